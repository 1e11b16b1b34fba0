/**
 * The gateway endpoints DeerFlow's web app calls, read in its source (`frontend/src/core/`, the settings pages and
 * the auth pages of bytedance/deer-flow): the path as the gateway receives it (the app's `/api/langgraph/...`
 * calls arrive as `/api/...` through its Next rewrites), where the app makes the call, the request it sends, and the
 * response fields it reads. A recorded request is matched to its endpoint here, which names its path parameters
 * and says what of the answer matters to the app.
 */

/** One endpoint. `path` names its parameters in braces; `{path*}` takes the rest of the path. */
export interface Endpoint {
  readonly method: string
  readonly path: string
  /** Where in DeerFlow's frontend the call is made. */
  readonly source: string
  /** The request the app sends (query, body, headers that matter). */
  readonly request?: string
  /** The response fields the app reads (`[]` marks an array's elements); `status` when only the status matters. */
  readonly reads: ReadonlyArray<string>
}

const SDK = "@langchain/langgraph-sdk Client (src/core/api/api-client.ts)"
const THREAD_LIST = "useInfiniteThreads / useThreads (src/core/threads/hooks.ts)"
const STATE_VALUES = [
  "values.messages[] (type, id, content, tool_calls, tool_call_id, name, additional_kwargs, response_metadata, usage_metadata)",
  "values.title",
  "values.artifacts",
  "values.todos",
  "values.goal",
  "values.uploaded_files"
]

