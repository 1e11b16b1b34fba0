/**
 * What DeerFlow's app needs of each gateway endpoint, in a form a test can check: the statuses it takes as an
 * answer, the response fields it reads (as paths: `a.b`, `[]` for every element of an array, `[0]` for a first
 * element that must be there, `list[?path=value]` for an element of `list` with that value, `header:NAME` for a
 * response header, `cookie:NAME` for a cookie set), and, for a
 * call a flow did not reach on the branch it was recorded on, the request body the app sends (read in its source,
 * scripts/deerflow-app/catalog.ts says where). `{name}` in a body is an id of the flow (`{thread_id}`,
 * `{message_id}`: the last AI message of the thread, `{human_message_id}`: its last human message, `{etag}`: the
 * ETag of the last answer that had one).
 */

/** The contract of one endpoint. */
export interface Contract {
  /** The statuses the app takes; the first is the one a working gateway answers. */
  readonly status: ReadonlyArray<number>
  readonly fields: ReadonlyArray<string>
  /** The body of a call not reached in a recording (JSON, or `form` for a URL-encoded body). */
  readonly body?: unknown
  readonly form?: Readonly<Record<string, string>>
  readonly query?: Readonly<Record<string, string>>
}

const MEMORY = [
  "version",
  "lastUpdated",
  "user.workContext.summary",
  "user.personalContext.summary",
  "user.topOfMind.summary",
  "history.recentMonths.summary",
  "history.earlierContext.summary",
  "history.longTermBackground.summary",
  "facts[].id",
  "facts[].content",
  "facts[].category",
  "facts[].confidence",
  "facts[].createdAt"
]
const AGENT = ["name", "description", "model", "tool_groups", "skills"]
const TASK = [
  "id",
  "thread_id",
  "context_mode",
  "title",
  "prompt",
  "schedule_type",
  "schedule_spec",
  "timezone",
  "status",
  "next_run_at",
  "run_count",
  "created_at",
  "updated_at"
]
const MESSAGES = ["values.messages[].type", "values.messages[].id", "values.messages[].content"]
const SESSION = ["cookie:access_token", "cookie:csrf_token"]

