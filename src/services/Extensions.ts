/**
 * DeerFlow's `extensions_config.json` (MCP servers and skill states), as Antler reads it: its Schema with
 * DeerFlow's field names and defaults. Loading the file lives in `layers/ExtensionsFile.ts`; the MCP client
 * service in `services/Mcp.ts`.
 */
import * as Schema from "effect/Schema"

const Seconds = Schema.Number.pipe(Schema.positive())

/**
 * Soft routing hints for an MCP tool (SPEC §5.24): keywords that make it preferred, with a priority 0–100 (one
 * outside is clamped, with a warning when the servers start). A key of its own is refused, as DeerFlow refuses it:
 * a misspelt `keyword` must not leave the routing silently off.
 */
export const McpRouting = Schema.Struct({
  mode: Schema.optional(Schema.Literal("off", "prefer")),
  priority: Schema.optional(Schema.Number.pipe(Schema.int())),
  keywords: Schema.optional(Schema.Array(Schema.String))
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type McpRouting = typeof McpRouting.Type

/**
 * OAuth for an HTTP or SSE server (DeerFlow's `oauth`): Antler takes an access token from `token_url` with the
 * `client_credentials` or `refresh_token` grant, keeps it until `refresh_skew_seconds` before it expires, and sends
 * it as the `Authorization` header of the server's requests. A rotated refresh token is kept in memory (never
 * written back to the file). Ignored for a stdio server.
 */
export const McpOAuth = Schema.Struct(
  {
    enabled: Schema.optionalWith(Schema.Boolean, { default: () => true }),
    token_url: Schema.String,
    grant_type: Schema.optionalWith(Schema.Literal("client_credentials", "refresh_token"), {
      default: () => "client_credentials" as const
    }),
    client_id: Schema.optional(Schema.NullOr(Schema.String)),
    client_secret: Schema.optional(Schema.NullOr(Schema.String)),
    refresh_token: Schema.optional(Schema.NullOr(Schema.String)),
    scope: Schema.optional(Schema.NullOr(Schema.String)),
    audience: Schema.optional(Schema.NullOr(Schema.String)),
    token_field: Schema.optionalWith(Schema.String, { default: () => "access_token" }),
    token_type_field: Schema.optionalWith(Schema.String, { default: () => "token_type" }),
    expires_in_field: Schema.optionalWith(Schema.String, { default: () => "expires_in" }),
    default_token_type: Schema.optionalWith(Schema.String, { default: () => "Bearer" }),
    refresh_skew_seconds: Schema.optionalWith(Schema.Number.pipe(Schema.int()), { default: () => 60 }),
    extra_token_params: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), {
      default: () => ({})
    })
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
export type McpOAuth = typeof McpOAuth.Type

/** Routing with every field settled. */
export interface EffectiveRouting {
  readonly mode: "off" | "prefer"
  readonly priority: number
  readonly keywords: ReadonlyArray<string>
}

/** The longest task name, server name and remote task id a task record holds (DeerFlow's storage bounds). */
export const MAX_TASK_NAME = 255
export const MAX_TASK_SERVER_NAME = 128
export const MAX_REMOTE_TASK_ID = 255

const RawToolName = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_TASK_NAME))

/**
 * One ordinary long-running task contract of a server (`task_toolsets[]`, DeerFlow's `McpTaskToolsetConfig`): the
 * raw names (as the server lists them, without the `<server>_` prefix) of the tools that submit work, poll it and
 * cancel it. The model calls the submit tool, which runs in the background; the other two are hidden from it.
 */
