/**
 * The MCP port over the official SDK (`@modelcontextprotocol/sdk`): stdio servers (a child process each),
 * streamable HTTP and SSE servers. One connection per server for the whole app, made the first time the
 * server's tools are asked for; a server whose connection closed (a crashed process, a dropped session) is
 * started again by the next call; every server stops when the layer's scope closes.
 *
 * What a server sends is untrusted: tool names are made safe for model APIs (`[A-Za-z0-9_-]`, 64 characters)
 * and namespaced `<server>_<tool>` as DeerFlow does, input schemas must be JSON object schemas of reasonable
 * size, descriptions are cleaned and clipped, and results are decoded leniently. `$VAR` / `${VAR}` in a
 * server's command, args, env, url and headers come from the environment; an unset one keeps that server from
 * starting (with the reason), never the app. A stdio server dies with the app however it ends, a SIGKILL
 * included: it is started with a parent-death signal (see `ParentDeath`; without one, a warning says so).
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { ChildProcess } from "node:child_process"
import { EventEmitter } from "node:events"
import type { McpServerConfig } from "../services/Extensions.js"
import { routingOf, serverProblem, transportOf } from "../services/Extensions.js"
import type { McpCatalog, McpContent, McpResult, McpTool, ServerStatus, Service } from "../services/Mcp.js"
import * as OptionalPackage from "../internal/OptionalPackage.js"
import { Mcp, McpError } from "../services/Mcp.js"
import type { JsonObject } from "../state/Message.js"
import * as Redact from "../state/Redact.js"
import { interpolate } from "./ConfigFile.js"
import * as ParentDeath from "./ParentDeath.js"
import { clean } from "./SearchProviders.js"
import * as Json from "../state/Json.js"

/** Options of the service. */
export interface Options {
  /** The servers, by name (`mcpServers` of `extensions_config.json`, decoded). */
  readonly servers: Readonly<Record<string, McpServerConfig>>
  /** Starting a server and its handshake, when the server sets no `session_init_timeout`. Default 30 s. */
  readonly initTimeoutMs?: number | undefined
  /** One tool call, when the server sets no `tool_call_timeout`. Default 300 s. */
  readonly callTimeoutMs?: number | undefined
  /** A server that failed to start is not tried again for this long. Default 30 s. */
  readonly retryAfterMs?: number | undefined
  /** The client's name in the MCP handshake. */
  readonly clientName?: string | undefined
  /** The `setpriv` giving stdio servers a parent-death signal (default: found on PATH); `false`: none. */
  readonly setpriv?: string | false | undefined
}

/** The MCP SDK: an optional package (a missing one fails a server's start, naming it). */
const MCP_SDK = "@modelcontextprotocol/sdk"

/** The SDK's client and transports, loaded when a server first starts (an app without MCP servers never does). */
const loadSdk = () =>
  Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/sse.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js")
  ]).then(([client, sse, stdio, http]) => ({
    Client: client.Client,
    SSEClientTransport: sse.SSEClientTransport,
    StdioClientTransport: stdio.StdioClientTransport,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport
  }))

type Sdk = Awaited<ReturnType<typeof loadSdk>>

const MAX_NAME = 64
const MAX_DESCRIPTION = 4000
const MAX_SCHEMA_CHARS = 100_000

/** A model-safe tool name: characters outside `[A-Za-z0-9_-]` become `_`, at most 64 characters. */
export const safeName = (name: string): string => name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, MAX_NAME)

/** The name the model sees for a server's tool (DeerFlow: `<server>_<tool>` unless `tool_name_prefix: false`). */
export const exposedName = (server: string, tool: string, prefix: boolean): string =>
  safeName(prefix ? `${server}_${tool}` : tool)

const ToolListing = Schema.Struct({
  name: Schema.String,
  description: Schema.optional(Schema.NullOr(Schema.String)),
  inputSchema: Schema.optional(Schema.Unknown)
})

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A server's input schema as the model gets it: an object schema, `$schema` dropped; or why it cannot be used. */
export const inputSchemaOf = (raw: unknown): Either.Either<JsonObject, string> => {
  if (raw === undefined || raw === null) return Either.right({ type: "object", properties: {} })
  if (!isRecord(raw)) return Either.left("its input schema is not an object")
  const { $schema: _, ...rest } = raw
  if (rest.type !== undefined && rest.type !== "object") {
    return Either.left("its input schema does not describe an object")
  }
  let text: string
  try {
    text = JSON.stringify(rest)
  } catch {
    return Either.left("its input schema is not JSON")
  }
  if (text.length > MAX_SCHEMA_CHARS) return Either.left(`its input schema is over ${MAX_SCHEMA_CHARS} characters`)
  return Either.right({ type: "object", ...(Json.parse(text) as JsonObject) })
}

