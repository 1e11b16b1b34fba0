/**
 * The gateway's runs in a cluster (`gateway.cluster`, issue 30) on @effect/cluster with PostgreSQL storage: a
 * thread is an entity (`ThreadEntity`), owned by the runner its shard is assigned to; its runs execute there, in
 * that runner's own run manager (`Runs.layer`). Any process accepts a request and routes it to the owner:
 * starting a run, following its events (a streaming RPC from any cursor: `Last-Event-ID` works from every
 * process), waiting for its end, cancelling it. The runners find each other through the database and talk over
 * sockets (`runner_host:runner_port`).
 *
 * A runner stopped (SIGTERM), or giving a thread's shard to a runner that joined, drains with the engine's own
 * shutdown: it leaves the registry at once (its idle shards move), its runs go on for `drain_seconds` (the
 * entities' termination timeout), and the runs still going are then handed over (see `untilDone`).
 *
 * The module imports @effect/sql-pg (an optional peer): the gateway loads it only when a cluster is configured.
 */
import { Readable } from "node:stream"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as Rpc from "@effect/rpc/Rpc"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ClusterConfig } from "../../../services/config/Server.js"
import type { RunRecord } from "../../../services/ThreadStore.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import * as M from "../../../state/Message.js"
import * as TS from "../../../state/ThreadState.js"
import type { ThreadState } from "../../../state/ThreadState.js"
import { GatewayError } from "../api/Problem.js"
import type * as Protocol from "../Protocol.js"
import * as FrameMirror from "../FrameMirror.js"
import { LeaseTtl } from "../RunLease.js"
import * as RunRecords from "../RunRecords.js"
import * as Runs from "../Runs.js"
import * as RunSettling from "../RunSettling.js"
import * as TraceId from "../TraceId.js"
import * as ClusterTables from "./ClusterTables.js"
import * as RunClosing from "./RunClosing.js"
import * as RunnerSocket from "./RunnerSocket.js"
import * as RunNotices from "./RunNotices.js"
import { unwire, wire } from "./RunWire.js"

const Frame = Schema.Struct({ id: Schema.Number, event: Schema.String, data: Schema.String })
const RunId = { runId: Schema.String }

/** Who a run is for, as the accepting process needs it to answer about a run its thread's runner runs. */
const RunInfo = Schema.Struct({
  threadId: Schema.String,
  publicThreadId: Schema.String,
  userId: Schema.String,
  modes: Schema.Array(Schema.String)
})

/**
 * The thread entity's protocol. Messages between runners of one cluster (a private network): the run request was
 * decoded at the HTTP boundary of the process that accepted it.
 */
export const ThreadEntity = Entity.make("AntlerThread", [
  Rpc.make("Start", { payload: { request: Schema.Unknown }, success: Schema.Struct(RunId), error: GatewayError }),
  Rpc.make("Describe", { payload: RunId, success: Schema.NullOr(RunInfo) }),
  Rpc.make("Frames", {
    payload: { ...RunId, cursor: Schema.Number },
    success: Frame,
    error: GatewayError,
    stream: true
  }),
  Rpc.make("Done", {
    payload: RunId,
    success: Schema.Struct({ record: Schema.Unknown, state: Schema.Unknown }),
    error: GatewayError
  }),
  Rpc.make("Cancel", {
    payload: { ...RunId, action: Schema.Literal("interrupt", "rollback"), wait: Schema.Boolean },
    error: GatewayError
  }),
  // the durable half of a run: kept in PostgreSQL until its runner answers it (when the run ended); a runner that
  // dies leaves it unanswered, and the thread's next runner resumes the run
  Rpc.make("Execute", { payload: { ...RunId, request: Schema.Unknown }, success: Schema.Unknown, error: GatewayError })
    .annotate(ClusterSchema.Persisted, true)
])

/** This runner's own run manager (the runs of the threads it owns). */
class LocalRuns extends Context.Tag("antler/gateway/cluster/LocalRuns")<LocalRuns, Runs.Service>() {}

