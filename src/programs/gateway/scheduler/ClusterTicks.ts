/**
 * The scheduler's polls in a cluster (`gateway.cluster`): a singleton of the cluster's engine (@effect/cluster's
 * `Singleton`), so exactly one runner looks for due ticks and starts their runs, and when that runner dies (or
 * stops) the engine starts the poller on the runner that takes over the singleton's shard. Every runner registers
 * it; the one holding the shard's lock in PostgreSQL runs it.
 *
 * Not `ClusterCron`: a ClusterCron is one cron expression and one effect fixed when its layer is built (an entity
 * type of its own per cron), while scheduled tasks are made, changed, paused and deleted by users while the
 * gateway runs, each in its own time zone. The singleton runs the scheduler's due-check over the task table; each
 * tick is still claimed there (a compare-and-set on the task's next run time), so a runner that has not yet noticed
 * it lost the shard cannot run a tick a second time either.
 *
 * Loaded only with a cluster (it loads the engine).
 */
import * as Sharding from "@effect/cluster/Sharding"
import * as Singleton from "@effect/cluster/Singleton"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scheduler from "./Scheduler.js"

/** The singleton's name (its shard is the hash of it). */
export const SINGLETON = "antler/scheduled-tasks"

/**
 * The poller every `pollSeconds` as the cluster's singleton; none when `pollSeconds` is 0 (triggers only). The
 * engine (`Sharding`) is the one the cluster's run manager built below it in the gateway's layers: it is looked up
 * there, as the gateway's layer types do not follow that only a cluster's run manager makes one.
 */
export const layer = (pollSeconds: number): Layer.Layer<never, never, Scheduler.Scheduler> =>
  pollSeconds <= 0 ? Layer.empty : Layer.unwrapEffect(Effect.gen(function*() {
    const scheduler = yield* Scheduler.Scheduler
    const sharding = yield* Effect.serviceOption(Sharding.Sharding)
    if (Option.isNone(sharding)) {
      return yield* Effect.dieMessage("scheduled tasks: a cluster's scheduler needs the cluster's run manager below it")
    }
    return Singleton.make(SINGLETON, Scheduler.poll(scheduler.tick, pollSeconds)).pipe(
      Layer.provide(Layer.succeed(Sharding.Sharding, sharding.value))
    )
  }))
