/**
 * The MCP port over the official SDK (`@modelcontextprotocol/sdk`): stdio servers (a child process each),
 * streamable HTTP and SSE servers. One connection per server is made the first time the server's tools are asked
 * for; a run's calls go through a session of its thread's own (`sessionOf`: a stdio server's process, an HTTP
 * server's session), so one thread's server state (a browser's pages) is never another's; a connection that
 * closed (a crashed process, a dropped session) is started again by the next call; every server stops when the
 * layer's scope closes.
 *
 * What a server sends is untrusted: tool names are made safe for model APIs (`[A-Za-z0-9_-]`, 64 characters)
 * and namespaced `<server>_<tool>` as DeerFlow does, input schemas must be JSON object schemas of reasonable
 * size, descriptions are cleaned and clipped, and results are decoded leniently. `$VAR` / `${VAR}` in a
 * server's command, args, env, url and headers come from the environment; an unset one keeps that server from
 * starting (with the reason), never the app. A stdio server dies with the app however it ends, a SIGKILL
 * included: it is started with a parent-death signal (see `ParentDeath`; without one, a warning says so).
 *
 * This module keeps the connections (start, reuse, restart, stop) and the port; `mcp/Transport.ts` makes the
 * SDK's transports, `mcp/Decode.ts` decodes what servers send, `mcp/Variables.ts` resolves the `$VAR`s,
 * `mcp/WorkspaceFiles.ts` gives the thread's files a pinned session's results name as the model's paths;
 * `mcp/Sessions.ts` keeps the scoped calls' sessions and bounds them per user and in all;
 * `mcp/ClientOptions.ts` holds the service's options; `mcp/Connection.ts` is a server's connection record (made,
 * pinned, its status); `mcp/Catalog.ts` puts the servers' listings together as one catalog.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as OptionalPackage from "../internal/OptionalPackage.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import type { McpCatalog, McpTool, ServerStatus, Service, SessionScope } from "../services/Mcp.js"
import { Mcp, McpError } from "../services/Mcp.js"
import type { JsonObject } from "../state/Message.js"
import * as Catalog from "./mcp/Catalog.js"
import * as Connection from "./mcp/Connection.js"
import { MAX_TOOLS, resultOf, toolsOf } from "./mcp/Decode.js"
import { DEFAULT_MAX_MESSAGE_BYTES } from "./mcp/Bounds.js"
import * as SecretRefs from "./mcp/SecretRefs.js"
import { loadSdk, makeTransport, MCP_SDK, type Start, terminate } from "./mcp/Transport.js"
import { entrySecrets } from "./mcp/Variables.js"
import * as WorkspaceFiles from "./mcp/WorkspaceFiles.js"
import * as WorkspaceDirs from "./mcp/WorkspaceDirs.js"
import * as Sessions from "./mcp/Sessions.js"
import type { Options } from "./mcp/ClientOptions.js"
import * as ParentDeath from "./ParentDeath.js"
import { clean } from "./SearchProviders.js"
import * as Redact from "../state/Redact.js"

export { exposedName, inputSchemaOf, resultOf, safeName } from "./mcp/Decode.js"
export { secrets } from "./mcp/Variables.js"
export type { Options, Workspace } from "./mcp/ClientOptions.js"

/**
 * An error's text as a failure says it: cut at 500 characters. With `c`, a beginning of its entry's secrets or of the
 * request secrets its session was made for left at the cut is hidden too: a server may say one back in its error,
 * and the masks after this (the run's, the store's) find whole values only. `hide` (a call's: the process's secrets
 * and the run's, `ProcessSecrets.ofRun`) masks the text before its cut.
 */
const errorText = (error: unknown, c?: Connection.Connection, hide?: Redact.Redactor): string => {
  const raw = error instanceof Error ? error.message : String(error)
  const text = clean(hide === undefined ? raw : hide.text(raw), 500)
  if (c === undefined || !text.endsWith("…")) return text
  const hides = c.hides ?? []
  const secrets = [...(Either.isRight(c.resolved) ? entrySecrets(c.resolved.right) : []), ...hides]
  return `${Redact.make(secrets, { encoded: hides.length > 0 }).last(text.slice(0, -1))}…`
}

const codeOf = (error: unknown): number | undefined => {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === "number" ? code : undefined
}

