/**
 * The gateway's runs in a cluster (`gateway.cluster`, issue 30) on @effect/cluster with PostgreSQL storage: a
 * thread is an entity (`ThreadEntity`), owned by the runner its shard is assigned to; its runs execute there, in
 * that runner's own run manager (`Runs.layer`). Any process accepts a request and routes it to the owner:
 * starting a run, following its events (a streaming RPC from any cursor: `Last-Event-ID` works from every
 * process), waiting for its end, cancelling it. The runners find each other through the database and talk over
 * sockets (`runner_host:runner_port`).
 *
 * The module imports @effect/sql-pg (an optional peer): the gateway loads it only when a cluster is configured.
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as Rpc from "@effect/rpc/Rpc"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ClusterConfig } from "../../../services/config/Server.js"
import type { RunRecord } from "../../../services/ThreadStore.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import * as TS from "../../../state/ThreadState.js"
import type { ThreadState } from "../../../state/ThreadState.js"
import { GatewayError } from "../api/Problem.js"
import type * as Protocol from "../Protocol.js"
import * as Runs from "../Runs.js"
import * as RunnerSocket from "./RunnerSocket.js"

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

const TERMINAL: ReadonlySet<string> = new Set(["success", "error", "cancelled", "interrupted"])

/** This runner's own run manager (the runs of the threads it owns). */
class LocalRuns extends Context.Tag("antler/gateway/cluster/LocalRuns")<LocalRuns, Runs.Service>() {}

const routed = (error: { readonly _tag: string; readonly message?: string }) =>
  error._tag === "GatewayError"
    ? (error as GatewayError)
    : new GatewayError({ reason: "internal", message: `cluster: ${error.message ?? error._tag}` })

const unknownRun = (runId: string) =>
  new GatewayError({ reason: "not_found", message: `Run ${runId} is not known to its thread's runner.` })

/** The entity's behaviour on the runner that owns the thread: its local run manager. */
const entityLayer = ThreadEntity.toLayer(
  Effect.gen(function*() {
    const local = yield* LocalRuns
    const store = yield* ThreadStore
    return ThreadEntity.of({
      Start: ({ payload }) =>
        Effect.map(local.start(payload.request as Runs.RunRequest), (run) => ({ runId: run.runId })),
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
        Effect.gen(function*() {
          const own = local.get(payload.runId)
          if (own !== undefined) return yield* Deferred.await(own.done)
          // not run here: the thread's shard moved while the run goes on elsewhere, or its runner died. Only when
          // no live process holds the thread (its lease, renewed while a run goes) is the run resumed here
          const request = payload.request as Runs.RunRequest
          for (;;) {
            const record = (yield* Effect.orElseSucceed(store.runs({ runId: payload.runId }), () => []))[0]
            if (record !== undefined && TERMINAL.has(record.status)) return record
            const probe = `resume-probe-${payload.runId}`
            const now = yield* Clock.currentTimeMillis
            const holder = yield* Effect.orElseSucceed(
              store.acquireLease({ threadId: request.threadId, runId: probe, ttlMs: 1, now }),
              () => ({ run_id: "unknown" })
            )
            if (holder === undefined) {
              yield* Effect.ignore(store.releaseLease(request.threadId, probe))
              break
            }
            yield* Effect.sleep("1 second")
          }
          yield* Effect.logWarning(`run ${payload.runId}: resumed here, its runner is gone`)
          const run = yield* local.resume(request, payload.runId)
          return yield* Deferred.await(run.done)
        })
    })
  }),
  // a run's stream, its end and a cancel are answered at once, whatever else the thread is asked
  { concurrency: "unbounded" }
)

/** The sharding of a runner: its address, PostgreSQL for its messages and the runners' registry. */
const shardingLayer = (config: ClusterConfig, url: Redacted.Redacted<string>) =>
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
      entityMessagePollInterval: Duration.seconds(1)
    }
  }).pipe(Layer.provide(PgClient.layer({ url })), Layer.orDie)

