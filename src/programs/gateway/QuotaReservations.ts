/**
 * Where a gateway's runs, and its other writes that add to threads (state updates, copies, branches, threads made
 * with metadata), reserve what they are to add against the storage quotas (`StorageQuota`), so that those of one
 * user admitted together are each admitted against what the others will add. An admission checks the counters and
 * the reservations and, admitted, reserves, at once: in the process (`inProcess`, one process: SQLite or the
 * in-memory store, one admission at a time) or in the PostgreSQL database processes share (`PgQuotaReservations`: a
 * row per run or write, counted by every process's admissions, live while its lease is). What a run or write then
 * keeps in its thread turns its reserved bytes into kept ones, as it is written (`drain`; on PostgreSQL in the
 * write's own transaction), so that a run's first step is not counted twice while the run goes. A configuration's:
 * `store/QuotaWiring`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { StoreError } from "../../services/RunContext.js"
import type { ThreadStore } from "../../services/ThreadStore.js"
import * as InputBounds from "./InputBounds.js"
import type { QuotaExceeded } from "./Quotas.js"
import * as StorageQuota from "./StorageQuota.js"

/** A run's (or a write's) admission against the storage quotas. */
export interface Admission {
  readonly userId: string
  readonly threadId: string
  /** The run's id, or the write's (its lease's holder: a writer id). */
  readonly runId: string
  /**
   * What the run adds at once, in bytes (its first step, its record's input: `StorageQuota.firstStepBytes`), or what
   * the write adds: checked, and reserved.
   */
  readonly adding: number
  /** Of those, what stays reserved once its record is kept (its first step): drained by what it keeps. */
  readonly pending: number
}

/** What an admitted run reserved. */
export interface Reservation {
  /** Its record is kept (with its input): at most its `pending` bytes stay reserved. */
  readonly recorded: Effect.Effect<void>
  /** Frees what it reserved (once). */
  readonly free: Effect.Effect<void>
  /**
   * `updates` (a checkpoint) were kept in its thread under another run's id than its own (a copy's or a branch's
   * checkpoints, under the runs they copy): what it reserved is freed by their bytes, as its own writes' are
   * (`drain`; on PostgreSQL a statement after the write's, so an admission in between counts them twice: sooner).
   */
  readonly kept: (updates: unknown) => Effect.Effect<void>
}

/** Nothing reserved. */
export const NONE: Reservation = { recorded: Effect.void, free: Effect.void, kept: () => Effect.void }

/** The service. */
export interface Service {
  /**
   * Admits the run (else fails with the `QuotaExceeded` of the first limit it would pass, counting what the runs
   * admitted before it reserved) and reserves its `adding` bytes, then its `pending` ones once it is recorded.
   */
  readonly admit: (
    store: ThreadStore["Type"],
    limits: StorageQuota.Limits,
    admission: Admission
  ) => Effect.Effect<Reservation, QuotaExceeded | StoreError>
  /**
   * The write of `updates` (a checkpoint) by the run or writer `holder` to `threadId` was kept: what it reserved there
   * is freed by their bytes (the gateway's store calls it as each write returns: `StorageQuota.bounded`; PostgreSQL's
   * reservations are drained by the write's own transaction, this does nothing).
   */
  readonly drain: (threadId: string, holder: string, updates: unknown) => Effect.Effect<void>
}

/** The port. */
export class QuotaReservations extends Context.Tag("antler/gateway/QuotaReservations")<
  QuotaReservations,
  Service
>() {}

/**
 * Reservations in this process's memory, for one process: its admissions one at a time (a lock of their own, so that
 * the runs the run manager admits and the other writes its handlers admit are each checked against the others').
 */
export const inProcess = (): Service => {
  const reservations = StorageQuota.makeReservations()
  const lock = Effect.unsafeMakeSemaphore(1)
  return {
    admit: (store, limits, { userId, threadId, runId, adding, pending }) =>
      lock.withPermits(1)(Effect.gen(function*() {
        yield* StorageQuota.admit(store, limits, userId, threadId, adding, reservations.of(userId, threadId))
        if (adding <= 0 || !StorageQuota.limited(limits)) return NONE
        yield* reservations.reserve(runId, userId, threadId, adding)
        return {
          recorded: reservations.lower(runId, pending),
          free: reservations.free(runId),
          kept: (updates) => Effect.suspend(() => reservations.drain(runId, threadId, InputBounds.jsonBytes(updates)))
        }
      })),
    // (measured only for a holder that holds bytes there: a run's first steps, a write; not every checkpoint)
    drain: (threadId, holder, updates) =>
      Effect.suspend(() =>
        reservations.holds(holder, threadId)
          ? reservations.drain(holder, threadId, InputBounds.jsonBytes(updates))
          : Effect.void
      )
  }
}
