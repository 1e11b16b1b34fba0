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
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import { StoreError } from "../services/RunContext.js"
import { RunStatus, StopReason } from "../services/RunEvents.js"
import type { CheckpointRecord, LoadedThread, Metadata, RunRecord, ThreadSummary } from "../services/ThreadStore.js"
import { deleteBusyMessage, leaseBlocks, leaseOwner, threadStatus, ThreadStore } from "../services/ThreadStore.js"
import type { MessageWrite } from "../state/Message.js"
import type { ReducerError } from "../state/Reducers.js"
import * as Redact from "../state/Redact.js"
import * as FastDecode from "../state/FastDecode.js"
import * as SqliteConnection from "./sqlite/SqliteConnection.js"
import { applyUpdate, makeIndexes } from "../state/Reducers.js"
import type { ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"
import * as Json from "../state/Json.js"

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

// ---------------------------------------------------------------------------------------------------------
// Schema migrations

/**
 * The schema, one entry per version: entry `i` takes a database from `user_version` i to i + 1. Entries are
 * only ever appended. Version 2: a checkpoint's `seq` is its rowid (increasing across the whole database, so
 * in step order within a thread) with an index by thread; an append inserts one row and touches nothing else.
 * Version 3: `leases`, one row per thread with an active run (see `ThreadStore.acquireLease`).
 * Version 4: a thread's `owner` and `metadata`, a run's `error` and `metadata` (the gateway's).
 * (Version 1 numbered checkpoints per thread through a trigger on the thread row: one more page written per
 * step, about a third of a step's SQLite time.) A thread's `updated_at` is that of its last checkpoint.
 * `snapshots` holds one folded state per thread, a cache that `load` may rebuild.
 */
export const migrations: ReadonlyArray<ReadonlyArray<string>> = [
  [
    `CREATE TABLE IF NOT EXISTS threads (
      thread_id TEXT PRIMARY KEY NOT NULL,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      title TEXT,
      last_seq INTEGER NOT NULL DEFAULT 0
    )`,
    `CREATE TABLE IF NOT EXISTS checkpoints (
      thread_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      run_id TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updates TEXT NOT NULL,
      PRIMARY KEY (thread_id, seq)
    )`,
    `CREATE TABLE IF NOT EXISTS runs (
      run_id TEXT PRIMARY KEY NOT NULL,
      thread_id TEXT NOT NULL,
      status TEXT NOT NULL,
      stop_reason TEXT,
      started_at TEXT NOT NULL,
      ended_at TEXT
    )`,
    `CREATE INDEX IF NOT EXISTS runs_by_thread ON runs (thread_id, started_at)`,
    // Every checkpoint touches its thread in the same statement, so a step is one statement and one commit.
    `CREATE TRIGGER IF NOT EXISTS checkpoints_touch_thread AFTER INSERT ON checkpoints BEGIN
      UPDATE threads SET last_seq = max(last_seq, NEW.seq), updated_at = NEW.created_at
      WHERE thread_id = NEW.thread_id;
    END`,
    `CREATE TABLE IF NOT EXISTS snapshots (
      thread_id TEXT PRIMARY KEY NOT NULL,
      seq INTEGER NOT NULL,
      created_at TEXT NOT NULL,
      state TEXT NOT NULL
    )`
  ],
  [
    `CREATE TABLE checkpoints_v2 (
      seq INTEGER PRIMARY KEY,
      thread_id TEXT NOT NULL,
      run_id TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updates TEXT NOT NULL
    )`,
    `INSERT INTO checkpoints_v2 (thread_id, run_id, created_at, updates)
      SELECT thread_id, run_id, created_at, updates FROM checkpoints ORDER BY thread_id, seq`,
    `DROP TRIGGER IF EXISTS checkpoints_touch_thread`,
    `DROP TABLE checkpoints`,
    `ALTER TABLE checkpoints_v2 RENAME TO checkpoints`,
    `CREATE INDEX checkpoints_by_thread ON checkpoints (thread_id, seq)`,
    // snapshots name the seq they were folded up to: renumbered checkpoints make them stale
    `DELETE FROM snapshots`
  ],
  [
    // one active run per thread, across processes: the lease of the run that holds it (epoch ms)
    `CREATE TABLE leases (
      thread_id TEXT PRIMARY KEY NOT NULL,
      run_id TEXT NOT NULL,
      owner TEXT NOT NULL,
      expires_at INTEGER NOT NULL
    )`
  ],
  [
    // the gateway's: who owns a thread and its metadata (JSON); why a run failed and what it was asked with
    `ALTER TABLE threads ADD COLUMN owner TEXT`,
    `ALTER TABLE threads ADD COLUMN metadata TEXT`,
    `ALTER TABLE runs ADD COLUMN error TEXT`,
    `ALTER TABLE runs ADD COLUMN metadata TEXT`,
    `CREATE INDEX runs_by_status ON runs (status)`
  ]
]

/** The schema version this build writes. */
export const SCHEMA_VERSION = migrations.length

// ---------------------------------------------------------------------------------------------------------
// Pure helpers: the checkpoint codec

// Schema-decoded with "preserve": provider fields the schemas do not name (a text block's `citations`) must
// survive a reload. FastDecode keeps plain parsed messages as they are, and gives Schema's result otherwise.
const decodeStateUpdates = FastDecode.decodeStateUpdates

const formatPath = (segments: ReadonlyArray<PropertyKey>): string =>
  segments.map((s) => (typeof s === "number" ? `[${s}]` : `.${String(s)}`)).join("") || "(root)"

const clip = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max - 3)}...` : text)

/** Renders a decoding failure as `at <path>: <problem>` lines. */
export const formatParseError = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .slice(0, 3)
    .map((issue) => `at ${formatPath(issue.path)}: ${clip(issue.message)}`)
    .join("; ")

/** Parses the JSON text of a row and decodes it; the failure says what was wrong and where. */
const decodeJsonText = <A>(decode: (json: unknown) => Either.Either<A, ParseResult.ParseError>) =>
(text: unknown): Either.Either<A, string> => {
  if (typeof text !== "string") return Either.left(`expected JSON text, found ${text === null ? "NULL" : typeof text}`)
  let json: unknown
  try {
    json = Json.parse(text)
  } catch (error) {
    return Either.left(`not valid JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  return Either.mapLeft(decode(json), formatParseError)
}

