/**
 * How a gateway run is stopped (see `Runs`): cancelled by a client (`interrupt`, or `rollback` to the state before
 * it), whether it runs here or waits in its thread's queue, or handed over to another process (a cluster's runner
 * draining). A run that already ended, or runs in another process, is refused with a reason.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type { ThreadStore } from "../../services/ThreadStore.js"
import { GatewayError } from "./api/Problem.js"
import * as Protocol from "./Protocol.js"
import type { CancelAction } from "./RunModel.js"
import { HANDOVER, internal } from "./RunModel.js"
import * as RunRecords from "./RunRecords.js"
import type { Registry } from "./RunRegistry.js"
import type { Starter } from "./RunStart.js"

/** How runs are stopped (see `Runs.Service.cancel` and `Runs.Service.handOver`). */
export interface Stopper {
  /** Stops a run; with `wait`, returns once it ended (and was rolled back). */
  readonly cancel: (runId: string, action: CancelAction, wait: boolean) => Effect.Effect<void, GatewayError>
  /** Stops a run of this process to hand it over to another; false when it is not running here. */
  readonly handOver: (runId: string) => Effect.Effect<boolean>
}

/** The stopper of a run manager. */
export const make = (
  store: ThreadStore["Type"],
  registry: Registry,
  queues: Starter["queues"]
): Stopper => {
  const { known, active, activeRun } = registry

  const cancel = (runId: string, action: CancelAction, wait: boolean): Effect.Effect<void, GatewayError> =>
    Effect.gen(function*() {
      const run = known.get(runId)
      // a queued run, not started: it ends now
      if (run !== undefined && (yield* queues.cancel(run.threadId, runId))) return
      if (run === undefined || run.finished() || active.get(run.threadId)?.runId !== runId) {
        const record = (yield* store.runs({ runId }).pipe(Effect.mapError(internal)))[0]
        if (record !== undefined && RunRecords.unfinished(record)) {
          return yield* new GatewayError({
            reason: "conflict",
            message: `Run ${runId} runs in another gateway process; cancel it there.`
          })
        }
        // cancelling a cancelled run again is done already (DeerFlow's cancel is idempotent: 202, not 409)
        if (record?.status === "cancelled") return
        return yield* new GatewayError({
          reason: "conflict",
          message: record === undefined
            ? `Run ${runId} is not running.`
            : `Run ${runId} is not cancellable (status: ${Protocol.runStatus(record)}).`
        })
      }
      yield* activeRun(runId)?.stop(action) ?? Effect.void
      if (wait) yield* Deferred.await(run.done)
    })

  const handOver = (runId: string): Effect.Effect<boolean> =>
    Effect.gen(function*() {
      const entry = activeRun(runId)
      if (entry === undefined) return false
      yield* entry.stop(HANDOVER)
      yield* Deferred.await(entry.done)
      return true
    })

  return { cancel, handOver }
}
