/**
 * The gateway as a layer: the app's agent factory (`App.factoryLayer`: configuration, the thread store chosen by
 * `database.url`, the local sandbox, the model clients, MCP servers, long-term memory), the run manager, the API
 * and the web page on a Node HTTP server, and traces when `tracing.enabled`. `antler serve` launches it; tests
 * build it on port 0. Runs go through `Factory.AgentFactory`, so a run's `configurable` / `context` (model,
 * plan mode, thinking, custom agent...) choose its agent as `antler run`'s flags do.
 *
 * Before it serves anything it checks where it is bound (anywhere but loopback needs API tokens) and settles
 * the runs a previous process left running (recorded as `error`, `orphan_recovered`) and the staging files of its
 * unfinished uploads (`StaleUploads`). Each user's threads and
 * files are bounded by `gateway.quotas` (`Quotas`), and what their threads keep in the database too (`StorageQuota`).
 * Every request passes
 * `Guard` first: a `Host` that does not name the gateway, or a state-changing request from another site's page,
 * reaches no route.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Http from "node:http"
import type * as Stream from "node:stream"
import type * as OptionalPackage from "../../internal/OptionalPackage.js"
import * as UserModule from "../../internal/UserModule.js"
import type * as ConfigReload from "../../layers/ConfigReload.js"
import * as ConfiguredAuthorization from "../../layers/ConfiguredAuthorization.js"
import * as OtelTracing from "../../layers/OtelTracing.js"
import * as SqliteThreadStore from "../../layers/SqliteThreadStore.js"
import type { AppConfig, AppConfigService } from "../../services/AppConfig.js"
import type { StoreError } from "../../services/RunContext.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as TraceContext from "../../services/TraceContext.js"
import * as Tracing from "../../services/Tracing.js"
import * as Redact from "../../state/Redact.js"
import * as App from "../App.js"
import * as Factory from "../Factory.js"
import * as StaleUploads from "../StaleUploads.js"
import * as AccountStore from "./accounts/AccountStore.js"
import * as LoginLimiter from "./accounts/LoginLimiter.js"
import * as Api from "./Api.js"
import * as Auth from "./Auth.js"
import * as Guard from "./Guard.js"
import * as Quotas from "./Quotas.js"
import * as QuotaReservations from "./QuotaReservations.js"
import * as RequestSpan from "./RequestSpan.js"
import * as StorageQuota from "./StorageQuota.js"
import * as Runs from "./Runs.js"
import * as McpTaskRequirement from "../McpTaskRequirement.js"
import * as McpTaskWiring from "./mcptasks/Wiring.js"
import * as Scheduling from "./scheduler/Wiring.js"
import * as QuotaWiring from "./store/QuotaWiring.js"
import * as StoreWiring from "./store/Wiring.js"
import * as ThreadIds from "./ThreadIds.js"
import * as TraceId from "./TraceId.js"
import * as Unrouted from "./Unrouted.js"
import * as Web from "./Web.js"

/** The gateway cannot start as configured. */
export class GatewayStartError extends Schema.TaggedError<GatewayStartError>()("GatewayStartError", {
  reason: Schema.Literal("unsafe_bind", "unsafe_cors", "tokens", "cluster", "mcp_tasks", "listen"),
  message: Schema.String
}) {}

/** The Postgres URL of a configuration, when threads live in PostgreSQL. */
export const databaseUrl = (config: AppConfig): Redacted.Redacted<string> | undefined =>
  config.database.url ?? config.database.postgres_url ?? undefined

/** Where a Postgres URL points, without its credentials. */
export const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `PostgreSQL database ${parsed.pathname.replace(/^\//, "") || "(default)"} at ${parsed.hostname}` +
      (parsed.port ? `:${parsed.port}` : "")
  } catch {
    return "PostgreSQL (database.url is not a URL)"
  }
}

/** Where a configuration keeps threads, for people (never the URL's credentials). */
export const describeStore = (app: AppConfigService["Type"]): string => {
  const url = databaseUrl(app.config)
  return url === undefined
    ? `SQLite ${SqliteThreadStore.FILENAME} in ${app.home}`
    : describeUrl(Redacted.value(url))
}