/** Parses and Schema-decodes the text of a checkpoint row; the failure says what was wrong and where. */
export const decodeUpdates: (text: unknown) => Either.Either<ReadonlyArray<TS.StateUpdate>, string> = decodeJsonText(
  decodeStateUpdates
)

/**
 * Whether JSON would not carry a value as it is (NaN, Infinity, undefined, a function), looking where
 * `JSON.stringify` looks: own enumerable keys, array items, not inside what a `toJSON` replaces.
 */
const lossyIn = (value: unknown): boolean => {
  switch (typeof value) {
    case "number":
      return !Number.isFinite(value)
    case "undefined":
    case "function":
      return true
    case "object": {
      if (value === null) return false
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (lossyIn(value[i])) return true
        return false
      }
      if (typeof (value as { readonly toJSON?: unknown }).toJSON === "function") return false
      const record = value as Record<string, unknown>
      for (const key in record) if (Object.hasOwn(record, key) && lossyIn(record[key])) return true
      return false
    }
    default:
      return false
  }
}

/**
 * The JSON text of a checkpoint. Values JSON cannot carry (NaN, Infinity, undefined in an array, functions)
 * are flagged while writing; a flagged checkpoint is decoded once more, and refused when the row could not
 * be loaded again (a `NaN` file size would be `null`), so `append` never writes what `load` would reject.
 */
export const encodeUpdates = (updates: ReadonlyArray<TS.StateUpdate>): Either.Either<string, string> => {
  let text: string
  try {
    // (no replacer: `JSON.stringify` keeps its fast path; the values JSON cannot carry are looked for apart)
    text = JSON.stringify(updates)
  } catch (error) {
    return Either.left(`not representable as JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  if (!lossyIn(updates)) return Either.right(text)
  return Either.match(decodeUpdates(text), {
    onLeft: (problem) => Either.left(`holds a value JSON cannot carry (NaN, Infinity, ...): once written, ${problem}`),
    onRight: () => Either.right(text)
  })
}

/**
 * A step's checkpoint as the stores write it: its JSON text with configured secrets redacted (the common case
 * costs one scan of the text; only a checkpoint holding a secret is rebuilt), and the title it sets, if any.
 * Updates JSON cannot carry are a `StoreError` naming the thread.
 */
export const checkpointOf = (
  threadId: string,
  given: ReadonlyArray<TS.StateUpdate>,
  redactor: Redact.Redactor
): Either.Either<{ readonly text: string; readonly title: string | null | undefined }, StoreError> => {
  let updates = given
  let text = encodeUpdates(updates)
  if (Either.isRight(text) && redactor.test(text.right)) {
    updates = redactor.value(updates)
    text = encodeUpdates(updates)
  }
  return Either.isLeft(text)
    ? Either.left(
      new StoreError({
        operation: "append",
        message: `Cannot save a checkpoint of thread "${threadId}": the step's updates ${text.left}`
      })
    )
    : Either.right({ text: text.right, title: titleOf(updates) })
}

/** The title the updates leave on the thread: `undefined` when none of them sets one. */
export const titleOf = (updates: ReadonlyArray<TS.StateUpdate>): string | null | undefined => {
  for (let i = updates.length - 1; i >= 0; i--) {
    const title = updates[i]!.title
    if (title !== undefined) return title
  }
  return undefined
}

