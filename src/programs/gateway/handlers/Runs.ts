/**
 * The runs endpoints (declared in `api/Runs.ts`): a run is checked (its strategy, its stops, its input
 * messages, its model and agent, which must be its user's) and handed to the run manager (`Runs.ts`), which
 * executes it in the server's fiber; the request then answers at once, streams its events, or waits for its
 * end. A run's events are joined again from any event id, and its end waited for, by its thread's user only.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { ModelConfig } from "../../../services/AppConfig.js"
import * as SkillSecrets from "../../../services/SkillSecrets.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import { LiveConfig } from "../../../services/LiveConfig.js"
import type { RunRecord, ThreadSummary } from "../../../services/ThreadStore.js"
import * as TraceContext from "../../../services/TraceContext.js"
import * as M from "../../../state/Message.js"
import type * as Redact from "../../../state/Redact.js"
import * as Factory from "../../Factory.js"
import type { LangGraphApi } from "../api/GatewayApi.js"
import { describeParseError, fail, notFound } from "../api/Problem.js"
import * as RunsApi from "../api/Runs.js"
import { CurrentIdentity } from "../api/Security.js"
import { DEFAULT_USER, type Identity } from "../Auth.js"
import * as Body from "../Body.js"
import * as EventIds from "../EventIds.js"
import * as Fork from "../Fork.js"
import * as InputBounds from "../InputBounds.js"
import * as Protocol from "../Protocol.js"
import * as RunRecords from "../RunRecords.js"
import * as RunSettings from "../RunSettings.js"
import type { ActiveRun } from "../Runs.js"
import * as ThreadIds from "../ThreadIds.js"
import * as TraceId from "../TraceId.js"
import * as Access from "./Access.js"
import type { QueryValue } from "./Http.js"
import { json, jsonPage, prefixOf, queryFlag, queryList, selectFields, sse } from "./Http.js"

const decodeStreamModes = Schema.decodeUnknownEither(Schema.Array(RunsApi.StreamMode))
const decodeRunSelect = Schema.decodeUnknownEither(RunsApi.RunSelect)

const withError = (values: Record<string, unknown>, record: RunRecord) =>
  record.status === "error"
    ? { ...values, __error__: { error: "RunError", message: record.error ?? "The run failed" } }
    : values

const runLocation = (prefix: string, run: ActiveRun) => `${prefix}/threads/${run.publicThreadId}/runs/${run.runId}`

/**
 * The runs endpoints of `api` (the LangGraph API under one of its prefixes); runs choose among `models`; what a
 * run was asked with is kept without `redact`'s secrets.
 */
