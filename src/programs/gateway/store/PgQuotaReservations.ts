/**
 * The storage quotas' reservations (`QuotaReservations`) in the PostgreSQL database of `database.url`, shared by the
 * gateway processes using it: a row per admitted run or write (`antler_quota_reservations`: its owner, thread and
 * reserved bytes: a run's first step and its record's input, a write's bytes) beside the thread store's tables, so
 * that runs and writes one user starts together in several processes are admitted against what each other will add,
 * as in one process. What a run or write keeps in its thread drains its row in the same transaction (triggers on the
 * store's checkpoints and run records: `antler_checkpoints_quota_kept`, `antler_runs_quota_kept`), so that no byte
 * is counted twice, reserved and kept, not even for an instant.
 *
 * An admission is one statement, one round trip: `antler_quota_admit(...)`, a function that takes an advisory lock
 * on the user, then on the thread (always in that order), until its transaction ends (one admission of a user's at a
 * time, across processes; the lock, not the snapshot, orders them: under READ COMMITTED each statement of a volatile
 * function reads what was committed before it), forgets the user's stale rows, reads the counters and the live
 * reservations (in one statement: one snapshot), and inserts the run's row only when it fits. Then one statement when
 * the run is recorded (its row down to its first step, at most) and one when it ends or the write is done (deleted).
 * A row is live until its `expires_at` (the lease's life from its admission) or, after, while its run (or writer)
 * holds its thread's lease (`antler_leases`, renewed by the run's one renewer: `RunLease`): deleted when the run
 * ends, ignored once both lapsed, so a process that crashed holds no quota longer than its leases. Loaded only when
 * PostgreSQL is configured (`@effect/sql-pg` is an optional peer).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as PgPool from "../../../layers/store/PgPool.js"
import { decodeRows } from "../../../layers/store/Rows.js"
import { StoreError } from "../../../services/RunContext.js"
import * as Run from "../../Run.js"
import { DEFAULT_USER } from "../Auth.js"
import * as InputBounds from "../InputBounds.js"
import * as QuotaReservations from "../QuotaReservations.js"
import * as StorageQuota from "../StorageQuota.js"

// Arbitrary constants: the advisory lock that serialises making the table, and the class of the admissions' locks.
const MIGRATION_LOCK = 7_246_114_341
const ADMISSION_LOCKS = 72_461_143

const LIVE = (now: string) =>
  `(r.expires_at > ${now} OR EXISTS (SELECT 1 FROM antler_leases l
    WHERE l.thread_id = r.thread_id AND l.run_id = r.run_id AND l.expires_at > ${now}))`

/** The table and the admission (`CREATE ... IF NOT EXISTS`, `OR REPLACE`: run by every process that opens it). */
export const MIGRATIONS: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS antler_quota_reservations (
    run_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  )`,
  `CREATE INDEX IF NOT EXISTS antler_quota_reservations_by_owner ON antler_quota_reservations (owner)`,
  `CREATE INDEX IF NOT EXISTS antler_quota_reservations_by_thread ON antler_quota_reservations (thread_id)`,
  `CREATE OR REPLACE FUNCTION antler_quota_admit(
    p_owner TEXT, p_unowned BOOLEAN, p_thread TEXT, p_run TEXT, p_adding BIGINT,
    p_thread_limit BIGINT, p_user_limit BIGINT, p_now BIGINT, p_expires BIGINT
  ) RETURNS TABLE (thread_bytes BIGINT, thread_reserved BIGINT, owned BIGINT, user_reserved BIGINT, admitted BOOLEAN)
  LANGUAGE plpgsql VOLATILE AS $$
  #variable_conflict use_column
  BEGIN
    PERFORM pg_advisory_xact_lock(${ADMISSION_LOCKS}, hashtext('user:' || p_owner));
    PERFORM pg_advisory_xact_lock(${ADMISSION_LOCKS}, hashtext('thread:' || p_thread));
    DELETE FROM antler_quota_reservations r WHERE r.owner = p_owner AND NOT ${LIVE("p_now")};
    -- (one statement, one snapshot: a write that commits meanwhile is counted once, kept or reserved, never both
    -- nor neither)
    SELECT (SELECT t.bytes FROM antler_threads t WHERE t.thread_id = p_thread),
      (SELECT COALESCE(SUM(r.bytes), 0) FROM antler_quota_reservations r
        WHERE r.thread_id = p_thread AND ${LIVE("p_now")}),
      (SELECT COALESCE(SUM(o.bytes), 0) FROM antler_owner_bytes o
        WHERE o.owner = p_owner OR (p_unowned AND o.owner = '')),
      (SELECT COALESCE(SUM(r.bytes), 0) FROM antler_quota_reservations r WHERE r.owner = p_owner AND ${LIVE("p_now")})
      INTO thread_bytes, thread_reserved, owned, user_reserved;
    admitted := NOT (
      (p_thread_limit > 0 AND thread_bytes IS NOT NULL AND thread_bytes + thread_reserved + p_adding > p_thread_limit)
      OR (p_user_limit > 0 AND owned + user_reserved + p_adding > p_user_limit));
    IF admitted AND p_adding > 0 THEN
      INSERT INTO antler_quota_reservations (run_id, owner, thread_id, bytes, expires_at)
        VALUES (p_run, p_owner, p_thread, p_adding, p_expires)
        ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, thread_id = excluded.thread_id,
          bytes = excluded.bytes, expires_at = excluded.expires_at;
    END IF;
    RETURN NEXT;
  END $$`,
  // what a run or a write keeps in its thread (a checkpoint, a run's record) turns what it reserved there into kept
  // bytes in the same transaction, so that none is counted twice, reserved and kept (after the thread store's tables:
  // `QuotaWiring` opens this after the store)
  ...[
    ["antler_checkpoints", "octet_length(NEW.updates)"],
    ["antler_runs", "COALESCE(octet_length(NEW.metadata), 0) + COALESCE(octet_length(NEW.error), 0)"]
  ].flatMap(([table, kept]) => [
    `CREATE OR REPLACE FUNCTION ${table}_quota_kept() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
      UPDATE antler_quota_reservations SET bytes = GREATEST(bytes - (${kept}), 0)
        WHERE run_id = NEW.run_id AND thread_id = NEW.thread_id AND bytes > 0;
      RETURN NULL;
    END $$`,
    `DO $$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '${table}_quota_kept') THEN
        CREATE TRIGGER ${table}_quota_kept AFTER INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_quota_kept();
      END IF;
    END $$`
  ])
]

// the driver gives a BIGINT as text
const Bytes = Schema.Union(Schema.Number, Schema.NumberFromString)
const AdmitRows = Schema.Tuple(Schema.Struct({
  thread_bytes: Schema.NullOr(Bytes),
  thread_reserved: Bytes,
  owned: Bytes,
  user_reserved: Bytes,
  admitted: Schema.Boolean
}))
const decodeAdmitRows = Schema.decodeUnknownEither(AdmitRows)

/** The reservations in the database at `url`; its pool closed with the scope. */
export const make = (url: Redacted.Redacted<string> | string) =>
  Effect.gen(function*() {
    const sql = yield* PgPool.open({
      url,
      maxConnections: 4,
      applicationName: "antler-quota",
      what: "the storage quotas' reservations"
    })
    yield* PgPool.migrate(sql, MIGRATION_LOCK, MIGRATIONS, "quota", "Cannot make the quotas' reservations table")
    const query = PgPool.query(sql, "quota", "Cannot admit a run against the storage quotas")
    // (a reservation not updated or freed lapses with the run's lease)
    const write = (runId: string, text: string, params: ReadonlyArray<unknown>) =>
      query(text, params).pipe(
        Effect.catchAll((error) => Effect.logWarning(`run ${runId}: its quota reservation: ${error.message}`)),
        Effect.asVoid
      )
    const reservation = (runId: string, pending: number): QuotaReservations.Reservation => {
      let freed = false
      const free = Effect.suspend(() => {
        if (freed) return Effect.void
        freed = true
        return write(runId, `DELETE FROM antler_quota_reservations WHERE run_id = ?`, [runId])
      })
      return {
        // (what its record's insert drained is drained: at most `pending` stays)
        recorded: pending === 0
          ? free
          : write(runId, `UPDATE antler_quota_reservations SET bytes = LEAST(bytes, ?) WHERE run_id = ?`, [
            pending,
            runId
          ]),
        free,
        kept: (updates) =>
          write(
            runId,
            `UPDATE antler_quota_reservations SET bytes = GREATEST(bytes - ?, 0) WHERE run_id = ? AND bytes > 0`,
            [InputBounds.jsonBytes(updates), runId]
          )
      }
    }
    const service: QuotaReservations.Service = {
      admit: (_store, limits, { userId, threadId, runId, adding, pending }) =>
        Effect.gen(function*() {
          if (!StorageQuota.limited(limits)) return QuotaReservations.NONE
          const now = yield* Clock.currentTimeMillis
          const rows = yield* query(`SELECT * FROM antler_quota_admit(?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
            userId,
            userId === DEFAULT_USER,
            threadId,
            runId,
            adding,
            limits.thread,
            limits.user,
            now,
            now + Run.LEASE_TTL_MS
          ])
          const [row] = yield* decodeRows(decodeAdmitRows, rows, "quota", "The quotas' admission")
          const counted = { thread: limits.thread > 0 ? row.thread_bytes ?? undefined : undefined, user: row.owned }
          const reserved = { thread: row.thread_reserved, user: row.user_reserved }
          if (!row.admitted) {
            return yield* StorageQuota.exceeded(limits, userId, counted, reserved, adding) ?? new StoreError({
              operation: "quota",
              message: `The quotas' admission refused run ${runId} within its limits`
            })
          }
          return adding === 0 ? QuotaReservations.NONE : reservation(runId, pending)
        }),
      // (drained by the write's own transaction: `antler_quota_kept`)
      drain: () => Effect.void
    }
    return service
  })

/** The reservations layer over a PostgreSQL database. */
export const layer = (
  url: Redacted.Redacted<string> | string
): Layer.Layer<QuotaReservations.QuotaReservations, StoreError> =>
  Layer.scoped(QuotaReservations.QuotaReservations, make(url))