const routed = (error: { readonly _tag: string; readonly message?: string }) =>
  error._tag === "GatewayError"
    ? (error as GatewayError)
    : new GatewayError({ reason: "internal", message: `cluster: ${error.message ?? error._tag}` })

/**
 * `effect` with its log lines naming the trace id of the request that started the run (`X-Trace-Id`), when it has
 * one: a run's request travels whole between runners (its trace id and client's span among it, see `Start`), so
 * what a runner logs about a run it was sent, resumed or handed over names it as the run's own lines do.
 */
const withTraceOf = <A, E, R>(request: Runs.RunRequest, effect: Effect.Effect<A, E, R>) =>
  request.traceId === undefined ? effect : Effect.annotateLogs(effect, TraceId.LOG_KEY, request.traceId)

const unknownRun = (runId: string) =>
  new GatewayError({ reason: "not_found", message: `Run ${runId} is not known to its thread's runner.` })

/** The entity's behaviour on the runner that owns the thread: its local run manager. */
const entityLayer = (clusterSecret: Redacted.Redacted<string> | undefined) => ThreadEntity.toLayer(
  Effect.gen(function*() {
    const local = yield* LocalRuns
    const store = yield* ThreadStore
    const ttlMs = yield* LeaseTtl
    /**
     * The answer to a run's durable message: its end. Interrupted first (this runner stops, or gives the thread's
     * shard to a runner that joined, and the run did not end within `drain_seconds`: the engine interrupts the
     * entity's requests after its `entityTerminationTimeout`), the run is handed over: stopped at its last
     * completed step, left `running` with the thread's lease released; the engine leaves the message unanswered
     * in the database for the thread's next runner, which resumes the run under its id.
     */
    const endOf = (run: Runs.ActiveRun) =>
      Deferred.await(run.done).pipe(
        Effect.onInterrupt(() =>
          local.handOver === undefined ? Effect.void : local.handOver(run.runId).pipe(
            Effect.tap((handed) =>
              handed ? Effect.logWarning(`run ${run.runId}: handed over to the thread's next runner`) : Effect.void
            )
          )
        )
      )
    // (a run that ended here unfinished, handed over with the run ahead of it, is not answered: the message stays for
    // the thread's next runner)
    const untilDone = (run: Runs.ActiveRun) =>
      Effect.flatMap(endOf(run), (record) => (RunRecords.unfinished(record) ? Effect.never : Effect.succeed(record)))
    return ThreadEntity.of({
      Start: ({ payload }) =>
        withTraceOf(
          payload.request as Runs.RunRequest,
          Either.match(unwire(clusterSecret, payload.request, (payload.request as Runs.RunRequest).runId), {
            onLeft: ({ problem }) =>
              Effect.fail(new GatewayError({ reason: "internal", message: `cluster: ${problem}` })),
            onRight: (request) => Effect.map(local.start(request), (run) => ({ runId: run.runId }))
          })
        ),
      Describe: ({ payload }) =>
        Effect.sync(() => {
          const run = local.get(payload.runId)
          return run === undefined
            ? null
            : { threadId: run.threadId, publicThreadId: run.publicThreadId, userId: run.userId, modes: run.modes }
        }),
      Frames: ({ payload }) => {
        const run = local.get(payload.runId)
        return run === undefined ? Stream.fail(unknownRun(payload.runId)) : Runs.framesOf(run, payload.cursor, () => {})
      },
      Done: ({ payload }) =>
        Effect.gen(function*() {
          const run = local.get(payload.runId)
          if (run !== undefined) {
            const record = yield* Deferred.await(run.done)
            return { record, state: run.state() }
          }
          const record = (yield* Effect.orElseSucceed(store.runs({ runId: payload.runId }), () => []))[0]
          if (record === undefined) return yield* unknownRun(payload.runId)
          return { record, state: TS.empty }
        }),
      Cancel: ({ payload }) => local.cancel(payload.runId, payload.action, payload.wait),
      Execute: ({ payload }) =>
        withTraceOf(payload.request as Runs.RunRequest, Effect.gen(function*() {
          const own = local.get(payload.runId)
          if (own !== undefined) return yield* untilDone(own)
          // not run here: the thread's shard moved while the run goes on elsewhere, or its runner died. Only when
          // no live process holds the thread (its lease, renewed until the run's end is recorded) is the run
          // resumed here; one whose last turn had ended (it was settling) is ended instead, never run again. (Its
          // sealed secrets that do not open here: it goes on without them, saying why.)
          const unwired = unwire(clusterSecret, payload.request, payload.runId)
          const request = Either.isRight(unwired) ? unwired.right : unwired.left.request
          let waited = 0
          for (;;) {
            const thread = yield* Effect.orElseSucceed(store.runs({ threadId: request.threadId }), () => [])
            const at = thread.findIndex((run) => run.run_id === payload.runId)
            const record = at < 0 ? undefined : thread[at]
            if (record !== undefined && !RunRecords.unfinished(record)) return record
            // a run queued behind another (handed over together) lets the ones before it go first: it waits for
            // them to end, or at most half a minute (one left unfinished for good), then for the thread's lease
            const before = thread.slice(0, Math.max(at, 0)).filter(RunRecords.unfinished)
            if (before.length > 0 && waited++ < 30) {
              yield* Effect.sleep("1 second")
              continue
            }
            // the thread's lease, taken under the run's own id for a lease's life and kept until the resumed run
            // renews it: no other runner resumes the run meanwhile (a second delivery of this message, the
            // thread's shard moving), and the run's record read once it is held is its last (a runner records a
            // run's end before it gives the lease back)
            const now = yield* Clock.currentTimeMillis
            const holder = yield* Effect.orElseSucceed(
              store.acquireLease({ threadId: request.threadId, runId: payload.runId, ttlMs, now }),
              () => ({ run_id: "unknown" })
            )
            if (holder === undefined) {
              // (this process's lease: a run of that id here holds it too, resumed by another delivery of this
              // message, which is followed to its end, or one being handed over, after which the run is resumed)
              const here = local.get(payload.runId)
              const followed = here === undefined ? undefined : yield* endOf(here)
              if (followed !== undefined && !RunRecords.unfinished(followed)) return followed
              if (followed !== undefined) {
                yield* Effect.sleep("1 second")
                continue
              }
              const current = yield* RunRecords.latest(store, payload.runId)
              const settling = current !== undefined && RunRecords.unfinished(current) &&
                RunSettling.of(current) !== undefined
              const ended = settling ? yield* Effect.either(RunSettling.interrupted(store, current!)) : undefined
              if ((current === undefined || RunRecords.unfinished(current)) && ended === undefined) {
                yield* Effect.logWarning(`run ${payload.runId}: resumed here, its runner is gone`)
                if (Either.isLeft(unwired)) {
                  const problem = unwired.left.problem
                  yield* Effect.logWarning(`run ${payload.runId}: resumed without its request's secrets: ${problem}`)
                }
                // (one that ended meanwhile, resumed here by another delivery, is not run again: `RunStart.resume`)
                const resumed = yield* Effect.either(local.resume(request, payload.runId))
                if (Either.isRight(resumed)) return yield* untilDone(resumed.right)
                if (local.get(payload.runId) !== undefined) continue
                yield* Effect.ignore(store.releaseLease(request.threadId, payload.runId))
                const last = yield* RunRecords.latest(store, payload.runId)
                return yield* (last !== undefined && !RunRecords.unfinished(last) ? Effect.succeed(last) : resumed.left)
              }
              yield* Effect.ignore(store.releaseLease(request.threadId, payload.runId))
              if (ended === undefined) return current!
              if (Either.isRight(ended)) {
                yield* Effect.logWarning(`run ${payload.runId}: its runner died while it settled; ended, not resumed`)
                return ended.right
              }
              yield* Effect.logWarning(`run ${payload.runId}: its end could not be recorded`, ended.left)
            }
            yield* Effect.sleep("1 second")
          }
        }))
    })
  }),
  // a run's stream, its end and a cancel are answered at once, whatever else the thread is asked
  { concurrency: "unbounded" }
)