export const layer = (api: LangGraphApi, models: ReadonlyArray<ModelConfig>, redact: Redact.Redactor) =>
  HttpApiBuilder.group(api, "runs", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const { store, runs, storeFailed, ownedThread, newThread, loadState, ownedRun, runObject, runCounts } = access
      const factory = yield* Factory.AgentFactory
      // the configuration and the models a run is checked against: those of the start, or as `config.yaml` is now
      // (`LiveConfig`: the names are gathered again only when an edit was taken)
      const started = { config: (yield* AppConfigService).config, names: new Set(models.map((m) => m.name)) }
      const live = yield* Effect.serviceOption(LiveConfig)
      let seen = { revision: 0, ...started }
      const limits = Option.isNone(live) ? Effect.succeed(started) : Effect.map(live.value.current, (snap) => {
        if (snap.revision !== seen.revision) {
          seen = { revision: snap.revision, config: snap.app.config, names: new Set(snap.models.map((m) => m.name)) }
        }
        return seen
      })

      const prepareRun = (who: Identity, threadId: string | undefined, request: RunsApi.RunCreate) =>
        Effect.gen(function*() {
          const userId = who.user
          const strategy = request.multitask_strategy ?? "reject"
          const credential = RunSettings.metadataRefusal(request.metadata, request.config?.metadata) ??
            RunSettings.optionRefusal(request)
          if (credential !== undefined) return yield* fail(credential.reason, credential.message)
          const { config, names } = yield* limits
          const { messages, settings, title } = yield* Either.match(
            RunSettings.prepare(request, {
              recursionLimit: config.recursion_limit,
              maxRecursionLimit: config.max_recursion_limit,
              models: names,
              admin: who.admin,
              bounds: InputBounds.fromConfig(config.gateway)
            }),
            { onLeft: (refusal) => Effect.fail(fail(refusal.reason, refusal.message)), onRight: Effect.succeed }
          )
          // (a cluster's runners seal them with their shared secret: without one, they are refused)
          const unsealed = config.gateway.cluster != null && config.gateway.cluster.secret === undefined
          const secrets = yield* Either.match(RunSettings.requestSecrets(request, unsealed), {
            onLeft: (refusal) => Effect.fail(fail(refusal.reason, refusal.message)),
            onRight: Effect.succeed
          })
          const checkpointId = Fork.requestedCheckpoint(request)
          if (checkpointId !== undefined && threadId === undefined) {
            return yield* fail("unprocessable", "A stateless run has no thread, so no checkpoint to start from.")
          }
          // the agent a run names is its user's (or a shared one): resolved for this user, as the run will be; an
          // assistant id naming no agent of the user's is an assistant that does not exist (LangGraph's 404)
          yield* Effect.mapError(
            factory.resolve(settings, userId, who.admin, who.role),
            (error) => Access.settingsRefusal(error, request.assistant_id)
          )
          const assistantId = request.assistant_id ?? Protocol.LEAD_AGENT
          // the graph and assistant the thread runs on, in its metadata as LangGraph keeps them (apps list a
          // graph's threads by `metadata.graph_id`)
          const ranOn = { graph_id: Protocol.LEAD_AGENT, assistant_id: assistantId }
          let thread: ThreadSummary
          let publicId: string
          let deleteThread = false
          let made = false
          if (threadId === undefined) {
            publicId = M.newId()
            deleteThread = request.on_completion !== "keep"
            thread = yield* newThread(userId, publicId, ranOn)
            made = true
          } else {
            publicId = threadId
            const exists = yield* Effect.either(ownedThread(userId, threadId))
            if (Either.isRight(exists)) thread = exists.right
            else if (request.if_not_exists !== "create") return yield* exists.left
            else {
              thread = yield* newThread(userId, threadId, ranOn)
              made = true
            }
          }
          const modes = Protocol.modesOf(request.stream_mode)
          // the run's metadata as LangGraph's Run object has it: over the thread's (with the graph and assistant)
          // when the thread was there, the run's own on a thread the run made
          // (without an `auth_token` the thread's metadata holds, refused in the run's: see metadataRefusal)
          const { auth_token: _credential, ...threadMetadata } = thread.metadata ?? {}
          const metadata = made
            ? { ...request.metadata }
            : { ...threadMetadata, ...ranOn, ...request.metadata }
          // (what the run was asked with is kept and answered with its record: without the request's secrets, which
          // the user may have typed into the input too, as its thread and stream hide them)
          const hide = SkillSecrets.runRedactor(redact, secrets)
          const kwargs = hide.value(RunSettings.kwargsOf(request, {
            assistantId,
            checkpointId,
            metadata,
            temporary: deleteThread
          }))
          // (as DeerFlow merges them: the run's metadata over its config's)
          const traceId = yield* TraceId.forRun({ ...request.config?.metadata, ...request.metadata })
          // (the client's span its W3C `traceparent` names, which the run's trace joins)
          const traceContext = Option.flatMapNullable(
            yield* Effect.serviceOption(HttpServerRequest.HttpServerRequest),
            (http) => TraceContext.fromHeaders(http.headers)
          )
          const run = yield* runs.start({
            threadId: thread.thread_id,
            publicThreadId: publicId,
            userId,
            admin: who.admin,
            ...(who.role === undefined ? {} : { role: who.role }),
            assistantId,
            messages,
            ...(title !== undefined ? { title } : {}),
            ...(request.command?.resume !== undefined ? { resume: request.command.resume } : {}),
            settings,
            ...(secrets === undefined ? {} : { secrets }),
            modes,
            multitaskStrategy: strategy,
            metadata: hide.value(metadata),
            kwargs,
            deleteThread,
            ...(checkpointId !== undefined ? { checkpointId } : {}),
            ...(traceId !== undefined ? { traceId } : {}),
            ...(Option.isSome(traceContext) ? { traceContext: traceContext.value } : {})
          })
          // (only once the run is accepted, a refused run leaving the thread as it was; and only when they change)
          const known = thread.metadata ?? {}
          if (!made && (known.graph_id !== ranOn.graph_id || known.assistant_id !== ranOn.assistant_id)) {
            yield* Effect.mapError(store.patchMetadata(thread.thread_id, ranOn), storeFailed)
          }
          return run
        })

      /** The run, when it is the stored thread's. */
      const ofThread = (threadId: string, run: ActiveRun | undefined) => run?.threadId === threadId ? run : undefined

      /**
       * A second later, the run as this process can follow it now (while the run changes hands the routing may
       * fail: none then, and the run's record says whether it still goes on).
       */
      const lookAgain = (threadId: string, runId: string) =>
        Effect.zipRight(
          Effect.sleep("1 second"),
          Effect.map(
            Effect.orElseSucceed(runs.lookup(threadId, runId), () => undefined),
            (run) => ofThread(threadId, run)
          )
        )

      /**
       * The end of run `runId` of the stored thread. A run this process follows is awaited; one recorded unfinished
       * that no process here follows yet is looked for again every second until it ends: a cluster's run between
       * two runners (its runner drained, the next one not resumed yet), a run of another process sharing the
       * store. A run handed over while awaited here is followed to its next runner the same way.
       */
      const awaitEnd = (threadId: string, runId: string, run: ActiveRun | undefined) =>
        Effect.gen(function*() {
          let following = ofThread(threadId, run)
          for (;;) {
            const record = following !== undefined
              ? yield* Deferred.await(following.done)
              : yield* ownedRun(threadId, runId)
            if (!RunRecords.unfinished(record)) return record
            following = yield* lookAgain(threadId, runId)
          }
        })

      /**
       * In a cluster, a run recorded unfinished that no runner follows yet (its runner died or drained, and the
       * thread's next runner has not resumed it): looked for again every second, for up to a minute, so that a
       * client joining its stream in that moment follows the resumed run instead of ending there.
       */
      const resumedRun = (threadId: string, runId: string) =>
        Effect.gen(function*() {
          if (runs.adopt === undefined) return undefined
          for (let waited = 0; waited < 60; waited++) {
            if (!RunRecords.unfinished(yield* ownedRun(threadId, runId))) return undefined
            const run = yield* lookAgain(threadId, runId)
            if (run !== undefined) return run
          }
          return undefined
        })

      /**
       * The thread's values at the end of the run (LangGraph answers a join with the run's last values): the
       * thread's state, unless a later run (the next one of its queue) has written since; then the state before
       * that run's first checkpoint.
       */
      const finalValues = (threadId: string, record: RunRecord) =>
        Effect.gen(function*() {
          const loaded = yield* loadState(threadId)
          const at = loaded.runs.findIndex((r) => r.run_id === record.run_id)
          const later = new Set(at < 0 ? [] : loaded.runs.slice(at + 1).map((r) => r.run_id))
          if (later.size === 0) return withError(Protocol.publicValues(loaded.state), record)
          const records = yield* Effect.mapError(store.checkpoints(threadId), storeFailed)
          const next = records.find((r) => later.has(r.run_id))
          if (next === undefined) return withError(Protocol.publicValues(loaded.state), record)
          const before = Fork.stateAfter(records, next.seq - 1)
          return withError(Protocol.publicValues(Either.isRight(before) ? before.right : loaded.state), record)
        })

      /** A run just started, as its run object (none when its record is gone already: a stateless run's). */
      const startedRun = (run: ActiveRun) =>
        Effect.map(Effect.mapError(store.runs({ runId: run.runId }), storeFailed), ([record]) =>
          record === undefined ? {} : runObject(record, run.publicThreadId))

      /** The `action` of a cancel: `interrupt` (the default) or `rollback`. */
      const cancelAction = (value: QueryValue) =>
        Effect.gen(function*() {
          const action = typeof value === "string" ? value : "interrupt"
          if (action !== "interrupt" && action !== "rollback") {
            return yield* fail("unprocessable", `action must be interrupt or rollback, got ${JSON.stringify(action)}.`)
          }
          return action
        })

      const createRun = (
        kind: "background" | "stream" | "wait",
        threadId: string | undefined,
        http: HttpServerRequest.HttpServerRequest
      ) =>
        Effect.gen(function*() {
          const who = yield* CurrentIdentity
          const request = yield* Body.json(RunsApi.RunCreate)
          const prefix = prefixOf(http.url)
          const run = yield* prepareRun(who, threadId, request)
          const location = runLocation(prefix, run)
          // (where the SDK rejoins a broken stream: its apiUrl, then this path, so none of the prefix the request
          // came by, which the client's apiUrl has already or, behind DeerFlow's Next rewrite, names otherwise)
          const rejoin = `${runLocation("", run)}/stream`
          const cancelOnDisconnect = (request.on_disconnect ?? "cancel") === "cancel"
          const disconnect = cancelOnDisconnect ? Effect.ignore(runs.cancel(run.runId, "interrupt", false)) : undefined
          switch (kind) {
            case "background":
              return HttpServerResponse.unsafeJson(yield* startedRun(run), {
                headers: { "content-location": location }
              })
            case "stream":
              return sse(runs.subscribe(run, 0, undefined, disconnect), {
                "content-location": location,
                location: rejoin
              })
            case "wait": {
              // (a stateless run's thread goes with it: only its own end is awaited)
              const record = yield* (
                threadId === undefined ? Deferred.await(run.done) : awaitEnd(run.threadId, run.runId, run)
              )
                .pipe(Effect.onInterrupt(() => disconnect ?? Effect.void))
              // a stateless run's thread is gone by now: its values are what its events left
              const values = threadId === undefined
                ? withError(Protocol.publicValues(run.state()), record)
                : yield* finalValues(run.threadId, record)
              return json(RunsApi.RunValues, values, 200, { "content-location": location })
            }
          }
        })

      const joinStream = (
        path: { readonly thread_id: string; readonly run_id: string },
        urlParams: { readonly stream_mode?: QueryValue; readonly cancel_on_disconnect?: QueryValue },
        headers: { readonly "last-event-id"?: string | undefined }
      ) =>
        Effect.gen(function*() {
          const { user: userId } = yield* CurrentIdentity
          const { thread_id: threadId, run_id: runId } = path
          const stored = (yield* ownedThread(userId, threadId)).thread_id
          const lastEventId = headers["last-event-id"]
          // none, or the SDK's "-1" (useStream's rejoin on a page reload, `lastEventId ??= "-1"`): from the first
          // kept event, as DeerFlow's gateway replays an id it has not sent from the earliest it keeps
          const cursor = lastEventId === undefined || lastEventId.trim() === "" || lastEventId.trim() === "-1"
            ? 0
            : EventIds.parse(lastEventId)
          if (cursor === undefined) {
            return yield* fail(
              "bad_request",
              `Last-Event-ID must be an event id of this run, got ${JSON.stringify(lastEventId)}.`
            )
          }
          const requested = queryList(urlParams.stream_mode)
          const modes = requested.length === 0 ? undefined : yield* Either.match(decodeStreamModes(requested), {
            onLeft: (error) => Effect.fail(fail("unprocessable", `stream_mode: ${describeParseError(error)}`)),
            onRight: (list) => Effect.succeed(Protocol.modesOf(list))
          })
          // (in a cluster the thread's runner may be changing: the run's record says whether to wait for the next)
          const looked = yield* Effect.either(runs.lookup(stored, runId))
          if (Either.isLeft(looked) && runs.adopt === undefined) return yield* looked.left
          const buffered = Either.isRight(looked) ? ofThread(stored, looked.right) : undefined
          // a run still buffered here may have been deleted since it ended (runs.delete): its record says
          if (buffered?.finished() === true) yield* ownedRun(stored, runId)
          const run = buffered ?? (yield* resumedRun(stored, runId))
          if (run !== undefined) {
            const disconnect = queryFlag(urlParams.cancel_on_disconnect)
              ? Effect.ignore(runs.cancel(runId, "interrupt", false))
              : undefined
            return sse(runs.subscribe(run, cursor, modes, disconnect), {})
          }
          // not buffered here (finished long ago, run by another process, or before a restart)
          const record = yield* ownedRun(stored, runId)
          // a run over: DeerFlow's `end` alone, with or without a cursor (`_terminal_record_stream_missing`); the
          // client reloads the thread, where a `gap` would send DeerFlow's app rejoining at that cursor for another
          if (!RunRecords.unfinished(record)) return sse(Protocol.END_WITHOUT_ID, {})
          // another process runs it, outside a cluster: DeerFlow's 409, which its app takes for a run to leave be
          if (runs.adopt === undefined) {
            return yield* fail("conflict", `Run ${runId} is not active on this worker and cannot be streamed`)
          }
          const gap = Protocol.gapPayload(runId, cursor, cursor + 1, cursor)
          return sse(Protocol.sse({ id: cursor, event: "gap", data: JSON.stringify(gap) }), {})
        })

      return handlers
        .handleRaw("createRun", ({ path, request }) => createRun("background", path.thread_id, request))
        .handleRaw("streamRun", ({ path, request }) => createRun("stream", path.thread_id, request))
        .handleRaw("waitRun", ({ path, request }) => createRun("wait", path.thread_id, request))
        .handleRaw("createStatelessRun", ({ request }) => createRun("background", undefined, request))
        .handleRaw("streamStatelessRun", ({ request }) => createRun("stream", undefined, request))
        .handleRaw("waitStatelessRun", ({ request }) => createRun("wait", undefined, request))
        // LangGraph's batch starts every run of the list; here a run refused (its settings, its assistant, the
        // runs limit) refuses the batch, and the runs it started before are cancelled
        .handleRaw("createStatelessRunBatch", () =>
          Effect.gen(function*() {
            const who = yield* CurrentIdentity
            const requests = yield* Body.json(RunsApi.RunBatch)
            const started: Array<ActiveRun> = []
            const cancelStarted = Effect.forEach(
              started,
              (run) => Effect.ignore(runs.cancel(run.runId, "interrupt", false)),
              { discard: true }
            )
            for (const [index, request] of requests.entries()) {
              const run = yield* prepareRun(who, undefined, request).pipe(
                Effect.mapError((error) => fail(error.reason, `[${index}]: ${error.message}`)),
                Effect.tapError(() => cancelStarted)
              )
              started.push(run)
            }
            return json(RunsApi.RunList, yield* Effect.forEach(started, startedRun))
          }))
        // LangGraph's bulk cancel: the runs of `run_ids` (of the user's thread `thread_id`: any other id is a run
        // that does not exist, 404), or those of a `status` of one thread or of all the user's threads; a run
        // that ended meanwhile is not cancelled again
        .handleRaw("cancelRuns", ({ urlParams }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const request = yield* Body.json(RunsApi.RunsCancel)
            const action = yield* cancelAction(urlParams.action)
            const byIds = request.run_ids != null
            if (byIds === (request.status != null)) {
              return yield* fail(
                "unprocessable",
                `Name the runs to cancel by run_ids (with their thread_id) or by status (pending, running, all), ${
                  byIds ? "not both" : "one of them"
                }.`
              )
            }
            if (byIds && request.thread_id == null) {
              return yield* fail("unprocessable", "thread_id: the thread of the run_ids is required with run_ids.")
            }
            let records: ReadonlyArray<RunRecord>
            if (request.thread_id != null) {
              const stored = (yield* ownedThread(userId, request.thread_id)).thread_id
              records = byIds
                ? yield* Effect.forEach(new Set(request.run_ids), (runId) => ownedRun(stored, runId))
                : yield* Effect.mapError(store.runs({ threadId: stored }), storeFailed)
            } else {
              const mine = new Set(
                (yield* Effect.mapError(store.listOwned(userId, userId === DEFAULT_USER), storeFailed))
                  .map((thread) => thread.thread_id)
              )
              const unfinished = yield* Effect.forEach(
                ["pending", "running"] as const,
                (status) => Effect.mapError(store.runs({ status }), storeFailed)
              )
              records = unfinished.flat().filter((record) => mine.has(record.thread_id))
            }
            const status = request.status ?? "all"
            const wanted = records.filter((record) =>
              RunRecords.unfinished(record) && (status === "all" || record.status === status)
            )
            // each run that can be is cancelled (one that ended since it was read is "not cancellable"); a run of
            // another gateway process sharing the store refuses the request, once the others are cancelled
            const elsewhere: Array<string> = []
            for (const record of wanted) {
              const cancelled = yield* Effect.either(runs.cancel(record.run_id, action, false))
              if (Either.isRight(cancelled) || /is not (running|cancellable)/.test(cancelled.left.message)) continue
              if (cancelled.left.reason !== "conflict") return yield* cancelled.left
              elsewhere.push(record.run_id)
            }
            if (elsewhere.length > 0) {
              const many = elsewhere.length > 1
              return yield* fail(
                "conflict",
                `${many ? "Runs" : "Run"} ${elsewhere.join(", ")} ${many ? "run" : "runs"} in another gateway ` +
                  `process; cancel ${many ? "them" : "it"} there (the others were cancelled).`
              )
            }
            return HttpServerResponse.empty({ status: 204 })
          }))
        .handleRaw("joinStream", ({ headers, path, urlParams }) => joinStream(path, urlParams, headers))
        // DeerFlow's stop: `POST .../stream?action=interrupt|rollback` cancels the run first (a cancelled run again is
        // no conflict), then streams what is left of it; with `wait`, answers 204 once it ended
        .handleRaw("joinStreamPost", ({ headers, path, urlParams }) =>
          Effect.gen(function*() {
            if (urlParams.action === undefined) return yield* joinStream(path, urlParams, headers)
            const { user: userId } = yield* CurrentIdentity
            const stored = (yield* ownedThread(userId, path.thread_id)).thread_id
            yield* ownedRun(stored, path.run_id)
            const action = yield* cancelAction(urlParams.action)
            const wait = queryFlag(urlParams.wait)
            yield* runs.cancel(path.run_id, action, wait)
            return wait ? HttpServerResponse.empty({ status: 204 }) : yield* joinStream(path, urlParams, headers)
          }))
        // the SDK's joinStream without a thread (LangGraph's, for a stateless run): the run's thread is found from
        // its record, and joined as the user's thread; a run of no thread of theirs is a run that does not exist
        .handleRaw("joinRunStream", ({ headers, path, urlParams }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const [record] = yield* Effect.mapError(store.runs({ runId: path.run_id }), storeFailed)
            if (record === undefined) return yield* notFound(`Run ${path.run_id}`)
            const thread = { thread_id: ThreadIds.publicIdOf(userId, record.thread_id), run_id: path.run_id }
            return yield* joinStream(thread, urlParams, headers).pipe(
              Effect.catchIf((error) => error.reason === "not_found", () => notFound(`Run ${path.run_id}`))
            )
          }))
        .handleRaw("joinRun", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const stored = (yield* ownedThread(userId, path.thread_id)).thread_id
            const record = yield* awaitEnd(stored, path.run_id, yield* runs.lookup(stored, path.run_id))
            // (the end of a run still buffered here, which may have been deleted since: runs.delete)
            yield* ownedRun(stored, path.run_id)
            return json(RunsApi.RunValues, yield* finalValues(stored, record))
          }))
        .handleRaw("cancelRun", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const { thread_id: threadId, run_id: runId } = path
            const stored = (yield* ownedThread(userId, threadId)).thread_id
            yield* ownedRun(stored, runId)
            const action = yield* cancelAction(urlParams.action)
            const wait = queryFlag(urlParams.wait)
            yield* runs.cancel(runId, action, wait)
            // DeerFlow's: 204 once the run ended (with wait), else 202; the SDK reads no body
            return HttpServerResponse.empty({ status: wait ? 204 : 202 })
          }))
        .handleRaw("listRuns", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const threadId = path.thread_id
            const stored = (yield* ownedThread(userId, threadId)).thread_id
            const limit = Math.max(1, Math.min(1000, Number(urlParams.limit ?? 10) || 10))
            const offset = Math.max(0, Number(urlParams.offset ?? 0) || 0)
            const status = typeof urlParams.status === "string" ? urlParams.status : undefined
            const select = yield* Either.match(decodeRunSelect(queryList(urlParams.select)), {
              onLeft: (error) => Effect.fail(fail("unprocessable", `select: ${describeParseError(error)}`)),
              onRight: Effect.succeed
            })
            const counts = yield* runCounts(stored)
            const records = (yield* Effect.mapError(store.runs({ threadId: stored }), storeFailed))
              .map((record) => runObject(record, threadId, counts.get(record.run_id)))
              .filter((run) => status === undefined || run.status === status)
              .reverse()
            // (each run holds its input: a page of them ends at gateway.max_page_bytes)
            return jsonPage(
              RunsApi.RunList,
              records.slice(offset, offset + limit).map((run) => selectFields(run, select)),
              (yield* limits).config.gateway.max_page_bytes
            )
          }))
        // LangGraph's server deletes a run whatever its status (the run going on without a record); a run that
        // has not ended is refused here, as the run manager writes its record and events until it ends
        .handleRaw("deleteRun", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const { thread_id: threadId, run_id: runId } = path
            const stored = (yield* ownedThread(userId, threadId)).thread_id
            const record = yield* ownedRun(stored, runId)
            if (RunRecords.unfinished(record) || runs.activeOf(stored)?.runId === runId) {
              return yield* fail(
                "conflict",
                `Run ${runId} has not ended (${record.status}); cancel it, or wait for its end, then delete it.`
              )
            }
            // (the store deletes only a run that has ended; none: deleted meanwhile)
            const deleted = yield* Effect.mapError(store.deleteRun(stored, runId), storeFailed)
            return deleted ? HttpServerResponse.empty({ status: 204 }) : yield* notFound(`Run ${runId}`)
          }))
        .handleRaw("getRun", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const stored = (yield* ownedThread(userId, path.thread_id)).thread_id
            const record = yield* ownedRun(stored, path.run_id)
            const counts = (yield* runCounts(stored)).get(path.run_id)
            return json(RunsApi.RunObject, runObject(record, path.thread_id, counts))
          }))
    }))