const decodeThreadState = FastDecode.decodeThreadState

/** Parses and Schema-decodes the text of a snapshot row. */
export const decodeSnapshot: (text: unknown) => Either.Either<ThreadState, string> = decodeJsonText(decodeThreadState)

const unreadable = (threadId: string, seq: unknown, problem: string) =>
  new StoreError({
    operation: "load",
    message: `Thread "${threadId}" cannot be loaded: its checkpoint ${seq} is unreadable: ${problem}`
  })

const inapplicable = (threadId: string, seq: unknown, error: ReducerError) =>
  new StoreError({
    operation: "load",
    message: `Thread "${threadId}" cannot be loaded: its checkpoint ${seq} does not apply to the state before it: ` +
      error.message,
    cause: error
  })

/**
 * Folds checkpoint rows (in seq order) into `initial` through the reducers; a row that does not decode or does
 * not apply fails naming the thread and its seq. Consecutive message writes are merged into one while none of
 * them removes anything (`add_messages` gives the same for w1 then w2 as for w1 ++ w2 when w1 removes
 * nothing), so a thread folds in one pass instead of copying its message list once per write: 10,000
 * messages load in a fraction of a second rather than seconds. Other fields are applied update by update.
 */
export const foldCheckpoints = (
  threadId: string,
  rows: ReadonlyArray<{ readonly seq: unknown; readonly updates: unknown }>,
  initial: ThreadState = TS.empty
): Either.Either<ThreadState, StoreError> => {
  let state = initial
  const indexes = makeIndexes()
  let pending: Array<MessageWrite> = []
  const flush = (seq: unknown): StoreError | undefined => {
    if (pending.length === 0) return undefined
    const next = applyUpdate(state, { messages: pending }, indexes)
    pending = []
    if (Either.isLeft(next)) return inapplicable(threadId, seq, next.left)
    state = next.right
    return undefined
  }
  let seq: unknown = 0
  for (const row of rows) {
    seq = row.seq
    const decoded = decodeUpdates(row.updates)
    if (Either.isLeft(decoded)) return Either.left(unreadable(threadId, seq, decoded.left))
    for (const update of decoded.right) {
      let others: TS.StateUpdate = update
      if (update.messages !== undefined) {
        const { messages, ...rest } = update
        others = rest
        let removes = false
        for (const item of messages) {
          pending.push(item)
          if (item.type === "remove") removes = true
        }
        const error = removes ? flush(seq) : undefined
        if (error !== undefined) return Either.left(error)
      }
      if (Object.keys(others).length > 0) {
        const next = applyUpdate(state, others, indexes)
        if (Either.isLeft(next)) return Either.left(inapplicable(threadId, seq, next.left))
        state = next.right
      }
    }
  }
  const error = flush(seq)
  return error === undefined ? Either.right(state) : Either.left(error)
}

// ---------------------------------------------------------------------------------------------------------
// Rows

/** A JSON object stored as text (thread and run metadata); `NULL` is none. */
export const MetadataText = Schema.NullOr(
  Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
)

/** A thread row (also the Postgres store's). */
export const ThreadRow = Schema.Struct({
  thread_id: Schema.String,
  title: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String,
  checkpoints: Schema.Union(Schema.Number, Schema.NumberFromString),
  owner: Schema.NullOr(Schema.String),
  metadata: MetadataText,
  /** The thread's last run, and the holder of its lease (for its status). */
  run_id: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.Union(RunStatus, Schema.Literal("pending", "running"))),
  stop_reason: Schema.NullOr(StopReason),
  lease_run_id: Schema.NullOr(Schema.String),
  lease_owner: Schema.NullOr(Schema.String),
  lease_expires_at: Schema.NullOr(Schema.Union(Schema.Number, Schema.NumberFromString))
})

/** A run row (also the Postgres store's). */
export const RunRow = Schema.Struct({
  run_id: Schema.String,
  thread_id: Schema.String,
  status: Schema.Union(RunStatus, Schema.Literal("pending", "running")),
  stop_reason: Schema.NullOr(StopReason),
  started_at: Schema.String,
  ended_at: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  metadata: MetadataText
})

const decodeThreadRows = Schema.decodeUnknownEither(Schema.Array(ThreadRow))
const decodeRunRows = Schema.decodeUnknownEither(Schema.Array(RunRow))
const decodeMetadata = Schema.decodeUnknownEither(MetadataText)

/** A metadata patch applied: keys set, `null` values removed. */
export const mergeMetadata = (current: Metadata, patch: Metadata): Metadata => {
  const out: Record<string, unknown> = { ...current }
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key]
    else out[key] = value
  }
  return out
}

