/**
 * The gateway's HTTP routes (`@effect/platform` HttpRouter): the LangGraph Platform subset the LangGraph SDK and
 * DeerFlow's frontend use (assistants, threads, state, history, runs: background, stream, wait, join, cancel;
 * stateless runs), served at `/`, `/api` and `/api/langgraph`, and DeerFlow's own endpoints under `/api`
 * (uploads, artifacts, models, skills). Bodies are decoded with Schema; every failure is a JSON problem response
 * (`{type, title, status, detail}`). Every thread, upload and artifact belongs to a user: another user's is
 * "not found" (404), never "forbidden", and a thread id another user has is, for this one, an id nobody has
 * (threads are stored under ids of their user's own, `ThreadIds`). What a user owns, and what no run of a
 * non-admin token may change: see `Auth.ts`.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Multipart from "@effect/platform/Multipart"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as SkillsDirectory from "../../layers/SkillsDirectory.js"
import { isStagingFile } from "../../middleware/Uploads.js"
import type { ModelConfig } from "../../services/AppConfig.js"
import { AppConfigService } from "../../services/AppConfig.js"
import { SafeId, SandboxProvider, threadPaths, UPLOADS, USER_DATA } from "../../services/Sandbox.js"
import type { CheckpointRecord, RunRecord, ThreadSummary } from "../../services/ThreadStore.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import { applyUpdates, makeIndexes } from "../../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../../state/ThreadState.js"
import * as TS from "../../state/ThreadState.js"
import * as App from "../App.js"
import * as Factory from "../Factory.js"
import * as Upload from "../Upload.js"
import type { Authenticator, Identity } from "./Auth.js"
import * as Body from "./Body.js"
import * as Protocol from "./Protocol.js"
import type { ActiveRun } from "./Runs.js"
import { GatewayError, Runs, statusOf } from "./Runs.js"
import * as ThreadIds from "./ThreadIds.js"
import * as CustomAgents from "../CustomAgents.js"

/** Where the LangGraph API is served: the SDK's root, DeerFlow's `/api` and its frontend's `/api/langgraph`. */
export const LANGGRAPH_PREFIXES: ReadonlyArray<string> = ["", "/api", "/api/langgraph"]

/** What the routes need besides the app's services. */
export interface Options {
  readonly auth: Authenticator
  /** The models runs may choose (names); the first is the default. */
  readonly models: ReadonlyArray<ModelConfig>
}

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Entity",
  500: "Internal Server Error"
}

/** A JSON problem response (RFC 9457). */
export const problem = (status: number, detail: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(
    { type: "about:blank", title: TITLES[status] ?? "Error", status, detail },
    { status, contentType: "application/problem+json", headers }
  )

const fail = (reason: GatewayError["reason"], message: string) => new GatewayError({ reason, message })
const notFound = (what: string) => fail("not_found", `${what} not found.`)

/** The response of a failed handler: a gateway error as its status, anything else as a 500 (logged). */
const respondError = (cause: Cause.Cause<unknown>) => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && failure.value instanceof GatewayError) {
    const error = failure.value
    return Effect.succeed(
      problem(
        statusOf(error.reason),
        error.message,
        error.reason === "unauthorized" ? { "www-authenticate": "Bearer" } : {}
      )
    )
  }
  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
  return Effect.as(
    Effect.logError("gateway request failed", cause),
    problem(500, "The server failed to handle this request; see its log.")
  )
}

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, { status, headers })

/** Reads a JSON body and decodes it (see `Body.json`). */
const body = Body.json

/** A body, if any, of a request that takes none: JSON, or refused as any other body is (and then ignored). */
const noBody = Body.json(Schema.Unknown)

const param = (name: string) =>
  Effect.flatMap(HttpRouter.params, (params) => {
    const value = params[name]
    return value === undefined ? Effect.fail(fail("bad_request", `Missing ${name}.`)) : Effect.succeed(value)
  })

/** A thread or run id from the path; ids are also directory names, so only safe ones exist. */
const idParam = (name: string, what: string) =>
  Effect.flatMap(param(name), (value) =>
    Schema.is(SafeId)(value) ? Effect.succeed(value) : Effect.fail(notFound(`${what} ${JSON.stringify(value)}`)))

const query = Effect.map(HttpServerRequest.ParsedSearchParams, (params) => params)

const queryFlag = (params: Readonly<Record<string, string | ReadonlyArray<string>>>, name: string) => {
  const value = params[name]
  const text = Array.isArray(value) ? value[0] : value
  return text === "1" || text === "true"
}

const queryList = (params: Readonly<Record<string, string | ReadonlyArray<string>>>, name: string) => {
  const value = params[name]
  return value === undefined ? [] : typeof value === "string" ? [value] : [...value]
}

/** The path prefix a request came in under (`""`, `/api`, `/api/langgraph`), for the URLs it is given back. */
const prefixOf = (url: string) => {
  const at = url.search(/\/(threads|runs)(\/|\?|$)/)
  return at > 0 ? url.slice(0, at) : ""
}

const decodeStreamModes = Schema.decodeUnknownEither(Schema.Array(Protocol.StreamMode))

