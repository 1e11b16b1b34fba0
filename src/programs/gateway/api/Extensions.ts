/**
 * DeerFlow's endpoints over `extensions_config.json`, declared: its MCP servers (DeerFlow's settings "Tools":
 * read with their secrets masked, replaced, one switched on or off, restarted from the file) and its skills'
 * states (the "Skills" switches). The file is every user's: only an admin token, or the open gateway on
 * loopback (the local user's), reads or changes it; other tokens are refused with 403, as DeerFlow refuses a
 * non-admin. Implemented in `handlers/Extensions.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, JsonRecord } from "./Threads.js"

/** The value a secret is shown as (and may be sent back as, to keep it). */
export const MASKED = "***"

/** The most MCP servers the file may name through the API. */
export const MAX_SERVERS = 64

/** MCP server names: what a tool name prefix may hold. */
export const SERVER_NAME = /^[A-Za-z0-9_-]{1,64}$/

/** One MCP server, as `extensions_config.json` holds it (DeerFlow's fields; others kept). */
export const McpServer = JsonRecord.annotations({
  identifier: "McpServer",
  description: "enabled, type (stdio, sse, http), command, args, env, url, headers, description, tool_name_prefix, " +
    "session_init_timeout, tool_call_timeout, routing, tools, task_toolsets; env and header values and secret-like " +
    "keys are " +
    `shown as "${MASKED}" (send "${MASKED}" back to keep a value)`
})

/** The MCP servers (DeerFlow's `McpConfigResponse`). */
export const McpConfig = Schema.Struct({ mcp_servers: Schema.Record({ key: Schema.String, value: McpServer }) })
  .annotations({ identifier: "McpConfig" })

/** `PATCH /mcp/config`: one server on or off. */
export const McpServerState = Schema.Struct({ server_name: Schema.String, enabled: Schema.Boolean })

/** The answer to `POST /mcp/cache/reset` (DeerFlow's `McpCacheResetResponse`). */
export const McpCacheReset = Schema.Struct({ success: Schema.Boolean, message: Schema.String })
  .annotations({ identifier: "McpCacheReset" })

/** One MCP server as the running gateway has it (Antler's own: DeerFlow's API shows no live status). */
export const McpServerStatus = Schema.Struct({
  name: Schema.String,
  type: Schema.Literal("stdio", "sse", "http"),
  enabled: Schema.Boolean,
  state: Schema.Literal("disabled", "idle", "running", "failed").annotations({
    description: "disabled (enabled: false), idle (not started yet: a server starts when its tools are first " +
      "asked for), running (connected), failed (it could not start or list its tools; tried again later)"
  }),
  tools: Schema.Number.annotations({ description: "The tools it offers, once listed (0 before)" }),
  starts: Schema.Number.annotations({ description: "How often it was started (a restart after a crash counts)" }),
  problems: Schema.Array(Schema.String).annotations({
    description: "Why it failed, or why some of its tools are left out (secrets redacted)"
  })
}).annotations({ identifier: "McpServerStatus" })

/** The answer to `GET /mcp/status`: the servers of the running gateway, in the file's order. */
export const McpStatus = Schema.Struct({ mcp_servers: Schema.Array(McpServerStatus) })
  .annotations({ identifier: "McpStatus" })

/** `PUT /skills/{skill_name}` */
export const SkillState = Schema.Struct({ enabled: Schema.Boolean })

/** `POST /skills/install`: a `.skill` file of a thread. */
export const SkillInstall = Schema.Struct({
  thread_id: Schema.String,
  path: Schema.String.pipe(Schema.maxLength(4096)).annotations({
    description: "The file's virtual path (mnt/user-data/outputs/my-skill.skill)"
  })
})

/** The answer to an installation. */
export const SkillInstalled = Schema.Struct({
  success: Schema.Boolean,
  skill_name: Schema.String,
  message: Schema.String
}).annotations({ identifier: "SkillInstalled" })

/** The answer to `POST /skills/reload` (DeerFlow's `SkillReloadResponse`). */
export const SkillReload = Schema.Struct({
  success: Schema.Boolean,
  scope: Schema.Literal("process"),
  message: Schema.String
}).annotations({ identifier: "SkillReload" })