/** A thread row as listed, its status read at `now` from its last run and the holder of its lease. */
export const threadSummary = (row: typeof ThreadRow.Type, now: number): ThreadSummary => {
  const holder = row.lease_run_id === null || row.lease_owner === null || row.lease_expires_at === null
    ? undefined
    : { run_id: row.lease_run_id, owner: row.lease_owner, expires_at: row.lease_expires_at }
  const last = row.run_id === null || row.status === null ? undefined : { run_id: row.run_id, status: row.status }
  const status = threadStatus(last, holder, now)
  return {
    thread_id: row.thread_id,
    title: row.title,
    created_at: row.created_at,
    updated_at: row.updated_at,
    checkpoints: row.checkpoints,
    owner: row.owner,
    metadata: row.metadata ?? {},
    ...(status === undefined ? {} : { status, stop_reason: row.stop_reason })
  }
}

/** Decodes checkpoint rows (`seq, run_id, created_at, updates`); an unreadable row fails naming it. */
export const checkpointRecords = (
  threadId: string,
  rows: ReadonlyArray<{ readonly [key: string]: unknown }>
): Effect.Effect<ReadonlyArray<CheckpointRecord>, StoreError> =>
  Effect.suspend(() => {
    const out: Array<CheckpointRecord> = []
    for (const row of rows) {
      const updates = decodeUpdates(row.updates)
      if (Either.isLeft(updates)) return Effect.fail(unreadable(threadId, row.seq, updates.left))
      out.push({
        seq: Number(row.seq),
        run_id: String(row.run_id),
        created_at: String(row.created_at),
        updates: updates.right
      })
    }
    return Effect.succeed(out)
  })

/** Rows decoded with `decode`; rows that do not decode are a `StoreError` saying what was unreadable. */
export const decodeRows = <A>(
  decode: (rows: unknown) => Either.Either<A, ParseResult.ParseError>,
  rows: unknown,
  operation: string,
  what: string
): Effect.Effect<A, StoreError> =>
  Either.match(decode(rows), {
    onLeft: (error) =>
      Effect.fail(new StoreError({ operation, message: `${what} has an unreadable row: ${formatParseError(error)}` })),
    onRight: Effect.succeed
  })

// ---------------------------------------------------------------------------------------------------------
// SQL

// Inserts only when the thread row exists (a read of it, no write): no row, nothing inserted.
const APPEND_CHECKPOINT = `INSERT INTO checkpoints (thread_id, run_id, created_at, updates)
  SELECT thread_id, ?, ?, ? FROM threads WHERE thread_id = ?`
const SET_TITLE = `UPDATE threads SET title = ? WHERE thread_id = ?`
const ENSURE_THREAD = `INSERT INTO threads (thread_id, created_at, updated_at) VALUES (?, ?, ?)
  ON CONFLICT (thread_id) DO NOTHING`
const CREATE_THREAD = `INSERT INTO threads (thread_id, created_at, updated_at, owner, metadata) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (thread_id) DO NOTHING`
const COUNT_CHECKPOINTS = `(SELECT COUNT(*) FROM checkpoints c WHERE c.thread_id = t.thread_id)`
const LAST_CHECKPOINT_AT = `(SELECT c.created_at FROM checkpoints c WHERE c.thread_id = t.thread_id ORDER BY c.seq DESC LIMIT 1)`
const SELECT_THREAD = `SELECT t.thread_id, ${COUNT_CHECKPOINTS} AS checkpoints FROM threads t WHERE t.thread_id = ?`
const SELECT_CHECKPOINTS = `SELECT seq, updates FROM checkpoints WHERE thread_id = ? AND seq > ? ORDER BY seq`
const SELECT_SNAPSHOT = `SELECT seq, state FROM snapshots WHERE thread_id = ?`
const UPSERT_SNAPSHOT = `INSERT INTO snapshots (thread_id, seq, created_at, state) VALUES (?, ?, ?, ?)
  ON CONFLICT (thread_id) DO UPDATE SET seq = excluded.seq, created_at = excluded.created_at, state = excluded.state
  WHERE excluded.seq >= snapshots.seq`
const RUN_COLUMNS = `run_id, thread_id, status, stop_reason, started_at, ended_at, error, metadata`
const SELECT_RUNS = `SELECT ${RUN_COLUMNS} FROM runs WHERE thread_id = ? ORDER BY started_at, rowid`
const UPSERT_RUN = `INSERT INTO runs (${RUN_COLUMNS})
  VALUES (?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, status = excluded.status,
  stop_reason = excluded.stop_reason, started_at = excluded.started_at, ended_at = excluded.ended_at,
  error = COALESCE(excluded.error, runs.error), metadata = COALESCE(excluded.metadata, runs.metadata)`