export const McpTaskToolset = Schema.Struct({
  name: Schema.String.pipe(
    Schema.maxLength(MAX_TASK_NAME),
    Schema.filter((name) => name.trim() !== "" || "MCP task toolset name must not be empty")
  ),
  submit_tool: RawToolName,
  status_tool: RawToolName,
  cancel_tool: RawToolName
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type McpTaskToolset = typeof McpTaskToolset.Type

const ROLES = ["submit_tool", "status_tool", "cancel_tool"] as const

/** A server's toolsets: one raw tool takes one role in one of them (DeerFlow refuses a second). */
const McpTaskToolsets = Schema.Array(McpTaskToolset).pipe(Schema.filter((toolsets) => {
    const claimed = new Map<string, string>()
    for (const toolset of toolsets) {
      for (const role of ROLES) {
        const previous = claimed.get(toolset[role])
        if (previous !== undefined) {
          return `MCP task tool '${toolset[role]}' must be unique across task_toolsets and roles; it is configured ` +
            `as both ${previous} and ${toolset.name}.${role}`
        }
        claimed.set(toolset[role], `${toolset.name}.${role}`)
      }
    }
    return true
  }))

/** One MCP server (`mcpServers.<name>`). `transport` is accepted as the MCP spec's spelling of `type`. */
export const McpServerConfig = Schema.Struct(
  {
    enabled: Schema.optionalWith(Schema.Boolean, { default: () => true }),
    type: Schema.optional(Schema.Literal("stdio", "sse", "http", "streamable_http", "streamable-http")),
    transport: Schema.optional(Schema.Literal("stdio", "sse", "http", "streamable_http", "streamable-http")),
    command: Schema.optional(Schema.String),
    args: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
    env: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { default: () => ({}) }),
    /** The working directory of a stdio server (default: the process's). */
    cwd: Schema.optional(Schema.String),
    url: Schema.optional(Schema.String),
    headers: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { default: () => ({}) }),
    /** OAuth for an HTTP or SSE server (see `McpOAuth`); null or absent: none. */
    oauth: Schema.optional(Schema.NullOr(McpOAuth)),
    description: Schema.optionalWith(Schema.String, { default: () => "" }),
    /** Prefix tool names with `<server>_` (DeerFlow's default), so two servers' tools never collide. */
    tool_name_prefix: Schema.optionalWith(Schema.Boolean, { default: () => true }),
    /** Seconds to start the server and finish the MCP handshake. */
    session_init_timeout: Schema.optional(Schema.NullOr(Seconds)),
    /** Seconds one tool call may take. */
    tool_call_timeout: Schema.optional(Schema.NullOr(Seconds)),
    routing: Schema.optional(McpRouting),
    /** Long-running task contracts (`McpTaskToolset`), run by the gateway's MCP task runtime (`mcp_tasks`). */
    task_toolsets: Schema.optionalWith(McpTaskToolsets, { default: () => [] }),
    tools: Schema.optionalWith(
      Schema.Record({
        key: Schema.String,
        value: Schema.Struct(
          { routing: Schema.optional(McpRouting) },
          Schema.Record({ key: Schema.String, value: Schema.Unknown })
        )
      }),
      { default: () => ({}) }
    )
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
export type McpServerConfig = typeof McpServerConfig.Type

/**
 * The whole file. `middlewares` are the configured middlewares (`ConfiguredMiddlewares`); other keys (`skills`,
 * `mcpInterceptors`) are kept but not read here.
 */
export const ExtensionsConfig = Schema.Struct(
  {
    middlewares: Schema.optional(Schema.Array(Schema.NonEmptyTrimmedString)),
    mcpServers: Schema.optionalWith(
      Schema.Record({ key: Schema.String, value: McpServerConfig }),
      { default: () => ({}) }
    )
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
export type ExtensionsConfig = typeof ExtensionsConfig.Type

/** A server's transport: `stdio`, `sse`, or streamable HTTP (`http`). */
export const transportOf = (server: McpServerConfig): "stdio" | "sse" | "http" => {
  const kind = server.type ?? server.transport ?? "stdio"
  return kind === "stdio" ? "stdio" : kind === "sse" ? "sse" : "http"
}

/**
 * The routing of one of a server's tools: the server's, with the fields the tool's own entry sets over it
 * (SPEC §5.24); the priority is clamped to 0–100.
 */
export const routingOf = (server: McpServerConfig, tool: string): EffectiveRouting => {
  const own = Object.hasOwn(server.tools, tool) ? server.tools[tool]?.routing : undefined
  const pick = <K extends keyof McpRouting>(key: K) => own?.[key] ?? server.routing?.[key]
  return {
    mode: pick("mode") ?? "off",
    priority: Math.min(100, Math.max(0, pick("priority") ?? 0)),
    keywords: pick("keywords") ?? []
  }
}

/** Why a server's entry cannot start (missing command or URL), or undefined. */
export const serverProblem = (name: string, server: McpServerConfig): string | undefined => {
  const transport = transportOf(server)
  if (transport === "stdio" && (server.command === undefined || server.command.trim() === "")) {
    return `MCP server '${name}' uses stdio but has no command`
  }
  if (transport !== "stdio") {
    if (server.url === undefined || server.url.trim() === "") {
      return `MCP server '${name}' uses ${transport} but has no url`
    }
    try {
      const url = new URL(server.url)
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        return `MCP server '${name}': url must be http:// or https://`
      }
    } catch {
      return `MCP server '${name}': url is not a valid URL`
    }
    const oauth = server.oauth
    if (oauth !== undefined && oauth !== null && oauth.enabled) return oauthProblem(name, oauth)
  }
  return undefined
}

const oauthProblem = (name: string, oauth: McpOAuth): string | undefined => {
  const given = (value: string | null | undefined) => value !== undefined && value !== null && value !== ""
  // (a URL made of `$VAR`s is checked once they are resolved)
  if (!oauth.token_url.includes("$")) {
    try {
      const url = new URL(oauth.token_url)
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        return `MCP server '${name}': oauth.token_url must be http:// or https://`
      }
    } catch {
      return `MCP server '${name}': oauth.token_url is not a valid URL`
    }
  }
  if (oauth.grant_type === "client_credentials" && !(given(oauth.client_id) && given(oauth.client_secret))) {
    return `MCP server '${name}': oauth with grant_type client_credentials needs client_id and client_secret`
  }
  if (oauth.grant_type === "refresh_token" && !given(oauth.refresh_token)) {
    return `MCP server '${name}': oauth with grant_type refresh_token needs refresh_token`
  }
  return undefined
}
