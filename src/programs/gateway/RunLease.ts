/**
 * The gateway runs' leases on their threads, renewed by one fiber for all the runs of a process (`make`): each run's
 * lease from its acceptance (`RunStart` takes it) until its end is recorded (`RunExecution` releases it), while it
 * waits for its place (`Admission`), through its turns (which take and renew none: `RunSettlement`) and the checks
 * after them. Every lease held is renewed every third of its life (`Run.LEASE_TTL_MS`), so no other process takes the
 * thread, or resumes the run, meanwhile. Lost (another process took the thread, or resumed the run, after this one
 * stalled for longer than the lease lasts), it says to whom (`lost`) and tells the run at once (`hold`'s `onLost`,
 * in the renewer's fiber: the run stops there, before it runs another tool beside the thread's new owner), and the
 * lease is no longer given back (it is the new owner's).
 * A renewal that gets no answer within `RENEWAL_TIMEOUT_MS` is given up with a warning, and the others go on.
 * (One renewer, not one fiber a run: a run's lease is an entry in a set, a few dozen bytes, where a fiber asleep
 * between its renewals kept about 10 KB.)
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { LeaseHolder, ThreadStore } from "../../services/ThreadStore.js"
import * as Run from "../Run.js"

/** A lease held by the renewer. */
export interface Held {
  /** Who took the lease from the run (`undefined`: the run holds it). */
  readonly lost: () => LeaseHolder | undefined
  /** Stops renewing and gives the lease back (if the run still holds it: not once it was found lost). */
  readonly release: Effect.Effect<void>
}

/** The renewer of a process's run leases. */
export interface Leases {
  /**
   * Renews run `runId`'s lease on `threadId`, which the run holds now, until `release` (or the scope's end, which
   * stops the renewing and leaves the lease to expire: the run's manager then settles and releases it). `onLost`
   * is run once, by the renewer, when a renewal finds the lease taken (it must not wait: the renewals of the
   * process's other runs wait for it).
   */
  readonly hold: (
    threadId: string,
    runId: string,
    onLost?: (holder: LeaseHolder) => Effect.Effect<void>
  ) => Effect.Effect<Held, never, Scope.Scope>
}

/**
 * How long one lease's renewal may take: a sixth of the lease's life, so that one store call that hangs delays the
 * others' renewals (one after the other) by that, well within the two thirds of a life a renewed lease has left.
 */
export const RENEWAL_TIMEOUT_MS = Run.LEASE_TTL_MS / 6

interface Entry {
  readonly threadId: string
  readonly runId: string
  readonly onLost: ((holder: LeaseHolder) => Effect.Effect<void>) | undefined
  lost: LeaseHolder | undefined
}

/**
 * The renewer of the leases of `store`, one fiber in the scope: every third of a lease's life it renews, one after
 * the other, the leases held then. A renewal and a lease's end (released, or left) never overlap: a lease let go is
 * never taken again by a renewal already under way.
 */
export const make = (store: ThreadStore["Type"]): Effect.Effect<Leases, never, Scope.Scope> =>
  Effect.gen(function*() {
    const held = new Set<Entry>()
    const renewing = yield* Effect.makeSemaphore(1)
    const renew = (entry: Entry) =>
      renewing.withPermits(1)(Effect.suspend(() => {
        if (!held.has(entry)) return Effect.void
        const { threadId, runId } = entry
        return Run.takeLease(store, threadId, runId).pipe(
          Effect.tap((holder) =>
            holder === undefined || entry.lost !== undefined ? Effect.void : Effect.zipRight(
              Effect.sync(() => (entry.lost = holder)),
              Effect.zipRight(
                Effect.logWarning(`run ${runId}: its thread's lease was taken by run ${holder.run_id} (process ` +
                  `${holder.owner})${entry.onLost === undefined ? "" : "; the run is stopped"}`),
                entry.onLost === undefined ? Effect.void : entry.onLost(holder)
              )
            )
          ),
          Effect.catchAll((error) =>
            Effect.logWarning(`run ${runId}: cannot renew its thread's lease: ${error.message}`)
          ),
          // (a store that does not answer, a stalled PostgreSQL connection, holds up this lease's renewal only; its
          // call is interrupted in the background, its cancelling possibly as stalled)
          Effect.disconnect,
          Effect.timeout(RENEWAL_TIMEOUT_MS),
          Effect.catchAll(() =>
            Effect.logWarning(`run ${runId}: renewing its thread's lease got no answer within ` +
              `${RENEWAL_TIMEOUT_MS / 1000} s; the other leases are renewed, this one tried again in ` +
              `${Run.LEASE_TTL_MS / 3000} s`)
          )
        )
      }))
    // (the leases held when the tick comes: one accepted after it waits for the next, under a third of a life)
    yield* Effect.suspend(() => Effect.forEach([...held], renew, { discard: true })).pipe(
      Effect.delay(Run.LEASE_TTL_MS / 3),
      Effect.forever,
      Effect.forkScoped
    )
    // a lease let go: out of the set, and after any renewal under way
    const letGo = (entry: Entry) =>
      Effect.zipRight(Effect.sync(() => held.delete(entry)), renewing.withPermits(1)(Effect.void))
    const hold: Leases["hold"] = (threadId, runId, onLost) =>
      Effect.gen(function*() {
        const entry: Entry = { threadId, runId, onLost, lost: undefined }
        held.add(entry)
        yield* Effect.addFinalizer(() => letGo(entry))
        return {
          lost: () => entry.lost,
          // (a lease found lost is another's: the same run's, resumed elsewhere, is released by its run id too)
          release: Effect.zipRight(
            letGo(entry),
            Effect.suspend(() =>
              entry.lost === undefined ? Effect.ignore(store.releaseLease(threadId, runId)) : Effect.void
            )
          )
        }
      })
    return { hold }
  })
