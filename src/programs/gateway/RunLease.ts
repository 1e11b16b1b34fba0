/**
 * A gateway run's lease on its thread, renewed by one fiber from the run's acceptance (`RunStart` takes it) until
 * its end is recorded (`RunExecution` releases it): while it waits for its place (`Admission`), through its turns
 * (which take and renew none: `RunSettlement`) and the checks after them. Renewed every third of its life
 * (`Run.LEASE_TTL_MS`), so no other process takes the thread, or resumes the run, meanwhile. Lost (another run took
 * the thread after this process stalled for longer than the lease lasts), it says to whom (`lost`): the run's
 * next checkpoint fails rather than write beside the other run.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type { LeaseHolder, ThreadStore } from "../../services/ThreadStore.js"
import * as Run from "../Run.js"

/** A lease held by its renewer. */
export interface Held {
  /** Who took the lease from the run (`undefined`: the run holds it). */
  readonly lost: () => LeaseHolder | undefined
  /** Stops renewing and gives the lease back (if the run still holds it). */
  readonly release: Effect.Effect<void>
}

/**
 * Renews run `runId`'s lease on `threadId`, which the run holds now, until `release` (or the scope's end, which
 * stops the renewing and leaves the lease to expire: the run's manager then settles and releases it).
 */
export const hold = (
  store: ThreadStore["Type"],
  threadId: string,
  runId: string
): Effect.Effect<Held, never, Scope.Scope> =>
  Effect.gen(function*() {
    let lost: LeaseHolder | undefined
    const renewer = yield* Effect.forkScoped(Run.takeLease(store, threadId, runId).pipe(
      Effect.tap((holder) =>
        holder === undefined || lost !== undefined ? Effect.void : Effect.zipRight(
          Effect.sync(() => (lost = holder)),
          Effect.logWarning(`run ${runId}: its thread's lease was taken by run ${holder.run_id} (process ` +
            `${holder.owner})`)
        )
      ),
      Effect.catchAll((error) => Effect.logWarning(`run ${runId}: cannot renew its thread's lease: ${error.message}`)),
      Effect.delay(Run.LEASE_TTL_MS / 3),
      Effect.forever
    ))
    return {
      lost: () => lost,
      release: Effect.zipRight(Fiber.interrupt(renewer), Effect.ignore(store.releaseLease(threadId, runId)))
    }
  })
