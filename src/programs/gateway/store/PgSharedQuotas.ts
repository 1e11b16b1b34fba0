/**
 * The per-user quotas on threads and files shared by the gateway processes of one PostgreSQL database
 * (`SharedQuotas`). A thread's count and its making hold an advisory lock of the user's until the transaction that
 * took it ends, after the thread is made (its insert, on the thread store's pool, committed before the lock is let
 * go): the next process's count sees it. An upload's (a copy's, a branch's) files are reserved in
 * `antler_file_reservations` (a row: its owner, its bytes, when it lapses) by a transaction that takes the user's
 * files lock, reads the user's live reservations, then has the files measured (`check`) and inserts its row only when
 * they fit; the row is renewed while the request writes, deleted once the files are written or failed, and lapses
 * `TTL_MS` after its last renewal when its process died first (forgotten at the user's next check). Loaded only
 * when PostgreSQL is configured (`@effect/sql-pg` is an optional peer).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as PgPool from "../../../layers/store/PgPool.js"
import { decodeRows, toStoreError } from "../../../layers/store/Rows.js"
import type { StoreError } from "../../../services/RunContext.js"
import * as SharedQuotas from "../SharedQuotas.js"

// Arbitrary constants: the advisory lock that serialises making the table, and the classes of the users' locks.
const MIGRATION_LOCK = 7_246_114_342
const THREAD_LOCKS = 72_461_144
const FILE_LOCKS = 72_461_145

/**
 * How long a reservation of files lives past its last renewal, in milliseconds: renewed every third of it while its
 * request writes (`ReservationTtl`), it holds the bytes of a process that died while writing no longer than this.
 */
export const TTL_MS = 10 * 60_000

/** The life of a reservation of files (`TTL_MS`; a test's shorter). */
export class ReservationTtl extends Context.Reference<ReservationTtl>()("antler/gateway/FileReservationTtl", {
  defaultValue: () => TTL_MS
}) {}

/** The table (`IF NOT EXISTS`: run by every process that opens it). */
export const MIGRATIONS: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS antler_file_reservations (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  )`,
  `CREATE INDEX IF NOT EXISTS antler_file_reservations_by_owner ON antler_file_reservations (owner)`
]

// the driver gives a BIGINT as text
const ReservedRows = Schema.Tuple(Schema.Struct({ reserved: Schema.Union(Schema.Number, Schema.NumberFromString) }))
const decodeReservedRows = Schema.decodeUnknownEither(ReservedRows)

/**
 * `effect` without the transaction it runs in: the other stores' statements (another pool, on the same database)
 * keep to their own connections and commit as they would without it.
 */
const outside = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.mapInputContext(
    effect,
    (context: Context.Context<R>) => Context.omit(SqlClient.TransactionConnection)(context) as Context.Context<R>
  )

/** The shared quotas in the database at `url`; its pool closed with the scope. */
export const make = (url: Redacted.Redacted<string> | string) =>
  Effect.gen(function*() {
    const sql = yield* PgPool.open({
      url,
      maxConnections: 4,
      applicationName: "antler-user-quotas",
      what: "the per-user quotas' reservations"
    })
    yield* PgPool.migrate(sql, MIGRATION_LOCK, MIGRATIONS, "quota", "Cannot make the files' reservations table")
    const query = PgPool.query(sql, "quota", "Cannot check a user's quota")
    const lock = (locks: number, userId: string) =>
      query(`SELECT pg_advisory_xact_lock(${locks}, hashtext(?)) IS NULL AS locked`, [userId])
    /** `effect` in a transaction, its own failures as they are, the transaction's a `StoreError`. */
    const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
      sql.withTransaction(effect).pipe(
        Effect.catchIf(
          (error): error is SqlError => error instanceof SqlError,
          (error) => Effect.fail(toStoreError("quota", "Cannot check a user's quota")(error))
        )
      ) as Effect.Effect<A, E | StoreError, R>

    const service: SharedQuotas.Service = {
      threads: (userId, make) => transaction(Effect.zipRight(lock(THREAD_LOCKS, userId), outside(make))),
      files: (userId, adding, check) =>
        Effect.gen(function*() {
          const ttl = yield* ReservationTtl
          const id = Crypto.randomUUID()
          const reserve = transaction(Effect.gen(function*() {
            yield* lock(FILE_LOCKS, userId)
            const now = yield* Clock.currentTimeMillis
            yield* query(`DELETE FROM antler_file_reservations WHERE owner = ? AND expires_at <= ?`, [userId, now])
            const rows = yield* query(
              `SELECT COALESCE(SUM(bytes), 0) AS reserved FROM antler_file_reservations WHERE owner = ?`,
              [userId]
            )
            const [{ reserved }] = yield* decodeRows(decodeReservedRows, rows, "quota", "The files' reservations")
            yield* outside(check(reserved))
            if (adding > 0) {
              yield* query(`INSERT INTO antler_file_reservations (id, owner, bytes, expires_at) VALUES (?, ?, ?, ?)`, [
                id,
                userId,
                adding,
                now + ttl
              ])
            }
          }))
          if (adding <= 0) return yield* reserve
          const warned = <A>(what: string, effect: Effect.Effect<A, StoreError>) =>
            Effect.catchAll(
              Effect.asVoid(effect),
              (error) => Effect.logWarning(`user ${userId}: their files' reservation, ${what}: ${error.message}`)
            )
          // (freed once the request's scope closes, its files written or failed; a reservation not deleted lapses)
          yield* Effect.acquireRelease(
            reserve,
            () => warned("freed", query(`DELETE FROM antler_file_reservations WHERE id = ?`, [id]))
          )
          // renewed while the request writes (a slow conversion, a copy of many files), put back if it lapsed
          // meanwhile (a process stalled past its life); stopped before the reservation is freed (the scope's
          // finalizers run in reverse), a renewal under way finished first, so none follows the delete
          const renew = Effect.flatMap(Clock.currentTimeMillis, (now) =>
            warned(
              "renewed",
              query(
                `INSERT INTO antler_file_reservations (id, owner, bytes, expires_at) VALUES (?, ?, ?, ?)
                  ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`,
                [id, userId, adding, now + ttl]
              )
            ))
          yield* Effect.forkScoped(Effect.forever(Effect.delay(Effect.uninterruptible(renew), ttl / 3)))
        })
    }
    return service
  })

/** The shared quotas' layer over a PostgreSQL database. */
export const layer = (url: Redacted.Redacted<string> | string): Layer.Layer<SharedQuotas.SharedQuotas, StoreError> =>
  Layer.scoped(SharedQuotas.SharedQuotas, make(url))
