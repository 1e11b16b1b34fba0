/**
 * The ThreadStore on a SQLite file (`@effect/sql-sqlite-node`, better-sqlite3 underneath): the embedded default.
 *
 * A checkpoint row is the JSON of one completed step's updates, so `append` costs the same at message 10 and
 * message 10,000: one INSERT, numbered from the thread's counter, whose trigger touches the thread row, in one
 * commit; it never reads the thread's state. `load` folds the rows through the reducers, decoding each with
 * Schema first (the file is a boundary: another process, an older build or a hand edit may have written it),
 * and starts from a snapshot of the folded state when `load` stored one earlier.
 *
 * Durability: WAL journal with `synchronous = NORMAL`, so a committed step survives a killed process (not
 * necessarily a power cut). Several processes (or stores) may share the file: each write statement or
 * `BEGIN IMMEDIATE` takes SQLite's write lock before reading anything. While another connection holds it,
 * the statement is retried after a short sleep, up to `busyTimeout`: SQLite's own busy wait would block the
 * event loop, and with it every other run of the process.
 *
 * This module opens the store and holds the operations on threads and runs; the rest lives under `sqlite/`
 * (`Migrations`, `Statements`, `Access` to the connection, `GroupCommit` for `append`, `Leases`, `Snapshots`
 * for `load`) and, shared with the PostgreSQL store, under `store/` (`Codec`, `Fold`, `Rows`).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import { StoreError } from "../services/RunContext.js"
import type { RunRecord } from "../services/ThreadStore.js"
import {
  changedRun,
  deleteBusyMessage,
  fencedMessage,
  keptMetadata,
  LEASE_FENCED,
  leaseBlocks,
  leaseHeldBy,
  leaseRunOf,
  ROLLBACK_UNDONE,
  ThreadStore,
  withSpans
} from "../services/ThreadStore.js"
import * as Redact from "../state/Redact.js"
import * as Access from "./sqlite/Access.js"
import * as GroupCommit from "./sqlite/GroupCommit.js"
import * as Leases from "./sqlite/Leases.js"
import { migrate } from "./sqlite/Migrations.js"
import * as Snapshots from "./sqlite/Snapshots.js"
import * as SqliteConnection from "./sqlite/SqliteConnection.js"
import {
  COUNT_OWNED,
  CREATE_THREAD,
  DELETE_ENDED_RUN,
  DELETE_RUN_CHECKPOINTS,
  DELETE_RUN_EVENTS,
  DELETE_THREAD,
  DELETE_THREAD_ROW,
  ENSURE_THREAD,
  LIST_OWNED,
  LIST_THREADS,
  OWNED_BYTES,
  RUN_COLUMNS,
  SELECT_ALL_CHECKPOINTS,
  SELECT_METADATA,
  SET_METADATA,
  SET_TITLE,
  THREAD_BYTES,
  THREAD_INFO,
  UPSERT_RUN
} from "./sqlite/Statements.js"
import { checkpointRecords } from "./store/Fold.js"
import {
  countOf,
  decodeBytesRows,
  decodeMetadata,
  decodeRows,
  decodeRunEventsRows,
  runEventsText,
  decodeRunRows,
  decodeThreadRows,
  driverMessage,
  iso,
  mergeBounded,
  threadSummary
} from "./store/Rows.js"

export { migrations, SCHEMA_VERSION } from "./sqlite/Migrations.js"
export { checkpointOf, decodeSnapshot, decodeUpdates, encodeUpdates, formatParseError, titleOf } from "./store/Codec.js"
export { checkpointRecords, foldCheckpoints } from "./store/Fold.js"
export {
  decodeRows,
  mergeMetadata,
  MetadataText,
  RunRow,
  ThreadRow,
  threadSummary,
  toStoreError
} from "./store/Rows.js"

/** Options of the SQLite store. */
export interface Options {
  /** The database file. Its directory is created when missing. */
  readonly filename: string
  /** How long a statement waits for another process's lock before failing, in milliseconds (default 5000). */
  readonly busyTimeout?: number | undefined
  /**
   * `load` stores the folded state once this many checkpoints were folded past the last snapshot, so later
   * loads decode the state plus the newer checkpoints only (default 50; 0 turns snapshots off). Appends never
   * write snapshots: a step costs the same whatever the thread's size.
   */
  readonly snapshotEvery?: number | undefined
  /**
   * What never reaches the file: every checkpoint is written with these secrets, URL credentials and bearer
   * tokens replaced (`Redact`). Default: URL credentials and bearer tokens only.
   */
  readonly redact?: Redact.Redactor | undefined
}

/** The file name of the store inside an Antler home directory. */
export const FILENAME = "antler.sqlite"