/** The thread store a configuration chooses: PostgreSQL at `database.url`, else SQLite under the data directory. */
export const storeLayer = (
  app: AppConfigService["Type"],
  redact?: Redact.Redactor
): Layer.Layer<ThreadStore, StoreError> =>
  App.configuredStoreLayer(app, redact)

/** The secrets of a gateway configuration, beyond the models' (tokens, the database URL's password). */
export const secrets = (config: AppConfig): ReadonlyArray<string> => {
  const url = databaseUrl(config)
  return [
    ...config.gateway.auth.tokens.map((t) => Redacted.value(t.token)),
    ...(url === undefined ? [] : Redact.urlSecrets(Redacted.value(url))),
    ...OtelTracing.secrets(OtelTracing.settings(config.tracing)),
    ...(config.gateway.cluster?.secret === undefined ? [] : [Redacted.value(config.gateway.cluster.secret)])
  ]
}

/**
 * The tracing layer of a configuration and the environment (see `OtelTracing`): OTLP/HTTP or the console when
 * tracing is on, spans to `processor` (tests), else none. A missing tracing package (optional) fails it, naming it.
 */
export const tracingLayer = (
  config: AppConfig,
  processor?: OtelTracing.SpanProcessorLike
): Layer.Layer<never, OptionalPackage.MissingPackageError> =>
  OtelTracing.layer(OtelTracing.settings(config.tracing), processor)

/** Options of the gateway. */
export interface Options {
  readonly app: AppConfigService["Type"]
  /** The default model, and every model runs may choose by name (see `App.chooseModel`). */
  readonly choice: App.ModelChoice
  /** Overrides `gateway.host` / `gateway.port` (0: any free port). */
  readonly host?: string | undefined
  readonly port?: number | undefined
  /** Secrets that never leave the process (streamed events) or reach the store. */
  readonly redact?: Redact.Redactor | undefined
  /** Spans go here instead of the configured exporter (tests). */
  readonly spanProcessor?: OtelTracing.SpanProcessorLike | undefined
  /** Options of every agent the factory builds. */
  readonly factory?: Factory.Options | undefined
  /** Threads kept here instead of the configured store (an embedder's, or `MemoryThreadStore.layer()`). */
  readonly store?: Layer.Layer<ThreadStore, StoreError> | undefined
  /**
   * Take edits of `app.source` (`config.yaml`) for the runs that start after them, as `antler serve` does (see
   * `ConfigReload`): `choose` is the process's model choice over an edited configuration (`App.chooseModel` with
   * the command's flags), or why it cannot be made. Without it, the configuration of the start is the only one.
   */
  readonly reload?: {
    readonly choose: (config: AppConfig) => Either.Either<App.ModelChoice, { readonly message: string }>
    readonly recheckMs?: number | undefined
  } | undefined
}

/**
 * How a gateway takes an edited configuration: its model choice and the clients of the models (a choice that
 * cannot be made refuses the edit), their secrets and the new tools' learned by `redact` before any run uses them.
 */
const watch = (
  reload: NonNullable<Options["reload"]>,
  redact: Redact.Growing
): ConfigReload.Watch => ({
  recheckMs: reload.recheckMs,
  prepare: (app) =>
    Effect.gen(function*() {
      const choice = yield* Either.mapLeft(reload.choose(app.config), (error) => error.message)
      redact.learn([...App.redactor(choice.models).secrets, ...App.configSecrets(app.config)])
      const model = yield* Effect.mapError(App.modelService(choice), (error) => error.message)
      return { models: choice.models, model }
    })
})

/** What Node's HTTP parser refuses before any route sees it, as the status, title and detail of a problem. */
const unparsedProblem = (error: NodeJS.ErrnoException): readonly [number, string, string] => {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return [431, "Request Header Fields Too Large", "The request's headers are larger than the gateway reads."]
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return [408, "Request Timeout", "The request did not arrive in time."]
    default:
      return [400, "Bad Request", `This is not an HTTP request the gateway reads (${error.code ?? "malformed"}).`]
  }
}

/** Whether the bytes Node failed to parse are a HEAD request's (whose answer has no body), as far as they show. */
const isHead = (error: Error): boolean => {
  const packet = (error as { readonly rawPacket?: unknown }).rawPacket
  return Buffer.isBuffer(packet) && /^\s*HEAD /.test(packet.subarray(0, 16).toString("latin1"))
}