/** Keyed by `METHOD path` as in the catalog. */
export const CONTRACTS: Readonly<Record<string, Contract>> = {
  "GET /api/v1/auth/me": { status: [200, 401], fields: ["id", "email", "system_role"] },
  "GET /api/v1/auth/setup-status": { status: [200], fields: ["needs_setup"] },
  "GET /api/v1/auth/providers": { status: [200], fields: ["providers"] },
  "POST /api/v1/auth/login/local": {
    status: [200],
    fields: SESSION,
    form: { username: "{email}", password: "{password}" }
  },
  "POST /api/v1/auth/register": {
    status: [201],
    fields: SESSION,
    body: { email: "{email}", password: "{password}" }
  },
  "POST /api/v1/auth/initialize": {
    status: [201, 200],
    fields: SESSION,
    body: { email: "{email}", password: "{password}" }
  },
  "POST /api/v1/auth/logout": { status: [200, 204], fields: [] },
  "POST /api/v1/auth/change-password": {
    status: [200],
    fields: [],
    body: { current_password: "{password}", new_password: "{password}-changed" }
  },
  "GET /api/features": {
    status: [200],
    fields: ["agents_api.enabled", "browser_control.enabled", "mcp_tasks.enabled"]
  },
  "GET /api/models": { status: [200], fields: ["models[].name", "models[].model", "models[].display_name"] },
  "GET /api/suggestions/config": { status: [200], fields: ["enabled", "max_suggestions"] },
  "POST /api/input-polish": { status: [200], fields: ["rewritten_text", "changed"], body: { text: "deer fact pls" } },
  "GET /api/channels/providers": { status: [200], fields: ["enabled", "providers"] },
  "GET /api/channels/connections": { status: [200], fields: ["connections"] },
  "GET /api/skills": {
    status: [200],
    fields: ["skills[].name", "skills[].description", "skills[].category", "skills[].enabled"]
  },
  "POST /api/skills/install": { status: [200], fields: ["success", "skill_name", "message"] },
  "PUT /api/skills/{skill_name}": { status: [200], fields: [], body: { enabled: false } },
  "GET /api/memory": { status: [200], fields: MEMORY },
  "DELETE /api/memory": { status: [200], fields: MEMORY },
  "GET /api/memory/export": { status: [200], fields: MEMORY },
  "POST /api/memory/import": { status: [200], fields: MEMORY },
  "POST /api/memory/facts": {
    status: [200],
    fields: MEMORY,
    body: { content: "The user keeps field notes on deer.", category: "context", confidence: 0.9 }
  },
  "PATCH /api/memory/facts/{fact_id}": { status: [200], fields: MEMORY, body: { content: "The user studies deer." } },
  "DELETE /api/memory/facts/{fact_id}": { status: [200], fields: MEMORY },
  "GET /api/agents/check": { status: [200], fields: ["available", "name"], query: { name: "deer-guide" } },
  "GET /api/agents": { status: [200], fields: ["agents[].name", "agents[].description"] },
  "POST /api/agents": {
    status: [201, 200],
    fields: AGENT,
    body: { name: "deer-guide", description: "Answers questions about deer", soul: "# Deer guide\n" }
  },
  "GET /api/agents/{agent_name}": { status: [200], fields: [...AGENT, "soul"] },
  "PUT /api/agents/{agent_name}": { status: [200], fields: AGENT, body: { description: "Knows deer well" } },
  "DELETE /api/agents/{agent_name}": { status: [204, 200], fields: [] },
  "GET /api/mcp/config": { status: [200], fields: ["mcp_servers"] },
  "PUT /api/mcp/config": { status: [200], fields: [] },
  "PATCH /api/mcp/config": {
    status: [200],
    fields: ["mcp_servers"],
    body: { server_name: "deer-facts", enabled: false }
  },
  "GET /api/scheduled-tasks": { status: [200], fields: TASK.map((f) => `[].${f}`) },
  "POST /api/scheduled-tasks": {
    status: [201, 200],
    fields: TASK,
    body: {
      context_mode: "new_thread",
      title: "Deer census",
      prompt: "Count the deer in my notes",
      schedule_type: "once",
      schedule_spec: "2099-01-01T09:00:00Z",
      timezone: "UTC"
    }
  },
  "GET /api/scheduled-tasks/{task_id}/runs": {
    status: [200],
    fields: ["[].id", "[].task_id", "[].thread_id", "[].run_id", "[].trigger", "[].status", "[].created_at"]
  },
  "POST /api/scheduled-tasks/{task_id}/pause": { status: [200], fields: ["id", "status"] },
  "POST /api/scheduled-tasks/{task_id}/resume": { status: [200], fields: ["id", "status"] },
  "POST /api/scheduled-tasks/{task_id}/trigger": { status: [200, 202], fields: ["id", "triggered"] },
  "PATCH /api/scheduled-tasks/{task_id}": { status: [200], fields: ["id", "title"], body: { title: "Deer count" } },
  "DELETE /api/scheduled-tasks/{task_id}": { status: [200], fields: ["id", "deleted"] },
  "POST /api/threads/search": {
    status: [200],
    fields: ["[].thread_id", "[].updated_at", "[].created_at", "[].status", "[].metadata"]
  },
  "POST /api/threads": {
    status: [200],
    fields: ["thread_id", "metadata", "created_at"],
    body: { thread_id: "{thread_id}", metadata: {} }
  },
  "POST /api/threads/{thread_id}/runs/stream": {
    status: [200],
    fields: ["event:metadata", "event:values", "event:end"],
    body: {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: [{ type: "text", text: "Tell me about deer" }] }] },
      config: { recursion_limit: 1000 },
      context: { mode: "flash", thinking_enabled: false, thread_id: "{thread_id}" },
      stream_mode: ["messages-tuple", "values", "updates", "custom"],
      on_disconnect: "continue"
    }
  },
  "GET /api/threads/{thread_id}/runs/{run_id}/stream": { status: [200], fields: [] },
  "POST /api/threads/{thread_id}/runs/{run_id}/cancel": { status: [202, 200, 204, 409], fields: [] },
  "POST /api/threads/{thread_id}/runs/regenerate/prepare": {
    status: [200],
    fields: ["target_run_id", "input", "checkpoint.checkpoint_id", "metadata"],
    body: { message_id: "{message_id}" }
  },
  "POST /api/threads/{thread_id}/runs/edit-regenerate/prepare": {
    status: [200],
    fields: ["target_run_id", "input.messages", "checkpoint.checkpoint_id", "metadata", "replacement_human_message_id"],
    body: { human_message_id: "{human_message_id}", replacement_text: "What colour are fawns?" }
  },
  "PUT /api/threads/{thread_id}/runs/{run_id}/feedback": {
    status: [200],
    fields: ["feedback_id", "rating"],
    body: { rating: 1, comment: null }
  },
  "DELETE /api/threads/{thread_id}/runs/{run_id}/feedback": { status: [200, 204, 404], fields: [] },
  "GET /api/threads/{thread_id}/runs/{run_id}/events": { status: [200], fields: [] },
  "GET /api/threads/{thread_id}/runs/{run_id}/workspace-changes": {
    status: [200],
    fields: ["available", "summary"],
    query: { include_files: "true" }
  },
  "GET /api/threads/{thread_id}/runs/{run_id}": { status: [200], fields: ["run_id", "status"] },
  "GET /api/threads/{thread_id}/runs": { status: [200], fields: ["[].run_id", "[].status", "[].created_at"] },
  "POST /api/threads/{thread_id}/history": {
    status: [200],
    fields: [
      "[0].checkpoint.checkpoint_id",
      "[0].values.messages[].type",
      "[0].values.messages[].id",
      "[0].values.messages[].content",
      "[0].next",
      "[0].tasks"
    ],
    body: { limit: 1 }
  },
  "GET /api/threads/{thread_id}/state": { status: [200], fields: MESSAGES },
  "POST /api/threads/{thread_id}/state": { status: [200], fields: [], body: { values: { title: "Deer" } } },
  "GET /api/threads/{thread_id}/messages/page": {
    status: [200],
    fields: ["data[].run_id", "data[].seq", "data[].content", "data[].created_at", "has_more", "next_before_seq"]
  },
  "GET /api/threads/{thread_id}/token-usage": {
    status: [200],
    fields: ["thread_id", "total_tokens", "total_input_tokens", "total_output_tokens", "total_runs", "by_model"]
  },
  "POST /api/threads/{thread_id}/compact": {
    status: [200],
    fields: ["thread_id", "compacted", "removed_message_count", "preserved_message_count"],
    body: { force: true }
  },
  "POST /api/threads/{thread_id}/branches": {
    status: [200, 201],
    fields: ["thread_id", "parent_thread_id", "parent_checkpoint_id", "branched_from_message_id"],
    body: { message_id: "{message_id}", message_ids: ["{human_message_id}", "{message_id}"] }
  },
  "GET /api/threads/{thread_id}/goal": { status: [200], fields: ["goal"] },
  "PUT /api/threads/{thread_id}/goal": { status: [200], fields: ["goal"], body: { objective: "Learn about deer" } },
  "DELETE /api/threads/{thread_id}/goal": { status: [200, 204], fields: [] },
  "POST /api/threads/{thread_id}/suggestions": {
    status: [200],
    fields: ["suggestions"],
    body: { messages: [{ role: "user", content: "Tell me about deer" }, { role: "assistant", content: "Deer." }], n: 3 }
  },
  "GET /api/threads/{thread_id}/uploads/limits": {
    status: [200],
    fields: ["max_files", "max_file_size", "max_total_size"]
  },
  "GET /api/threads/{thread_id}/uploads/list": {
    status: [200],
    fields: ["files[].filename", "files[].size", "files[].virtual_path", "files[].artifact_url", "count"]
  },
  "POST /api/threads/{thread_id}/uploads": {
    status: [200],
    fields: ["success", "files[].filename", "files[].size", "files[].virtual_path", "files[].artifact_url", "message"]
  },
  "DELETE /api/threads/{thread_id}/uploads/{filename}": { status: [200], fields: ["success", "message"] },
  "GET /api/threads/{thread_id}/artifacts/{path*}": { status: [200, 206], fields: ["header:etag"] },
  "PUT /api/threads/{thread_id}/artifacts/{path*}": {
    status: [200],
    fields: ["path", "sha256", "size"],
    body: { content: "# Deer notes\n\nEdited in the artifact panel.\n", expected_sha256: "{etag}" }
  },
  "GET /api/threads/{thread_id}/scheduled-tasks": { status: [200], fields: [] },
  "GET /api/threads/{thread_id}/mcp-tasks": { status: [200], fields: [] },
  "GET /api/threads/{thread_id}": { status: [200, 404], fields: ["thread_id", "metadata"] },
  "PATCH /api/threads/{thread_id}": { status: [200], fields: ["thread_id", "metadata"], body: { metadata: {} } },
  "DELETE /api/threads/{thread_id}": { status: [200, 204, 404], fields: [] }
}