/** A skill as DeerFlow answers it after a change. */
export const SkillObject = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  license: Schema.NullOr(Schema.String),
  enabled: Schema.Boolean,
  editable: Schema.Boolean.annotations({ description: "Whether it is a custom skill (installed or written by hand)" })
}).annotations({ identifier: "Skill" })

const AdminOnly = refusal(403, "A token that is not an admin's (the file is every user's)")
const FileFailed = refusal(500, "extensions_config.json could not be read or written")
const Frozen = refusal(
  409,
  "A change of a task-enabled MCP server's settings (task_toolsets) while the gateway runs: restart it to make one"
)

/** The MCP configuration group (served under `/api`). */
export const mcp = HttpApiGroup.make("mcpConfig")
  .add(
    HttpApiEndpoint.get("getMcpConfig", "/mcp/config")
      .addSuccess(McpConfig)
      .addError(AdminOnly)
      .addError(FileFailed)
      .annotate(OpenApi.Summary, "The MCP servers of extensions_config.json (secrets masked)")
  )
  .add(
    HttpApiEndpoint.put("putMcpConfig", "/mcp/config")
      .setPayload(McpConfig)
      .addSuccess(McpConfig)
      .addError(BodyRefusals)
      .addError(refusal(400, "A server that cannot be started as given, or a masked value with nothing to keep"))
      .addError(Frozen)
      .addError(AdminOnly)
      .addError(FileFailed)
      .annotate(OpenApi.Summary, "Replace the MCP servers (the next run uses them; no restart)")
  )
  .add(
    HttpApiEndpoint.patch("patchMcpConfig", "/mcp/config")
      .setPayload(McpServerState)
      .addSuccess(McpConfig)
      .addError(BodyRefusals)
      .addError(refusal(404, "No MCP server of that name"))
      .addError(Frozen)
      .addError(AdminOnly)
      .addError(FileFailed)
      .annotate(OpenApi.Summary, "Switch one MCP server on or off")
  )
  .add(
    HttpApiEndpoint.get("getMcpStatus", "/mcp/status")
      .addSuccess(McpStatus)
      .addError(AdminOnly)
      .annotate(
        OpenApi.Summary,
        "What each MCP server of the running gateway is doing: its state, its tool count, its problems (starts none)"
      )
  )
  .add(
    HttpApiEndpoint.post("resetMcpCache", "/mcp/cache/reset")
      .addSuccess(McpCacheReset)
      .addError(refusal(422, "A server of the file that cannot be read"))
      .addError(Frozen)
      .addError(AdminOnly)
      .addError(FileFailed)
      .annotate(
        OpenApi.Summary,
        "Restart the MCP servers from extensions_config.json as it is now (every thread's; the next run uses them)"
      )
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "The MCP servers of extensions_config.json (DeerFlow's settings: Tools)")

/** The skill state group (served under `/api`). */
export const skillStates = HttpApiGroup.make("skillStates")
  .add(
    HttpApiEndpoint.post("installSkill", "/skills/install")
      .setPayload(SkillInstall)
      .addSuccess(SkillInstalled)
      .addError(BodyRefusals)
      .addError(refusal(400, "Not a .skill archive the skills directory takes (the reason named)"))
      .addError(refusal(404, "No such thread (of this user), or no such file in it"))
      .addError(refusal(409, "A skill of that name exists"))
      .addError(AdminOnly)
      .annotate(OpenApi.Summary, "Install a skill from a thread's .skill file (into the skills' custom/)")
  )
  .add(
    HttpApiEndpoint.post("reloadSkills", "/skills/reload")
      .addSuccess(SkillReload)
      .addError(AdminOnly)
      .annotate(OpenApi.Summary, "Have the next runs read the skills directory again (Antler reads it on each run)")
  )
  .add(
    HttpApiEndpoint.put("putSkill", "/skills/:skill_name")
      .setPath(Schema.Struct({ skill_name: Schema.String }))
      .setPayload(SkillState)
      .addSuccess(SkillObject)
      .addError(BodyRefusals)
      .addError(refusal(404, "No skill of that name"))
      .addError(AdminOnly)
      .addError(FileFailed)
      .annotate(OpenApi.Summary, "Switch a skill on or off (kept in extensions_config.json)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "The skills' states (DeerFlow's settings: Skills)")
