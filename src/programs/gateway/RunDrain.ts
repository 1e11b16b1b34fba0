/**
 * The stop of a run manager whose runs another process resumes (`Options.resumable`: a cluster's runner stopping, see
 * `cluster/ClusterRuns`): the runs it executes go on for the drain period, counted from when the stop began
 * (`begin`), and those still going then are handed over (`Runs.Service.handOver`): each stopped at its last completed
 * step, left `running` with its thread's lease released, for the thread's next runner to resume under its id (one
 * whose last turn had ended settles here as that turn ended it, see `RunExecution`). Without it, the server's fibers
 * closing with the manager would end them `cancelled` with no client's stop, as a process without a cluster does; so
 * did a run that no durable message waited on in the runner's entity when its shard closed (the runner stopped just
 * after the run's `Start`, before its `Execute` arrived), and it was never resumed.
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Entry } from "./RunModel.js"

/** A manager's drain. */
export interface Drain {
  /** Begins the drain (once; later calls change nothing): the drain period is counted from now. */
  readonly begin: Effect.Effect<void>
  /** Begins the drain if it was not, and returns once every run here ended or was handed over. */
  readonly finish: Effect.Effect<void>
}

/** Rounds of handing over at most: a run started here as another was handed over (a queued one) is handed over too. */
const ROUNDS = 100

/**
 * The drain of the runs `running` gives (each thread's active run here), `seconds` long, handing over with
 * `handOver` (false when the run is not running here any more).
 */
export const make = (
  seconds: number,
  running: () => ReadonlyArray<Entry>,
  handOver: (runId: string) => Effect.Effect<boolean>
): Effect.Effect<Drain> =>
  Effect.gen(function*() {
    const drained = yield* Deferred.make<void>()
    // (when the drain period ends: set as it begins)
    const deadline = yield* Deferred.make<number>()
    const drain = Effect.gen(function*() {
      const until = yield* Deferred.await(deadline)
      for (let round = 0; round < ROUNDS; round++) {
        const runs = running()
        if (runs.length === 0) return
        yield* Effect.forEach(runs, (run) =>
          Effect.gen(function*() {
            const left = until - (yield* Clock.currentTimeMillis)
            yield* Effect.timeoutOption(Deferred.await(run.done), Duration.millis(Math.max(0, left)))
            if (yield* handOver(run.runId)) {
              yield* Effect.logWarning(`run ${run.runId}: handed over to the thread's next runner (this one stops)`)
            }
          }), { concurrency: "unbounded", discard: true })
      }
    })
    // (a daemon: the manager's scope closing does not interrupt it before `finish` awaited it; interruptible, though
    // begun by a finalizer, so that a run's drain period can run out)
    const begin = Effect.gen(function*() {
      const at = (yield* Clock.currentTimeMillis) + Duration.toMillis(Duration.seconds(seconds))
      if (!(yield* Deferred.succeed(deadline, at))) return
      yield* Effect.forkDaemon(Effect.ensuring(Effect.interruptible(drain), Deferred.succeed(drained, undefined)))
    })
    // (and once more for a run that started here after the drain found none: its `Start` came as the runner stopped)
    const finish = Effect.zipRight(begin, Deferred.await(drained)).pipe(Effect.zipRight(Effect.interruptible(drain)))
    return { begin, finish }
  })