const LAST_RUN = (column: string) =>
  `(SELECT r.${column} FROM runs r WHERE r.thread_id = t.thread_id ORDER BY r.started_at DESC, r.rowid DESC LIMIT 1)`
const THREAD_COLUMNS = `t.thread_id, t.title, t.created_at,
  COALESCE(${LAST_CHECKPOINT_AT}, t.updated_at) AS updated_at, ${COUNT_CHECKPOINTS} AS checkpoints, t.owner, t.metadata,
  ${LAST_RUN("run_id")} AS run_id, ${LAST_RUN("status")} AS status, ${LAST_RUN("stop_reason")} AS stop_reason,
  l.run_id AS lease_run_id, l.owner AS lease_owner, l.expires_at AS lease_expires_at`
const THREADS_FROM = `threads t LEFT JOIN leases l ON l.thread_id = t.thread_id`
const LIST_THREADS = `SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} ORDER BY updated_at DESC, t.rowid DESC`
const THREAD_INFO = `SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} WHERE t.thread_id = ?`
const SELECT_METADATA = `SELECT metadata FROM threads WHERE thread_id = ?`
const SET_METADATA = `UPDATE threads SET metadata = ?, updated_at = ? WHERE thread_id = ?`
const DELETE_THREAD = [
  `DELETE FROM checkpoints WHERE thread_id = ?`,
  `DELETE FROM runs WHERE thread_id = ?`,
  `DELETE FROM snapshots WHERE thread_id = ?`,
  `DELETE FROM leases WHERE thread_id = ?`
]
const DELETE_THREAD_ROW = `DELETE FROM threads WHERE thread_id = ? RETURNING thread_id`
const SELECT_ALL_CHECKPOINTS =
  `SELECT seq, run_id, created_at, updates FROM checkpoints WHERE thread_id = ? ORDER BY seq`
const DELETE_RUN_CHECKPOINTS = `DELETE FROM checkpoints WHERE thread_id = ? AND run_id = ?`

const SELECT_LEASE = `SELECT run_id, owner, expires_at FROM leases WHERE thread_id = ?`
const UPSERT_LEASE = `INSERT INTO leases (thread_id, run_id, owner, expires_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (thread_id) DO UPDATE SET run_id = excluded.run_id, owner = excluded.owner,
  expires_at = excluded.expires_at`
const DELETE_LEASE = `DELETE FROM leases WHERE thread_id = ? AND run_id = ?`

const LeaseRow = Schema.Struct({ run_id: Schema.String, owner: Schema.String, expires_at: Schema.Number })
const decodeLeaseRows = Schema.decodeUnknownEither(Schema.Array(LeaseRow))

// the database's own words (the driver's error), else the SQL layer's
const driverMessage = (error: SqlError): string => {
  const cause: unknown = error.cause
  const detail = cause instanceof Error ? cause.message : undefined
  return detail !== undefined && detail !== "" ? detail : error.message
}

/** A store operation's failure: `what: <the database's message>`, the SQL error as the cause. */
export const toStoreError = (operation: string, what: string) => (error: SqlError | StoreError): StoreError =>
  error._tag === "StoreError"
    ? error
    : new StoreError({ operation, message: `${what}: ${driverMessage(error)}`, cause: error })

const iso = (millis: number) => new Date(millis).toISOString()

