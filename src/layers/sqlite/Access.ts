/**
 * How the SQLite store uses its one connection: a fiber's statements (or transaction) run alone on it, under the
 * store's lock, and a statement that another process's write lock refuses is retried after a short sleep, up to
 * `busyTimeout`. SQLite's own busy wait would block the event loop, and with it every other run of the process.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { StoreError } from "../../services/RunContext.js"
import { toStoreError } from "../store/Rows.js"
import * as SqliteConnection from "./SqliteConnection.js"

/** Whether SQLite refused a statement because another connection holds the lock it needs. */
export const isBusy = (error: SqlError | StoreError): boolean => {
  if (error._tag !== "SqlError") return false
  const code = (error.cause as { readonly code?: unknown } | undefined)?.code
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

/** The store's access to its connection. */
export interface Access {
  /** The store's one connection: a fiber's statements (or transaction) run alone on it. */
  readonly lock: SqliteConnection.Lock
  /** Runs `body` alone on the connection: no other fiber of this store can put a statement in between. */
  readonly exclusive: <A>(
    body: Effect.Effect<A, SqlError | StoreError>,
    operation: string,
    what: string
  ) => Effect.Effect<A, StoreError>
  /** `body` in a transaction: `BEGIN IMMEDIATE` (the default) takes the write lock first: a writer never deadlocks. */
  readonly transaction: <A>(
    body: Effect.Effect<A, SqlError | StoreError>,
    operation: string,
    what: string,
    begin?: string
  ) => Effect.Effect<A, StoreError>
}

/** The access of a store to `conn`, waiting up to `busyTimeout` milliseconds for another process's lock. */
export const make = (conn: SqliteConnection.Connection, busyTimeout: number): Access => {
  const lock = SqliteConnection.makeLock()
  // While another connection holds the lock: retry after 2, 4, 8... ms (at most 100), up to `busyTimeout`.
  const whileBusy = Schedule.exponential("2 millis").pipe(
    Schedule.union(Schedule.spaced("100 millis")),
    Schedule.upTo(Duration.millis(busyTimeout)),
    Schedule.whileInput(isBusy)
  )

  // Waiting for another connection is real time, whatever clock the caller runs on (a test's TestClock).
  const wallClock = Clock.make()

  /**
   * Retries an attempt that `first` refused while the file stays busy. The refusal is replayed as the
   * schedule's first failure, so the waits are the schedule's; an attempt that succeeds at once (the usual
   * case) never sets a schedule up.
   */
  const retryBusy = <A>(attempt: Effect.Effect<A, SqlError | StoreError>, first: SqlError | StoreError) =>
    Effect.suspend(() => {
      let replayed = false
      const again = Effect.suspend(() => replayed ? attempt : ((replayed = true), Effect.fail(first)))
      return Effect.retry(again, whileBusy)
    }).pipe(Effect.withClock(wallClock))

  const exclusive = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) => {
    const attempt = lock.exclusively(body)
    return attempt.pipe(
      Effect.catchIf(isBusy, (first) => retryBusy(attempt, first)),
      Effect.mapError(toStoreError(operation, what))
    )
  }

  const transaction = <A>(
    body: Effect.Effect<A, SqlError | StoreError>,
    operation: string,
    what: string,
    begin = "BEGIN IMMEDIATE"
  ) =>
    exclusive(
      conn.executeRaw(begin, []).pipe(
        Effect.zipRight(body),
        Effect.tap(conn.executeRaw("COMMIT", [])),
        Effect.tapError(() => Effect.ignore(conn.executeRaw("ROLLBACK", [])))
      ),
      operation,
      what
    )

  return { lock, exclusive, transaction }
}