/** The contract of an endpoint (`undefined` when the catalog has none for it). */
export const of = (method: string, path: string): Contract | undefined => CONTRACTS[`${method} ${path}`]

/** The statuses a test expects of a recorded call: the recorded one when the app takes it, else a working one. */
export const expectedStatus = (contract: Contract | undefined, recorded: number): ReadonlyArray<number> => {
  if (contract === undefined) return recorded > 0 && recorded < 400 ? [recorded] : [200]
  return contract.status.includes(recorded) ? [recorded] : [contract.status[0]!]
}

/** What a test reads of an answer: its JSON body, headers, cookies set and stream events. */
export interface Answer {
  readonly body: unknown
  readonly headers: Readonly<Record<string, string>>
  readonly cookies: ReadonlyArray<string>
  readonly events: ReadonlyArray<string>
}

const missingIn = (value: unknown, segments: ReadonlyArray<string>, at: string): Array<string> => {
  if (segments.length === 0) return []
  const [head, ...rest] = segments as [string, ...Array<string>]
  if (head === "[]" || head === "[0]") {
    if (!Array.isArray(value)) return [`${at || "the body"} is not an array`]
    if (head === "[0]" && value.length === 0) return [`${at || "the body"} is empty`]
    const items = head === "[0]" ? value.slice(0, 1) : value
    return items.flatMap((item, i) => missingIn(item, rest, `${at}[${head === "[0]" ? 0 : i}]`))
  }
  if (value === null || typeof value !== "object" || Array.isArray(value) || !(head in value)) {
    return [`${at === "" ? head : `${at}.${head}`}`]
  }
  return missingIn((value as Record<string, unknown>)[head], rest, at === "" ? head : `${at}.${head}`)
}

