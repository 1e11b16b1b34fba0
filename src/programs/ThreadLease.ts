/**
 * A run's lease on its thread (one active run a thread, across processes): how long it lasts unless renewed, its
 * taking or renewal, what a run is told when its thread is busy, or when it lost the lease or let it lapse, and a
 * run's checkpoint fenced by it.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { StoreError } from "../services/RunContext.js"
import type { Lost } from "../services/RunSettlement.js"
import { LAPSED } from "../services/RunSettlement.js"
import type { AppendOptions, LeaseHolder, ThreadStore } from "../services/ThreadStore.js"
import { LEASE_FENCED } from "../services/ThreadStore.js"
import type { StateUpdate } from "../state/ThreadState.js"

/** How long a run's lease on its thread lasts unless renewed (it is renewed every third of that). */
export const LEASE_TTL_MS = 30_000

/**
 * How long a run's lease on its thread lasts unless renewed, in ms, where it is taken and renewed (`LEASE_TTL_MS`; a
 * test's shorter): what a run stopped for its lapse or loss is told its life was.
 */
export class LeaseTtl extends Context.Reference<LeaseTtl>()("antler/ThreadLeaseTtl", {
  defaultValue: () => LEASE_TTL_MS
}) {}

/**
 * Takes, or renews, run `runId`'s lease on `threadId` for `ttlMs` (`LEASE_TTL_MS`): `undefined`, or who holds it
 * instead.
 */
export const takeLease = (store: ThreadStore["Type"], threadId: string, runId: string, ttlMs = LEASE_TTL_MS) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => store.acquireLease({ threadId, runId, ttlMs, now }))

/** A run refused because another run of the thread is active. */
export const busyMessage = (threadId: string, holder: LeaseHolder): string =>
  `Thread ${threadId} already has a run in progress (run ${holder.run_id}, process ${holder.owner}); ` +
  `wait for it to end or stop it, then try again.`

/**
 * A run stopped because another took its thread's lease (`lost`): not `busyMessage`, which asks the user to wait for
 * a run to end, since this run was already going when this process, stalled past the lease's life, lost the thread.
 * `ttlMs`: the lease's life where the run held it (`LeaseTtl`).
 */
export const lostMessage = (runId: string, lost: Lost, ttlMs: number): string =>
  lost === LAPSED
    ? `Run ${runId} was stopped: ${LAPSED_REASON} Its process had no answer from the store renewing the ` +
      `thread's lease within the lease's life (${ttlMs / 1000} s), so another process may have taken the ` +
      `thread. What the run did after its last saved step is not kept.`
    : `Run ${runId} was stopped: its thread was taken by run ${lost.run_id} (process ${lost.owner}) after this ` +
      `process had not renewed the thread's lease for longer than its life (${ttlMs / 1000} s). What the ` +
      `run did after its last saved step is not kept.`

/** What a run whose lease could not be confirmed is stopped with: DeerFlow's worker's words when it fences its run. */
export const LAPSED_REASON = "Lease ownership could not be confirmed before the last confirmed lease expired."

/** What a run that no longer owns its thread fails a checkpoint with (`lostMessage`), writing nothing. */
export const notOwnedError = (runId: string, lost: Lost, ttlMs: number): Effect.Effect<never, StoreError> =>
  Effect.fail(new StoreError({ operation: "lease", message: lostMessage(runId, lost, ttlMs) }))

const LEASED: AppendOptions = { leased: true }

/** Whether a store's refusal is an append's fence (`AppendOptions.leased`): its writer's lease was taken from it. */
export const isFenced = (error: StoreError): boolean => error.operation === LEASE_FENCED

/**
 * A write outside a run (a state update, a copy, a branch's seed, a compaction, a fork), refused by its fence
 * (`isFenced`): its writer stalled past its lease's life and another run took the thread meanwhile; `what` it wrote.
 */
export const takenWhile = (threadId: string, what: string): string =>
  `Thread ${threadId} was taken by another run while ${what} was being saved (its hold on the thread, the ` +
  `thread's lease, ran out first): it was not saved, and the other run's steps were kept. Try again once that ` +
  `run has ended.`

/**
 * A checkpoint of run `runId`, fenced by its lease in the store (`AppendOptions.leased`): the store refuses it once
 * another took the lease, also between the run's last look at its lease and this write. Refused, `confirm` says who
 * holds the lease now, and the run fails as on its loss (`notOwnedError`); the store's refusal when it does not say.
 */
export const appendLeased = (
  store: ThreadStore["Type"],
  threadId: string,
  runId: string,
  updates: ReadonlyArray<StateUpdate>,
  ttlMs: number,
  confirm: Effect.Effect<Lost | undefined>
): Effect.Effect<void, StoreError> =>
  Effect.catchIf(
    store.append(threadId, runId, updates, LEASED),
    (error) => error.operation === LEASE_FENCED,
    (error) =>
      Effect.flatMap(confirm, (lost) => lost === undefined ? Effect.fail(error) : notOwnedError(runId, lost, ttlMs))
  )