/** Whether SQLite refused a statement because another connection holds the lock it needs. */
const isBusy = (error: SqlError | StoreError): boolean => {
  if (error._tag !== "SqlError") return false
  const code = (error.cause as { readonly code?: unknown } | undefined)?.code
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

// ---------------------------------------------------------------------------------------------------------
// The store

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

    // The store's own connection (closed with the store), its access serialised by the lock below.
    const conn = yield* SqliteConnection.open(filename).pipe(
      Effect.mapError((error) => openFailed(driverMessage(error), error))
    )
    // The store's one connection: a fiber's statements (or transaction) run alone on it.
    const lock = SqliteConnection.makeLock()
    const busyTimeout = Math.max(0, Math.floor(options.busyTimeout ?? 5000))
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

    /** Runs `body` alone on the connection: no other fiber of this store can put a statement in between. */
    const exclusive = <A>(body: Effect.Effect<A, SqlError | StoreError>, operation: string, what: string) => {
      const attempt = lock.exclusively(body)
      return attempt.pipe(
        Effect.catchIf(isBusy, (first) => retryBusy(attempt, first)),
        Effect.mapError(toStoreError(operation, what))
      )
    }

    /** `body` in a transaction: `BEGIN IMMEDIATE` takes the write lock first, so a writer never deadlocks. */
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

    yield* exclusive(
      Effect.zipRight(
        conn.executeRaw("PRAGMA busy_timeout = 0", []),
        conn.executeRaw("PRAGMA synchronous = NORMAL", [])
      ),
      "open",
      `Cannot open ${where}`
    )
    yield* transaction(
      Effect.gen(function*() {
        const rows = yield* conn.execute("PRAGMA user_version", [], undefined)
        const version = Number(rows[0]?.user_version ?? 0)
        if (version > SCHEMA_VERSION) {
          return yield* openFailed(
            `it has schema version ${version}, written by a newer Antler; this build reads up to ${SCHEMA_VERSION}`
          )
        }
        for (let v = version; v < SCHEMA_VERSION; v++) {
          for (const statement of migrations[v]!) yield* conn.executeRaw(statement, [])
        }
        if (version < SCHEMA_VERSION) yield* conn.executeRaw(`PRAGMA user_version = ${SCHEMA_VERSION}`, [])
      }),
      "open",
      `Cannot migrate ${where}`
    )

    // Group commit. Every append waits for a commit that holds it (a completed step is durable when `append`
    // returns), but appends of concurrent runs that arrive together share one transaction: the first caller
    // leads, lets the others queue up for one scheduler turn, then writes the whole queue. Alone, a step is
    // one auto-committed statement, as before.
    interface Pending {
      readonly threadId: string
      readonly runId: string
      readonly text: string
      readonly title: string | null | undefined
      /** How its write ended, once it did. */
      exit: Exit.Exit<void, StoreError> | undefined
      /**
       * Resumes a follower waiting for the leader's commit (the leader reads `exit` itself). A plain callback:
       * making a `Deferred` copies Effect's whole prototype into a new object, about 5 µs for each step of a
       * busy store.
       */
      resume: ((exit: Exit.Exit<void, StoreError>) => void) | undefined
    }
    let queue: Array<Pending> = []
    let leading = false

    const whatOf = (threadId: string) => `Cannot save a checkpoint of thread "${threadId}"`

    /** One checkpoint, inside a transaction the caller holds: creates the thread and sets its title as needed. */
    const writeOne = (p: Pending, now: string) => {
      const insert = conn.executeRaw(APPEND_CHECKPOINT, [p.runId, now, p.text, p.threadId])
      const general = conn.executeRaw(ENSURE_THREAD, [p.threadId, now, now]).pipe(
        Effect.zipRight(insert),
        Effect.zipRight(p.title === undefined ? Effect.void : conn.executeRaw(SET_TITLE, [p.title, p.threadId]))
      )
      if (p.title !== undefined) return Effect.asVoid(general)
      return Effect.flatMap(insert, (result) =>
        (result as { readonly changes?: number }).changes === 1 ? Effect.void : Effect.asVoid(general))
    }

    /** A single checkpoint: the usual step is one statement (SQLite takes the write lock before reading). */
    const writeAlone = (p: Pending, now: string) =>
      p.title === undefined
        ? Effect.flatMap(
          exclusive(conn.executeRaw(APPEND_CHECKPOINT, [p.runId, now, p.text, p.threadId]), "append", whatOf(p.threadId)),
          (result) =>
            (result as { readonly changes?: number }).changes === 1
              ? Effect.void
              : transaction(writeOne(p, now), "append", whatOf(p.threadId))
        )
        : transaction(writeOne(p, now), "append", whatOf(p.threadId))

    const settle = (p: Pending, exit: Exit.Exit<void, StoreError>) => {
      p.exit = exit
      const resume = p.resume
      p.resume = undefined
      if (resume !== undefined) resume(exit)
    }

    /** Writes a batch and settles each caller; a failed batch is retried one by one, so one bad step fails alone. */
    const writeBatch = (batch: ReadonlyArray<Pending>) =>
      Effect.clockWith((clock) => {
        const now = iso(clock.unsafeCurrentTimeMillis())
        const alone = (p: Pending) => Effect.map(Effect.exit(writeAlone(p, now)), (exit) => settle(p, exit))
        if (batch.length === 1) return alone(batch[0]!)
        const oneByOne = Effect.forEach(batch, alone, { discard: true })
        return Effect.flatMap(
          Effect.exit(transaction(Effect.forEach(batch, (p) => writeOne(p, now), { discard: true }), "append", whatOf(batch[0]!.threadId))),
          (exit) => Exit.isSuccess(exit) ? Effect.sync(() => batch.forEach((p) => settle(p, exit))) : oneByOne
        )
      })

    /**
     * A follower's wait: until the leader settles it (at once when it already has). Interrupted, it stops
     * waiting; its step is written all the same, as it was queued.
     */
    const follow = (p: Pending) =>
      Effect.async<void, StoreError>((resume) => {
        if (p.exit !== undefined) return resume(p.exit)
        p.resume = resume
        return Effect.sync(() => {
          p.resume = undefined
        })
      })

    const lead = (own: Pending) =>
      Effect.uninterruptible(
        Effect.yieldNow().pipe(
          Effect.zipRight(Effect.suspend(() => {
            const batch = queue
            queue = []
            leading = false
            return writeBatch(batch)
          }))
        )
      ).pipe(Effect.zipRight(Effect.suspend(() => own.exit!)))

    // The runs of this process that hold a lease through this store (by thread and run): while it is the only one,
    // no other append can arrive to share a commit, and waiting a scheduler turn for one would be wasted.
    const leased = new Set<string>()
    const leaseKey = (threadId: string, runId: string) => `${threadId}\u0000${runId}`

    /**
     * The usual step of a run alone on the store, written now: one auto-committed statement, run synchronously
     * while the connection is free (no effect step, no scheduler turn). `undefined` when it cannot be written
     * this way: the connection is busy, another process holds the file's write lock, or the thread row is
     * missing; the caller then takes the general path, which handles each of these.
     */
    const writeNow = (p: Pending, now: string): Exit.Exit<void, StoreError> | undefined =>
      lock.ifFree(() => {
        const written = conn.writeNow(APPEND_CHECKPOINT, [p.runId, now, p.text, p.threadId])
        if (Either.isRight(written)) return written.right.changes === 1 ? Exit.void : undefined
        return isBusy(written.left) ? undefined : Exit.fail(toStoreError("append", whatOf(p.threadId))(written.left))
      })

    const append: ThreadStore["Type"]["append"] = (threadId, runId, given) =>
      Effect.clockWith((clock) => {
        const checkpoint = checkpointOf(threadId, given, redactor)
        if (Either.isLeft(checkpoint)) return Effect.fail(checkpoint.left)
        const { text, title } = checkpoint.right
        const pending: Pending = { threadId, runId, text, title, exit: undefined, resume: undefined }
        if (!leading && title === undefined && leased.size <= 1) {
          const exit = writeNow(pending, iso(clock.unsafeCurrentTimeMillis()))
          if (exit !== undefined) return exit
        }
        queue.push(pending)
        if (leading) return follow(pending)
        leading = true
        return lead(pending)
      })

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

    const snapshotEvery = Math.max(0, Math.floor(options.snapshotEvery ?? 50))

    const readCheckpoints = (threadId: string, after: number) =>
      transaction(
        conn.execute(SELECT_CHECKPOINTS, [threadId, after], undefined),
        "load",
        `Cannot load thread "${threadId}"`,
        "BEGIN"
      )

    // A snapshot is a cache: one that cannot be written is skipped, one that cannot be read is rebuilt.
    const writeSnapshot = (threadId: string, seq: number, state: ThreadState) =>
      Effect.clockWith((clock) =>
        transaction(
          Effect.suspend(() => {
            const now = iso(clock.unsafeCurrentTimeMillis())
            return conn.executeRaw(UPSERT_SNAPSHOT, [threadId, seq, now, JSON.stringify(state)])
          }),
          "load",
          `Cannot save a snapshot of thread "${threadId}"`
        )
      ).pipe(Effect.catchAll((error) => Effect.logWarning(error.message)))

    const load: ThreadStore["Type"]["load"] = (threadId) =>
      Effect.gen(function*() {
        // One read transaction: the thread, its snapshot, the checkpoints after it and its runs are one state.
        const read = yield* transaction(
          Effect.gen(function*() {
            const threads = yield* conn.execute(SELECT_THREAD, [threadId], undefined)
            const snapshots = snapshotEvery > 0 ? yield* conn.execute(SELECT_SNAPSHOT, [threadId], undefined) : []
            const after = snapshots.length > 0 ? Number(snapshots[0].seq) : 0
            const checkpoints = yield* conn.execute(SELECT_CHECKPOINTS, [threadId, after], undefined)
            const runs = yield* conn.execute(SELECT_RUNS, [threadId], undefined)
            return { threads, snapshot: snapshots[0], checkpoints, runs }
          }),
          "load",
          `Cannot load thread "${threadId}"`,
          "BEGIN"
        )
        if (read.threads.length === 0 && read.checkpoints.length === 0 && read.snapshot === undefined) {
          return Option.none<LoadedThread>()
        }
        let base = TS.empty
        let baseSeq = 0
        let checkpoints: ReadonlyArray<{ readonly seq: unknown; readonly updates: unknown }> = read.checkpoints
        if (read.snapshot !== undefined) {
          const decoded = decodeSnapshot(read.snapshot.state)
          if (Either.isRight(decoded)) {
            base = decoded.right
            baseSeq = Number(read.snapshot.seq)
          } else {
            yield* Effect.logWarning(
              `The snapshot of thread "${threadId}" is unreadable (${decoded.left}); folding all its checkpoints`
            )
            // Checkpoints are immutable once written: reading them all again gives a consistent (newer) state.
            checkpoints = yield* readCheckpoints(threadId, 0)
          }
        }
        const state = yield* foldCheckpoints(threadId, checkpoints, base)
        const lastSeq = checkpoints.length > 0 ? Number(checkpoints[checkpoints.length - 1]!.seq) : baseSeq
        const count = Number(read.threads[0]?.checkpoints ?? checkpoints.length)
        const records: ReadonlyArray<RunRecord> = yield* decodeRows(
          decodeRunRows,
          read.runs,
          "load",
          `The run table of thread "${threadId}"`
        )
        if (snapshotEvery > 0 && checkpoints.length >= snapshotEvery) yield* writeSnapshot(threadId, lastSeq, state)
        return Option.some<LoadedThread>({ thread_id: threadId, state, checkpoints: count, runs: records })
      })

    const saveRun: ThreadStore["Type"]["saveRun"] = (run) =>
      Effect.clockWith((clock) => {
        const now = iso(clock.unsafeCurrentTimeMillis())
        return transaction(
          Effect.zipRight(
            conn.executeRaw(ENSURE_THREAD, [run.thread_id, now, now]),
            conn.executeRaw(UPSERT_RUN, [
              run.run_id,
              run.thread_id,
              run.status,
              run.stop_reason,
              run.started_at,
              run.ended_at,
              run.error ?? null,
              run.metadata == null ? null : JSON.stringify(run.metadata)
            ])
          ),
          "saveRun",
          `Cannot save run "${run.run_id}" of thread "${run.thread_id}"`
        )
      })

    const list: ThreadStore["Type"]["list"] = Effect.gen(function*() {
      const rows = yield* exclusive(conn.execute(LIST_THREADS, [], undefined), "list", "Cannot list threads")
      const threads = yield* decodeRows(decodeThreadRows, rows, "list", "The thread table")
      const now = yield* Clock.currentTimeMillis
      return threads.map((row) => threadSummary(row, now))
    })

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

    const patchMetadata: ThreadStore["Type"]["patchMetadata"] = (threadId, patch) =>
      Effect.clockWith((clock) =>
        transaction(
          Effect.gen(function*() {
            const rows = yield* conn.execute(SELECT_METADATA, [threadId], undefined)
            if (rows.length === 0) return false
            const current = yield* decodeRows(decodeMetadata, rows[0].metadata, "patchMetadata", `Thread "${threadId}"`)
            const next = mergeMetadata(current ?? {}, patch)
            yield* conn.executeRaw(SET_METADATA, [JSON.stringify(next), iso(clock.unsafeCurrentTimeMillis()), threadId])
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

    const rollback: ThreadStore["Type"]["rollback"] = (threadId, runId) =>
      Effect.gen(function*() {
        const deleted = yield* transaction(
          Effect.gen(function*() {
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
          const rows = yield* conn.execute(SELECT_LEASE, [threadId], undefined)
          const [holder] = yield* decodeRows(decodeLeaseRows, rows, "delete", "The lease table")
          if (leaseBlocks(holder, { threadId, runId: "", ttlMs: 0, now })) {
            return yield* new StoreError({ operation: "delete", message: deleteBusyMessage(threadId, holder) })
          }
          for (const statement of DELETE_THREAD) yield* conn.executeRaw(statement, [threadId])
          const deleted = yield* conn.execute(DELETE_THREAD_ROW, [threadId], undefined)
          return Array.isArray(deleted) && deleted.length > 0
        }),
        "delete",
        `Cannot delete thread "${threadId}"`
      ))

    const owner = leaseOwner()
    const acquireLease: ThreadStore["Type"]["acquireLease"] = (request) =>
      transaction(
        Effect.gen(function*() {
          const rows = yield* conn.execute(SELECT_LEASE, [request.threadId], undefined)
          const [holder] = yield* decodeRows(decodeLeaseRows, rows, "lease", "The lease table")
          if (leaseBlocks(holder, request)) return holder
          yield* conn.executeRaw(UPSERT_LEASE, [request.threadId, request.runId, owner, request.now + request.ttlMs])
          leased.add(leaseKey(request.threadId, request.runId))
          return undefined
        }),
        "lease",
        `Cannot take the lease of thread "${request.threadId}"`
      )

    const releaseLease: ThreadStore["Type"]["releaseLease"] = (threadId, runId) =>
      Effect.asVoid(
        exclusive(conn.executeRaw(DELETE_LEASE, [threadId, runId]), "lease", `Cannot release the lease of thread "${threadId}"`)
      ).pipe(Effect.ensuring(Effect.sync(() => leased.delete(leaseKey(threadId, runId)))))

    return ThreadStore.of({
      ensure,
      info,
      patchMetadata,
      delete: deleteThread,
      checkpoints,
      rollback,
      runs,
      load,
      append,
      saveRun,
      list,
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
