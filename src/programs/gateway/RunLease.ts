/**
 * The gateway runs' leases on their threads, renewed by one fiber for all the runs of a process (`make`): each run's
 * lease from its acceptance (`RunStart` takes it) until its end is recorded (`RunExecution` releases it), while it
 * waits for its place (`Admission`), through its turns (which take and renew none: `RunSettlement`) and the checks
 * after them. Every lease held is renewed every third of its life (`LeaseTtl`), so no other process takes the
 * thread, or resumes the run, meanwhile. Lost (another process took the thread, or resumed the run, after this one
 * stalled for longer than the lease lasts), it says to whom (`lost`) and tells the run at once (`hold`'s `onLost`,
 * in the renewer's fiber: the run stops there, before it runs another tool beside the thread's new owner), and the
 * lease is no longer given back (it is the new owner's).
 * A renewal that gets no answer within a sixth of the lease's life is given up with a warning, and the others go on.
 * A lease whose life, from its last renewal that succeeded, ran out without another (the store did not answer) is
 * fenced as DeerFlow's worker fences its run: `lost` says `LAPSED` from that moment, the run is told at once (one
 * fiber watches the leases' ends), and the lease is renewed no more; the run, stopped, may take it back once to
 * record its end (`reclaim`); the store still silent then, its end is recorded once the store answers again
 * (`recordLate`).
 * (One renewer, not one fiber a run: a run's lease is an entry in a set, a few dozen bytes, where a fiber asleep
 * between its renewals kept about 10 KB.)
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { Lost } from "../../services/RunSettlement.js"
import { LAPSED } from "../../services/RunSettlement.js"
import type { StoreError } from "../../services/RunContext.js"
import type { LeaseHolder, ThreadStore } from "../../services/ThreadStore.js"
import * as Run from "../Run.js"
import { LeaseTtl } from "../ThreadLease.js"

/** How long a run's lease on its thread lasts unless renewed, in ms (`Run.LEASE_TTL_MS`; a test's shorter). */
export { LeaseTtl } from "../ThreadLease.js"

/** A lease held by the renewer. */
export interface Held {
  /**
   * Who took the lease from the run, or `LAPSED` once its life ran out unrenewed (read on the clock: also before the
   * watcher told the run); `undefined`: the run holds it.
   */
  readonly lost: () => Lost | undefined
  /**
   * A lapsed lease taken back once, by the stopped run, to record its end as the thread's owner: `undefined` (the run
   * holds it again, until `release`), who holds it instead, or `LAPSED` (no answer within a lease's life).
   */
  readonly reclaim: Effect.Effect<Lost | undefined>
  /**
   * Renews the lease now (a checkpoint of the run's, fenced by it, was refused by the store), then says as `lost`:
   * found taken, the run is told (`hold`'s `onLost`) as at a renewal's round.
   */
  readonly confirm: Effect.Effect<Lost | undefined>
  /** Stops renewing and gives the lease back (if the run still holds it: not once it was found lost or lapsed). */
  readonly release: Effect.Effect<void>
  /**
   * For a run that ended without taking its lapsed lease back (`reclaim` answered `LAPSED`: the store was silent),
   * its end recorded once the store answers again: every third of the lease's life, until the process stops, the
   * lease is asked for again; answered, `record` runs (the lease taken back, or the thread another run's, whose
   * record that run does not write) and the lease is given back. Not run when another process resumed the run (it
   * holds the run's own lease: it records it). In the renewer's fiber scope, not the run's: at once.
   */
  readonly recordLate: (record: Effect.Effect<void, StoreError>) => Effect.Effect<void>
}

