/**
 * The ThreadStore on PostgreSQL (`@effect/sql-pg`), so several `antler serve` processes (or apps) share threads.
 * Chosen by `database.url` in `config.yaml`. Same semantics as the SQLite store, checked by the same
 * conformance suite: a checkpoint is the JSON text of one completed step's updates (text, not `jsonb`, so a
 * NUL character or a key order a provider sent survives), appended in one transaction; `load` folds them
 * through the reducers after decoding each with Schema; a thread has one active run at a time through a lease
 * row taken under a row lock.
 *
 * Tables are prefixed `antler_` so the store can live in a database other programs use. Appends to one thread
 * lock its row first, so their `seq` order is their commit order even when two processes append at once.
 * A database written by a newer build (a higher schema version) is refused rather than misread.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { StoreError } from "../services/RunContext.js"
import type { AppendOptions, LoadedThread, RunRecord } from "../services/ThreadStore.js"
import {
  deleteBusyMessage,
  fencedMessage,
  keptMetadata,
  LEASE_FENCED,
  leaseRunOf,
  leaseBlocks,
  leaseHeldBy,
  leaseOwner,
  ThreadStore,
  withSpans
} from "../services/ThreadStore.js"
import * as Redact from "../state/Redact.js"
import type { StateUpdate } from "../state/ThreadState.js"
import * as PgPool from "./store/PgPool.js"
import { migrations, SCHEMA_VERSION } from "./store/PgMigrations.js"
import { checkpointOf } from "./store/Codec.js"
import { checkpointRecords, foldCheckpoints } from "./store/Fold.js"
import {
  countOf,
  decodeBytesRows,
  decodeMetadata,
  decodeRows,
  decodeRunEventsRows,
  decodeRunRows,
  decodeThreadRows,
  iso,
  mergeBounded,
  runEventsText,
  threadSummary,
  toStoreError
} from "./store/Rows.js"

/** Options of the Postgres store. */
export interface Options {
  /** `postgres://user:password@host:port/database` (a secret: it is never printed). */
  readonly url: string | Redacted.Redacted<string>
  /** Most connections the store's pool opens (default 10). */
  readonly maxConnections?: number | undefined
  /** What never reaches the database (see `SqliteThreadStore.Options.redact`). */
  readonly redact?: Redact.Redactor | undefined
}

export { migrations, SCHEMA_VERSION } from "./store/PgMigrations.js"

// An arbitrary constant: the advisory lock that serialises migrations of processes starting at once.
const MIGRATION_LOCK = 7_246_114_337

const RUN_COLUMNS = `run_id, thread_id, status, stop_reason, started_at, ended_at, error, metadata`
const LAST_CHECKPOINT_AT =
  `(SELECT c.created_at FROM antler_checkpoints c WHERE c.thread_id = t.thread_id ORDER BY c.seq DESC LIMIT 1)`
const LAST_RUN = (column: string) =>
  `(SELECT r.${column} FROM antler_runs r WHERE r.thread_id = t.thread_id
    ORDER BY r.started_at DESC, r.ord DESC LIMIT 1)`
const THREAD_COLUMNS = `t.thread_id, t.title, t.created_at, COALESCE(${LAST_CHECKPOINT_AT}, t.updated_at) AS updated_at,
  (SELECT COUNT(*) FROM antler_checkpoints c WHERE c.thread_id = t.thread_id) AS checkpoints, t.owner, t.metadata,
  ${LAST_RUN("run_id")} AS run_id, ${LAST_RUN("status")} AS status, ${LAST_RUN("stop_reason")} AS stop_reason,
  l.run_id AS lease_run_id, l.owner AS lease_owner, l.expires_at AS lease_expires_at`
const THREADS_FROM = `antler_threads t LEFT JOIN antler_leases l ON l.thread_id = t.thread_id`

// the driver gives a BIGINT as text
const LeaseRow = Schema.Struct({
  run_id: Schema.String,
  owner: Schema.String,
  expires_at: Schema.Union(Schema.Number, Schema.NumberFromString)
})
const decodeLeaseRows = Schema.decodeUnknownEither(Schema.Array(LeaseRow))

/** Where a URL points, without its credentials (for messages). */
export const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `postgres database ${parsed.pathname.replace(/^\//, "") || "(default)"} at ${parsed.hostname}` +
      (parsed.port ? `:${parsed.port}` : "")
  } catch {
    return "the postgres database (database.url is not a URL)"
  }
}