/** The run manager of a runner of a cluster: the `Runs` the gateway's handlers use, routing to each thread's owner. */
export const layer = (
  options: Runs.Options,
  config: ClusterConfig,
  url: Redacted.Redacted<string>
) => {
  const local = Layer.effect(LocalRuns, Runs.Runs).pipe(Layer.provide(Runs.layer(options)))
  const routing = Layer.scoped(
    Runs.Runs,
    Effect.gen(function*() {
      const localRuns = yield* LocalRuns
      const store = yield* ThreadStore
      const client = yield* ThreadEntity.client
      const scope = yield* Effect.scope
      const remote = new WeakSet<Runs.ActiveRun>()

      /** A run another runner executes, as this process follows it: its end arrives through `Done`. */
      const remoteRun = (info: typeof RunInfo.Type, runId: string): Effect.Effect<Runs.ActiveRun> =>
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
            // (its frames come from its runner: nothing is appended here)
            changes: () => 0,
            onChange: () => () => {},
            state: () => state
          }
          remote.add(run)
          yield* client(info.threadId).Done({ runId }).pipe(
            Effect.flatMap((answer) =>
              Effect.suspend(() => {
                state = answer.state as ThreadState
                finished = true
                return Deferred.succeed(done, answer.record as RunRecord)
              })
            ),
            Effect.catchAll((error) =>
              Effect.gen(function*() {
                yield* Effect.logWarning(`run ${runId}: its end could not be learned from its runner`, error)
                const record = (yield* Effect.orElseSucceed(store.runs({ runId }), () => []))[0]
                finished = true
                if (record !== undefined) yield* Deferred.succeed(done, record)
              })
            ),
            Effect.forkIn(scope)
          )
          return run
        })

      const lookup: Runs.Service["lookup"] = (threadId, runId) =>
        Effect.gen(function*() {
          const own = localRuns.get(runId)
          if (own !== undefined) return own
          const info = yield* Effect.mapError(client(threadId).Describe({ runId }), routed)
          return info === null || info.threadId !== threadId ? undefined : yield* remoteRun(info, runId)
        })

      const start: Runs.Service["start"] = (request) =>
        Effect.gen(function*() {
          const { runId } = yield* Effect.mapError(client(request.threadId).Start({ request }), routed)
          yield* client(request.threadId).Execute({ runId, request }, { discard: true }).pipe(
            Effect.catchAll((error) => Effect.logWarning(`run ${runId}: not made durable`, error))
          )
          const own = localRuns.get(runId)
          if (own !== undefined) return own
          return yield* remoteRun({
            threadId: request.threadId,
            publicThreadId: request.publicThreadId ?? request.threadId,
            userId: request.userId,
            modes: request.modes
          }, runId)
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

      const subscribe: Runs.Service["subscribe"] = (run, cursor, modes, onDisconnect) => {
        if (!remote.has(run)) return localRuns.subscribe(run, cursor, modes, onDisconnect)
        let complete = false
        const frames = client(run.threadId).Frames({ runId: run.runId, cursor }).pipe(
          Stream.tap((frame) => Effect.sync(() => (complete = frame.event === "end" || frame.event === "gap"))),
          Stream.catchAll((error) =>
            Stream.fromEffect(Effect.logWarning(`run ${run.runId}: its stream from its runner broke`, error)).pipe(
              Stream.drain
            )
          )
        )
        return Runs.sseOf(frames, modes, options.heartbeatSeconds).pipe(
          Stream.ensuring(Effect.suspend(() => (complete || onDisconnect === undefined ? Effect.void : onDisconnect)))
        )
      }

      return Runs.Runs.of({
        start,
        get: (runId) => localRuns.get(runId),
        lookup,
        activeOf: (threadId) => localRuns.activeOf(threadId),
        cancel,
        subscribe,
        resume: localRuns.resume,
        recover: localRuns.recover
      })
    })
  )
  return routing.pipe(
    Layer.provideMerge(entityLayer),
    Layer.provideMerge(local),
    Layer.provideMerge(shardingLayer(config, url))
  )
}