const pathOf = (field: string): Array<string> =>
  field.split(".").flatMap((s) => {
    const m = /^(.*?)((?:\[\]|\[0\])*)$/.exec(s)!
    const arrays = m[2]!.match(/\[\]|\[0\]/g) ?? []
    return [...(m[1] !== "" ? [m[1]!] : []), ...arrays]
  })

/** The values at a path (`[]` and `[0]` as in `fields`); an element's own path is plain keys. */
const valuesAt = (value: unknown, segments: ReadonlyArray<string>): Array<unknown> => {
  if (segments.length === 0) return [value]
  const [head, ...rest] = segments as [string, ...Array<string>]
  if (head === "[]" || head === "[0]") {
    if (!Array.isArray(value)) return []
    return (head === "[0]" ? value.slice(0, 1) : value).flatMap((item) => valuesAt(item, rest))
  }
  if (value === null || typeof value !== "object") return []
  return valuesAt((value as Record<string, unknown>)[head], rest)
}

/**
 * `list[?path=value]`: some element of the array `list` has `value` (as text) at `path`, as in
 * `data[?content.type=ai]` (the page holds an AI message).
 */
const SOME = /^(.*)\[\?([^\]=]+)=([^\]]*)\]$/

/** The fields of `fields` an answer lacks (empty when it has them all). */
export const missing = (fields: ReadonlyArray<string>, answer: Answer): Array<string> =>
  fields.flatMap((field) => {
    const some = SOME.exec(field)
    if (some !== null) {
      const [, list, path, value] = some as unknown as [string, string, string, string]
      const lacking = missingIn(answer.body, pathOf(list), "")
      if (lacking.length > 0) return lacking
      const items = valuesAt(answer.body, pathOf(list)).flatMap((v) => (Array.isArray(v) ? v : []))
      return items.some((item) => valuesAt(item, pathOf(path)).some((v) => String(v) === value))
        ? []
        : [`an element of ${list || "the body"} with ${path} = ${value}`]
    }
    if (field.startsWith("header:")) {
      const name = field.slice(7)
      return answer.headers[name] === undefined ? [`the header ${name}`] : []
    }
    if (field.startsWith("cookie:")) {
      const name = field.slice(7)
      return answer.cookies.includes(name) ? [] : [`the cookie ${name}`]
    }
    if (field.startsWith("event:")) {
      const name = field.slice(6)
      return answer.events.includes(name) ? [] : [`the stream event ${name}`]
    }
    return missingIn(answer.body, pathOf(field), "")
  })