/**
 * A run's fiber (`Runs.Options.traced`) telling every process when it starts and when it ends, whatever ends it (its
 * record already says so: the thread streams it wakes read it).
 */
const announced = (heard: RunNotices.Service, traced: Runs.Traced | undefined): Runs.Traced => (body, run) =>
  Effect.zipRight(heard.notify(run.threadId), traced === undefined ? body : traced(body, run)).pipe(
    Effect.ensuring(heard.notify(run.threadId))
  )

/** Seconds between a runner's heartbeats (and shard lock refreshes). */
const heartbeatSeconds = (config: ClusterConfig) => Math.min(10, Math.max(3, config.health_check_seconds))

/** The sharding of a runner: its address, PostgreSQL for its messages and the runners' registry. */
const shardingLayer = (config: ClusterConfig, pg: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient>) =>
  RunnerSocket.layer({
    secret: config.secret,
    shardingConfig: {
      runnerAddress: Option.some(RunnerAddress.make(config.runner_host, config.runner_port)),
      runnerListenAddress: Option.some(
        RunnerAddress.make(config.listen_host ?? config.runner_host, config.runner_port)
      ),
      // how soon a dead runner is noticed (its shards, and the runs it left, go to the others), and how often a
      // runner looks for messages its shards were sent while another had them
      runnerHealthCheckInterval: Duration.seconds(config.health_check_seconds),
      entityMessagePollInterval: Duration.seconds(1),
      // the runners' heartbeats: a runner silent for `shardLockExpiration` leaves the runners' list. Only that
      // notices a dead runner that was running the health checks itself (the others' checks notice the rest), so
      // it follows `health_check_seconds` (3 to 10 s between heartbeats: one slower than that makes the runner give
      // up its shards; the default keeps @effect/cluster's 10 s and about 35 s). PostgreSQL's advisory locks keep
      // a live runner's shards its own, listed or not
      shardLockRefreshInterval: Duration.seconds(heartbeatSeconds(config)),
      shardLockExpiration: Duration.seconds(3 * heartbeatSeconds(config) + 2),
      // stopped (SIGTERM) or giving shards to a runner that joined, a runner first stops taking the shards'
      // messages (it unregisters: `preemptiveShutdown`, the default) and lets their entities' requests go on for
      // this long, then interrupts them: the runs still going are then handed over (see `untilDone`)
      preemptiveShutdown: true,
      entityTerminationTimeout: Duration.seconds(config.drain_seconds)
    }
  }).pipe(
    // (the cluster's tables made first, one process at a time)
    Layer.provide(ClusterTables.layer),
    Layer.provide(pg)
  )

