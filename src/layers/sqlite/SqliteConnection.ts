/**
 * The SQLite connection of the thread store: one better-sqlite3 database, its statements prepared once and kept
 * by their text. better-sqlite3 runs a statement synchronously, so a statement here is one step of an effect.
 *
 * `@effect/sql`'s client wraps each statement in a cache with a time-to-live, keyed by a hash of the SQL text,
 * plus its own permit: about 10 µs and a dozen effect steps per statement. The store already serialises its use
 * of the connection under its own lock, so it talks to the database directly (same statements, same errors:
 * `SqlError` with the driver's error as `cause`).
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { Worker } from "node:worker_threads"
import * as Mutex from "../../internal/Mutex.js"

/** What a write statement reports. */
export interface RunResult {
  readonly changes: number
  readonly lastInsertRowid: number | bigint
}

interface Statement {
  readonly reader: boolean
  readonly readonly: boolean
  run(...params: ReadonlyArray<unknown>): RunResult
  all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>>
}

interface Database {
  prepare(sql: string): Statement
  pragma(source: string): unknown
  close(): void
}

type DatabaseConstructor = new(filename: string, options?: { readonly readonly?: boolean }) => Database

/** The store's connection: the two statement forms it uses, as `@effect/sql`'s `Connection` has them. */
export interface Connection {
  /** Rows of a query (`[]` for a statement that returns none). */
  readonly execute: (
    sql: string,
    params: ReadonlyArray<unknown>,
    transformRows?: undefined
  ) => Effect.Effect<ReadonlyArray<any>, SqlError>
  /** Rows of a query, or a write's `RunResult` (`changes`, `lastInsertRowid`). */
  readonly executeRaw: (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown, SqlError>
  /**
   * Runs a write statement now, synchronously (no effect step): its `RunResult`, or the `SqlError` it failed
   * with. For the hot path of a caller that already holds the connection (see `Mutex.ifFree`).
   */
  readonly writeNow: (sql: string, params: ReadonlyArray<unknown>) => Either.Either<RunResult, SqlError>
  /** `writeNow` for a write that returns rows (`RETURNING`): its rows. */
  readonly writeRowsNow: (
    sql: string,
    params: ReadonlyArray<unknown>
  ) => Either.Either<ReadonlyArray<Record<string, unknown>>, SqlError>
}

/** Prepared statements kept at most (the store has a few dozen distinct statements). */
const MAX_PREPARED = 256

/** Write statements between two checkpoints of the write-ahead log (a step writes 2 to 3 pages). */
const CHECKPOINT_EVERY = 300

const failed = (cause: unknown, message: string) => new SqlError({ cause, message })

// ---------------------------------------------------------------------------------------------------------
// Checkpoints off the main thread
//
// In WAL mode a commit appends pages to the log; now and then a checkpoint copies them into the database file
// and syncs both. SQLite runs that checkpoint inside whichever commit crosses 1,000 pages, on the caller's
// thread: about half of what an insert cost (measured on a step's row: 75 µs with it, 36 without). Here the store's
// connection never checkpoints; a worker thread with its own connection to the same file does (PASSIVE: it
// never blocks a writer or a reader), asked after every CHECKPOINT_EVERY writes, one checkpoint at a time (a flag
// in shared memory says when one is done); the writes made while one runs count towards the next. The worker
// starts at the first request, so a short-lived store (a CLI command) never starts one; closing the last
// connection checkpoints what is left, as SQLite always does. Durability is the same: a commit is in the log
// (and so survives SIGKILL) when it returns, checkpointed or not. Should the worker fail, the connection goes
// back to checkpointing on its own.

const CHECKPOINTER = `
const { parentPort, workerData } = require("node:worker_threads")
// the worker's own connection (undefined when it could not open: the connection is told, and falls back)
const db = (() => {
  try {
    const opened = new (require(workerData.driver))(workerData.filename, { fileMustExist: true })
    opened.pragma("busy_timeout = 1000")
    return opened
  } catch (error) {
    parentPort.postMessage({ failed: String(error && error.message || error) })
    return undefined
  }
})()
parentPort.on("message", (message) => {
  if (message === "close") {
    if (db !== undefined) db.close()
    parentPort.close()
    return
  }
  try {
    if (db !== undefined) db.pragma("wal_checkpoint(PASSIVE)")
  } catch {
    // busy, or a transient error: the next request tries again
  }
  // read by the connection's thread at its next write, whether or not its event loop has turned since
  Atomics.store(workerData.busy, 0, 0)
  parentPort.postMessage("done")
})
`

interface Checkpointer {
  /** A write happened: asks the worker for a checkpoint once enough have. */
  readonly wrote: () => void
  /** Stops the worker (its connection closes first); resolves when it has exited. */
  readonly close: () => Promise<void>
}

const makeCheckpointer = (db: Database, filename: string, driver: string): Checkpointer => {
  let worker: Worker | undefined
  let writes = 0
  // 1 while a checkpoint is asked for and not done. Shared with the worker, which clears it: its "done" message
  // waits for this thread's event loop, which a busy store may not turn for seconds (then no checkpoint would
  // be asked for all that time, and the log would grow).
  const busy = new Int32Array(new SharedArrayBuffer(4))
  let failedOnce = false
  const fallBack = () => {
    if (failedOnce) return
    failedOnce = true
    void worker?.terminate()
    worker = undefined
    try {
      db.pragma("wal_autocheckpoint = 1000")
    } catch {
      // the connection is closing
    }
  }
  const request = () => {
    writes = 0
    Atomics.store(busy, 0, 1)
    try {
      ;(worker ??= start()).postMessage("checkpoint")
    } catch {
      fallBack()
    }
  }
  const start = (): Worker => {
    const w = new Worker(CHECKPOINTER, { eval: true, workerData: { filename, driver, busy } })
    w.on("message", (message: unknown) => {
      if (message !== "done") return fallBack()
      // the writes made while it ran are not all in the file: another checkpoint when there are enough (a
      // burst that ended during this one would otherwise leave its tail in the log until the next write)
      if (writes >= CHECKPOINT_EVERY && Atomics.load(busy, 0) === 0) request()
    })
    w.on("error", fallBack)
    // after the listeners (adding a "message" listener refs the worker's port again): the worker never keeps
    // the process alive
    w.unref()
    return w
  }
  return {
    wrote: () => {
      if (failedOnce || ++writes < CHECKPOINT_EVERY || Atomics.load(busy, 0) === 1) return
      request()
    },
    close: () => {
      const w = worker
      worker = undefined
      if (w === undefined) return Promise.resolve()
      return new Promise<void>((resolve) => {
        w.once("exit", () => resolve())
        // waited for: the process stays up until the worker's connection has closed
        w.ref()
        w.postMessage("close")
      })
    }
  }
}

/** A connection to a file (not `:memory:` nor a `file:` URI, which may name an in-memory database). */
const onDisk = (filename: string) => filename !== ":memory:" && filename !== "" && !filename.startsWith("file:")

/** How long opening waits out another process that holds the file's lock while it, too, opens it. */
const OPEN_WAIT_MS = 5_000

/**
 * Switches the connection to WAL. Two processes opening a new file at once can get SQLITE_BUSY here without
 * SQLite's busy handler waiting (seen once: `antler run` twice at once on a fresh home); it is retried, with a
 * short synchronous pause (this runs once, at open), until `OPEN_WAIT_MS` have passed.
 */
const walMode = (db: { pragma: (source: string) => unknown }) => {
  const deadline = Date.now() + OPEN_WAIT_MS
  for (let pause = 10;; pause = Math.min(pause * 2, 200)) {
    try {
      db.pragma("journal_mode = WAL")
      return
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code !== "SQLITE_BUSY" || Date.now() >= deadline) throw error
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pause)
    }
  }
}