/** Opens the store (creating and migrating its tables when needed); closed with the scope. */
export const make = (options: Options): Effect.Effect<ThreadStore["Type"], StoreError, Scope.Scope> =>
  Effect.gen(function*() {
    const url = Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url)
    const where = describeUrl(Redacted.value(url))
    const redactor = options.redact ?? Redact.none
    const sql: SqlClient.SqlClient = yield* PgPool.open({
      url,
      maxConnections: options.maxConnections ?? 10,
      applicationName: "antler",
      what: where
    })

    const run = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) =>
      Effect.mapError(body, toStoreError(operation, what))
    const transaction = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) =>
      run(sql.withTransaction(body), operation, what)
    /** A read transaction that sees one snapshot of the database. */
    const snapshot = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) =>
      transaction(Effect.zipRight(sql.unsafe("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"), body), operation, what)
    const q = (text: string, params: ReadonlyArray<unknown> = []) =>
      sql.unsafe<{ readonly [column: string]: unknown; readonly seq: unknown; readonly updates: unknown }>(
        text,
        params as Array<unknown>
      )

    yield* transaction(
      Effect.gen(function*() {
        yield* q(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`)
        yield* q(`CREATE TABLE IF NOT EXISTS antler_schema (version INTEGER NOT NULL)`)
        const rows = yield* q(`SELECT version FROM antler_schema`)
        const version = rows.length === 0 ? 0 : Number(rows[0]!.version)
        if (version > SCHEMA_VERSION) {
          return yield* new StoreError({
            operation: "open",
            message: `Cannot open ${where}: it has schema version ${version}, written by a newer Antler; ` +
              `this build reads up to ${SCHEMA_VERSION}`
          })
        }
        for (let v = version; v < SCHEMA_VERSION; v++) for (const statement of migrations[v]!) yield* q(statement)
        if (rows.length === 0) yield* q(`INSERT INTO antler_schema (version) VALUES ($1)`, [SCHEMA_VERSION])
        else if (version < SCHEMA_VERSION) yield* q(`UPDATE antler_schema SET version = $1`, [SCHEMA_VERSION])
      }),
      "open",
      `Cannot migrate ${where}`
    )

    const now = Effect.map(Clock.currentTimeMillis, iso)
    // (this process, as the owner of the leases it takes)
    const owner = leaseOwner()
    const ensureThread = (threadId: string, at: string, owner: string | null = null, metadata: string | null = null) =>
      q(
        `INSERT INTO antler_threads (thread_id, created_at, updated_at, owner, metadata) VALUES ($1, $2, $2, $3, $4)
          ON CONFLICT (thread_id) DO NOTHING`,
        [threadId, at, owner, metadata]
      )

    const ensure: ThreadStore["Type"]["ensure"] = (threadId, init) =>
      Effect.flatMap(now, (at) =>
        run(
          ensureThread(
            threadId,
            at,
            init?.owner ?? null,
            init?.metadata === undefined ? null : JSON.stringify(init.metadata)
          ),
          "ensure",
          `Cannot create thread "${threadId}"`
        ))

    // What the thread keeps once the checkpoint is kept, read by the statement that touches the thread after it (the
    // checkpoint's triggers have counted it by then), for `appendMeasured`: no statement of its own.
    const MEASURED = `RETURNING t.bytes, t.owner, (SELECT COALESCE(SUM(o.bytes), 0) FROM antler_owner_bytes o
      WHERE o.owner = COALESCE(t.owner, '') OR (COALESCE(t.owner, '') IN ('', $3) AND o.owner IN ('', $3))) AS owned`
    const appendWith = (
      threadId: string,
      runId: string,
      given: ReadonlyArray<StateUpdate>,
      unownedOf: string | undefined,
      options: AppendOptions | undefined
    ) =>
      Effect.suspend(() => {
        const checkpoint = checkpointOf(threadId, given, redactor)
        if (Either.isLeft(checkpoint)) return Effect.fail(checkpoint.left)
        const { text: body, title } = checkpoint.right
        const returning = unownedOf === undefined ? "" : ` ${MEASURED}`
        const measure = unownedOf === undefined ? [] : [unownedOf]
        return Effect.flatMap(now, (at) =>
          transaction(
            Effect.gen(function*() {
              // fenced by the run's lease: its row locked first (as a delete locks it), shared, until the commit, so
              // no other process takes the lease between this check and the write
              const leased = leaseRunOf(runId, options)
              if (leased !== undefined) {
                const leases = yield* q(
                  `SELECT run_id, owner, expires_at FROM antler_leases WHERE thread_id = $1 FOR SHARE`,
                  [threadId]
                )
                const [holder] = yield* decodeRows(decodeLeaseRows, leases, "append", "The lease table")
                if (!leaseHeldBy(holder, leased, owner)) {
                  return yield* new StoreError({
                    operation: LEASE_FENCED,
                    message: fencedMessage(threadId, leased, holder)
                  })
                }
              }
              yield* ensureThread(threadId, at)
              // one appender of a thread at a time: seq order is commit order
              yield* q(`SELECT 1 FROM antler_threads WHERE thread_id = $1 FOR UPDATE`, [threadId])
              yield* q(
                `INSERT INTO antler_checkpoints (thread_id, run_id, created_at, updates) VALUES ($1, $2, $3, $4)`,
                [threadId, runId, at, body]
              )
              const rows = yield* title === undefined
                ? q(`UPDATE antler_threads t SET updated_at = $2 WHERE thread_id = $1${returning}`, [
                  threadId,
                  at,
                  ...measure
                ])
                : q(
                  `UPDATE antler_threads t SET updated_at = $2, title = $${3 + measure.length} WHERE thread_id = $1` +
                    returning,
                  [threadId, at, ...measure, title]
                )
              if (unownedOf === undefined) return undefined
              const found = yield* decodeRows(decodeBytesRows, rows, "append", "The thread table")
              return found[0]
            }),
            "append",
            `Cannot save a checkpoint of thread "${threadId}"`
          ))
      })

    const append: ThreadStore["Type"]["append"] = (threadId, runId, given, options) =>
      Effect.asVoid(appendWith(threadId, runId, given, undefined, options))

    const appendMeasured: ThreadStore["Type"]["appendMeasured"] = (threadId, runId, given, unownedOf, options) =>
      Effect.flatMap(appendWith(threadId, runId, given, unownedOf, options), (measured) =>
        measured !== undefined ? Effect.succeed(measured) : Effect.die(new Error("a measured append measured nothing")))

    const load: ThreadStore["Type"]["load"] = (threadId) =>
      Effect.gen(function*() {
        const read = yield* snapshot(
          Effect.gen(function*() {
            const threads = yield* q(`SELECT thread_id FROM antler_threads WHERE thread_id = $1`, [threadId])
            const checkpoints = yield* q(
              `SELECT seq, updates FROM antler_checkpoints WHERE thread_id = $1 ORDER BY seq`,
              [threadId]
            )
            const runs = yield* q(
              `SELECT ${RUN_COLUMNS} FROM antler_runs WHERE thread_id = $1 ORDER BY started_at, ord`,
              [threadId]
            )
            return { threads, checkpoints, runs }
          }),
          "load",
          `Cannot load thread "${threadId}"`
        )
        if (read.threads.length === 0 && read.checkpoints.length === 0) return Option.none<LoadedThread>()
        const state = yield* foldCheckpoints(threadId, read.checkpoints)
        const records: ReadonlyArray<RunRecord> = yield* decodeRows(
          decodeRunRows,
          read.runs,
          "load",
          `The run table of thread "${threadId}"`
        )
        return Option.some<LoadedThread>({
          thread_id: threadId,
          state,
          checkpoints: read.checkpoints.length,
          runs: records
        })
      })

    const upsertRun = (record: RunRecord) =>
      q(
        `INSERT INTO antler_runs (${RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
          ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, status = excluded.status,
          stop_reason = excluded.stop_reason, started_at = excluded.started_at, ended_at = excluded.ended_at,
          error = COALESCE(excluded.error, antler_runs.error),
          metadata = COALESCE(excluded.metadata, antler_runs.metadata)`,
        [
          record.run_id,
          record.thread_id,
          record.status,
          record.stop_reason,
          record.started_at,
          record.ended_at,
          record.error == null ? null : redactor.text(record.error),
          record.metadata == null ? null : JSON.stringify(redactor.value(record.metadata))
        ]
      )
    // the run as stored, its row locked until the transaction ends (no write in between)
    const lockedRun = (runId: string, operation: string) =>
      Effect.flatMap(
        q(`SELECT ${RUN_COLUMNS} FROM antler_runs WHERE run_id = $1 FOR UPDATE`, [runId]),
        (rows) => Effect.map(decodeRows(decodeRunRows, rows, operation, "The run table"), (runs) => runs[0])
      )

    const saveRun: ThreadStore["Type"]["saveRun"] = (record) =>
      Effect.flatMap(now, (at) =>
        transaction(
          Effect.gen(function*() {
            yield* ensureThread(record.thread_id, at)
            // (its feedback, written by `updateRun` alone, as stored)
            const stored = record.metadata == null ? undefined : yield* lockedRun(record.run_id, "saveRun")
            const metadata = record.metadata == null ? record.metadata : keptMetadata(record.metadata, stored?.metadata)
            yield* upsertRun({ ...record, metadata })
          }),
          "saveRun",
          `Cannot save run "${record.run_id}" of thread "${record.thread_id}"`
        ))

    const updateRun: ThreadStore["Type"]["updateRun"] = (threadId, runId, change) =>
      transaction(
        Effect.gen(function*() {
          const stored = yield* lockedRun(runId, "updateRun")
          if (stored === undefined || stored.thread_id !== threadId) return undefined
          const metadata = change(stored)
          if (metadata === undefined) return undefined
          const written = { ...stored, metadata }
          yield* upsertRun(written)
          return written
        }),
        "updateRun",
        `Cannot update run "${runId}" of thread "${threadId}"`
      )

    const summaries = (rows: ReadonlyArray<unknown>, operation: "list" | "listOwned") =>
      Effect.gen(function*() {
        const millis = yield* Clock.currentTimeMillis
        return (yield* decodeRows(decodeThreadRows, rows, operation, "The thread table")).map((row) =>
          threadSummary(row, millis)
        )
      })

    const list: ThreadStore["Type"]["list"] = Effect.flatMap(
      run(
        q(`SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} ORDER BY updated_at DESC, t.ord DESC`),
        "list",
        "Cannot list threads"
      ),
      (rows) => summaries(rows, "list")
    )

    const listOwned: ThreadStore["Type"]["listOwned"] = (owner, unowned) =>
      Effect.flatMap(
        run(
          q(
            `SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} WHERE t.owner = $1 OR ($2 AND t.owner IS NULL)
              ORDER BY updated_at DESC, t.ord DESC`,
            [owner, unowned]
          ),
          "listOwned",
          `Cannot list the threads of ${owner}`
        ),
        (rows) => summaries(rows, "listOwned")
      )

    const countOwned: ThreadStore["Type"]["countOwned"] = (owner, unowned) =>
      Effect.flatMap(
        run(
          q(`SELECT COUNT(*) AS n FROM antler_threads WHERE owner = $1 OR ($2 AND owner IS NULL)`, [owner, unowned]),
          "countOwned",
          `Cannot count the threads of ${owner}`
        ),
        (rows) => countOf(rows, "countOwned")
      )

    const bytesOf: ThreadStore["Type"]["bytesOf"] = (threadId) =>
      Effect.flatMap(
        run(
          q(
            `SELECT t.bytes, t.owner, COALESCE(o.bytes, 0) AS owned FROM antler_threads t
              LEFT JOIN antler_owner_bytes o ON o.owner = COALESCE(t.owner, '') WHERE t.thread_id = $1`,
            [threadId]
          ),
          "bytesOf",
          `Cannot read thread "${threadId}"`
        ),
        (rows) => Effect.map(decodeRows(decodeBytesRows, rows, "bytesOf", "The thread table"), (found) => found[0])
      )

    const bytesOwned: ThreadStore["Type"]["bytesOwned"] = (owner, unowned) =>
      Effect.flatMap(
        run(
          q(
            `SELECT COALESCE(SUM(bytes), 0) AS n FROM antler_owner_bytes WHERE owner = $1 OR ($2 AND owner = '')`,
            [owner, unowned]
          ),
          "bytesOwned",
          `Cannot count the bytes of the threads of ${owner}`
        ),
        (rows) => countOf(rows, "bytesOwned")
      )

    const info: ThreadStore["Type"]["info"] = (threadId) =>
      Effect.gen(function*() {
        const rows = yield* run(
          q(`SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} WHERE t.thread_id = $1`, [threadId]),
          "info",
          `Cannot read thread "${threadId}"`
        )
        const threads = yield* decodeRows(decodeThreadRows, rows, "info", "The thread table")
        const millis = yield* Clock.currentTimeMillis
        return threads.length === 0 ? Option.none() : Option.some(threadSummary(threads[0]!, millis))
      })

    const patchMetadata: ThreadStore["Type"]["patchMetadata"] = (threadId, patch, options) =>
      Effect.flatMap(now, (at) =>
        transaction(
          Effect.gen(function*() {
            const rows = yield* q(`SELECT metadata FROM antler_threads WHERE thread_id = $1 FOR UPDATE`, [threadId])
            if (rows.length === 0) return false
            const current = yield* decodeRows(
              decodeMetadata,
              rows[0]!.metadata,
              "patchMetadata",
              `Thread "${threadId}"`
            )
            const next = yield* mergeBounded(current ?? {}, patch, options?.maxBytes)
            const set = `UPDATE antler_threads SET metadata = $2, updated_at = COALESCE($3::text, updated_at)`
            yield* q(`${set} WHERE thread_id = $1`, [
              threadId,
              JSON.stringify(next),
              options?.touch === false ? null : at
            ])
            return true
          }),
          "patchMetadata",
          `Cannot update the metadata of thread "${threadId}"`
        ))

    const deleteThread: ThreadStore["Type"]["delete"] = (threadId) =>
      Effect.flatMap(Clock.currentTimeMillis, (millis) =>
        transaction(
          Effect.gen(function*() {
            // the lease row (when there is one) locked: its run cannot renew it while the thread is deleted
            const leases = yield* q(
              `SELECT run_id, owner, expires_at FROM antler_leases WHERE thread_id = $1 FOR UPDATE`,
              [threadId]
            )
            const [holder] = yield* decodeRows(decodeLeaseRows, leases, "delete", "The lease table")
            if (leaseBlocks(holder, { threadId, runId: "", ttlMs: 0, now: millis })) {
              return yield* new StoreError({ operation: "delete", message: deleteBusyMessage(threadId, holder) })
            }
            // (the thread's row first: its owner's byte counter changes once, not once per checkpoint)
            const deleted = yield* q(`DELETE FROM antler_threads WHERE thread_id = $1 RETURNING thread_id`, [threadId])
            yield* q(`DELETE FROM antler_checkpoints WHERE thread_id = $1`, [threadId])
            yield* q(`DELETE FROM antler_runs WHERE thread_id = $1`, [threadId])
            yield* q(`DELETE FROM antler_run_events WHERE thread_id = $1`, [threadId])
            yield* q(`DELETE FROM antler_leases WHERE thread_id = $1`, [threadId])
            return deleted.length > 0
          }),
          "delete",
          `Cannot delete thread "${threadId}"`
        ))

    const checkpoints: ThreadStore["Type"]["checkpoints"] = (threadId) =>
      Effect.gen(function*() {
        const rows = yield* run(
          q(
            `SELECT seq, run_id, created_at, updates FROM antler_checkpoints WHERE thread_id = $1 ORDER BY seq`,
            [threadId]
          ),
          "checkpoints",
          `Cannot read the checkpoints of thread "${threadId}"`
        )
        return yield* checkpointRecords(threadId, rows)
      })

    const rollback: ThreadStore["Type"]["rollback"] = (threadId, runId) =>
      transaction(
        Effect.gen(function*() {
          yield* q(`SELECT 1 FROM antler_threads WHERE thread_id = $1 FOR UPDATE`, [threadId])
          const deleted = yield* q(
            `DELETE FROM antler_checkpoints WHERE thread_id = $1 AND run_id = $2 RETURNING seq`,
            [threadId, runId]
          )
          const rows = yield* q(
            `SELECT seq, updates FROM antler_checkpoints WHERE thread_id = $1 ORDER BY seq`,
            [threadId]
          )
          const state = yield* foldCheckpoints(threadId, rows)
          yield* q(`UPDATE antler_threads SET title = $2 WHERE thread_id = $1`, [threadId, state.title])
          return deleted.length
        }),
        "rollback",
        `Cannot roll back run "${runId}" of thread "${threadId}"`
      )

    const runs: ThreadStore["Type"]["runs"] = (filter) =>
      Effect.gen(function*() {
        const where: Array<string> = []
        const params: Array<string> = []
        const add = (column: string, value: string | undefined) => {
          if (value === undefined) return
          params.push(value)
          where.push(`${column} = $${params.length}`)
        }
        add("thread_id", filter.threadId)
        add("run_id", filter.runId)
        add("status", filter.status)
        const rows = yield* run(
          q(
            `SELECT ${RUN_COLUMNS} FROM antler_runs${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""} ` +
              `ORDER BY started_at, ord`,
            params
          ),
          "runs",
          "Cannot read runs"
        )
        return yield* decodeRows(decodeRunRows, rows, "runs", "The run table")
      })

    const acquireLease: ThreadStore["Type"]["acquireLease"] = (request) =>
      transaction(
        Effect.gen(function*() {
          const expires = request.now + request.ttlMs
          const inserted = yield* q(
            `INSERT INTO antler_leases (thread_id, run_id, owner, expires_at) VALUES ($1, $2, $3, $4)
              ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id`,
            [request.threadId, request.runId, owner, expires]
          )
          if (inserted.length > 0) return undefined
          // the row exists: lock it, then decide
          const rows = yield* q(`SELECT run_id, owner, expires_at FROM antler_leases WHERE thread_id = $1 FOR UPDATE`, [
            request.threadId
          ])
          const [holder] = yield* decodeRows(decodeLeaseRows, rows, "lease", "The lease table")
          if (leaseBlocks(holder, request, owner)) return holder
          yield* q(`UPDATE antler_leases SET run_id = $2, owner = $3, expires_at = $4 WHERE thread_id = $1`, [
            request.threadId,
            request.runId,
            owner,
            expires
          ])
          return undefined
        }),
        "lease",
        `Cannot take the lease of thread "${request.threadId}"`
      )

    const releaseLease: ThreadStore["Type"]["releaseLease"] = (threadId, runId) =>
      Effect.asVoid(run(
        q(`DELETE FROM antler_leases WHERE thread_id = $1 AND run_id = $2 AND owner = $3`, [threadId, runId, owner]),
        "lease",
        `Cannot release the lease of thread "${threadId}"`
      ))

    const saveRunEvents: ThreadStore["Type"]["saveRunEvents"] = (threadId, runId, events) =>
      Effect.asVoid(run(
        q(
          `INSERT INTO antler_run_events (run_id, thread_id, events) VALUES ($1, $2, $3)
            ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, events = excluded.events`,
          [runId, threadId, runEventsText(events, redactor)]
        ),
        "saveRunEvents",
        `Cannot save the events of run "${runId}" of thread "${threadId}"`
      ))

    const runEvents: ThreadStore["Type"]["runEvents"] = (threadId, runId) =>
      Effect.gen(function*() {
        const rows = yield* run(
          q(`SELECT events FROM antler_run_events WHERE run_id = $1 AND thread_id = $2`, [runId, threadId]),
          "runEvents",
          `Cannot read the events of run "${runId}"`
        )
        const decoded = yield* decodeRows(decodeRunEventsRows, rows, "runEvents", "The run event table")
        return decoded[0]?.events ?? []
      })

    const deleteRun: ThreadStore["Type"]["deleteRun"] = (threadId, runId) =>
      transaction(
        Effect.gen(function*() {
          const deleted = yield* q(
            `DELETE FROM antler_runs WHERE thread_id = $1 AND run_id = $2 AND status NOT IN ('pending', 'running')
              RETURNING run_id`,
            [threadId, runId]
          )
          if (deleted.length === 0) return false
          yield* q(`DELETE FROM antler_run_events WHERE thread_id = $1 AND run_id = $2`, [threadId, runId])
          return true
        }),
        "deleteRun",
        `Cannot delete run "${runId}" of thread "${threadId}"`
      )

    return withSpans("PgThreadStore", {
      ensure,
      info,
      patchMetadata,
      delete: deleteThread,
      deleteRun,
      checkpoints,
      rollback,
      runs,
      load,
      append,
      appendMeasured,
      saveRun,
      updateRun,
      saveRunEvents,
      runEvents,
      list,
      listOwned,
      countOwned,
      bytesOf,
      bytesOwned,
      acquireLease,
      releaseLease
    })
  })

/** A Postgres thread store, opened (and migrated) when the layer is built, closed with it. */
export const layer = (options: Options): Layer.Layer<ThreadStore, StoreError> =>
  Layer.scoped(ThreadStore, make(options))