/** The run manager of a runner of a cluster: the `Runs` the gateway's handlers use, routing to each thread's owner. */
export const layer = (
  options: Runs.Options,
  config: ClusterConfig,
  url: Redacted.Redacted<string>
) => {
  // (one connection pool, and one LISTEN connection, per process)
  const pg = Layer.orDie(PgClient.layer({ url }))
  const notices = RunNotices.layer.pipe(Layer.provide(pg))
  // (its runs are resumed by the thread's next runner when it dies: `RunSettling`; every process hears when they
  // start and end: `RunNotices`)
  const local = Layer.unwrapEffect(Effect.map(RunNotices.RunNotices, (heard) =>
    Layer.effect(LocalRuns, Runs.Runs).pipe(
      Layer.provide(Runs.layer({
        ...options,
        resumable: true,
        drainSeconds: config.drain_seconds,
        traced: announced(heard, options.traced)
      }))
    )))
  const routing = Layer.scoped(
    Runs.Runs,
    Effect.gen(function*() {
      const localRuns = yield* LocalRuns
      const heard = yield* RunNotices.RunNotices
      const store = yield* ThreadStore
      const client = yield* ThreadEntity.client
      const scope = yield* Effect.scope
      const remote = new WeakSet<Runs.ActiveRun>()
      // the runner stopping: its runs' drain begins as the engine's does, before the entities close (this layer's end
      // comes first), so that a run no durable message waits on here (its `Execute` not arrived yet) has the same
      // drain and is handed over, not cancelled, when the run manager's fibers are interrupted (`RunDrain`)
      yield* Effect.addFinalizer(() => localRuns.drain ?? Effect.void)

      /**
       * A run another runner executes, as this process follows it: its end arrives through `Done` (what is logged
       * meanwhile names the trace id of the request that started it, when that request was this process's).
       */
      const remoteRun = (
        info: typeof RunInfo.Type,
        runId: string,
        request?: Runs.RunRequest
      ): Effect.Effect<Runs.ActiveRun> =>
        Effect.gen(function*() {
          const done = Deferred.unsafeMake<RunRecord>(FiberId.none)
          let state: ThreadState = TS.empty
          let finished = false
          const run: Runs.ActiveRun = {
            runId,
            threadId: info.threadId,
            publicThreadId: info.publicThreadId,
            userId: info.userId,
            modes: info.modes as ReadonlyArray<Protocol.StreamMode>,
            done,
            finished: () => finished,
            after: () => ({ frames: [] }),
            origin: () => 0,
            // (its frames come from its runner: nothing is appended here)
            changes: () => 0,
            onChange: () => () => {},
            state: () => state
          }
          remote.add(run)
          // a run handed over (its runner drained) is answered `running`, or not at all (the request interrupted
          // with the runner's entity): its end is asked again, of the thread's next runner, which resumes it
          const ask: Effect.Effect<void> = client(info.threadId).Done({ runId }).pipe(
            Effect.map((answer) => ({ record: answer.record as RunRecord, state: answer.state as ThreadState })),
            Effect.catchAllCause((cause) =>
              Effect.gen(function*() {
                yield* Effect.logWarning(`run ${runId}: its end could not be learned from its runner`, cause)
                const record = (yield* Effect.orElseSucceed(store.runs({ runId }), () => []))[0]
                return record === undefined ? undefined : { record, state: TS.empty }
              })
            ),
            Effect.flatMap((answer) =>
              answer !== undefined && RunRecords.unfinished(answer.record)
                ? Effect.zipRight(Effect.sleep("1 second"), ask)
                : Effect.suspend(() => {
                  finished = true
                  if (answer === undefined) return Effect.void
                  state = answer.state
                  return Deferred.succeed(done, answer.record)
                })
            )
          )
          yield* Effect.forkIn(request === undefined ? ask : withTraceOf(request, ask), scope)
          return run
        })

      const lookup: Runs.Service["lookup"] = (threadId, runId) =>
        Effect.gen(function*() {
          const own = localRuns.get(runId)
          if (own !== undefined) return own
          const info = yield* Effect.mapError(client(threadId).Describe({ runId }), routed)
          return info === null || info.threadId !== threadId ? undefined : yield* remoteRun(info, runId)
        })

      /** Run `runId` of `request` as this process follows it: its own, or one another runner executes. */
      const follow = (request: Runs.RunRequest, runId: string): Effect.Effect<Runs.ActiveRun> => {
        const own = localRuns.get(runId)
        return own !== undefined ? Effect.succeed(own) : remoteRun({
          threadId: request.threadId,
          publicThreadId: request.publicThreadId ?? request.threadId,
          userId: request.userId,
          modes: request.modes
        }, runId, request)
      }

      const start: Runs.Service["start"] = (asked) =>
        Effect.gen(function*() {
          // (its id chosen here when the request names none: its secrets are sealed for it, see `RunWire`)
          const runId = asked.runId ?? M.newId()
          const request = { ...asked, runId }
          const sent = yield* Effect.try({
            try: () => wire(config.secret, request, runId),
            catch: (error) => new GatewayError({ reason: "internal", message: `cluster: ${(error as Error).message}` })
          })
          yield* Effect.mapError(client(request.threadId).Start({ request: sent }), routed)
          // a run that is not durable would be left unfinished, never resumed, by its runner's death (a process
          // starting leaves unfinished runs to their durable messages): it is stopped, and the request fails. (Once
          // started, it is made durable even when this request is interrupted: this process stopping)
          yield* client(request.threadId).Execute({ runId, request: sent }, { discard: true }).pipe(
            Effect.catchAll((error) =>
              Effect.gen(function*() {
                yield* Effect.logWarning(`run ${runId}: not made durable, stopped`, error)
                yield* Effect.ignore(client(request.threadId).Cancel({ runId, action: "interrupt", wait: true }))
                return yield* new GatewayError({
                  reason: "internal",
                  message: `cluster: run ${runId} could not be made durable: ${error.message ?? error._tag}`
                })
              })
            ),
            Effect.uninterruptible
          )
          return yield* follow(request, runId)
        })

      const adopt: NonNullable<Runs.Service["adopt"]> = (request, runId) =>
        Effect.gen(function*() {
          const sent = yield* Effect.try({
            try: () => wire(config.secret, request, runId),
            catch: (error) => new GatewayError({ reason: "internal", message: `cluster: ${(error as Error).message}` })
          })
          yield* Effect.mapError(client(request.threadId).Execute({ runId, request: sent }, { discard: true }), routed)
          return yield* follow(request, runId)
        })

      const cancel: Runs.Service["cancel"] = (runId, action, wait) =>
        Effect.gen(function*() {
          if (localRuns.get(runId) !== undefined) return yield* localRuns.cancel(runId, action, wait)
          const record = (yield* store.runs({ runId }).pipe(
            Effect.mapError((error) => new GatewayError({ reason: "internal", message: error.message }))
          ))[0]
          if (record === undefined) {
            return yield* new GatewayError({ reason: "conflict", message: `Run ${runId} is not running.` })
          }
          yield* Effect.mapError(client(record.thread_id).Cancel({ runId, action, wait }), routed)
        })

      /**
       * The frames of run `run` (another runner's) after `cursor`, from its runner. Its stream ending without the
       * run's last frame (the runner drained and handed the run over, or died) is joined again, from the last frame
       * it gave, once a second while the run's record says it goes on, up to a minute (two for a run that was
       * settling: the thread's next runner ends it once its dead runner's lease lapsed): on the thread's next runner
       * once it resumed the run (whose event ids go on above these), so the stream goes on through the change of
       * runner. A run that ended meanwhile gives what is left of its stream; when no runner keeps it any more (it
       * was ended, not resumed, by the next runner, or settled by a runner that stopped), the stream ends as its
       * record says (`RunClosing`). `complete`: whether the run's last frame (`end`, `gap`) passed.
       */
      const remoteFrames = (run: Runs.ActiveRun, cursor: number) => {
        let complete = false
        let last = cursor
        const tracked = <E>(frames: Stream.Stream<Protocol.Frame, E>) =>
          Stream.tap(frames, (frame) =>
            Effect.sync(() => {
              complete = frame.event === "end" || frame.event === "gap"
              last = Math.max(last, frame.id)
            }))
        const from = (attempt: number): Stream.Stream<Protocol.Frame> =>
          tracked(client(run.threadId).Frames({ runId: run.runId, cursor: last })).pipe(
            // (however it broke: a runner stopping interrupts its entity's requests; this fiber interrupted, the
            // client gone, stays interrupted)
            Stream.catchAllCause((cause) =>
              Stream.drain(Stream.fromEffect(
                attempt === 0 && !Cause.isInterruptedOnly(cause)
                  ? Effect.logWarning(`run ${run.runId}: its stream from its runner broke`, cause)
                  : Effect.void
              ))
            ),
            Stream.concat(
              Stream.unwrap(Effect.suspend(() => (complete ? Effect.succeed(Stream.empty) : again(attempt))))
            )
          )
        const rest = (record: RunRecord) =>
          Stream.concat(
            tracked(Stream.suspend(() =>
              Stream.catchAllCause(client(run.threadId).Frames({ runId: run.runId, cursor: last }), () => Stream.empty)
            )),
            Stream.unwrap(Effect.suspend(() =>
              complete
                ? Effect.succeed(Stream.empty)
                : Effect.map(RunClosing.frames(store, record, last, run.modes), (frames) =>
                  tracked(Stream.fromIterable(frames)))
            ))
          )
        const again = (attempt: number): Effect.Effect<Stream.Stream<Protocol.Frame>> =>
          Effect.gen(function*() {
            const record = (yield* Effect.orElseSucceed(store.runs({ runId: run.runId }), () => []))[0]
            if (record === undefined) return Stream.empty
            // (a run that ended meanwhile: one more look gives what is left of its stream, its end among it)
            if (!RunRecords.unfinished(record)) return rest(record)
            if (attempt >= (RunSettling.of(record) === undefined ? 60 : 120)) return Stream.empty
            yield* Effect.sleep("1 second")
            return from(attempt + 1)
          })
        return { frames: from(0), complete: () => complete }
      }

      const subscribe: Runs.Service["subscribe"] = (run, cursor, modes, onDisconnect) => {
        if (!remote.has(run)) return localRuns.subscribe(run, cursor, modes, onDisconnect)
        // `ended`: the stream ended here (not the client gone, after which `onDisconnect` runs)
        let ended = false
        const followed = remoteFrames(run, cursor)
        const frames = followed.frames.pipe(
          Stream.concat(Stream.drain(Stream.fromEffect(Effect.sync(() => (ended = true)))))
        )
        const text = Runs.sseOf(frames, modes, options.heartbeatSeconds).pipe(
          Stream.ensuring(
            Effect.suspend(() =>
              followed.complete() || ended || onDisconnect === undefined ? Effect.void : onDisconnect
            )
          )
        )
        // destroying the readable (the client gone) ends the iteration, which interrupts the stream
        return Readable.from(Stream.toAsyncIterable(text), { objectMode: false })
      }

      const mirror: NonNullable<Runs.Service["mirror"]> = (run, cursor) =>
        Effect.gen(function*() {
          if (!remote.has(run)) return run
          const kept = FrameMirror.make(run.runId, options)
          const frames = remoteFrames(run, cursor).frames
          yield* Stream.runForEach(frames, (frame) => Effect.sync(() => kept.put(frame))).pipe(
            Effect.ensuring(Effect.sync(kept.close)),
            Effect.forkScoped
          )
          return kept
        })

      return Runs.Runs.of({
        start,
        get: (runId) => localRuns.get(runId),
        lookup,
        activeOf: (threadId) => localRuns.activeOf(threadId),
        onStart: localRuns.onStart,
        onNotice: heard.on,
        cancel,
        subscribe,
        mirror,
        resume: localRuns.resume,
        reservations: localRuns.reservations,
        adopt,
        // a run a dead process left unfinished is a durable message: its thread's runner resumes it (or learns it
        // ended), so a process starting does not record it as ended (`orphan_recovered`) as without a cluster
        recover: Effect.succeed([])
      })
    })
  )
  return routing.pipe(
    Layer.provideMerge(entityLayer(config.secret)),
    Layer.provideMerge(local),
    Layer.provideMerge(notices),
    Layer.provideMerge(shardingLayer(config, pg))
  )
}
