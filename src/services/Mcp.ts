/**
 * The MCP port: the app's connections to its MCP servers (`extensions_config.json`), one service per app.
 * Servers start lazily (the first time their tools are asked for), are shared by every agent and run of the
 * app, are started again after a crash, and stop when the app's scope closes. A server that fails never fails
 * the app: its tools are missing (with the reason) or its calls return a readable error.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { JsonObject } from "../state/Message.js"
import type { EffectiveRouting, McpServerConfig } from "./Extensions.js"
import type * as SkillSecrets from "./SkillSecrets.js"

/** A tool one of the servers offers, under the name the model sees. */
export interface McpTool {
  readonly server: string
  /** The name the model sees (`<server>_<tool>` unless the server sets `tool_name_prefix: false`). */
  readonly name: string
  /** The tool's own name on its server. */
  readonly original: string
  readonly description: string
  /** Its arguments' JSON Schema (an object schema). */
  readonly inputSchema: JsonObject
  readonly routing: EffectiveRouting
}

/** What a server is doing. */
export interface ServerStatus {
  readonly name: string
  readonly transport: "stdio" | "sse" | "http"
  readonly enabled: boolean
  readonly state: "disabled" | "idle" | "running" | "failed"
  /** Tools it offers (when it has been listed). */
  readonly tools: number
  /** How often it was started (a restart after a crash counts). */
  readonly starts: number
  /** Why it failed, or why some of its tools are left out. */
  readonly problems: ReadonlyArray<string>
  /** The process id of a running stdio server. */
  readonly pid?: number | undefined
}

/** A call that failed for a reason of the server's, not of the tool's (which answers with `isError`). */
export class McpError extends Schema.TaggedError<McpError>()("McpError", {
  server: Schema.String,
  reason: Schema.Literal("config", "start", "timeout", "closed", "protocol"),
  message: Schema.String,
  /** Whether this is the first failure since the server last worked (callers warn once per outage). */
  firstInOutage: Schema.Boolean
}) {}

/** One content block of a tool result, as MCP sends it (decoded leniently: unknown kinds are kept as data). */
export type McpContent =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image" | "audio"; readonly data: string; readonly mimeType: string }
  | {
    readonly type: "resource"
    readonly resource: {
      readonly uri: string
      readonly mimeType?: string | undefined
      readonly text?: string | undefined
      readonly blob?: string | undefined
    }
  }
  | {
    readonly type: "resource_link"
    readonly uri: string
    readonly name?: string | undefined
    readonly description?: string | undefined
    readonly mimeType?: string | undefined
  }
  | { readonly type: "other"; readonly value: unknown }

/** A tool result. */
export interface McpResult {
  readonly content: ReadonlyArray<McpContent>
  readonly isError: boolean
  readonly structuredContent?: unknown
}

/** The tools of the enabled servers, and what went wrong with the others. */
export interface McpCatalog {
  readonly tools: ReadonlyArray<McpTool>
  /** One line per server that could not be listed (or tool left out), for warnings and `antler tools list`. */
  readonly problems: ReadonlyArray<{ readonly server: string; readonly message: string }>
  /**
   * Whether some of it was listed with a run's request secrets (`Service.catalogWith`): an agent built from it is
   * that run's alone.
   */
  readonly perRun?: boolean | undefined
}

/** The app's MCP connections. */
export interface Service {
  /** The tools of every enabled server; starts the servers not started yet (a failed one is retried later). */
  readonly catalog: Effect.Effect<McpCatalog>
  /**
   * Calls a tool by its name on its server (starting the server again if it died). Calls of one `scope` (a run's
   * user and thread) share a session of the server, kept apart from other scopes' (a stdio
   * server's process each), as DeerFlow pools a session per thread; without a scope, the server's shared one.
   */
  readonly call: (
    server: string,
    tool: string,
    args: JsonObject,
    scope?: SessionScope
  ) => Effect.Effect<McpResult, McpError>
  /**
   * `catalog` for a run given `secrets`: a server whose header or env values name request secrets
   * (`${secret:NAME}`) and that did not list its tools without them is listed with the run's, on a connection of
   * its own closed after (its tools are the run's alone, `McpCatalog.perRun`); a run that did not give them all has
   * a problem naming the missing ones (never a value) instead of its tools. Absent: `catalog` is every run's.
   */
  readonly catalogWith?: ((secrets: SkillSecrets.RequestSecrets | undefined) => Effect.Effect<McpCatalog>) | undefined
  /** What each configured server is doing (starts nothing). */
  readonly status: Effect.Effect<ReadonlyArray<ServerStatus>>
  /**
   * How many times the servers were replaced (`replace`): agents built for an older revision have the older
   * servers' tools, so they are built again. Absent: the servers never change.
   */
  readonly revision?: Effect.Effect<number> | undefined
  /**
   * Replaces the servers (the extensions file changed): the old ones stop, the new ones start when their tools
   * are first asked for. Absent: the servers are fixed for the app's life.
   */
  readonly replace?: ((servers: Readonly<Record<string, McpServerConfig>>) => Effect.Effect<void>) | undefined
  /**
   * Why `servers` may not replace the running ones (`undefined`: they may): under `antler serve`, an edit of a
   * task-enabled server's settings (`TaskSnapshot`). Absent: every replacement may be made.
   */
  readonly refusal?: ((servers: Readonly<Record<string, McpServerConfig>>) => string | undefined) | undefined
  /**
   * The servers as configured now (enabled or not), after any `replace`: the sandbox reads an enabled filesystem
   * server's roots from it. Absent: unknown (no roots are taken from MCP).
   */
  readonly servers?: Effect.Effect<Readonly<Record<string, McpServerConfig>>> | undefined
}

/** The MCP connections of an app. */
export class Mcp extends Context.Tag("antler/Mcp")<Mcp, Service>() {}

/** The scope of a run's MCP calls (`Service.call`): its user and thread. */
export interface SessionScope {
  readonly userId: string
  readonly threadId: string
  /**
   * The run's request secrets (`RunOptions.secrets`), for a server whose header or env values name them
   * (`${secret:NAME}`): such a call gets a connection of its own, made with them and closed after it.
   */
  readonly secrets?: SkillSecrets.RequestSecrets | undefined
}