/** The renewer of a process's run leases. */
export interface Leases {
  /** How long a lease lasts unless renewed (`LeaseTtl`), in milliseconds: what the run takes at its acceptance. */
  readonly ttlMs: number
  /**
   * Renews run `runId`'s lease on `threadId`, which the run holds now, until `release` (or the scope's end, which
   * stops the renewing and leaves the lease to expire: the run's manager then settles and releases it). `onLost`
   * is run once, by the renewer when a renewal finds the lease taken, or by its watcher when the lease's life ran
   * out unrenewed (it must not wait: the renewals of the process's other runs wait for it).
   */
  readonly hold: (
    threadId: string,
    runId: string,
    onLost?: (lost: Lost) => Effect.Effect<void>
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
  readonly onLost: ((lost: Lost) => Effect.Effect<void>) | undefined
  lost: LeaseHolder | undefined
  /** When the lease ends, as its last take or renewal that succeeded set it (the store's `expires_at`). */
  confirmed: number
  /** Its life ran out unrenewed: renewed no more (`LAPSED`). */
  fenced: boolean
  /** Taken back by `reclaim`: given back by `release`. */
  reclaimed: boolean
}

/**
 * The renewer of the leases of `store`, one fiber in the scope: every third of a lease's life it renews, one after
 * the other, the leases held then. A renewal and a lease's end (released, or left) never overlap: a lease let go is
 * never taken again by a renewal already under way. A second fiber fences the leases whose life ran out unrenewed.
 */
export const make = (store: ThreadStore["Type"]): Effect.Effect<Leases, never, Scope.Scope> =>
  Effect.gen(function*() {
    const ttlMs = yield* LeaseTtl
    const timeoutMs = ttlMs / 6
    const clock = yield* Effect.clock
    const scope = yield* Effect.scope
    const held = new Set<Entry>()
    const renewing = yield* Effect.makeSemaphore(1)
    const renew = (entry: Entry) =>
      renewing.withPermits(1)(Effect.suspend(() => {
        if (!held.has(entry)) return Effect.void
        const { threadId, runId } = entry
        // (the lease the store keeps ends a life after the time asked for, whenever the answer comes)
        const now = clock.unsafeCurrentTimeMillis()
        return store.acquireLease({ threadId, runId, ttlMs, now }).pipe(
          Effect.tap((holder) => {
            if (holder === undefined) {
              if (!entry.fenced) entry.confirmed = Math.max(entry.confirmed, now + ttlMs)
              return Effect.void
            }
            return entry.lost !== undefined ? Effect.void : Effect.zipRight(
              Effect.sync(() => (entry.lost = holder)),
              Effect.zipRight(
                Effect.logWarning(`run ${runId}: its thread's lease was taken by run ${holder.run_id} (process ` +
                  `${holder.owner})${entry.onLost === undefined || entry.fenced ? "" : "; the run is stopped"}`),
                entry.onLost === undefined || entry.fenced ? Effect.void : entry.onLost(holder)
              )
            )
          }),
          Effect.catchAll((error) =>
            Effect.logWarning(`run ${runId}: cannot renew its thread's lease: ${error.message}`)
          ),
          // (a store that does not answer, a stalled PostgreSQL connection, holds up this lease's renewal only; its
          // call is interrupted in the background, its cancelling possibly as stalled)
          Effect.disconnect,
          Effect.timeout(timeoutMs),
          Effect.catchAll(() =>
            Effect.logWarning(`run ${runId}: renewing its thread's lease got no answer within ` +
              `${timeoutMs / 1000} s; the other leases are renewed, this one tried again in ` +
              `${ttlMs / 3000} s`)
          )
        )
      }))
    // (the leases held when the tick comes: one accepted after it waits for the next, under a third of a life)
    yield* Effect.suspend(() => Effect.forEach([...held], renew, { discard: true })).pipe(
      Effect.delay(ttlMs / 3),
      Effect.forever,
      Effect.forkScoped
    )
    // the fence: a lease whose life ran out with no renewal that succeeded is the run's no more, whoever holds it
    // now (the store did not say): the run is told at once, as DeerFlow's worker cancels its run, and the lease is
    // renewed no more (a renewal under way that lands later changes nothing: the run stays fenced)
    const fence = (entry: Entry) =>
      Effect.suspend(() => {
        entry.fenced = true
        held.delete(entry)
        return Effect.zipRight(
          Effect.logError(`run ${entry.runId}: ${Run.LAPSED_REASON} Its lease on thread ${entry.threadId} was last ` +
            `renewed more than ${ttlMs / 1000} s ago, with no answer from the store since; the run is stopped`),
          entry.onLost === undefined || entry.lost !== undefined ? Effect.void : entry.onLost(LAPSED)
        )
      })
    // (one fiber for every lease: it wakes when the first of them ends, unless renewed meanwhile; a lease taken
    // later ends later, so none ends before it wakes)
    yield* Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      let first = now + ttlMs
      for (const entry of held) first = Math.min(first, entry.confirmed)
      return Effect.sleep(Math.max(0, first - now))
    }).pipe(
      Effect.zipRight(Effect.suspend(() => {
        const now = clock.unsafeCurrentTimeMillis()
        return Effect.forEach([...held].filter((entry) => entry.confirmed <= now), fence, { discard: true })
      })),
      Effect.forever,
      Effect.forkScoped
    )
    // a lease let go: out of the set, and after any renewal under way
    const letGo = (entry: Entry) =>
      Effect.zipRight(Effect.sync(() => held.delete(entry)), renewing.withPermits(1)(Effect.void))
    const lostOf = (entry: Entry): Lost | undefined =>
      entry.lost ?? (entry.fenced || clock.unsafeCurrentTimeMillis() >= entry.confirmed ? LAPSED : undefined)
    // (a run's end recorded once the store answers again: `Held.recordLate`)
    const recordLate = (threadId: string, runId: string, record: Effect.Effect<void, StoreError>) => {
      const attempt = Effect.gen(function*() {
        const now = clock.unsafeCurrentTimeMillis()
        const holder = yield* store.acquireLease({ threadId, runId, ttlMs, now }).pipe(
          Effect.disconnect,
          Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => "no answer" as const })
        )
        if (holder?.run_id === runId) {
          return yield* Effect.as(
            Effect.logWarning(`run ${runId}: resumed by process ${holder.owner}, which records its end`),
            true
          )
        }
        yield* Effect.ensuring(
          record,
          holder === undefined ? Effect.ignore(store.releaseLease(threadId, runId)) : Effect.void
        )
        yield* Effect.logInfo(`run ${runId}: its end recorded, the store answering again`)
        return true
      })
      return attempt.pipe(
        Effect.orElseSucceed(() => false),
        Effect.delay(ttlMs / 3),
        Effect.repeat({ until: (done) => done }),
        Effect.forkIn(scope),
        Effect.asVoid
      )
    }
    const hold: Leases["hold"] = (threadId, runId, onLost) =>
      Effect.gen(function*() {
        const entry: Entry = {
          threadId,
          runId,
          onLost,
          lost: undefined,
          // (taken by the run's acceptance, just before)
          confirmed: clock.unsafeCurrentTimeMillis() + ttlMs,
          fenced: false,
          reclaimed: false
        }
        held.add(entry)
        yield* Effect.addFinalizer(() => letGo(entry))
        return {
          lost: () => lostOf(entry),
          confirm: Effect.zipRight(renew(entry), Effect.sync(() => lostOf(entry))),
          reclaim: Effect.gen(function*() {
            if (lostOf(entry) !== LAPSED) return lostOf(entry)
            entry.fenced = true
            yield* letGo(entry)
            const now = clock.unsafeCurrentTimeMillis()
            const holder: Lost | undefined = yield* store.acquireLease({ threadId, runId, ttlMs, now }).pipe(
              Effect.disconnect,
              Effect.timeout(ttlMs),
              Effect.catchAll((error): Effect.Effect<Lost> =>
                Effect.as(
                  Effect.logWarning(`run ${runId}: its lapsed lease could not be taken back to record its end: ` +
                    ("message" in error ? error.message : `no answer within ${ttlMs / 1000} s`)),
                  LAPSED
                )
              )
            )
            if (holder === undefined) entry.reclaimed = true
            else if (holder !== LAPSED) entry.lost = holder
            return holder
          }),
          recordLate: (record) => recordLate(threadId, runId, record),
          // (a lease found lost is another's: the same run's, resumed elsewhere, is released by its run id too; a
          // lapsed one is given back only once taken back)
          release: Effect.zipRight(
            letGo(entry),
            Effect.suspend(() =>
              entry.lost === undefined && (!entry.fenced || entry.reclaimed)
                ? Effect.ignore(store.releaseLease(threadId, runId))
                : Effect.void
            )
          )
        }
      })
    return { ttlMs, hold }
  })
