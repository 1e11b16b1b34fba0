/**
 * An MCP server's connection as `McpClient` keeps it: its configured entry, the entry with its `$VAR`s resolved
 * (or why it cannot start), its client and process while it runs, its last failure and its listed tools; how one
 * is made for a configured server (`make`), a connection of its own for a session (`fresh`, `pin`), and what the
 * status route says of it (`status`).
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { McpServerConfig } from "../../services/Extensions.js"
import { serverProblem, transportOf } from "../../services/Extensions.js"
import type { McpTool, ServerStatus } from "../../services/Mcp.js"
import type { Workspace } from "./ClientOptions.js"
import { type TokenSource, tokenSource } from "./OAuth.js"
import * as SecretRefs from "./SecretRefs.js"
import type { Start } from "./Transport.js"
import { lookupAll, resolveEntry, variablesOf } from "./Variables.js"
import type * as WorkspaceFiles from "./WorkspaceFiles.js"

/** A configured server and the state of its connection. */
export interface Connection {
  readonly name: string
  readonly config: McpServerConfig
  readonly transport: "stdio" | "sse" | "http"
  /** The entry with `$VAR`s replaced, or why it cannot start. */
  readonly resolved: Either.Either<McpServerConfig, string>
  /** The request secrets its header and env values name (`SecretRefs`), and the entry resolved with a run's. */
  readonly secretNames: ReadonlyArray<string>
  readonly resolveWith: (secrets: ReadonlyMap<string, string>) => Either.Either<McpServerConfig, string>
  /** Its OAuth tokens (an HTTP or SSE server with `oauth` on), kept across its restarts. */
  readonly tokens: TokenSource | undefined
  readonly lock: Effect.Semaphore
  client: Client | undefined
  /** A start under way (its process started, its handshake not done): given up if the service closes. */
  starting: Start | undefined
  pid: number | undefined
  tools: ReadonlyArray<McpTool> | undefined
  toolProblems: ReadonlyArray<string>
  failure: { readonly message: string; readonly at: number } | undefined
  starts: number
  healthy: boolean
  stderr: string
  /**
   * The request secrets of a session made for a call given them (`secretSession`): hidden from its stderr as it
   * arrives, so that the tail kept and shown in a failed start's error never holds one in part, cut by the tail.
   */
  readonly hides?: ReadonlyArray<string> | undefined
  /** A scope's pinned session (`Options.workspace`): the workspace made before it starts, and its results' paths. */
  readonly pinnedTo?: Workspace | undefined
  readonly rewrite?: ((text: string) => string) | undefined
  readonly files?: WorkspaceFiles.Place | undefined
}

/** A warning for each routing priority of a server outside 0–100 (it is clamped, as DeerFlow clamps it). */
export const priorityWarnings = (name: string, config: McpServerConfig): ReadonlyArray<string> =>
  [
    ["", config.routing?.priority] as const,
    ...Object.entries(config.tools).map(([tool, entry]) => [` (tool '${tool}')`, entry.routing?.priority] as const)
  ].flatMap(([where, priority]) =>
    priority === undefined || (priority >= 0 && priority <= 100)
      ? []
      : [
        `MCP server '${name}'${where}: routing priority ${priority} is ${priority < 0 ? "below 0" : "above 100"}; ` +
        `clamped to ${priority < 0 ? 0 : 100}`
      ]
  )

/** The connection of configured server `name` (not started), its `$VAR`s looked up in the environment. */
export const make = (name: string, config: McpServerConfig): Effect.Effect<Connection> =>
  Effect.gen(function*() {
    const values = config.enabled ? yield* lookupAll(variablesOf(config)) : new Map<string, string | undefined>()
    const problem = serverProblem(name, config) ?? SecretRefs.problemOf(name, config)
    const resolveWith = (secrets?: ReadonlyMap<string, string>): Either.Either<McpServerConfig, string> =>
      problem !== undefined ? Either.left(problem) : Either.flatMap(
        Either.mapLeft(resolveEntry(config, (v) => values.get(v), secrets), (m) => `MCP server '${name}': ${m}`),
        // (checked again with its `$VAR`s resolved: an OAuth token URL or secret may be one)
        (entry) => {
          const resolvedProblem = serverProblem(name, entry)
          return resolvedProblem === undefined ? Either.right(entry) : Either.left(resolvedProblem)
        }
      )
    const resolved = resolveWith()
    const oauth = Either.isRight(resolved) ? resolved.right.oauth : undefined
    return {
      name,
      config,
      transport: transportOf(config),
      resolved,
      secretNames: SecretRefs.namesOf(config),
      resolveWith,
      tokens: oauth !== undefined && oauth !== null && oauth.enabled && transportOf(config) !== "stdio"
        ? tokenSource(oauth)
        : undefined,
      lock: yield* Effect.makeSemaphore(1),
      client: undefined,
      starting: undefined,
      pid: undefined,
      tools: undefined,
      toolProblems: [],
      failure: undefined,
      starts: 0,
      healthy: true,
      stderr: ""
    }
  })

/** A stdio server's entry run in `workspace`: its cwd (unless set) and temporary directory (unless set). */
export const pin = (resolved: Either.Either<McpServerConfig, string>, workspace: Workspace) => ({
  resolved: Either.map(resolved, (entry): McpServerConfig => ({
    ...entry,
    cwd: entry.cwd ?? workspace.cwd,
    env: { TMPDIR: workspace.tmp, TMP: workspace.tmp, TEMP: workspace.tmp, ...entry.env }
  })),
  rewrite: workspace.rewrite,
  files: workspace.files,
  pinnedTo: workspace
})

/** A connection of its own to `c`'s server (not started), run in a workspace when `pinned`. */
export const fresh = (c: Connection, pinned: ReturnType<typeof pin> | undefined): Connection => ({
  ...c,
  ...(pinned === undefined
    ? {}
    : { resolved: pinned.resolved, rewrite: pinned.rewrite, files: pinned.files, pinnedTo: pinned.pinnedTo }),
  lock: Effect.unsafeMakeSemaphore(1),
  client: undefined,
  starting: undefined,
  pid: undefined,
  failure: undefined,
  starts: 0,
  healthy: true,
  stderr: ""
})

/** What the status route and `antler mcp status` say of a connection. */
export const status = (c: Connection): ServerStatus => ({
  name: c.name,
  transport: c.transport,
  enabled: c.config.enabled,
  state: !c.config.enabled
    ? "disabled"
    : c.client !== undefined
    ? "running"
    : c.failure !== undefined || Either.isLeft(c.resolved)
    ? "failed"
    : "idle",
  tools: c.tools?.length ?? 0,
  starts: c.starts,
  problems: [
    ...(Either.isLeft(c.resolved) && c.config.enabled ? [c.resolved.left] : []),
    ...(c.failure !== undefined ? [c.failure.message] : []),
    ...c.toolProblems
  ],
  pid: c.pid
})