const Block = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
  Schema.Struct({ type: Schema.Literal("image", "audio"), data: Schema.String, mimeType: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("resource"),
    resource: Schema.Struct({
      uri: Schema.String,
      mimeType: Schema.optional(Schema.String),
      text: Schema.optional(Schema.String),
      blob: Schema.optional(Schema.String)
    })
  }),
  Schema.Struct({
    type: Schema.Literal("resource_link"),
    uri: Schema.String,
    name: Schema.optional(Schema.String),
    description: Schema.optional(Schema.String),
    mimeType: Schema.optional(Schema.String)
  })
)
const decodeBlock = Schema.decodeUnknownOption(Block, { onExcessProperty: "ignore" })

/**
 * A tool result as a server sent it, decoded leniently (a block of an unknown kind is kept as `other`), without
 * `__proto__` keys (the blocks kept as they are reach the thread's state: see `Json.parse`).
 */
export const resultOf = (given: unknown): McpResult => {
  const raw = Json.withoutProto(given)
  const record = isRecord(raw) ? raw : {}
  const content = Array.isArray(record.content) ? record.content : []
  return {
    content: content.map((block): McpContent =>
      Option.getOrElse(decodeBlock(block) as Option.Option<McpContent>, () => ({ type: "other", value: block }))
    ),
    isError: record.isError === true,
    ...(record.structuredContent !== undefined ? { structuredContent: record.structuredContent } : {})
  }
}

// ---------------------------------------------------------------------------------------------------------
// Connections

/** A server being started: its client, and the process the stdio transport spawned for it (once it has). */
interface Start {
  readonly client: Client
  child: ChildProcess | undefined
}

/**
 * Ends a process of ours: SIGTERM, then SIGKILL if it is still there after a second. Resolves when it has exited
 * (or two seconds at most).
 */
const terminate = (child: ChildProcess): Promise<void> => {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(hard)
      clearTimeout(last)
      resolve()
    }
    child.once("exit", done)
    const hard = setTimeout(() => child.kill("SIGKILL"), 1000)
    const last = setTimeout(done, 2000)
    child.kill("SIGTERM")
  })
}

interface Connection {
  readonly name: string
  readonly config: McpServerConfig
  readonly transport: "stdio" | "sse" | "http"
  /** The entry with `$VAR`s replaced, or why it cannot start. */
  readonly resolved: Either.Either<McpServerConfig, string>
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
}

const errorText = (error: unknown): string => clean(error instanceof Error ? error.message : String(error), 500)

const codeOf = (error: unknown): number | undefined => {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === "number" ? code : undefined
}

/** Collects the `$VAR`s of a server entry's strings (command, args, env, url, headers, cwd). */
const variablesOf = (server: McpServerConfig): ReadonlyArray<string> => {
  const names = new Set<string>()
  interpolate(interpolatable(server), (name) => {
    names.add(name)
    return ""
  })
  return [...names]
}

const interpolatable = (server: McpServerConfig) => ({
  command: server.command,
  args: server.args,
  env: server.env,
  url: server.url,
  headers: server.headers,
  cwd: server.cwd
})

const resolveEntry = (
  server: McpServerConfig,
  lookup: (name: string) => string | undefined
): Either.Either<McpServerConfig, string> =>
  Either.map(
    Either.mapLeft(interpolate(interpolatable(server), lookup), (issues) =>
      issues.map((issue) => `${issue.path}: ${issue.message}`).join("; ")),
    (values) => ({ ...server, ...(values as Partial<McpServerConfig>) })
  )

const lookupAll = (names: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(names, (name) =>
      Effect.map(
        Effect.orElseSucceed(Config.option(Config.string(name)), () => Option.none<string>()),
        (value) => [name, Option.getOrUndefined(value)] as const
      )),
    (entries) => new Map<string, string | undefined>(entries)
  )

/**
 * The secrets of the enabled servers, with their `$VAR`s resolved: header and env values and URL credentials,
 * which nothing the app prints or stores may contain.
 */