/** The MCP service over `options.servers`. Servers stop when the scope closes. */
export const make = (options: Options): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const initTimeoutMs = options.initTimeoutMs ?? 60_000
    const callTimeoutMs = options.callTimeoutMs ?? 300_000
    const retryAfterMs = options.retryAfterMs ?? 30_000
    const maxMessageBytes = Math.max(1024, options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES)
    // (what a failed start's or listing's error is masked with before its cut: the process's secrets)
    const processSecrets = options.redact
    // (why a client's connection was ended for a message over the bound: its failed calls say so)
    const oversize = new WeakMap<Client, string>()
    const connections: Array<Connection.Connection> = yield* Effect.forEach(
      Object.entries(options.servers),
      ([name, config]) => Connection.make(name, config)
    )
    const byName = new Map(connections.map((c) => [c.name, c]))
    for (const c of connections) {
      if (!c.config.enabled) continue
      yield* Effect.forEach(Connection.priorityWarnings(c.name, c.config), (w) => Effect.logWarning(w))
    }

    const initMs = (c: Connection.Connection) => (c.config.session_init_timeout ?? undefined) !== undefined
      ? c.config.session_init_timeout! * 1000
      : initTimeoutMs
    const callMs = (c: Connection.Connection) => (c.config.tool_call_timeout ?? undefined) !== undefined
      ? c.config.tool_call_timeout! * 1000
      : callTimeoutMs

    const fail = (c: Connection.Connection, reason: McpError["reason"], message: string) => {
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

    const closeClient = (client: Client) => Effect.promise(() => client.close().catch(() => undefined))
    /** Gives a start up: its client closed and its process ended now. */
    const abandon = ({ child, client }: Start) =>
      Effect.all([
        closeClient(client),
        child === undefined ? Effect.void : Effect.promise(() => terminate(child))
      ], { concurrency: "unbounded", discard: true })
    // set when the service closes: a start still under way then stops its server instead of keeping it
    let closed = false
    /** Closes a connection's client and gives up its start under way (its stdio process ends). */
    const stopConnection = (c: Connection.Connection) => {
      const client = c.client
      const start = c.starting
      c.client = undefined
      c.starting = undefined
      c.pid = undefined
      return Effect.zipRight(
        client === undefined ? Effect.void : closeClient(client),
        start === undefined ? Effect.void : abandon(start)
      )
    }

    // Scoped calls' sessions (a run's user and thread each), kept by `mcp/Sessions.ts`: a stdio server pinned to
    // the scope's workspace (`Options.workspace`) is a process of its own from the start; a session closed for room
    // ends its process.
    // Calls given request secrets their server's entry names (`SecretRefs`): each on a connection of its own, made
    // with the run's values for that call and closed after it (its stdio process ended), as langchain-mcp-adapters
    // opens a session for each call an interceptor gave headers; no session any other call uses ever holds them.
    const withSecrets = new Set<Connection.Connection>()
    const secretSession = (
      c: Connection.Connection,
      scope: SessionScope | undefined
    ): Connection.Connection | undefined => {
      const given = SkillSecrets.entries(scope?.secrets)
      if (c.secretNames.every((name) => !given.has(name))) return undefined
      const workspace = c.transport === "stdio" && scope !== undefined ? options.workspace?.(scope) : undefined
      // (each line of a value of several lines too, as a tool's result masks them)
      const hides = SkillSecrets.withLines(given.values())
      const own = Connection.fresh({ ...c, resolved: c.resolveWith(given), hides }, undefined)
      const session = workspace === undefined ? own : Connection.fresh(own, Connection.pin(own.resolved, workspace))
      withSecrets.add(session)
      return session
    }
    const table = Sessions.make<Connection.Connection>(
      Math.max(1, options.maxSessions ?? 256),
      Math.max(1, options.maxSessionsPerUser ?? 16)
    )
    /** The session of `scope` on server `c`, entered (`table.leave` it when the call is done). */
    const sessionOf = (
      c: Connection.Connection,
      scope: SessionScope | undefined
    ): Effect.Effect<Connection.Connection> =>
      Effect.suspend(() => {
        if (scope === undefined) return Effect.succeed(table.enter(c))
        const { closed, session } = table.take(c, scope, (sharedIsFree) => {
          // a stdio server pinned to the scope's workspace is a process of its own from the start
          const workspace = c.transport === "stdio" ? options.workspace?.(scope) : undefined
          const pinned = workspace === undefined ? undefined : Connection.pin(c.resolved, workspace)
          return sharedIsFree && pinned === undefined ? c : Connection.fresh(c, pinned)
        })
        return Effect.as(Effect.forEach(closed, stopConnection, { concurrency: "unbounded", discard: true }), session)
      })

    // Connects (or reuses the live connection). A closed connection (crash) is replaced.
    const connect = (c: Connection.Connection): Effect.Effect<Client, McpError> =>
      c.lock.withPermits(1)(Effect.suspend((): Effect.Effect<Client, McpError> => {
        if (c.client !== undefined) return Effect.succeed(c.client)
        if (Either.isLeft(c.resolved)) return Effect.fail(fail(c, "config", c.resolved.left))
        const entry = c.resolved.right
        return Effect.gen(function*() {
          if (c.pinnedTo !== undefined) {
            const { cwd, tmp } = c.pinnedTo
            // (the workspace is the model's: a symlink its bash put at .mcp is not followed)
            yield* Effect.try({
              try: () => WorkspaceDirs.make(cwd, [tmp]),
              catch: (error) =>
                fail(c, "start", `MCP server '${c.name}' could not be started: ${errorText(error, c, processSecrets)}`)
            })
          }
          const sdk = yield* Effect.tryPromise({
            try: () => OptionalPackage.load([MCP_SDK], "connect to MCP servers", loadSdk),
            catch: (cause) =>
              fail(c, "start", `MCP server '${c.name}' could not be started: ${errorText(cause, c, processSecrets)}`)
          })
          c.starts++
          c.stderr = ""
          const client = new sdk.Client({ name: options.clientName ?? "antler", version: "0.1.0" })
          const start: Start = { client, child: undefined }
          const wrapper = c.transport === "stdio" ? yield* parentDeath : ({ _tag: "none", reason: "" } as const)
          // (the entry's own secrets, a call's request secrets and the process's hidden as the stderr arrives, before
          // its tail is cut; a prefix of one at a chunk's end waits for the next: a value split between chunks too)
          const hides = c.hides ?? []
          const hidden = Redact.make([...entrySecrets(entry), ...hides, ...processSecrets?.secrets ?? []], {
            encoded: hides.length > 0
          }).stream()
          const transport = makeTransport(sdk, c.transport, entry, start, wrapper, (text) => {
            c.stderr = (c.stderr + hidden.push(text)).slice(-2000)
          }, {
            server: c.name,
            bytes: maxMessageBytes,
            onOversize: (message) => {
              if (!oversize.has(client)) oversize.set(client, message)
            }
          }, c.tokens)
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
            // (with what the redactor still holds back: the stream ended with the process, or may yet go on)
            const tail = clean((c.stderr + hidden.peek()).slice(-2000), 300)
            const message = timedOut
              ? `MCP server '${c.name}' did not finish starting within ${ms / 1000} s`
              : `MCP server '${c.name}' could not be started: ` +
                `${oversize.get(client) ?? errorText(connected.left, c, processSecrets)}` +
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

    const list = (c: Connection.Connection): Effect.Effect<ReadonlyArray<McpTool>, McpError> =>
      Effect.gen(function*() {
        const client = yield* connect(c)
        // (each page decoded as it comes: what is kept of a listing is its tools, at most MAX_TOOLS of them)
        const tools: Array<McpTool> = []
        const problems: Array<string> = []
        let cursor: string | undefined
        for (let page = 0; page < 50; page++) {
          const answer = yield* Effect.tryPromise({
            try: (signal) =>
              client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: initMs(c), signal }),
            catch: (error) =>
              fail(
                c,
                codeOf(error) === -32001 ? "timeout" : "protocol",
                `MCP server '${c.name}' did not list its tools: ` +
                  (oversize.get(client) ?? errorText(error, c, processSecrets))
              )
          })
          const listed = toolsOf(c.name, c.config, answer.tools)
          problems.push(...listed.problems)
          const room = MAX_TOOLS - tools.length
          tools.push(...listed.tools.slice(0, room))
          cursor = answer.nextCursor
          if (listed.tools.length > room || (tools.length >= MAX_TOOLS && cursor !== undefined)) {
            problems.push(`MCP server '${c.name}' lists more than ${MAX_TOOLS} tools: the rest are left out`)
            break
          }
          if (cursor === undefined) break
        }
        c.tools = tools
        c.toolProblems = problems
        c.healthy = true
        return tools
      })

    const catalog: Effect.Effect<McpCatalog> = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const enabled = connections.filter((c) => c.config.enabled)
      const listed = yield* Effect.forEach(enabled, (c): Effect.Effect<Catalog.Listed> => {
        const problems = (error?: string) => [...(error === undefined ? [] : [error]), ...c.toolProblems]
        if (c.tools !== undefined) return Effect.succeed({ server: c.name, tools: c.tools, problems: problems() })
        if (c.failure !== undefined && now - c.failure.at < retryAfterMs) {
          return Effect.succeed({ server: c.name, tools: [], problems: problems(c.failure.message) })
        }
        return list(c).pipe(
          Effect.map((tools) => ({ server: c.name, tools, problems: problems() })),
          Effect.catchAll((error) =>
            Effect.map(Clock.currentTimeMillis, (at) => {
              // (a server naming request secrets may refuse to list without them: `catalogWith` lists it per run)
              const message = c.secretNames.length > 0 && c.client !== undefined
                ? SecretRefs.listedPerRun(c.name, c.secretNames, error.message)
                : error.message
              c.failure = { message, at }
              return { server: c.name, tools: [], problems: problems(message) }
            })
          )
        )
      }, { concurrency: "unbounded" })
      return Catalog.merge(listed)
    })

    // A server naming request secrets that did not list its tools without them (its listing is refused without
    // the header) is listed for each run with the run's values, on a connection of its own closed after it, as its
    // calls are (`secretSession`); its tools are never kept for another run.
    const catalogWith = (given: SkillSecrets.RequestSecrets | undefined): Effect.Effect<McpCatalog> =>
      Effect.gen(function*() {
        const shared = yield* catalog
        const secrets = SkillSecrets.entries(given)
        const gated = connections.filter((c) =>
          c.config.enabled && c.secretNames.length > 0 && c.tools === undefined && Either.isRight(c.resolved)
        )
        if (gated.length === 0) return shared
        const listed = yield* Effect.forEach(gated, (c): Effect.Effect<Catalog.Listed> => {
          const missing = c.secretNames.filter((name) => !secrets.has(name))
          const none = (message: string) => ({ server: c.name, tools: [], problems: [message] })
          if (missing.length > 0) return Effect.succeed(none(SecretRefs.notListed(c.name, missing)))
          // (the run's values hidden from its stderr as it arrives, as a call's are: a failed start's error shows it)
          const hides = SkillSecrets.withLines(secrets.values())
          const own = Connection.fresh({ ...c, resolved: c.resolveWith(secrets), hides }, undefined)
          withSecrets.add(own)
          return list(own).pipe(
            Effect.map((tools) => ({ server: c.name, tools, problems: own.toolProblems })),
            Effect.catchAll((error) => Effect.succeed(none(error.message))),
            Effect.ensuring(Effect.suspend(() => {
              withSecrets.delete(own)
              return stopConnection(own)
            }))
          )
        }, { concurrency: "unbounded" })
        return Catalog.withPerRun(shared, listed)
      })

    // (a span per call: a round trip to another process or server, which costs far more than the span)
    const call = Effect.fn("McpClient.call")(function*(
      server: string,
      tool: string,
      args: JsonObject,
      scope?: SessionScope
    ) {
      yield* Effect.annotateCurrentSpan({ "mcp.server": server, "mcp.tool": tool })
      const shared = byName.get(server)
      if (shared === undefined) {
        const message = `no MCP server is named '${server}'`
        return yield* Effect.fail(new McpError({ server, reason: "config", message, firstInOutage: true }))
      }
      // (what a failed call's error is masked with before its cut: the process's secrets, the run's)
      const hide = yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)
      const callOn = (c: Connection.Connection) => Effect.gen(function*() {
        const client = yield* connect(c)
        // (DeerFlow's pre-call snapshot: the files the call writes are told apart by it)
        const before = c.files === undefined ? undefined : yield* WorkspaceFiles.snapshot(c.files.workspace)
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
            const over = oversize.get(client)
            if (over !== undefined) return fail(c, "protocol", over)
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
            return fail(c, "protocol", `MCP server '${c.name}' failed the call: ${errorText(error, c, hide)}`)
          }
        })
        c.healthy = true
        if (c.rewrite === undefined) return resultOf(raw)
        const cwd = Either.isRight(c.resolved) ? c.resolved.right.cwd : undefined
        return yield* WorkspaceFiles.rewrite(resultOf(raw), { hostPaths: c.rewrite, place: c.files, cwd, before })
      })
      const own = secretSession(shared, scope)
      if (own !== undefined) {
        return yield* Effect.ensuring(callOn(own), Effect.suspend(() => {
          withSecrets.delete(own)
          return stopConnection(own)
        }))
      }
      return yield* Effect.acquireUseRelease(sessionOf(shared, scope), callOn, (c) => Effect.sync(() => table.leave(c)))
    })

    const status: Effect.Effect<ReadonlyArray<ServerStatus>> = Effect.sync(() => connections.map(Connection.status))

    yield* Effect.addFinalizer(() => {
      closed = true
      const all = new Set([...connections, ...table.clear(), ...withSecrets])
      return Effect.forEach(all, stopConnection, { concurrency: "unbounded", discard: true })
    })

    return { catalog, catalogWith, call, status }
  })

/** The MCP service as a layer: servers stop when the layer is released. */
export const layer = (options: Options): Layer.Layer<Mcp> => Layer.scoped(Mcp, make(options))