/**
 * Answers what Node's parser refused (a method it does not know, headers over its limit, malformed HTTP) with a
 * JSON problem, as every other refusal is answered; Node's own answer was an empty 400 or 431. Written to the
 * socket as Node's is: only when nothing of an answer went out on it yet; without the body to a HEAD request.
 */
const refuseUnparsed = (error: NodeJS.ErrnoException, socket: Stream.Duplex) => {
  const inFlight = (socket as { readonly _httpMessage?: { readonly headersSent?: boolean } })._httpMessage
  if (error.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent === true) {
    socket.destroy()
    return
  }
  const [status, title, detail] = unparsedProblem(error)
  const body = JSON.stringify({ type: "about:blank", title, status, detail })
  socket.end(
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${isHead(error) ? "" : body}`,
    () => socket.destroy()
  )
}

/**
 * How long an idle keep-alive connection stays open. Node's default (5 s) is shorter than the idle time of the
 * clients' own pools (undici's 4 s, less its margin, measured on a lagging event loop): a client that sends its
 * next request on a connection as the server closes it gets ECONNRESET, which the SDK does not retry for a POST
 * (a run lost under load). Past the clients' pools, as proxies are advised to.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000

/**
 * The gateway's Node HTTP server. Node's own check of the Host header is off: `Guard` checks it on every request
 * and answers one without it with a JSON problem (Node answered an empty 400).
 */
const makeServer = (): Http.Server => {
  const server = Http.createServer({ requireHostHeader: false, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS })
  server.on("clientError", refuseUnparsed)
  return server
}

/** The gateway's Node HTTP server, as made (`makeServer`). */
class NodeServer extends Context.Tag("antler/gateway/NodeServer")<NodeServer, Http.Server>() {}

/** How long connections still open when the gateway stops (their requests were stopped) are given to close. */
const CLOSE_GRACE_MS = 2000

/**
 * The HTTP server over `NodeServer`. Stopping, once the requests under way were stopped, it closes the keep-alive
 * connections left idle, and every one that becomes so, and after `CLOSE_GRACE_MS` every connection still open:
 * Node's `close` waits for every connection, clients' pools keep theirs open as long as the server says it keeps them
 * (`KEEP_ALIVE_TIMEOUT_MS`), and connections whose streamed response was stopped stayed open until Node's own
 * timeouts, so stopping took a minute.
 */
const httpServer = (listen: { readonly host: string; readonly port: number }) =>
  Layer.unwrapEffect(Effect.map(NodeServer, (server) => {
    const closing = Layer.scopedDiscard(Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (!server.listening) return
        server.closeIdleConnections()
        const idle = setInterval(() => server.closeIdleConnections(), 100)
        const all = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS)
        idle.unref()
        all.unref()
        server.once("close", () => {
          clearInterval(idle)
          clearTimeout(all)
        })
      })
    ))
    return closing.pipe(Layer.provideMerge(NodeHttpServer.layer(() => server, listen)))
  })).pipe(
    Layer.provide(Layer.sync(NodeServer, makeServer)),
    Layer.mapError((error) => new GatewayStartError({ reason: "listen", message: listenProblem(listen, error.cause) }))
  )

/** The settings that choose where a server listens, as a start's error names them. */
interface ListenKeys {
  readonly port: string
  readonly host: string
}

const GATEWAY_KEYS: ListenKeys = { port: "--port or gateway.port", host: "--host or gateway.host" }

/** A cluster runner's socket: where the other runners reach it (`gateway.cluster`). */
const RUNNER_KEYS: ListenKeys = {
  port: "gateway.cluster.runner_port",
  host: "gateway.cluster.listen_host (or runner_host)"
}

/**
 * Why a server could not listen, in words (the platform's `ServeError` and `SocketServerError` have no message of
 * their own: the runner's said only "Open").
 */
const listenProblem = (
  listen: { readonly host: string; readonly port: number },
  cause: unknown,
  keys: ListenKeys = GATEWAY_KEYS
): string => {
  const where = `${listen.host.includes(":") ? `[${listen.host}]` : listen.host}:${listen.port}`
  const code = typeof cause === "object" && cause !== null ? (cause as { readonly code?: unknown }).code : undefined
  switch (code) {
    case "EADDRINUSE":
      return `cannot listen on ${where}: the address is in use (another antler serve, or another program, listens ` +
        `there); stop it, or choose another port with ${keys.port}`
    case "EACCES":
      return `cannot listen on ${where}: permission denied (a port below 1024 needs privileges); choose another ` +
        `port with ${keys.port}`
    case "EADDRNOTAVAIL":
      return `cannot listen on ${where}: this machine has no such address; choose another with ${keys.host}`
    default:
      return `cannot listen on ${where}: ${String((cause as { readonly message?: unknown })?.message ?? cause)}`
  }
}

/**
 * The span every run is traced under, with the thread, run, agent and model: the root of its own trace, or a child
 * of the client's span when the request that started the run gave a valid W3C `traceparent`. The thread
 * is the id its user's client knows (DeerFlow's trace session), with the id it is stored under beside it when that
 * differs. The agent is named as DeerFlow names a run's root trace (`resolve_root_run_name`): the run's
 * `agent_name` (its context's, else its configurable's, else its assistant's), else the assistant id.
 */
const traced = <A, E, R>(effect: Effect.Effect<A, E, R>, run: Runs.RunRequest & { readonly runId: string }) => {
  const publicId = ThreadIds.publicIdOf(run.userId, run.threadId)
  return Effect.withSpan(effect, Tracing.RUN_SPAN, Tracing.runSpanOptions({
    "antler.thread_id": publicId,
    ...(publicId !== run.threadId ? { "antler.stored_thread_id": run.threadId } : {}),
    "antler.run_id": run.runId,
    "antler.user_id": run.userId,
    "antler.assistant_id": run.assistantId,
    "antler.agent_name": typeof run.settings.agent_name === "string" && run.settings.agent_name.trim() !== ""
      ? run.settings.agent_name
      : run.assistantId,
    ...(typeof run.settings.model_name === "string" ? { "gen_ai.request.model": run.settings.model_name } : {}),
    ...(run.traceId !== undefined ? { [TraceId.SPAN_ATTRIBUTE]: run.traceId } : {})
  }, run.traceContext === undefined ? undefined : TraceContext.parentSpan(run.traceContext))).pipe(
    // (the run's log lines name the trace id of the request that started it, however long it waited for a place)
    (traced) => run.traceId === undefined ? traced : Effect.annotateLogs(traced, TraceId.LOG_KEY, run.traceId)
  )
}

/**
 * The gateway: its HTTP server (read its address from `HttpServer.HttpServer`), the run manager and the store.
 * Runs end (cancelled, their completed steps saved) when the layer is released.
 */
export const layer = (options: Options) => {
  const { app } = options
  const gateway = app.config.gateway
  const host = options.host ?? gateway.host
  const port = options.port ?? gateway.port
  // (growing: the MCP servers' secrets join it at the start, and those of servers added while the gateway runs)
  const configured = [...secrets(app.config), ...App.configSecrets(app.config)]
  // (one given as growing is the one taught: its other holders, the process's logs, hide what it learns)
  const redact = Redact.growingOf(options.redact ?? App.redactor(options.choice.models, {}, configured))

  const checks = Effect.gen(function*() {
    redact.learn(yield* App.mcpSecrets(app))
    const bind = Auth.bindProblem(host, gateway.auth.tokens, gateway.auth.accounts)
    if (bind !== undefined) return yield* new GatewayStartError({ reason: "unsafe_bind", message: bind })
    const cors = Auth.corsProblem(gateway.cors.allow_origins, gateway.auth.tokens, gateway.auth.accounts)
    if (cors !== undefined) return yield* new GatewayStartError({ reason: "unsafe_cors", message: cors })
    const tokens = Auth.tokensProblem(gateway.auth.tokens)
    if (tokens !== undefined) return yield* new GatewayStartError({ reason: "tokens", message: tokens })
    if (gateway.cluster != null && databaseUrl(app.config) === undefined) {
      return yield* new GatewayStartError({
        reason: "cluster",
        message: "gateway.cluster needs PostgreSQL, where the runners keep their messages and find each other: set " +
          "database.url (postgres://user:password@host:port/database), or remove gateway.cluster to run one process"
      })
    }
    const tasks = yield* McpTaskRequirement.check(app)
    if (tasks !== undefined) return yield* new GatewayStartError({ reason: "mcp_tasks", message: tasks })
  })

  const reload = options.reload === undefined ? undefined : watch(options.reload, redact)
  // (the MCP task runtime, when `mcp_tasks.enabled`: the agents' task tools and the mcp-tasks endpoints read it)
  const taskRecords = McpTaskWiring.recordsLayer(app)
  const tasks = McpTaskWiring.layer(app, redact, taskRecords)
  // (and its notifier, which starts runs: once the run manager settled what a previous process left)
  const notifier = McpTaskWiring.notifierLayer(app, taskRecords)
  // (every checkpoint the gateway writes checked against the quotas on what threads keep: see `StorageQuota`)
  const limits = StorageQuota.fromConfig(gateway.quotas)
  // (and what its writes keep drains what they reserved in this process: `QuotaReservations`)
  const reservations = QuotaReservations.inProcess()
  const store = Layer.map(options.store ?? storeLayer(app, redact), (context) =>
    Context.add(
      context,
      ThreadStore,
      StorageQuota.bounded(Context.get(context, ThreadStore), limits, reservations.drain)
    ))
  // (the task-enabled MCP servers' settings stay as they started while it serves, as DeerFlow's gateway's do)
  const factory = App.factoryLayer(app, options.choice, options.factory, redact, store, reload, tasks, {
    freezeTaskServers: true
  })
  const runOptions: Runs.Options = {
    bufferSize: gateway.replay_buffer_events,
    bufferBytes: Math.floor(gateway.replay_buffer_mb * 1024 * 1024),
    keepFinished: gateway.finished_runs_kept,
    heartbeatSeconds: gateway.heartbeat_seconds,
    defaultModel: options.choice.name,
    maxActiveRuns: gateway.max_active_runs ?? undefined,
    maxActiveRunsPerUser: gateway.max_active_runs_per_user ?? undefined,
    storageLimits: limits,
    redact,
    traced
  }
  const cluster = gateway.cluster ?? undefined
  const url = databaseUrl(app.config)
  // one process: its own run manager; a runner of a cluster: the manager routing each thread to its runner
  // (loaded only then: it needs the optional @effect/sql-pg)
  const manager = cluster === undefined || url === undefined
    ? Runs.layer(runOptions)
    : Layer.unwrapEffect(
      Effect.map(Effect.promise(() => import("./cluster/ClusterRuns.js")), (ClusterRuns) =>
        ClusterRuns.layer(runOptions, cluster, url))
    ).pipe(
      // (the runner's socket, where the other runners reach it: a port in use says so, and which setting to change)
      Layer.catchAll((error) =>
        Layer.fail(
          error._tag === "SocketServerError"
            ? new GatewayStartError({
              reason: "listen",
              message: "the cluster's runner " + listenProblem(
                { host: cluster.listen_host ?? cluster.runner_host, port: cluster.runner_port },
                error.cause,
                RUNNER_KEYS
              )
            })
            : error
        )
      )
    )
  // (the storage quotas' reservations: in the PostgreSQL database processes share, else in the process)
  const runs = manager.pipe(Layer.provide(QuotaWiring.layer(app, reservations)), Layer.provideMerge(factory))
  // in a cluster the polls for due scheduled tasks are the engine's singleton: one runner makes them
  const scheduling = cluster === undefined || url === undefined ? Scheduling.layer(app) : Scheduling.clusterLayer(app)

  const recovered = Layer.effectDiscard(Effect.gen(function*() {
    // the default agent is built now: a configuration it cannot be built from stops the start, not a run; a
    // default role that may use no model (or a provider that cannot say) refuses that role's runs only, as DeerFlow's
    const agents = yield* Factory.AgentFactory
    yield* Effect.flatMap(agents.resolve({}), agents.agent).pipe(
      Effect.catchIf(
        (error) => error._tag === "SettingsError" && error.unauthorized === true,
        (error) => Effect.logWarning(`The default agent was not built: ${error.message} Its role's runs are refused.`)
      )
    )
    const manager = yield* Runs.Runs
    const settled = yield* manager.recover
    if (settled.length > 0) {
      yield* Effect.logWarning(
        `${settled.length} run(s) a previous process left unfinished recorded as error (orphan_recovered): ` +
          settled.map((r) => `${r.run_id} of thread ${r.thread_id}`).join(", ")
      )
    }
    const staging = yield* StaleUploads.removeStale(app.home)
    if (staging > 0) yield* Effect.logInfo(`removed ${staging} staging file(s) of uploads a previous process left`)
  }))

  const http = Layer.unwrapScoped(Effect.gen(function*() {
    const accounts = gateway.auth.accounts
      ? {
        store: yield* Effect.orDie(AccountStore.open(app.home, gateway.auth.session_days)),
        limiter: LoginLimiter.make(),
        allowRegistration: gateway.auth.allow_registration,
        sessionDays: gateway.auth.session_days
      }
      : undefined
    // the gateway's own model calls get clients of their own (the factory built the agents' from the same choice)
    const model = yield* Effect.orDie(App.modelService(options.choice))
    const auth = Auth.make(gateway.auth.tokens)
    const api = yield* Api.router({
      auth,
      models: options.choice.models,
      redact,
      accounts,
      model,
      learnSecrets: redact.learn,
      // (loaded when the default agent was built: a provider that cannot be used stopped the start there)
      authorization: yield* Effect.orDie(
        ConfiguredAuthorization.fromConfig(app.config.authorization, UserModule.baseDirOf(app.source))
      ),
      maxModelCallsPerUser: gateway.max_active_runs_per_user ?? undefined
    })
    const address = (yield* HttpServer.HttpServer).address
    const origins = gateway.cors.allow_origins.map(Guard.normalizeOrigin)
    const routes = HttpRouter.concat(api, Web.router()).pipe(
      // (under `/api`, a request without a session is refused first, as DeerFlow's middleware refuses it)
      Effect.catchTag("RouteNotFound", (error) => Unrouted.answer(auth, accounts?.store)(error.request))
    )
    const handler = origins.length === 0 ? routes : routes.pipe(HttpMiddleware.cors({
      // (an empty list answers any origin with `*`)
      allowedOrigins: origins.includes("*") ? [] : origins,
      allowedHeaders: [
        "content-type",
        "authorization",
        "x-api-key",
        "last-event-id",
        "x-csrf-token",
        "range",
        TraceId.HEADER,
        // (a page whose OpenTelemetry instrumentation sends its trace: see RequestSpan)
        "traceparent",
        "tracestate"
      ],
      // (an artifact's preview reads its range and revision)
      exposedHeaders: ["content-location", "location", "content-range", "accept-ranges", "etag"],
      allowedMethods: ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    }))
    // the Host and Origin checks come first: a refused request reaches neither the routes nor CORS
    const guarded = handler.pipe(Guard.middleware({
      host,
      port: address._tag === "TcpAddress" ? address.port : port,
      allowedHosts: gateway.allowed_hosts,
      allowOrigins: origins
    }))
    // (every answer carries the request's trace id, the Host and Origin checks' refusals too)
    // (and each request is one span, a child of its client's when it gave a valid `traceparent`)
    return RequestSpan.withoutPlatformSpans(
      HttpServer.serve(RequestSpan.middleware(TraceId.middleware(app.config.logging.enhance.enabled)(guarded)))
    )
  }))

  // built bottom up: the checks, the store and run manager, the recovery, the scheduler, then the server binds
  // and serves
  return http.pipe(
    Layer.provideMerge(httpServer({ host, port })),
    // scheduled tasks start once the runs a previous process left are settled
    Layer.provideMerge(scheduling),
    Layer.provideMerge(notifier ?? Layer.empty),
    // LangGraph's store: beside the threads and the scheduled tasks
    Layer.provideMerge(StoreWiring.layer(app)),
    Layer.provideMerge(recovered),
    // (per-user quotas on threads and files: over the store and the data directory, shared with the processes of
    // its PostgreSQL database)
    Layer.provideMerge(Quotas.layer().pipe(Layer.provide(QuotaWiring.sharedLayer(app)))),
    Layer.provideMerge(runs),
    Layer.provide(Layer.effectDiscard(checks)),
    Layer.provide(NodeContext.layer),
    Layer.provide(tracingLayer(app.config, options.spanProcessor))
  )
}