/** The endpoints, the more specific paths first (a request takes the first that matches). */
export const ENDPOINTS: ReadonlyArray<Endpoint> = [
  // --- DeerFlow's accounts (src/core/auth/, src/app/(auth)/) ---
  {
    method: "GET",
    path: "/api/v1/auth/me",
    source: "src/core/auth/server.ts getServerSideUser (Next server, with the access_token cookie); " +
      "src/core/auth/AuthProvider.tsx refreshUser; src/components/workspace/gateway-offline-banner.tsx",
    request: "Cookie: access_token=... (from the Next server) or the browser's cookies",
    reads: ["id", "email", "system_role (admin|user)", "needs_setup", "oauth_provider", "status 401/403 = signed out"]
  },
  {
    method: "GET",
    path: "/api/v1/auth/setup-status",
    source: "src/core/auth/server.ts (Next server, no session cookie); src/core/auth/setup.ts fetchSetupStatus",
    reads: ["needs_setup", "registration_enabled"]
  },
  {
    method: "GET",
    path: "/api/v1/auth/providers",
    source: "src/app/(auth)/login/page.tsx",
    reads: ["providers[] (id, display_name, type)"]
  },
  {
    method: "POST",
    path: "/api/v1/auth/login/local",
    source: "src/app/(auth)/login/page.tsx handleSubmit",
    request: "application/x-www-form-urlencoded: username, password, remember_me",
    reads: ["status", "Set-Cookie access_token (HttpOnly) and csrf_token", "error: detail.code, detail.message"]
  },
  {
    method: "POST",
    path: "/api/v1/auth/register",
    source: "src/app/(auth)/login/page.tsx handleSubmit",
    request: "JSON {email, password, remember_me}",
    reads: ["status (201)", "Set-Cookie access_token and csrf_token", "error: detail.code, detail.message"]
  },
  {
    method: "POST",
    path: "/api/v1/auth/initialize",
    source: "src/app/(auth)/setup/page.tsx handleInitAdmin",
    request: "JSON {email, password, remember_me}",
    reads: ["status", "Set-Cookie access_token and csrf_token", "error code system_already_initialized"]
  },
  {
    method: "POST",
    path: "/api/v1/auth/logout",
    source: "src/core/auth/AuthProvider.tsx logout",
    reads: ["status"]
  },
  {
    method: "POST",
    path: "/api/v1/auth/change-password",
    source: "src/app/(auth)/setup/page.tsx; src/components/workspace/settings/account-settings-page.tsx",
    request: "JSON {current_password, new_password, new_email?, remember_me}, X-CSRF-Token",
    reads: ["status", "error: detail.code, detail.message"]
  },
  // --- server features and configuration ---
  {
    method: "GET",
    path: "/api/features",
    source: "src/core/features/api.ts fetchFeatures",
    reads: ["agents_api.enabled", "browser_control.enabled", "mcp_tasks.enabled"]
  },
  {
    method: "GET",
    path: "/api/models",
    source: "src/core/models/api.ts loadModels",
    reads: [
      "models[] (name, model, display_name, description, supports_thinking, supports_reasoning_effort)",
      "token_usage.enabled"
    ]
  },
  {
    method: "GET",
    path: "/api/suggestions/config",
    source: "src/core/suggestions/api.ts loadSuggestionsConfig (a 404 counts as enabled)",
    reads: ["enabled", "max_suggestions"]
  },
  {
    method: "POST",
    path: "/api/input-polish",
    source: "src/core/input-polish/api.ts polishInputDraft",
    request: "JSON {text, locale?, thread_id?}",
    reads: ["rewritten_text", "changed", "error: detail"]
  },
  {
    method: "GET",
    path: "/api/channels/providers",
    source: "src/core/channels/api.ts listChannelProviders (sidebar, settings: channels)",
    reads: ["enabled", "providers[] (provider, display_name, enabled, configured, connection_status, credential_fields)"]
  },
  {
    method: "GET",
    path: "/api/channels/connections",
    source: "src/core/channels/api.ts listChannelConnections",
    reads: ["connections[] (id, provider, status, ...)"]
  },
  {
    method: "GET",
    path: "/api/integrations/lark/status",
    source: "src/core/integrations/lark/api.ts (settings: integrations)",
    reads: ["installed", "app_configured", "auth.status", "cli.available", "..."]
  },
  // --- skills ---
  {
    method: "GET",
    path: "/api/skills",
    source: "src/core/skills/api.ts loadSkills (settings: skills, slash autocomplete)",
    reads: ["skills[] (name, description, category, license, enabled, editable)"]
  },
  {
    method: "POST",
    path: "/api/skills/install",
    source: "src/core/skills/api.ts installSkill (a .skill artifact's Install button)",
    request: "JSON {thread_id, path (virtual path of the .skill file)}",
    reads: ["success", "skill_name", "message", "status 403 = admin only"]
  },
  {
    method: "PUT",
    path: "/api/skills/{skill_name}",
    source: "src/core/skills/api.ts enableSkill (settings: skills switch)",
    request: "JSON {enabled}",
    reads: ["status", "error: detail (403 = admin only)"]
  },
  // --- memory ---
  {
    method: "GET",
    path: "/api/memory",
    source: "src/core/memory/api.ts loadMemory (settings: memory); src/app/api/memory/route.ts proxies it to " +
      "NEXT_PUBLIC_BACKEND_BASE_URL or http://127.0.0.1:8001, not to DEER_FLOW_INTERNAL_GATEWAY_BASE_URL",
    reads: [
      "version",
      "lastUpdated",
      "user.{workContext,personalContext,topOfMind}.{summary,updatedAt}",
      "history.{recentMonths,earlierContext,longTermBackground}.{summary,updatedAt}",
      "facts[] (id, content, category, confidence, createdAt, source)"
    ]
  },
  {
    method: "DELETE",
    path: "/api/memory",
    source: "src/core/memory/api.ts clearMemory (through src/app/api/memory/route.ts)",
    reads: ["the memory document (as GET /api/memory)"]
  },
  {
    method: "GET",
    path: "/api/memory/export",
    source: "src/core/memory/api.ts exportMemory",
    reads: ["the memory document (as GET /api/memory)"]
  },
  {
    method: "POST",
    path: "/api/memory/import",
    source: "src/core/memory/api.ts importMemory",
    request: "JSON: a memory document",
    reads: ["the memory document", "error: detail (string or [{msg}])"]
  },
  {
    method: "POST",
    path: "/api/memory/facts",
    source: "src/core/memory/api.ts createMemoryFact",
    request: "JSON {content, category, confidence}",
    reads: ["the memory document", "error: detail"]
  },
  {
    method: "PATCH",
    path: "/api/memory/facts/{fact_id}",
    source: "src/core/memory/api.ts updateMemoryFact",
    request: "JSON {content?, category?, confidence?}",
    reads: ["the memory document", "error: detail"]
  },
  {
    method: "DELETE",
    path: "/api/memory/facts/{fact_id}",
    source: "src/core/memory/api.ts deleteMemoryFact",
    reads: ["the memory document"]
  },
  // --- custom agents ---
  {
    method: "GET",
    path: "/api/agents/check",
    source: "src/core/agents/api.ts checkAgentName (agents/new)",
    request: "query name",
    reads: ["available", "name", "error: detail (mentions agents_api.enabled when the feature is off)"]
  },
  {
    method: "GET",
    path: "/api/agents",
    source: "src/core/agents/api.ts listAgents (agents gallery, sidebar)",
    reads: ["agents[] (name, description, model, tool_groups, skills, model_settings, thinking_enabled, reasoning_effort)"]
  },
  {
    method: "POST",
    path: "/api/agents",
    source: "src/core/agents/api.ts createAgent",
    request: "JSON {name, description?, model?, tool_groups?, skills?, model_settings?, thinking_enabled?, " +
      "reasoning_effort?, soul?}",
    reads: ["the agent (as GET /api/agents/{agent_name})", "error: detail"]
  },
  {
    method: "GET",
    path: "/api/agents/{agent_name}",
    source: "src/core/agents/api.ts getAgent (agent chat page, agents/new after setup_agent)",
    reads: ["name", "description", "model", "tool_groups", "skills", "model_settings", "thinking_enabled",
      "reasoning_effort", "soul"]
  },
  {
    method: "PUT",
    path: "/api/agents/{agent_name}",
    source: "src/core/agents/api.ts updateAgent (agent settings dialog)",
    request: "JSON: the fields of an agent to change (soul included)",
    reads: ["the agent", "error: detail"]
  },
  {
    method: "DELETE",
    path: "/api/agents/{agent_name}",
    source: "src/core/agents/api.ts deleteAgent",
    reads: ["status"]
  },
  // --- MCP ---
  {
    method: "GET",
    path: "/api/mcp/config",
    source: "src/core/mcp/api.ts loadMCPConfig (settings: tools)",
    reads: ["mcp_servers{name: {enabled, description, ...}}", "status 403 = admin only"]
  },
  {
    method: "PUT",
    path: "/api/mcp/config",
    source: "src/core/mcp/api.ts updateMCPConfig",
    request: "JSON {mcp_servers}",
    reads: ["status", "error: detail"]
  },
  {
    method: "PATCH",
    path: "/api/mcp/config",
    source: "src/core/mcp/api.ts updateMCPServerState (settings: tools switch)",
    request: "JSON {server_name, enabled}",
    reads: ["mcp_servers", "error: detail"]
  },
  // --- scheduled tasks ---
  {
    method: "GET",
    path: "/api/scheduled-tasks",
    source: "src/core/scheduled-tasks/api.ts fetchScheduledTasks",
    reads: ["[] (id, thread_id, context_mode, title, prompt, schedule_type, schedule_spec, timezone, status, " +
      "next_run_at, last_run_at, last_run_id, last_thread_id, last_error, run_count, created_at, updated_at)"]
  },
  {
    method: "POST",
    path: "/api/scheduled-tasks",
    source: "src/core/scheduled-tasks/api.ts createScheduledTask",
    request: "JSON {context_mode, thread_id?, title, prompt, schedule_type (once|cron), schedule_spec, timezone}",
    reads: ["the task (as in the list)", "error: detail"]
  },
  {
    method: "GET",
    path: "/api/scheduled-tasks/{task_id}/runs",
    source: "src/core/scheduled-tasks/api.ts fetchScheduledTaskRuns",
    reads: ["[] (id, task_id, thread_id, run_id, scheduled_for, trigger, status, error, started_at, finished_at, " +
      "created_at)"]
  },
  {
    method: "POST",
    path: "/api/scheduled-tasks/{task_id}/pause",
    source: "src/core/scheduled-tasks/api.ts pauseScheduledTask",
    reads: ["the task"]
  },
  {
    method: "POST",
    path: "/api/scheduled-tasks/{task_id}/resume",
    source: "src/core/scheduled-tasks/api.ts resumeScheduledTask",
    reads: ["the task"]
  },
  {
    method: "POST",
    path: "/api/scheduled-tasks/{task_id}/trigger",
    source: "src/core/scheduled-tasks/api.ts triggerScheduledTask",
    reads: ["id", "triggered"]
  },
  {
    method: "PATCH",
    path: "/api/scheduled-tasks/{task_id}",
    source: "src/core/scheduled-tasks/api.ts updateScheduledTask",
    request: "JSON: some of {context_mode, title, prompt, schedule_spec, timezone}",
    reads: ["the task"]
  },
  {
    method: "DELETE",
    path: "/api/scheduled-tasks/{task_id}",
    source: "src/core/scheduled-tasks/api.ts deleteScheduledTask",
    reads: ["id", "deleted"]
  },
  // --- threads: LangGraph API through the SDK ---
  {
    method: "POST",
    path: "/api/threads/search",
    source: `${THREAD_LIST}; sidecar lookups (src/core/sidecar/api.ts) — ${SDK}`,
    request: "JSON {limit, offset, sort_by, sort_order, select?, metadata?}",
    reads: ["[] (thread_id, updated_at, created_at, status, metadata.agent_name, metadata.deerflow_pinned, " +
      "metadata.deerflow_sidecar, metadata.parent_thread_id, values.title, values.goal)"]
  },
  {
    method: "POST",
    path: "/api/threads",
    source: `useStream's submit on a new chat (${SDK}); src/core/sidecar/api.ts createSidecarThread`,
    request: "JSON {thread_id?, metadata?}",
    reads: ["thread_id", "metadata", "created_at"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/runs/stream",
    source: `useStream submit (src/core/threads/hooks.ts sendMessage, submitPreparedReplay) — ${SDK}`,
    request: "JSON {assistant_id: lead_agent, input.messages[], config.recursion_limit, context (model_name, mode, " +
      "thinking_enabled, is_plan_mode, subagent_enabled, reasoning_effort, thread_id, agent_name?, is_bootstrap?), " +
      "stream_mode [messages-tuple, values, updates, custom], on_disconnect: continue, checkpoint? (the thread's " +
      "head as read from history, or a prepared one), metadata?}",
    reads: [
      "SSE metadata.run_id",
      "SSE values: the whole state (values.messages, title, artifacts, todos, goal)",
      "SSE messages: [message chunk, metadata] accumulated by message id",
      "SSE updates (SummarizationMiddleware's messages)",
      "SSE custom (task/subagent events, stream_replay_gap)",
      "SSE error (message)",
      "SSE end",
      "Content-Location (run id)"
    ]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/runs/{run_id}/stream",
    source: `useStream reconnect (reconnectOnMount, sessionStorage lg:stream:{thread_id}) — ${SDK} joinStream`,
    request: "Last-Event-ID header when resuming",
    reads: ["the SSE events of runs/stream"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/runs/{run_id}/cancel",
    source: `useStream stop (src/core/threads/hooks.ts stopThread) — ${SDK} runs.cancel`,
    request: "query wait, action",
    reads: ["status (409 'is not cancellable' is ignored)"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/runs/regenerate/prepare",
    source: "src/core/threads/hooks.ts regenerateMessage",
    request: "JSON {message_id (the AI message to regenerate)}",
    reads: ["target_run_id", "input", "checkpoint (checkpoint_ns, checkpoint_id, checkpoint_map)", "metadata",
      "error: detail"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/runs/edit-regenerate/prepare",
    source: "src/core/threads/hooks.ts editAndRegenerateMessage",
    request: "JSON {human_message_id, replacement_text}",
    reads: ["target_run_id", "input.messages", "checkpoint", "metadata", "replacement_human_message_id",
      "source_message_ids", "error: detail"]
  },
  {
    method: "PUT",
    path: "/api/threads/{thread_id}/runs/{run_id}/feedback",
    source: "src/core/api/feedback.ts upsertFeedback (thumbs on an answer)",
    request: "JSON {rating (1|-1), comment}",
    reads: ["feedback_id", "rating", "comment"]
  },
  {
    method: "DELETE",
    path: "/api/threads/{thread_id}/runs/{run_id}/feedback",
    source: "src/core/api/feedback.ts deleteFeedback",
    reads: ["status (404 is fine)"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/runs/{run_id}/events",
    source: "src/core/tasks/api.ts fetchSubtaskSteps (a subtask card opened after a reload)",
    request: "query event_types=subagent.step, task_id, limit, after_seq?",
    reads: ["[] (seq, event_type, content/metadata of subagent.step events)"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/runs/{run_id}/workspace-changes",
    source: "src/core/workspace-changes/api.ts fetchWorkspaceChanges (the changes badge under an answer)",
    request: "query include_files, include_diff",
    reads: ["available", "version", "summary (created, modified, deleted, symlink_created, additions, deletions, " +
      "truncated)", "files[] (path, root, status, diff, additions, deletions, ...)", "limits"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/runs/{run_id}",
    source: `api-client.ts shouldSkipReconnect before a join; useRunDetail — ${SDK} runs.get`,
    reads: ["status (success|error|timeout|interrupted = terminal)"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/runs",
    source: `useThreadRuns — ${SDK} runs.list`,
    reads: ["[] (run_id, status, created_at, updated_at)"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/history",
    source: `useStream fetchStateHistory {limit: 1} after each run and on load — ${SDK} threads.getHistory`,
    request: "JSON {limit: 1}",
    reads: ["[0].checkpoint (checkpoint_id: sent back with the next run)", ...STATE_VALUES.map((v) => `[0].${v}`),
      "[0].next", "[0].tasks[].interrupts", "[0].parent_checkpoint"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/state",
    source: `stream replay-gap recovery (src/core/api/api-client.ts) — ${SDK} threads.getState`,
    reads: STATE_VALUES
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/state",
    source: `useRenameThread — ${SDK} threads.updateState`,
    request: "JSON {values: {title}}",
    reads: ["status"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/messages/page",
    source: "src/core/threads/hooks.ts useThreadHistory (a chat opened or reloaded)",
    request: "query before_seq? (older pages)",
    reads: ["data[] (run_id, seq (a positive integer, unique), content (a message), metadata.caller, created_at)",
      "has_more", "next_before_seq (an integer when has_more, else null)"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/token-usage",
    source: "src/core/threads/api.ts fetchThreadTokenUsage (403/404 hide the usage)",
    reads: ["thread_id", "total_tokens", "total_input_tokens", "total_output_tokens", "total_runs", "by_model",
      "by_caller (lead_agent, subagent, middleware)", "context_usage (token_count, max_context_tokens, percentage)"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/compact",
    source: "src/core/threads/api.ts compactThreadContext (the /compact command)",
    request: "JSON {force: true, agent_name?, model_name?}",
    reads: ["thread_id", "compacted", "reason", "removed_message_count", "preserved_message_count",
      "summary_updated", "checkpoint_id", "total_tokens"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/branches",
    source: "src/core/threads/api.ts branchThreadFromTurn (Branch conversation on an answer)",
    request: "JSON {message_id, message_ids[], title?}",
    reads: ["thread_id (the new chat)", "parent_thread_id", "parent_checkpoint_id", "branched_from_message_id",
      "workspace_clone_mode"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/goal",
    source: "src/components/workspace/input-box.tsx handleGoalCommand (/goal status)",
    reads: ["goal (objective, status, ...) or null"]
  },
  {
    method: "PUT",
    path: "/api/threads/{thread_id}/goal",
    source: "src/components/workspace/input-box.tsx handleGoalCommand (/goal <objective>)",
    request: "JSON {objective}",
    reads: ["goal"]
  },
  {
    method: "DELETE",
    path: "/api/threads/{thread_id}/goal",
    source: "src/components/workspace/input-box.tsx handleGoalCommand (/goal clear)",
    reads: ["status"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/suggestions",
    source: "src/components/workspace/input-box.tsx (after each answer, when suggestions are enabled)",
    request: "JSON {messages[] (role, content; the last 6), n, model_name?}",
    reads: ["suggestions[] (strings; a failure shows none)"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/uploads/limits",
    source: "src/core/uploads/api.ts getUploadLimits (the composer's attachment button)",
    reads: ["max_files", "max_file_size", "max_total_size"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/uploads/list",
    source: "src/core/uploads/api.ts listUploadedFiles",
    reads: ["files[] (filename, size, path, virtual_path, artifact_url, extension, modified, markdown_*)", "count"]
  },
  {
    method: "POST",
    path: "/api/threads/{thread_id}/uploads",
    source: "src/core/uploads/api.ts uploadFiles (a message sent with files)",
    request: "multipart/form-data, field files (one part per file)",
    reads: ["success", "files[] (filename, size, path, virtual_path, artifact_url, markdown_*)", "message",
      "skipped_files", "error: detail"]
  },
  {
    method: "DELETE",
    path: "/api/threads/{thread_id}/uploads/{filename}",
    source: "src/core/uploads/api.ts deleteUploadedFile",
    reads: ["success", "message"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/artifacts/{path*}",
    source: "src/core/artifacts/loader.ts loadArtifactContent (the artifact panel; Range: bytes=0-1048575); " +
      "src/core/artifacts/utils.ts urlOfArtifact (?download=true; images and links in answers)",
    request: "Range header for the preview; query download=true for a download",
    reads: ["status 200/206 (416 with Content-Range bytes */0 = an empty file)", "Content-Range", "ETag " +
      "(\"<sha256>\", the revision an edit must name)", "Content-Length", "the body"]
  },
  {
    method: "PUT",
    path: "/api/threads/{thread_id}/artifacts/{path*}",
    source: "src/core/artifacts/api.ts updateArtifactContent (editing an output file in the artifact panel)",
    request: "JSON {content, expected_sha256}",
    reads: ["path", "sha256", "size", "error: detail (409 when the file changed)"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/scheduled-tasks",
    source: "src/core/scheduled-tasks/api.ts fetchThreadScheduledTasks (the chat header's link)",
    reads: ["[] tasks (as GET /api/scheduled-tasks)"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}/mcp-tasks",
    source: "src/core/background-tasks/api.ts fetchBackgroundTasks (when features.mcp_tasks.enabled)",
    request: "query limit=20",
    reads: ["[] background tasks"]
  },
  {
    method: "GET",
    path: "/api/threads/{thread_id}",
    source: `useThreadMetadata (chat page) — ${SDK} threads.get`,
    reads: ["thread_id", "metadata (agent_name, channel source, sidecar)", "values.title", "status 404 = no such chat"]
  },
  {
    method: "PATCH",
    path: "/api/threads/{thread_id}",
    source: `useStream onCreated for an agent's chat ({metadata: {agent_name}}) — ${SDK} threads.update; ` +
      "src/core/threads/api.ts patchThreadMetadata (pin)",
    request: "JSON {metadata}",
    reads: ["thread_id", "status", "created_at", "updated_at", "metadata"]
  },
  {
    method: "DELETE",
    path: "/api/threads/{thread_id}",
    source: "useDeleteThread: the SDK's threads.delete, then deleteLocalThreadData (404 is fine)",
    reads: ["status"]
  }
]

const compiled = ENDPOINTS.map((endpoint) => {
  const names: Array<string> = []
  const pattern = endpoint.path
    .split("/")
    .map((segment) => {
      const rest = /^\{(\w+)\*\}$/.exec(segment)
      if (rest !== null) {
        names.push(rest[1]!)
        return "(.+)"
      }
      const one = /^\{(\w+)\}$/.exec(segment)
      if (one !== null) {
        names.push(one[1]!)
        return "([^/]+)"
      }
      return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    })
    .join("/")
  return { endpoint, names, regex: new RegExp(`^${pattern}$`) }
})

/** The endpoint a request is for, with its path parameters (decoded), or undefined. */
export const match = (method: string, path: string) => {
  for (const { endpoint, names, regex } of compiled) {
    if (endpoint.method !== method) continue
    const found = regex.exec(path)
    if (found === null) continue
    const params: Record<string, string> = {}
    names.forEach((name, i) => {
      const raw = found[i + 1]!
      try {
        params[name] = decodeURIComponent(raw)
      } catch {
        params[name] = raw
      }
    })
    return { endpoint, params }
  }
  return undefined
}

/** The endpoint of a method and template, or undefined. */
export const find = (method: string, path: string): Endpoint | undefined =>
  ENDPOINTS.find((e) => e.method === method && e.path === path)