/**
 * Opens (creating and migrating when needed) the database and returns the store. The SQLite client is
 * private to the store, which lets it run its statements straight on the client's single connection (whose
 * prepared-statement cache it keeps using) under its own lock. Through the client's statement API, each
 * statement costs about 20 µs of CPU in spans, permits and compiling, and `withTransaction` about 45 µs more:
 * an append that way cost twice the CPU of this one (measured in scratch/sqlite/bench-paths.ts).
 */
export const make = (options: Options): Effect.Effect<ThreadStore["Type"], StoreError, Scope.Scope> =>
  Effect.gen(function*() {
    const filename = options.filename
    const redactor = options.redact ?? Redact.none
    const where = `the thread database ${filename}`
    const openFailed = (message: string, cause?: unknown) =>
      new StoreError({ operation: "open", message: `Cannot open ${where}: ${message}`, cause })

    if (filename !== ":memory:" && !filename.startsWith("file:")) {
      yield* Effect.try({
        try: () => fs.mkdirSync(path.dirname(path.resolve(filename)), { recursive: true }),
        catch: (cause) => openFailed(cause instanceof Error ? cause.message : String(cause), cause)
      })
    }

    // The store's own connection (closed with the store), its access serialised by its lock.
    const conn = yield* SqliteConnection.open(filename).pipe(
      Effect.mapError((error) => openFailed(driverMessage(error), error))
    )
    const access = Access.make(conn, Math.max(0, Math.floor(options.busyTimeout ?? 5000)))
    const { exclusive, transaction } = access

    yield* exclusive(
      Effect.zipRight(
        conn.executeRaw("PRAGMA busy_timeout = 0", []),
        conn.executeRaw("PRAGMA synchronous = NORMAL", [])
      ),
      "open",
      `Cannot open ${where}`
    )
    yield* transaction(migrate(conn, (message) => openFailed(message)), "open", `Cannot migrate ${where}`)

    const leases = Leases.make(conn, access)
    const appendAny = GroupCommit.make(conn, access, redactor, leases)
    const append: ThreadStore["Type"]["append"] = (threadId, runId, updates, options) =>
      Effect.asVoid(appendAny(threadId, runId, updates, undefined, options))
    const appendMeasured: ThreadStore["Type"]["appendMeasured"] = (threadId, runId, updates, unownedOf, options) =>
      Effect.flatMap(appendAny(threadId, runId, updates, unownedOf, options), (measured) =>
        measured !== undefined ? Effect.succeed(measured) : Effect.die(new Error("a measured append measured nothing")))
    const load = Snapshots.makeLoad(conn, access, Math.max(0, Math.floor(options.snapshotEvery ?? 50)))

    const ensure: ThreadStore["Type"]["ensure"] = (threadId, init) =>
      Effect.clockWith((clock) => {
        const now = iso(clock.unsafeCurrentTimeMillis())
        return exclusive(
          init === undefined
            ? conn.executeRaw(ENSURE_THREAD, [threadId, now, now])
            : conn.executeRaw(CREATE_THREAD, [
              threadId,
              now,
              now,
              init.owner ?? null,
              init.metadata === undefined ? null : JSON.stringify(init.metadata)
            ]),
          "ensure",
          `Cannot create thread "${threadId}"`
        )
      })

    // the run as stored, within the transaction that writes it (BEGIN IMMEDIATE: no write in between)
    const storedRun = (runId: string) =>
      Effect.flatMap(
        conn.execute(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = ?`, [runId], undefined),
        (rows) => Effect.map(decodeRows(decodeRunRows, rows, "saveRun", "The run table"), (runs) => runs[0])
      )

    const upsertRun = (run: RunRecord) =>
      conn.executeRaw(UPSERT_RUN, [
        run.run_id,
        run.thread_id,
        run.status,
        run.stop_reason,
        run.started_at,
        run.ended_at,
        run.error == null ? null : redactor.text(run.error),
        run.metadata == null ? null : JSON.stringify(redactor.value(run.metadata))
      ])

    const saveRun: ThreadStore["Type"]["saveRun"] = (run) =>
      Effect.clockWith((clock) => {
        const now = iso(clock.unsafeCurrentTimeMillis())
        return transaction(
          Effect.gen(function*() {
            yield* conn.executeRaw(ENSURE_THREAD, [run.thread_id, now, now])
            // (its feedback, written by `updateRun` alone, as stored)
            const stored = run.metadata == null ? undefined : yield* storedRun(run.run_id)
            const metadata = run.metadata == null ? run.metadata : keptMetadata(run.metadata, stored?.metadata)
            yield* upsertRun({ ...run, metadata })
          }),
          "saveRun",
          `Cannot save run "${run.run_id}" of thread "${run.thread_id}"`
        )
      })

    const updateRun: ThreadStore["Type"]["updateRun"] = (threadId, runId, change) =>
      transaction(
        Effect.gen(function*() {
          const written = changedRun(yield* storedRun(runId), threadId, change)
          if (written !== undefined) yield* upsertRun(written)
          return written
        }),
        "updateRun",
        `Cannot update run "${runId}" of thread "${threadId}"`
      )

    const saveRunEvents: ThreadStore["Type"]["saveRunEvents"] = (threadId, runId, events) =>
      transaction(
        conn.executeRaw(
          `INSERT INTO run_events (run_id, thread_id, events) VALUES (?, ?, ?)
            ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, events = excluded.events`,
          [runId, threadId, runEventsText(events, redactor)]
        ),
        "saveRunEvents",
        `Cannot save the events of run "${runId}" of thread "${threadId}"`
      )

    const SELECT_RUN_EVENTS = `SELECT events FROM run_events WHERE run_id = ? AND thread_id = ?`
    const runEvents: ThreadStore["Type"]["runEvents"] = (threadId, runId) =>
      Effect.gen(function*() {
        const rows = yield* exclusive(
          conn.execute(SELECT_RUN_EVENTS, [runId, threadId], undefined),
          "runEvents",
          `Cannot read the events of run "${runId}"`
        )
        const decoded = yield* decodeRows(decodeRunEventsRows, rows, "runEvents", "The run event table")
        return decoded[0]?.events ?? []
      })

    const summaries = (rows: unknown, operation: "list" | "listOwned") =>
      Effect.gen(function*() {
        const threads = yield* decodeRows(decodeThreadRows, rows, operation, "The thread table")
        const now = yield* Clock.currentTimeMillis
        return threads.map((row) => threadSummary(row, now))
      })

    const list: ThreadStore["Type"]["list"] = Effect.flatMap(
      exclusive(conn.execute(LIST_THREADS, [], undefined), "list", "Cannot list threads"),
      (rows) => summaries(rows, "list")
    )

    const listOwned: ThreadStore["Type"]["listOwned"] = (owner, unowned) =>
      Effect.flatMap(
        exclusive(
          conn.execute(LIST_OWNED, [owner, unowned ? 1 : 0], undefined),
          "listOwned",
          `Cannot list the threads of ${owner}`
        ),
        (rows) => summaries(rows, "listOwned")
      )

    const countOwned: ThreadStore["Type"]["countOwned"] = (owner, unowned) =>
      exclusive(
        Effect.flatMap(conn.execute(COUNT_OWNED, [owner, unowned ? 1 : 0], undefined), (rows) =>
          countOf(rows, "countOwned")),
        "countOwned",
        `Cannot count the threads of ${owner}`
      )

    const bytesOf: ThreadStore["Type"]["bytesOf"] = (threadId) =>
      Effect.flatMap(
        exclusive(conn.execute(THREAD_BYTES, [threadId], undefined), "bytesOf", `Cannot read thread "${threadId}"`),
        (rows) => Effect.map(decodeRows(decodeBytesRows, rows, "bytesOf", "The thread table"), (found) => found[0])
      )

    const bytesOwned: ThreadStore["Type"]["bytesOwned"] = (owner, unowned) =>
      exclusive(
        Effect.flatMap(conn.execute(OWNED_BYTES, [owner, unowned ? 1 : 0], undefined), (rows) =>
          countOf(rows, "bytesOwned")),
        "bytesOwned",
        `Cannot count the bytes of the threads of ${owner}`
      )

    const info: ThreadStore["Type"]["info"] = (threadId) =>
      Effect.gen(function*() {
        const rows = yield* exclusive(
          conn.execute(THREAD_INFO, [threadId], undefined),
          "info",
          `Cannot read thread "${threadId}"`
        )
        const threads = yield* decodeRows(decodeThreadRows, rows, "info", "The thread table")
        const now = yield* Clock.currentTimeMillis
        return threads.length === 0 ? Option.none() : Option.some(threadSummary(threads[0]!, now))
      })

    const patchMetadata: ThreadStore["Type"]["patchMetadata"] = (threadId, patch, options) =>
      Effect.clockWith((clock) =>
        transaction(
          Effect.gen(function*() {
            const rows = yield* conn.execute(SELECT_METADATA, [threadId], undefined)
            if (rows.length === 0) return false
            const current = yield* decodeRows(decodeMetadata, rows[0].metadata, "patchMetadata", `Thread "${threadId}"`)
            const next = yield* mergeBounded(current ?? {}, patch, options?.maxBytes)
            const at = options?.touch === false ? null : iso(clock.unsafeCurrentTimeMillis())
            yield* conn.executeRaw(SET_METADATA, [JSON.stringify(next), at, threadId])
            return true
          }),
          "patchMetadata",
          `Cannot update the metadata of thread "${threadId}"`
        )
      )

    const checkpoints: ThreadStore["Type"]["checkpoints"] = (threadId) =>
      Effect.gen(function*() {
        const rows = yield* transaction(
          conn.execute(SELECT_ALL_CHECKPOINTS, [threadId], undefined),
          "checkpoints",
          `Cannot read the checkpoints of thread "${threadId}"`,
          "BEGIN"
        )
        return yield* checkpointRecords(threadId, rows)
      })

    const rollback: ThreadStore["Type"]["rollback"] = (threadId, runId, options) =>
      Effect.gen(function*() {
        const deleted = yield* transaction(
          Effect.gen(function*() {
            // fenced as an append is, in the same write transaction (SQLite's write lock is taken first)
            const leased = leaseRunOf(runId, options)
            if (leased !== undefined) {
              const holder = yield* leases.holder(threadId, "rollback")
              if (!leaseHeldBy(holder, leased, leases.owner)) {
                return yield* new StoreError({
                  operation: LEASE_FENCED,
                  message: fencedMessage(threadId, leased, holder, ROLLBACK_UNDONE)
                })
              }
            }
            const result = yield* conn.executeRaw(DELETE_RUN_CHECKPOINTS, [threadId, runId])
            // the snapshot may hold what the run wrote: the next load folds from the start
            yield* conn.executeRaw(`DELETE FROM snapshots WHERE thread_id = ?`, [threadId])
            return Number((result as { readonly changes?: number }).changes ?? 0)
          }),
          "rollback",
          `Cannot roll back run "${runId}" of thread "${threadId}"`
        )
        // the thread's title is the one its remaining checkpoints leave
        const loaded = yield* load(threadId)
        if (Option.isSome(loaded)) {
          yield* exclusive(
            conn.executeRaw(SET_TITLE, [loaded.value.state.title, threadId]),
            "rollback",
            `Cannot roll back run "${runId}" of thread "${threadId}"`
          )
        }
        return deleted
      })

    const runs: ThreadStore["Type"]["runs"] = (filter) =>
      Effect.gen(function*() {
        const where: Array<string> = []
        const params: Array<string> = []
        if (filter.threadId !== undefined) (where.push("thread_id = ?"), params.push(filter.threadId))
        if (filter.runId !== undefined) (where.push("run_id = ?"), params.push(filter.runId))
        if (filter.status !== undefined) (where.push("status = ?"), params.push(filter.status))
        const sql = `SELECT ${RUN_COLUMNS} FROM runs${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""} ` +
          `ORDER BY started_at, rowid`
        const rows = yield* exclusive(conn.execute(sql, params, undefined), "runs", "Cannot read runs")
        return yield* decodeRows(decodeRunRows, rows, "runs", "The run table")
      })

    const deleteThread: ThreadStore["Type"]["delete"] = (threadId) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => transaction(
        Effect.gen(function*() {
          const holder = yield* leases.holder(threadId, "delete")
          if (leaseBlocks(holder, { threadId, runId: "", ttlMs: 0, now })) {
            return yield* new StoreError({ operation: "delete", message: deleteBusyMessage(threadId, holder) })
          }
          const deleted = yield* conn.execute(DELETE_THREAD_ROW, [threadId], undefined)
          for (const statement of DELETE_THREAD) yield* conn.executeRaw(statement, [threadId])
          return Array.isArray(deleted) && deleted.length > 0
        }),
        "delete",
        `Cannot delete thread "${threadId}"`
      ))

    const deleteRun: ThreadStore["Type"]["deleteRun"] = (threadId, runId) =>
      transaction(
        Effect.gen(function*() {
          const deleted = yield* conn.execute(DELETE_ENDED_RUN, [threadId, runId], undefined)
          if (!Array.isArray(deleted) || deleted.length === 0) return false
          yield* conn.executeRaw(DELETE_RUN_EVENTS, [threadId, runId])
          return true
        }),
        "deleteRun",
        `Cannot delete run "${runId}" of thread "${threadId}"`
      )

    const { acquireLease, releaseLease } = leases
    return withSpans("SqliteThreadStore", {
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

/** A SQLite thread store on this file, opened (and migrated) when the layer is built, closed with it. */
export const layer = (options: Options): Layer.Layer<ThreadStore, StoreError> =>
  Layer.scoped(ThreadStore, make(options))

/** A SQLite thread store at `${home}/antler.sqlite`. */
export const layerFromHome = (
  home: string,
  options: Omit<Options, "filename"> = {}
): Layer.Layer<ThreadStore, StoreError> => layer({ ...options, filename: path.join(home, FILENAME) })

