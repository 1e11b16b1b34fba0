/**
 * Where a gateway's runs reserve what they are to add against the storage quotas (`StorageQuota`): a run's messages,
 * kept with its first step, reserved from its admission until it ended, so that runs of one user started together
 * are each admitted against what the others will add. An admission checks the counters and the reservations and,
 * admitted, reserves, at once: in the process (`inProcess`, one process: SQLite or the in-memory store, the check
 * and the reservation under the run manager's lock) or in the PostgreSQL database processes share
 * (`PgQuotaReservations`: a row per run, counted by every process's admissions, live while the run's lease is). A
 * configuration's: `store/QuotaWiring`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { StoreError } from "../../services/RunContext.js"
import type { ThreadStore } from "../../services/ThreadStore.js"
import type { QuotaExceeded } from "./Quotas.js"
import * as StorageQuota from "./StorageQuota.js"

/** A run's admission against the storage quotas. */
export interface Admission {
  readonly userId: string
  readonly threadId: string
  readonly runId: string
  /** What the run adds at once, in bytes (its messages, its record's input): checked, and reserved until recorded. */
  readonly adding: number
  /** Of those, what stays reserved once its record is kept, until the run ended (its messages). */
  readonly pending: number
}

/** What an admitted run reserved. */
export interface Reservation {
  /** Its record is kept (with its input): only its `pending` bytes stay reserved. */
  readonly recorded: Effect.Effect<void>
  /** Frees what it reserved (once). */
  readonly free: Effect.Effect<void>
}

/** Nothing reserved. */
export const NONE: Reservation = { recorded: Effect.void, free: Effect.void }

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
  const reserve = (userId: string, threadId: string, bytes: number) =>
    bytes === 0 ? Effect.succeed(Effect.void) : reservations.reserve(userId, threadId, bytes)
  return {
    admit: (store, limits, { userId, threadId, adding, pending }) =>
      lock.withPermits(1)(Effect.gen(function*() {
        yield* StorageQuota.admit(store, limits, userId, threadId, adding, reservations.of(userId, threadId))
        const recorded = yield* reserve(userId, threadId, adding - pending)
        const kept = yield* reserve(userId, threadId, pending)
        return { recorded, free: Effect.zipRight(recorded, kept) }
      }))
  }
}