/** The routes of a gateway over the app's services. */
export const router = (options: Options) =>
  Effect.gen(function*() {
    const store = yield* ThreadStore
    const runs = yield* Runs
    const app = yield* AppConfigService
    const factory = yield* Factory.AgentFactory
    const sandboxes = yield* SandboxProvider
    const config = app.config

    /** Who the request is, or 401. */
    const identity = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Either.match(options.auth.identify(request.headers), {
        onLeft: (message) => Effect.fail(fail("unauthorized", message)),
        onRight: (found): Effect.Effect<Identity, GatewayError> => Effect.succeed(found)
      }))

    /** The user of the request, or 401. */
    const user = Effect.map(identity, (found) => found.user)

    const storeFailed = (error: { readonly message: string }) =>
      new GatewayError({ reason: "internal", message: error.message, cause: error })

    /**
     * The user's thread the client calls `threadId`, or 404 (also when only another user has a thread of that
     * id). Its `thread_id` is the stored id: the one for the store, the runs and the thread's files; clients are
     * shown `threadId`.
     */
    const ownedThread = (userId: string, threadId: string) =>
      Effect.flatMap(Effect.mapError(ThreadIds.find(store, userId, threadId), storeFailed), (info) =>
        Option.isSome(info) ? Effect.succeed(info.value) : Effect.fail(notFound(`Thread ${threadId}`)))

    /** Makes the user's thread `threadId` (the user has none of that id: see `ownedThread`). */
    const newThread = (userId: string, threadId: string, metadata: Readonly<Record<string, unknown>>) =>
      Effect.gen(function*() {
        const problemText = ThreadIds.newIdProblem(threadId)
        if (problemText !== undefined) return yield* fail("unprocessable", `thread_id: ${problemText}.`)
        const made = yield* Effect.mapError(ThreadIds.create(store, userId, threadId, metadata), storeFailed)
        if (Option.isNone(made)) return yield* fail("conflict", `Thread ${threadId} already exists.`)
        return made.value
      })

    const loadState = (threadId: string) =>
      Effect.map(Effect.mapError(store.load(threadId), storeFailed), (loaded) =>
        Option.match(loaded, {
          onNone: () => ({ state: TS.empty, runs: [] as ReadonlyArray<RunRecord> }),
          onSome: (t) => t
        }))

    /** LangGraph's status of a thread: `busy` while a run holds it, `error` when its last run failed or died. */
    const threadStatus = (summary: ThreadSummary) => {
      if (runs.activeOf(summary.thread_id) !== undefined) return "busy" as const
      switch (summary.status) {
        case "running":
          return "busy" as const
        case "error":
        case "stopped":
          return "error" as const
        default:
          return "idle" as const
      }
    }

    /** The thread object of a stored thread, as its user's client knows it (`threadId`). */
    const fullThread = (summary: ThreadSummary, threadId: string) =>
      Effect.map(loadState(summary.thread_id), (loaded) =>
        Protocol.threadObject(
          { ...summary, thread_id: threadId },
          threadStatus(summary),
          Protocol.publicValues(loaded.state)
        ))

    /** A stored run as its thread's client knows it. */
    const runObject = (record: RunRecord, threadId: string) => Protocol.runObject({ ...record, thread_id: threadId })

    const ownedRun = (threadId: string, runId: string) =>
      Effect.flatMap(Effect.mapError(store.runs({ runId }), storeFailed), (records) => {
        const record = records[0]
        return record !== undefined && record.thread_id === threadId
          ? Effect.succeed(record)
          : Effect.fail(notFound(`Run ${runId}`))
      })

    // -------------------------------------------------------------------------------------------------------
    // Runs

    const modelNames = new Set(options.models.map((m) => m.name))

    const prepareRun = (who: Identity, threadId: string | undefined, request: Protocol.RunCreate) =>
      Effect.gen(function*() {
        const userId = who.user
        const strategy = request.multitask_strategy ?? "reject"
        if (strategy === "enqueue") {
          return yield* fail(
            "unprocessable",
            `multitask_strategy "enqueue" is not supported; use reject, interrupt or rollback.`
          )
        }
        const stops = [
          ["interrupt_before", request.interrupt_before],
          ["interrupt_after", request.interrupt_after]
        ] as const
        for (const [key, value] of stops) {
          if (value != null && !(Array.isArray(value) && value.length === 0)) {
            return yield* fail(
              "unprocessable",
              `${key} is not supported: Antler's agent has no graph nodes to stop at.`
            )
          }
        }
        if (request.checkpoint_id != null || request.checkpoint != null) {
          return yield* fail("unprocessable", "Starting a run from an older checkpoint (forking) is not supported.")
        }
        const messages = yield* Either.match(Protocol.inputMessages(request.input), {
          onLeft: (message) => Effect.fail(fail("unprocessable", message)),
          onRight: Effect.succeed
        })
        const settings: Record<string, unknown> = Factory.mergeRuntime(
          request.config?.configurable,
          Protocol.allowedContext(request.context)
        )
        delete settings.non_interactive
        const agentName = Protocol.agentNameOf(request.assistant_id)
        if (agentName !== undefined && settings.agent_name === undefined) settings.agent_name = agentName
        settings.recursion_limit = Protocol.recursionLimit(
          request.config?.recursion_limit,
          config.recursion_limit,
          config.max_recursion_limit
        )
        for (const key of ["model_name", "model"]) {
          const name = settings[key]
          if (typeof name === "string" && modelNames.size > 0 && !modelNames.has(name)) {
            return yield* fail(
              "bad_request",
              `Unknown model "${name}". Configured models: ${[...modelNames].join(", ")}.`
            )
          }
        }
        // the bootstrap agent without an agent name writes the default agent's SOUL.md, which every user's
        // default agent reads: only an admin's run may (see Auth.ts); DeerFlow's clients always name the agent
        if (settings.is_bootstrap === true && settings.agent_name == null && !who.admin) {
          return yield* fail(
            "bad_request",
            "context.is_bootstrap without context.agent_name would change the default agent's SOUL.md, which " +
              "every user's agent reads, and only an admin token may do that. Give context.agent_name (the agent " +
              "to create, one of your own)."
          )
        }
        // the agent a run names is its user's (or a shared one): resolved for this user, as the run will be
        yield* Effect.mapError(
          factory.resolve(settings, userId),
          (error) => fail("unprocessable", `Run settings: ${error.message}`)
        )
        let thread: ThreadSummary
        let publicId: string
        let deleteThread = false
        if (threadId === undefined) {
          publicId = M.newId()
          deleteThread = request.on_completion !== "keep"
          thread = yield* newThread(userId, publicId, {})
        } else {
          publicId = threadId
          const exists = yield* Effect.either(ownedThread(userId, threadId))
          if (Either.isRight(exists)) thread = exists.right
          else if (request.if_not_exists !== "create") return yield* exists.left
          else thread = yield* newThread(userId, threadId, {})
        }
        const modes = Protocol.modesOf(request.stream_mode)
        return yield* runs.start({
          threadId: thread.thread_id,
          publicThreadId: publicId,
          userId,
          admin: who.admin,
          assistantId: request.assistant_id ?? Protocol.LEAD_AGENT,
          messages,
          ...(request.command?.resume !== undefined ? { resume: request.command.resume } : {}),
          settings,
          modes,
          multitaskStrategy: strategy,
          metadata: request.metadata ?? {},
          deleteThread
        })
      })

    const runLocation = (prefix: string, run: ActiveRun) =>
      `${prefix}/threads/${run.publicThreadId}/runs/${run.runId}`

    const sseResponse = (stream: Stream.Stream<string>, headers: Record<string, string>) =>
      HttpServerResponse.stream(Stream.encodeText(stream), {
        contentType: "text/event-stream",
        headers: { "cache-control": "no-cache", "x-accel-buffering": "no", ...headers }
      })

    const withError = (values: Record<string, unknown>, record: RunRecord) =>
      record.status === "error"
        ? { ...values, __error__: { error: "RunError", message: record.error ?? "The run failed" } }
        : values

    const finalValues = (threadId: string, record: RunRecord) =>
      Effect.map(loadState(threadId), (loaded) => withError(Protocol.publicValues(loaded.state), record))

    const createRun = (kind: "background" | "stream" | "wait", stateless: boolean) =>
      Effect.gen(function*() {
        const who = yield* identity
        const threadId = stateless ? undefined : yield* idParam("thread_id", "Thread")
        const request = yield* body(Protocol.RunCreate)
        const http = yield* HttpServerRequest.HttpServerRequest
        const prefix = prefixOf(http.url)
        const run = yield* prepareRun(who, threadId, request)
        const location = runLocation(prefix, run)
        const cancelOnDisconnect = (request.on_disconnect ?? "cancel") === "cancel"
        const disconnect = cancelOnDisconnect ? Effect.ignore(runs.cancel(run.runId, "interrupt", false)) : undefined
        switch (kind) {
          case "background": {
            const record = (yield* Effect.mapError(store.runs({ runId: run.runId }), storeFailed))[0]
            return json(record === undefined ? {} : runObject(record, run.publicThreadId), 200, {
              "content-location": location
            })
          }
          case "stream":
            return sseResponse(runs.subscribe(run, 0, undefined, disconnect), {
              "content-location": location,
              location: `${location}/stream`
            })
          case "wait": {
            const record = yield* Deferred.await(run.done).pipe(
              Effect.onInterrupt(() => disconnect ?? Effect.void)
            )
            // a stateless run's thread is gone by now: its values are what its events left
            const values = stateless
              ? withError(Protocol.publicValues(run.state()), record)
              : yield* finalValues(run.threadId, record)
            return json(values, 200, { "content-location": location })
          }
        }
      })

    const joinStream = Effect.gen(function*() {
      const userId = yield* user
      yield* noBody
      const threadId = yield* idParam("thread_id", "Thread")
      const runId = yield* idParam("run_id", "Run")
      const stored = (yield* ownedThread(userId, threadId)).thread_id
      const http = yield* HttpServerRequest.HttpServerRequest
      const params = yield* query
      const lastEventId = http.headers["last-event-id"]
      const cursor = lastEventId === undefined || lastEventId.trim() === "" ? 0 : Number(lastEventId)
      if (!Number.isInteger(cursor) || cursor < 0) {
        return yield* fail(
          "bad_request",
          `Last-Event-ID must be an event id of this run, got ${JSON.stringify(lastEventId)}.`
        )
      }
      const requested = queryList(params, "stream_mode")
      const modes = requested.length === 0 ? undefined : yield* Either.match(decodeStreamModes(requested), {
        onLeft: (error) => Effect.fail(fail("unprocessable", `stream_mode: ${Protocol.describeParseError(error)}`)),
        onRight: (list) => Effect.succeed(Protocol.modesOf(list))
      })
      const run = runs.get(runId)
      if (run !== undefined && run.threadId === stored) {
        const disconnect = queryFlag(params, "cancel_on_disconnect")
          ? Effect.ignore(runs.cancel(runId, "interrupt", false))
          : undefined
        return sseResponse(runs.subscribe(run, cursor, modes, disconnect), {})
      }
      // not buffered here (finished long ago, run by another process, or before a restart)
      const record = yield* ownedRun(stored, runId)
      const frames: Array<string> = []
      if (cursor > 0 || record.status === "running" || record.status === "pending") {
        frames.push(Protocol.sse({
          id: cursor,
          event: "gap",
          data: JSON.stringify(Protocol.gapPayload(runId, cursor, cursor + 1, cursor))
        }))
      } else {
        const loaded = yield* loadState(stored)
        const metadata = JSON.stringify({ run_id: runId, thread_id: threadId })
        frames.push(Protocol.sse({ id: 1, event: "metadata", data: metadata }))
        if (modes === undefined || modes.includes("values")) {
          const values = JSON.stringify(Protocol.publicValues(loaded.state))
          frames.push(Protocol.sse({ id: 2, event: "values", data: values }))
        }
        frames.push(Protocol.sse({ id: 3, event: "end", data: "null" }))
      }
      return sseResponse(Stream.fromIterable(frames), {})
    })

    const joinRun = Effect.gen(function*() {
      const userId = yield* user
      const threadId = yield* idParam("thread_id", "Thread")
      const runId = yield* idParam("run_id", "Run")
      const stored = (yield* ownedThread(userId, threadId)).thread_id
      const run = runs.get(runId)
      const record = run !== undefined && run.threadId === stored
        ? yield* Deferred.await(run.done)
        : yield* ownedRun(stored, runId)
      return json(yield* finalValues(stored, record))
    })

    const cancelRun = Effect.gen(function*() {
      const userId = yield* user
      yield* noBody
      const threadId = yield* idParam("thread_id", "Thread")
      const runId = yield* idParam("run_id", "Run")
      const stored = (yield* ownedThread(userId, threadId)).thread_id
      yield* ownedRun(stored, runId)
      const params = yield* query
      const action = (typeof params.action === "string" ? params.action : "interrupt") as string
      if (action !== "interrupt" && action !== "rollback") {
        return yield* fail("unprocessable", `action must be interrupt or rollback, got ${JSON.stringify(action)}.`)
      }
      const wait = queryFlag(params, "wait")
      yield* runs.cancel(runId, action, wait)
      if (!wait) return HttpServerResponse.empty({ status: 202 })
      return json(runObject(yield* ownedRun(stored, runId), threadId))
    })

    const listRuns = Effect.gen(function*() {
      const userId = yield* user
      const threadId = yield* idParam("thread_id", "Thread")
      const stored = (yield* ownedThread(userId, threadId)).thread_id
      const params = yield* query
      const limit = Math.max(1, Math.min(1000, Number(params.limit ?? 10) || 10))
      const offset = Math.max(0, Number(params.offset ?? 0) || 0)
      const status = typeof params.status === "string" ? params.status : undefined
      const records = (yield* Effect.mapError(store.runs({ threadId: stored }), storeFailed))
        .map((record) => runObject(record, threadId))
        .filter((run) => status === undefined || run.status === status)
        .reverse()
      return json(records.slice(offset, offset + limit))
    })

    const getRun = Effect.gen(function*() {
      const userId = yield* user
      const threadId = yield* idParam("thread_id", "Thread")
      const runId = yield* idParam("run_id", "Run")
      const stored = (yield* ownedThread(userId, threadId)).thread_id
      return json(runObject(yield* ownedRun(stored, runId), threadId))
    })

    // -------------------------------------------------------------------------------------------------------
    // Threads

    // LangGraph's `if_exists` (`raise`, the default: 409; `do_nothing`: the existing thread) is about the
    // caller's own thread of that id; another user's is, for the caller, a thread that does not exist
    const createThread = Effect.gen(function*() {
      const userId = yield* user
      const request = yield* body(Protocol.ThreadCreate)
      const threadId = request.thread_id ?? M.newId()
      const existing = Schema.is(SafeId)(threadId)
        ? yield* Effect.mapError(ThreadIds.find(store, userId, threadId), storeFailed)
        : Option.none<ThreadSummary>()
      if (Option.isSome(existing)) {
        if (request.if_exists !== "do_nothing") return yield* fail("conflict", `Thread ${threadId} already exists.`)
        return json(yield* fullThread(existing.value, threadId))
      }
      return json(yield* fullThread(yield* newThread(userId, threadId, request.metadata ?? {}), threadId))
    })

    const searchThreads = Effect.gen(function*() {
      const userId = yield* user
      const request = yield* body(Protocol.ThreadSearch)
      const all = yield* Effect.mapError(store.list, storeFailed)
      const wanted = request.metadata ?? {}
      const ids = request.ids == null ? undefined : new Set(request.ids)
      const matches = all.filter((thread) => (thread.owner ?? "default") === userId)
        .map((thread) => ({ thread, threadId: ThreadIds.publicIdOf(userId, thread.thread_id) }))
        .filter(({ thread, threadId }) =>
          (ids === undefined || ids.has(threadId)) &&
          Object.entries(wanted).every(([key, value]) =>
            JSON.stringify(thread.metadata?.[key]) === JSON.stringify(value)
          )
        ).map(({ thread, threadId }) =>
          Protocol.threadObject({ ...thread, thread_id: threadId }, threadStatus(thread), { title: thread.title })
        ).filter((thread) => request.status == null || thread.status === request.status)
      const sortBy = request.sort_by ?? "updated_at"
      const order = request.sort_order === "asc" ? 1 : -1
      matches.sort((a, b) => order * String(a[sortBy]).localeCompare(String(b[sortBy])))
      const offset = request.offset ?? 0
      return json(matches.slice(offset, offset + (request.limit ?? 10)))
    })

    const getThread = Effect.gen(function*() {
      const userId = yield* user
      const threadId = yield* idParam("thread_id", "Thread")
      return json(yield* fullThread(yield* ownedThread(userId, threadId), threadId))
    })

    const patchThread = Effect.gen(function*() {
      const userId = yield* user
      const threadId = yield* idParam("thread_id", "Thread")
      const stored = (yield* ownedThread(userId, threadId)).thread_id
      const request = yield* body(Protocol.ThreadPatch)
      yield* Effect.mapError(store.patchMetadata(stored, request.metadata ?? {}), storeFailed)
      return json(yield* fullThread(yield* ownedThread(userId, threadId), threadId))
    })

    const deleteThread = Effect.gen(function*() {
      const userId = yield* user
      yield* noBody
      const threadId = yield* idParam("thread_id", "Thread")
      const stored = (yield* ownedThread(userId, threadId)).thread_id
      const active = runs.activeOf(stored)
      if (active !== undefined) yield* Effect.ignore(runs.cancel(active.runId, "interrupt", true))
      // a run of another gateway process sharing the store still holds the thread
      if ((yield* ownedThread(userId, threadId)).status === "running") {
        return yield* fail(
          "conflict",
          `Thread ${threadId} has a run in progress in another gateway process; cancel it there, then delete ` +
            "the thread."
        )
      }
      yield* App.deleteThread(app.home, stored, userId).pipe(
        Effect.provideService(ThreadStore, store),
        Effect.mapError(storeFailed)
      )
      return HttpServerResponse.empty({ status: 204 })
    })

    /** A user's thread: as stored, and as the client calls it. */
    interface ThreadRef {
      readonly stored: string
      readonly threadId: string
    }

    /** The user's thread the request's path names, or 404. */
    const threadRef = (userId: string) =>
      Effect.gen(function*() {
        const threadId = yield* idParam("thread_id", "Thread")
        const stored = (yield* ownedThread(userId, threadId)).thread_id
        return { stored, threadId } satisfies ThreadRef
      })

    /** The states after each of the thread's checkpoints, newest first: the last `limit` (before `before`). */
    const history = ({ stored, threadId }: ThreadRef, limit: number, before?: number) =>
      Effect.gen(function*() {
        const all = yield* Effect.mapError(store.checkpoints(stored), storeFailed)
        const records: ReadonlyArray<CheckpointRecord> = before === undefined ? all : all.filter((r) => r.seq < before)
        const from = Math.max(0, records.length - limit)
        const indexes = makeIndexes()
        let state: ThreadState = TS.empty
        const prefix = applyUpdates(state, records.slice(0, from).flatMap((r) => r.updates), indexes)
        if (Either.isLeft(prefix)) return yield* fail("internal", prefix.left.message)
        state = prefix.right
        const out: Array<ReturnType<typeof Protocol.stateObject>> = []
        for (let i = from; i < records.length; i++) {
          const record = records[i]!
          const next = applyUpdates(state, record.updates, indexes)
          if (Either.isLeft(next)) return yield* fail("internal", next.left.message)
          state = next.right
          out.push(Protocol.stateObject(threadId, state, {
            seq: record.seq,
            parent: i > 0 ? records[i - 1]!.seq : undefined,
            created_at: record.created_at,
            run_id: record.run_id,
            step: i
          }))
        }
        return out.reverse()
      })

    const currentState = (thread: ThreadRef) =>
      Effect.gen(function*() {
        const [latest] = yield* history(thread, 1)
        if (latest !== undefined) return latest
        return Protocol.stateObject(thread.threadId, TS.empty, {})
      })

    const getState = Effect.gen(function*() {
      const userId = yield* user
      return json(yield* currentState(yield* threadRef(userId)))
    })

    const stateAt = (thread: ThreadRef, checkpointId: unknown) =>
      Effect.gen(function*() {
        const seq = Number(checkpointId)
        if (!Number.isInteger(seq)) return yield* notFound(`Checkpoint ${JSON.stringify(checkpointId)}`)
        const [state] = yield* history(thread, 1, seq + 1)
        if (state === undefined || state.checkpoint.checkpoint_id !== String(seq)) {
          return yield* notFound(`Checkpoint ${seq}`)
        }
        return state
      })

    const getStateAt = Effect.gen(function*() {
      const userId = yield* user
      const thread = yield* threadRef(userId)
      return json(yield* stateAt(thread, yield* param("checkpoint_id")))
    })

    const postStateAt = Effect.gen(function*() {
      const userId = yield* user
      const thread = yield* threadRef(userId)
      const request = yield* body(Schema.Struct({
        checkpoint: Schema.Struct({ checkpoint_id: Schema.optional(Schema.NullOr(Schema.String)) })
      }))
      if (request.checkpoint.checkpoint_id == null) return json(yield* currentState(thread))
      return json(yield* stateAt(thread, request.checkpoint.checkpoint_id))
    })

    const getHistory = (fromBody: boolean) =>
      Effect.gen(function*() {
        const userId = yield* user
        const thread = yield* threadRef(userId)
        const params = yield* query
        const request = fromBody ? yield* body(Protocol.HistoryRequest) : { limit: Number(params.limit ?? 10) || 10 }
        const before = (request as { before?: unknown }).before as { checkpoint_id?: unknown } | undefined
        const beforeSeq = before != null && typeof before === "object" && before.checkpoint_id != null
          ? Number(before.checkpoint_id)
          : undefined
        return json(yield* history(thread, request.limit ?? 10, Number.isInteger(beforeSeq) ? beforeSeq : undefined))
      })

    const UpdateFields = TS.StateUpdate.pipe(Schema.omit("messages"))
    const SERVER_FIELDS: ReadonlyArray<string> = ["thread_data", "sandbox", "viewed_images"]

    const updateState = Effect.gen(function*() {
      const userId = yield* user
      const thread = yield* threadRef(userId)
      const { stored, threadId } = thread
      const request = yield* body(Protocol.StateUpdateRequest)
      const values = request.values ?? {}
      if (typeof values !== "object" || Array.isArray(values)) {
        return yield* fail("unprocessable", "values: expected an object of state fields")
      }
      const { messages: rawMessages, ...fields } = values as Record<string, unknown>
      // fields that name host resources: ViewImage reads `viewed_images` files and sends them to the model, a run
      // writes large tool outputs to the `sandbox` bound, `thread_data` holds the thread's directories
      const serverOwn = SERVER_FIELDS.find((field) => Object.hasOwn(fields, field))
      if (serverOwn !== undefined) {
        return yield* fail(
          "unprocessable",
          `values.${serverOwn} is the server's own field (it names host resources); clients cannot set it.`
        )
      }
      const decoded = Schema.decodeUnknownEither(UpdateFields, { errors: "all", onExcessProperty: "error" })(fields)
      if (Either.isLeft(decoded)) {
        return yield* fail("unprocessable", `values: ${Protocol.describeParseError(decoded.left)}`)
      }
      const update: { -readonly [K in keyof StateUpdate]: StateUpdate[K] } = { ...decoded.right }
      if (rawMessages !== undefined) {
        const list = Array.isArray(rawMessages) ? rawMessages : [rawMessages]
        const removals = list.filter((m) =>
          typeof m === "object" && m !== null && (m as { type?: unknown }).type === "remove"
        )
        const others = list.filter((m) => !removals.includes(m))
        const messages = yield* Either.match(Protocol.inputMessages({ messages: others }), {
          onLeft: (message) => Effect.fail(fail("unprocessable", `values.${message.replace(/^input\./, "")}`)),
          onRight: Effect.succeed
        })
        update.messages = [
          ...messages,
          ...removals.map((m) => M.remove(String((m as { id?: unknown }).id)))
        ]
      }
      const writer = `update-state-${M.newId()}`
      if (runs.activeOf(stored) !== undefined) {
        return yield* fail("conflict", `Thread ${threadId} has a run in progress; update its state after the run.`)
      }
      const holder = yield* Effect.mapError(
        store.acquireLease({ threadId: stored, runId: writer, ttlMs: 30_000, now: Date.now() }),
        storeFailed
      )
      if (holder !== undefined) {
        return yield* fail("conflict", `Thread ${threadId} has a run in progress (run ${holder.run_id}).`)
      }
      // an update that does not apply to the thread (removing a message it does not have) is refused, not
      // stored: stored, it would make every later load of the thread fail
      const appended = yield* Effect.either(Effect.gen(function*() {
        const current = yield* loadState(stored)
        const applied = applyUpdates(current.state, [update])
        if (Either.isLeft(applied)) return yield* fail("unprocessable", `values: ${applied.left.message}`)
        return yield* store.append(stored, writer, [update])
      })).pipe(Effect.ensuring(Effect.ignore(store.releaseLease(stored, writer))))
      if (Either.isLeft(appended)) {
        return yield* appended.left instanceof GatewayError
          ? appended.left
          : fail("unprocessable", appended.left.message)
      }
      const latest = yield* currentState(thread)
      return json({ checkpoint: latest.checkpoint })
    })

    // -------------------------------------------------------------------------------------------------------
    // Assistants

    const agentNames = (userId: string): ReadonlyArray<string> => {
      const dirs = [Path.join(app.home, "users", userId, "agents"), Path.join(app.home, "agents")]
      const names = new Set<string>()
      for (const dir of dirs) {
        try {
          for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
            // an agent is a directory with its config.yaml (as `antler agents` and the factory read it)
            if (
              entry.isDirectory() && CustomAgents.isAgentName(entry.name) &&
              Fs.existsSync(Path.join(dir, entry.name, CustomAgents.CONFIG_FILE))
            ) names.add(entry.name.toLowerCase())
          }
        } catch {
          // no agents directory
        }
      }
      return [...names].sort()
    }

    const assistant = (id: string) => ({
      assistant_id: id,
      graph_id: Protocol.LEAD_AGENT,
      name: id,
      description: id === Protocol.LEAD_AGENT ? "DeerFlow's lead agent" : `Custom agent ${id}`,
      config: {},
      context: id === Protocol.LEAD_AGENT ? {} : { agent_name: id },
      metadata: {},
      version: 1,
      created_at: new Date(0).toISOString(),
      updated_at: new Date(0).toISOString()
    })

    const searchAssistants = Effect.gen(function*() {
      const userId = yield* user
      const request = yield* body(Protocol.AssistantSearch)
      const all = [Protocol.LEAD_AGENT, ...agentNames(userId)].map(assistant)
        .filter((a) => request.name == null || a.name.includes(request.name))
        .filter((a) => request.graph_id == null || a.graph_id === request.graph_id)
      const offset = request.offset ?? 0
      return json(all.slice(offset, offset + (request.limit ?? 10)))
    })

    const getAssistant = (what: "assistant" | "graph" | "schemas") =>
      Effect.gen(function*() {
        const userId = yield* user
        const id = yield* param("assistant_id")
        if (id !== Protocol.LEAD_AGENT && !agentNames(userId).includes(id)) return yield* notFound(`Assistant ${id}`)
        switch (what) {
          case "assistant":
            return json(assistant(id))
          case "graph":
            return json({
              nodes: [{ id: "__start__" }, { id: "model" }, { id: "tools" }, { id: "__end__" }],
              edges: [
                { source: "__start__", target: "model" },
                { source: "model", target: "tools", conditional: true },
                { source: "tools", target: "model" },
                { source: "model", target: "__end__", conditional: true }
              ]
            })
          case "schemas":
            return json({
              graph_id: Protocol.LEAD_AGENT,
              input_schema: {},
              output_schema: {},
              state_schema: {},
              config_schema: {}
            })
        }
      })

    // -------------------------------------------------------------------------------------------------------
    // DeerFlow: uploads, artifacts, models, skills

    const artifactUrl = (threadId: string, virtualPath: string) =>
      `/api/threads/${threadId}/artifacts${virtualPath.split("/").map(encodeURIComponent).join("/")}`

    const uploadFiles = Effect.gen(function*() {
      const userId = yield* user
      const { stored, threadId } = yield* threadRef(userId)
      const limits = config.uploads
      const form = yield* Body.multipart.pipe(
        Multipart.withLimits({
          maxParts: Option.some(limits.max_files + 20),
          maxFileSize: Option.some(limits.max_file_size),
          maxTotalSize: Option.some(limits.max_total_size + 1024 * 1024)
        }),
        Effect.mapError((error) =>
          error instanceof GatewayError ? error : fail(
            error.reason === "FileTooLarge" || error.reason === "BodyTooLarge" || error.reason === "TooManyParts"
              ? "unprocessable"
              : "bad_request",
            `The upload was refused: ${error.reason === "FileTooLarge"
              ? `a file is larger than ${Upload.formatBytes(limits.max_file_size)} (uploads.max_file_size)`
              : error.reason === "BodyTooLarge"
              ? `the files are larger than ${Upload.formatBytes(limits.max_total_size)} in all (uploads.max_total_size)`
              : error.reason === "TooManyParts"
              ? `more than ${limits.max_files} files (uploads.max_files)`
              : "it is not a multipart form with files"}.`
          ))
      )
      const files = Object.values(form).flatMap((value) =>
        Array.isArray(value) ? value.filter(Multipart.isPersistedFile) : Multipart.isPersistedFile(value) ? [value] : []
      )
      const inputs = yield* Effect.forEach(files, (file) =>
        Effect.map(
          Effect.tryPromise({
            try: () => Fs.promises.readFile(file.path),
            catch: () => fail("internal", "Cannot read an uploaded part.")
          }),
          (bytes) => ({ name: file.name, bytes: new Uint8Array(bytes) })
        ))
      const results = yield* Upload.upload(stored, inputs, { userId }).pipe(
        Effect.provideService(AppConfigService, app),
        Effect.mapError((error) => fail(error.reason === "io" ? "internal" : "unprocessable", error.message))
      )
      return json({
        success: true,
        files: results.map((result) => ({
          ...result,
          virtual_path: result.path,
          artifact_url: artifactUrl(threadId, result.path),
          ...(result.markdown_path !== undefined
            ? {
              markdown_virtual_path: result.markdown_path,
              markdown_artifact_url: artifactUrl(threadId, result.markdown_path)
            }
            : {})
        })),
        message: `Uploaded ${results.length} file${results.length === 1 ? "" : "s"}.`
      })
    })

    const listUploads = Effect.gen(function*() {
      const userId = yield* user
      const { stored, threadId } = yield* threadRef(userId)
      const dir = threadPaths(app.home, userId, stored).uploads
      const entries = Fs.existsSync(dir) ? Fs.readdirSync(dir, { withFileTypes: true }) : []
      const files = entries.filter((e) => e.isFile() && !isStagingFile(e.name)).map((entry) => {
        const stat = Fs.statSync(Path.join(dir, entry.name))
        const path = `${UPLOADS}/${entry.name}`
        return {
          filename: entry.name,
          size: stat.size,
          path,
          virtual_path: path,
          artifact_url: artifactUrl(threadId, path),
          extension: Path.extname(entry.name),
          modified: stat.mtime.toISOString()
        }
      })
      return json({ files, count: files.length })
    })

    const deleteUpload = Effect.gen(function*() {
      const userId = yield* user
      yield* noBody
      const { stored } = yield* threadRef(userId)
      // (the router has decoded the path once; a name is taken literally from there: `%2e` stays `%2e`)
      const filename = yield* param("filename")
      const problemText = Upload.filenameProblem(filename)
      if (problemText !== undefined) return yield* fail("bad_request", `Invalid file name: ${problemText}.`)
      const file = Path.join(threadPaths(app.home, userId, stored).uploads, filename)
      if (!Fs.existsSync(file)) return yield* notFound(`Upload ${filename}`)
      Fs.rmSync(file, { force: true })
      return json({ success: true, message: `Deleted ${filename}.` })
    })

    const getArtifact = Effect.gen(function*() {
      const userId = yield* user
      const { stored } = yield* threadRef(userId)
      const params = yield* HttpRouter.params
      // (decoded once, by the router; decoding again would make `%252e%252e` a `..`)
      const virtual = `/${params["*"] ?? ""}`.replace(/^\/+/, "/")
      if (!virtual.startsWith(`${USER_DATA}/`)) {
        return yield* fail("not_found", `Artifact not found: artifacts are files under ${USER_DATA}.`)
      }
      const sandbox = yield* Effect.mapError(
        sandboxes.acquire(stored, userId),
        (error) => fail("internal", error.message)
      )
      const host = yield* Effect.mapError(sandbox.resolve(virtual, "read"), () => notFound(`Artifact ${virtual}`))
      const stat = yield* Effect.try({ try: () => Fs.statSync(host), catch: () => notFound(`Artifact ${virtual}`) })
      if (!stat.isFile()) return yield* notFound(`Artifact ${virtual}`)
      const search = yield* query
      const download = queryFlag(search, "download")
      const name = Path.basename(virtual)
      const bytes = yield* Effect.tryPromise({
        try: () => Fs.promises.readFile(host),
        catch: () => notFound(`Artifact ${virtual}`)
      })
      return HttpServerResponse.uint8Array(new Uint8Array(bytes), {
        contentType: contentTypeOf(name),
        headers: {
          // a model-written page must not run scripts in the gateway's origin (where the API token lives)
          "content-security-policy": "sandbox",
          "x-content-type-options": "nosniff",
          "content-disposition": `${download ? "attachment" : "inline"}; filename*=UTF-8''${encodeURIComponent(name)}`
        }
      })
    })

    const listModels = Effect.gen(function*() {
      yield* user
      return json({
        models: options.models.map((m) => ({
          name: m.name,
          model: m.model,
          display_name: m.display_name ?? m.name,
          supports_thinking: m.supports_thinking,
          supports_reasoning_effort: m.supports_reasoning_effort,
          supports_vision: m.supports_vision
        }))
      })
    })

    const listSkills = Effect.gen(function*() {
      yield* user
      const skills = SkillsDirectory.catalogOf(app).skills.map((skill) => ({
        name: skill.name,
        description: skill.description,
        category: skill.category,
        location: skill.location,
        enabled: skill.enabled
      }))
      return json({ skills })
    })

    // -------------------------------------------------------------------------------------------------------
    // The router

    const langgraph = HttpRouter.empty.pipe(
      HttpRouter.post("/assistants/search", searchAssistants),
      HttpRouter.get("/assistants/:assistant_id", getAssistant("assistant")),
      HttpRouter.get("/assistants/:assistant_id/graph", getAssistant("graph")),
      HttpRouter.get("/assistants/:assistant_id/schemas", getAssistant("schemas")),
      HttpRouter.post("/threads", createThread),
      HttpRouter.post("/threads/search", searchThreads),
      HttpRouter.get("/threads/:thread_id", getThread),
      HttpRouter.patch("/threads/:thread_id", patchThread),
      HttpRouter.del("/threads/:thread_id", deleteThread),
      HttpRouter.get("/threads/:thread_id/state", getState),
      HttpRouter.post("/threads/:thread_id/state", updateState),
      HttpRouter.post("/threads/:thread_id/state/checkpoint", postStateAt),
      HttpRouter.get("/threads/:thread_id/state/:checkpoint_id", getStateAt),
      HttpRouter.get("/threads/:thread_id/history", getHistory(false)),
      HttpRouter.post("/threads/:thread_id/history", getHistory(true))
    ).pipe(
      HttpRouter.post("/threads/:thread_id/runs", createRun("background", false)),
      HttpRouter.post("/threads/:thread_id/runs/stream", createRun("stream", false)),
      HttpRouter.post("/threads/:thread_id/runs/wait", createRun("wait", false)),
      HttpRouter.get("/threads/:thread_id/runs", listRuns),
      HttpRouter.get("/threads/:thread_id/runs/:run_id", getRun),
      HttpRouter.get("/threads/:thread_id/runs/:run_id/stream", joinStream),
      HttpRouter.post("/threads/:thread_id/runs/:run_id/stream", joinStream),
      HttpRouter.get("/threads/:thread_id/runs/:run_id/join", joinRun),
      HttpRouter.post("/threads/:thread_id/runs/:run_id/cancel", cancelRun),
      HttpRouter.post("/runs", createRun("background", true)),
      HttpRouter.post("/runs/stream", createRun("stream", true)),
      HttpRouter.post("/runs/wait", createRun("wait", true)),
      HttpRouter.get("/ok", Effect.succeed(json({ ok: true }))),
      HttpRouter.get("/info", Effect.succeed(json({ version: "antler", flags: { assistants: true, crons: false } })))
    )

    const deerflow = HttpRouter.empty.pipe(
      HttpRouter.post("/threads/:thread_id/uploads", uploadFiles),
      HttpRouter.get("/threads/:thread_id/uploads/list", listUploads),
      HttpRouter.del("/threads/:thread_id/uploads/:filename", deleteUpload),
      HttpRouter.get("/threads/:thread_id/artifacts/*", getArtifact),
      HttpRouter.get("/models", listModels),
      HttpRouter.get("/skills", listSkills)
    )

    return HttpRouter.concatAll(
      ...LANGGRAPH_PREFIXES.map((prefix) =>
        prefix === "" ? langgraph : HttpRouter.prefixAll(langgraph, prefix as `/${string}`)
      ),
      HttpRouter.prefixAll(deerflow, "/api")
    ).pipe(HttpRouter.catchAllCause(respondError))
  })

const CONTENT_TYPES: Record<string, string> = {
  ".md": "text/markdown; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".json": "application/json",
  ".csv": "text/csv; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".htm": "text/html; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".pdf": "application/pdf"
}

/** The content type of an artifact by its extension (unknown ones are bytes). */
export const contentTypeOf = (name: string): string =>
  CONTENT_TYPES[Path.extname(name).toLowerCase()] ?? "application/octet-stream"