/**
 * Opens the database file (created when missing) in WAL mode; closed when the scope closes. Fails with a
 * `SqlError` whose cause is the driver's error when the file cannot be opened.
 */
export const open = (filename: string): Effect.Effect<Connection, SqlError, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.try({
        try: () => {
          const requireCjs = createRequire(import.meta.url)
          const Sqlite = requireCjs("better-sqlite3") as DatabaseConstructor
          const db = new Sqlite(filename, { readonly: false })
          let checkpointer: Checkpointer | undefined
          try {
            walMode(db)
            if (onDisk(filename)) {
              db.pragma("wal_autocheckpoint = 0")
              // (the absolute path: the worker opens the file later, when the process may have changed directory)
              checkpointer = makeCheckpointer(db, Path.resolve(filename), requireCjs.resolve("better-sqlite3"))
            }
          } catch (error) {
            db.close()
            throw error
          }
          return { db, checkpointer }
        },
        catch: (cause) => failed(cause, "Failed to open the database")
      }),
      ({ checkpointer, db }) =>
        Effect.promise(() => checkpointer?.close() ?? Promise.resolve()).pipe(
          Effect.ensuring(Effect.sync(() => db.close()))
        )
    ),
    ({ checkpointer, db }): Connection => {
      const prepared = new Map<string, Statement>()
      const statement = (sql: string): Statement => {
        let found = prepared.get(sql)
        if (found === undefined) {
          if (prepared.size >= MAX_PREPARED) prepared.clear()
          found = db.prepare(sql)
          prepared.set(sql, found)
        }
        return found
      }
      // Runs a statement now: its rows (a query), its `RunResult` (a write, `raw`) or `[]`, or the error.
      const runNow = (sql: string, params: ReadonlyArray<unknown>, raw: boolean): Either.Either<unknown, SqlError> => {
        let s: Statement
        try {
          s = statement(sql)
        } catch (cause) {
          return Either.left(failed(cause, "Failed to prepare statement"))
        }
        try {
          if (s.reader) {
            const rows = s.all(...params)
            // (a write that returns rows: `RETURNING`)
            if (!s.readonly) checkpointer?.wrote()
            return Either.right(rows)
          }
          const result = s.run(...params)
          checkpointer?.wrote()
          return Either.right(raw ? result : [])
        } catch (cause) {
          return Either.left(failed(cause, "Failed to execute statement"))
        }
      }
      // (an Either is an effect: a Left fails with its error)
      const run = (sql: string, params: ReadonlyArray<unknown>, raw: boolean): Effect.Effect<any, SqlError> =>
        Effect.suspend(() => runNow(sql, params, raw))
      const writeNow = (sql: string, params: ReadonlyArray<unknown>) =>
        runNow(sql, params, true) as Either.Either<RunResult, SqlError>
      const writeRowsNow = (sql: string, params: ReadonlyArray<unknown>) =>
        runNow(sql, params, false) as Either.Either<ReadonlyArray<Record<string, unknown>>, SqlError>
      return {
        execute: (sql, params) => run(sql, params, false),
        executeRaw: (sql, params) => run(sql, params, true),
        writeNow,
        writeRowsNow
      }
    }
  )

/** Mutual exclusion between the fibers of one store (one connection: one statement or transaction at a time). */
export type Lock = Mutex.Mutex

/** A fresh lock. */
export const makeLock = (): Lock => Mutex.make()