export const secrets = (servers: Readonly<Record<string, McpServerConfig>>): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function*() {
    const out: Array<string> = []
    for (const config of Object.values(servers)) {
      if (!config.enabled) continue
      const values = yield* lookupAll(variablesOf(config))
      const resolved = Either.getOrElse(resolveEntry(config, (v) => values.get(v)), () => config)
      out.push(...Object.values(resolved.headers), ...Object.values(resolved.env), ...Redact.urlSecrets(resolved.url))
      for (const value of Object.values(resolved.headers)) {
        const token = /^(?:bearer|basic|token)\s+(\S+)$/i.exec(value.trim())?.[1]
        if (token !== undefined) out.push(token)
      }
    }
    return out
  })

/** The MCP service over `options.servers`. Servers stop when the scope closes. */
export const make = (options: Options): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const initTimeoutMs = options.initTimeoutMs ?? 30_000
    const callTimeoutMs = options.callTimeoutMs ?? 300_000
    const retryAfterMs = options.retryAfterMs ?? 30_000
    const connections: Array<Connection> = []
    for (const [name, config] of Object.entries(options.servers)) {
      const values = config.enabled ? yield* lookupAll(variablesOf(config)) : new Map<string, string | undefined>()
      const problem = serverProblem(name, config)
      connections.push({
        name,
        config,
        transport: transportOf(config),
        resolved: problem !== undefined
          ? Either.left(problem)
          : Either.mapLeft(resolveEntry(config, (v) => values.get(v)), (m) => `MCP server '${name}': ${m}`),
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
      })
    }
    const byName = new Map(connections.map((c) => [c.name, c]))

    const initMs = (c: Connection) => (c.config.session_init_timeout ?? undefined) !== undefined
      ? c.config.session_init_timeout! * 1000
      : initTimeoutMs
    const callMs = (c: Connection) => (c.config.tool_call_timeout ?? undefined) !== undefined
      ? c.config.tool_call_timeout! * 1000
      : callTimeoutMs

    const fail = (c: Connection, reason: McpError["reason"], message: string) => {
      const error = new McpError({ server: c.name, reason, message, firstInOutage: c.healthy })
      c.healthy = false
      return error
    }

    // found once, when the first stdio server starts
    const parentDeath = yield* Effect.cached(Effect.tap(ParentDeath.find(options.setpriv), (wrapper) =>
      wrapper._tag === "none" && options.setpriv !== false
        ? Effect.logWarning(
          `MCP stdio servers start without a parent-death signal (${wrapper.reason}): a server may outlive ` +
            "Antler if Antler is killed"
        )
        : Effect.void))

    const makeTransport = (
      sdk: Sdk,
      c: Connection,
      entry: McpServerConfig,
      start: Start,
      wrapper: ParentDeath.Wrapper
    ): Transport => {
      if (c.transport === "stdio") {
        const env = { ...sdk.getDefaultEnvironment(), ...entry.env }
        const { args, command } = ParentDeath.wrap(wrapper, entry.command!, entry.args, {
          path: env.PATH,
          cwd: entry.cwd ?? process.cwd()
        })
        const transport = new sdk.StdioClientTransport({
          command,
          args: [...args],
          env: { ...entry.env },
          ...(entry.cwd !== undefined ? { cwd: entry.cwd } : {}),
          stderr: "pipe"
        })
        transport.stderr?.on("data", (chunk: Buffer) => {
          c.stderr = (c.stderr + chunk.toString("utf8")).slice(-2000)
        })
        // The process, kept to end it when a start is given up. The SDK's own close, which the client calls
        // when its handshake fails, waits up to 4 s for the process to exit, on timers that do not keep Node
        // alive: an app that exits sooner leaves the server running. (Read off the transport once it has
        // spawned: the SDK does not hand the process out.)
        const spawn = transport.start.bind(transport)
        transport.start = async () => {
          await spawn()
          const child = (transport as unknown as { readonly _process?: unknown })._process
          if (child instanceof EventEmitter && typeof (child as ChildProcess).kill === "function") {
            start.child = child as ChildProcess
          }
        }
        return transport
      }
      const url = new URL(entry.url!)
      const requestInit = { headers: { ...entry.headers } }
      return c.transport === "sse"
        ? new sdk.SSEClientTransport(url, {
          requestInit,
          // The event stream is opened by its own fetch: the configured headers go there too.
          eventSourceInit: {
            fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, ...entry.headers } })
          }
        })
        : new sdk.StreamableHTTPClientTransport(url, { requestInit })
    }

    const closeClient = (client: Client) => Effect.promise(() => client.close().catch(() => undefined))
    /** Gives a start up: its client closed and its process ended now. */
    const abandon = ({ child, client }: Start) =>
      Effect.all([
        closeClient(client),
        child === undefined ? Effect.void : Effect.promise(() => terminate(child))
      ], { concurrency: "unbounded", discard: true })
    // set when the service closes: a start still under way then stops its server instead of keeping it
    let closed = false

    // Connects (or reuses the live connection). A closed connection (crash) is replaced.
    const connect = (c: Connection): Effect.Effect<Client, McpError> =>
      c.lock.withPermits(1)(Effect.suspend((): Effect.Effect<Client, McpError> => {
        if (c.client !== undefined) return Effect.succeed(c.client)
        if (Either.isLeft(c.resolved)) return Effect.fail(fail(c, "config", c.resolved.left))
        const entry = c.resolved.right
        return Effect.gen(function*() {
          const sdk = yield* Effect.tryPromise({
            try: () => OptionalPackage.load([MCP_SDK], "connect to MCP servers", loadSdk),
            catch: (cause) =>
              fail(c, "start", `MCP server '${c.name}' could not be started: ${errorText(cause)}`)
          })
          c.starts++
          c.stderr = ""
          const client = new sdk.Client({ name: options.clientName ?? "antler", version: "0.1.0" })
          const start: Start = { client, child: undefined }
          const wrapper = c.transport === "stdio" ? yield* parentDeath : ({ _tag: "none", reason: "" } as const)
          const transport = makeTransport(sdk, c, entry, start, wrapper)
          const ms = initMs(c)
          c.starting = start
          const connected = yield* Effect.tryPromise({
            try: (signal) => client.connect(transport, { timeout: ms, signal }),
            catch: (error) => error
          }).pipe(
            Effect.timeoutFail({ duration: ms + 1000, onTimeout: () => new Error("timeout") }),
            Effect.either,
            // (interrupted, the start is given up: its process must not outlive it)
            Effect.onInterrupt(() => abandon(start)),
            Effect.ensuring(Effect.sync(() => {
              if (c.starting === start) c.starting = undefined
            }))
          )
          if (Either.isRight(connected) && closed) {
            yield* abandon(start)
            return yield* Effect.fail(fail(c, "start", `MCP server '${c.name}' was started after the service closed`))
          }
          if (Either.isLeft(connected)) {
            yield* abandon(start)
            const timedOut = codeOf(connected.left) === -32001 || errorText(connected.left) === "timeout"
            const tail = clean(c.stderr, 300)
            const message = timedOut
              ? `MCP server '${c.name}' did not finish starting within ${ms / 1000} s`
              : `MCP server '${c.name}' could not be started: ${errorText(connected.left)}` +
                (tail !== "" ? ` (its stderr: ${tail})` : "")
            c.failure = { message, at: yield* Clock.currentTimeMillis }
            return yield* Effect.fail(fail(c, timedOut ? "timeout" : "start", message))
          }
          client.onclose = () => {
            if (c.client === client) {
              c.client = undefined
              c.pid = undefined
            }
          }
          c.client = client
          c.pid = transport instanceof sdk.StdioClientTransport ? transport.pid ?? undefined : undefined
          c.failure = undefined
          return client
        })
      }))

    const list = (c: Connection): Effect.Effect<ReadonlyArray<McpTool>, McpError> =>
      Effect.gen(function*() {
        const client = yield* connect(c)
        const raw: Array<unknown> = []
        let cursor: string | undefined
        for (let page = 0; page < 50; page++) {
          const answer = yield* Effect.tryPromise({
            try: (signal) =>
              client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: initMs(c), signal }),
            catch: (error) =>
              fail(
                c,
                codeOf(error) === -32001 ? "timeout" : "protocol",
                `MCP server '${c.name}' did not list its tools: ${errorText(error)}`
              )
          })
          raw.push(...answer.tools)
          cursor = answer.nextCursor
          if (cursor === undefined) break
        }
        const tools: Array<McpTool> = []
        const problems: Array<string> = []
        for (const item of raw) {
          const decoded = Schema.decodeUnknownEither(ToolListing, { onExcessProperty: "ignore" })(item)
          if (Either.isLeft(decoded)) {
            problems.push(`a tool of MCP server '${c.name}' was left out: it has no name`)
            continue
          }
          const tool = decoded.right
          const schema = inputSchemaOf(tool.inputSchema)
          if (Either.isLeft(schema)) {
            problems.push(`${c.name}: tool '${clean(tool.name, 100)}' was left out: ${schema.left}`)
            continue
          }
          tools.push({
            server: c.name,
            name: exposedName(c.name, tool.name, c.config.tool_name_prefix),
            original: tool.name,
            description: clean(tool.description ?? "", MAX_DESCRIPTION) || `${tool.name} (MCP server ${c.name})`,
            inputSchema: schema.right,
            routing: routingOf(c.config, tool.name)
          })
        }
        c.tools = tools
        c.toolProblems = problems
        c.healthy = true
        return tools
      })

    const catalog: Effect.Effect<McpCatalog> = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const enabled = connections.filter((c) => c.config.enabled)
      const listed = yield* Effect.forEach(enabled, (c) => {
        if (c.tools !== undefined) return Effect.succeed({ c, tools: c.tools, error: undefined })
        if (c.failure !== undefined && now - c.failure.at < retryAfterMs) {
          return Effect.succeed({ c, tools: [] as ReadonlyArray<McpTool>, error: c.failure.message })
        }
        return list(c).pipe(
          Effect.map((tools) => ({ c, tools, error: undefined as string | undefined })),
          Effect.catchAll((error) =>
            Effect.map(Clock.currentTimeMillis, (at) => {
              c.failure = { message: error.message, at }
              return { c, tools: [] as ReadonlyArray<McpTool>, error: error.message }
            })
          )
        )
      }, { concurrency: "unbounded" })
      const tools: Array<McpTool> = []
      const problems: Array<{ server: string; message: string }> = []
      const taken = new Map<string, string>()
      for (const { c, error, tools: own } of listed) {
        if (error !== undefined) problems.push({ server: c.name, message: error })
        for (const message of c.toolProblems) problems.push({ server: c.name, message })
        for (const tool of own) {
          const holder = taken.get(tool.name)
          if (holder !== undefined) {
            problems.push({
              server: c.name,
              message: `${c.name}: tool '${tool.original}' was left out: the name ${tool.name} is already taken by ` +
                `MCP server '${holder}' (keep tool_name_prefix on)`
            })
            continue
          }
          taken.set(tool.name, c.name)
          tools.push(tool)
        }
      }
      return { tools, problems }
    })

    // (a span per call: a round trip to another process or server, which costs far more than the span)
    const call = Effect.fn("McpClient.call")(function*(server: string, tool: string, args: JsonObject) {
      yield* Effect.annotateCurrentSpan({ "mcp.server": server, "mcp.tool": tool })
      const c = byName.get(server)
      if (c === undefined) {
        const message = `no MCP server is named '${server}'`
        return yield* Effect.fail(new McpError({ server, reason: "config", message, firstInOutage: true }))
      }
      return yield* Effect.gen(function*() {
        const client = yield* connect(c)
        const ms = callMs(c)
        const raw = yield* Effect.tryPromise({
          try: (signal) =>
            client.callTool({ name: tool, arguments: args }, undefined, {
              timeout: ms,
              signal,
              resetTimeoutOnProgress: true
            }),
          catch: (error) => {
            const code = codeOf(error)
            if (code === -32001) {
              return fail(c, "timeout", `MCP server '${c.name}' did not answer within ${ms / 1000} s`)
            }
            if (code === -32000 || c.client !== client) {
              return fail(
                c,
                "closed",
                `the connection to MCP server '${c.name}' closed during the call ` +
                  "(it will be started again on the next call)"
              )
            }
            return fail(c, "protocol", `MCP server '${c.name}' failed the call: ${errorText(error)}`)
          }
        })
        c.healthy = true
        return resultOf(raw)
      })
    })

    const status: Effect.Effect<ReadonlyArray<ServerStatus>> = Effect.sync(() =>
      connections.map((c): ServerStatus => ({
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
      }))
    )

    yield* Effect.addFinalizer(() => {
      closed = true
      return Effect.forEach(connections, (c) => {
        const client = c.client
        const start = c.starting
        c.client = undefined
        c.starting = undefined
        return Effect.zipRight(
          client === undefined ? Effect.void : closeClient(client),
          start === undefined ? Effect.void : abandon(start)
        )
      }, { concurrency: "unbounded", discard: true })
    })

    return { catalog, call, status }
  })

/** The MCP service as a layer: servers stop when the layer is released. */
export const layer = (options: Options): Layer.Layer<Mcp> => Layer.scoped(Mcp, make(options))
