/**
 * The SQLite store's schema and its migrations: `PRAGMA user_version` is the version a database is at, and
 * opening the store takes it to this build's version, one entry of `migrations` after another, in the
 * transaction that opens it. A database written by a newer build is refused rather than misread.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { StoreError } from "../../services/RunContext.js"
import type { Connection } from "./SqliteConnection.js"

// What a run's record keeps (what it was asked with, why it failed), in bytes.
const runBytes = (row: string) =>
  `(COALESCE(octet_length(${row}.metadata), 0) + COALESCE(octet_length(${row}.error), 0))`
const addTo = (thread: string, bytes: string) =>
  `UPDATE threads SET bytes = bytes + ${bytes} WHERE thread_id = ${thread};`

/**
 * Version 7: the byte counters. Each write of a checkpoint, a run's record or its events adds what it keeps to its
 * thread's `bytes` (a delete, what it kept, subtracted); each change of a thread's `bytes`, and its deletion, moves
 * its owner's. The thread's row is deleted before its checkpoints (`Statements.DELETE_THREAD_ROW`), so deleting a
 * long thread is one change of its owner's counter, not one per checkpoint.
 */
const BYTES_MIGRATION: ReadonlyArray<string> = [
  `ALTER TABLE threads ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0`,
  `CREATE TABLE owner_bytes (owner TEXT PRIMARY KEY NOT NULL, bytes INTEGER NOT NULL) WITHOUT ROWID`,
  `CREATE TRIGGER checkpoints_bytes_in AFTER INSERT ON checkpoints BEGIN
    ${addTo("NEW.thread_id", "octet_length(NEW.updates)")}
  END`,
  `CREATE TRIGGER checkpoints_bytes_out AFTER DELETE ON checkpoints BEGIN
    ${addTo("OLD.thread_id", "-octet_length(OLD.updates)")}
  END`,
  `CREATE TRIGGER runs_bytes_in AFTER INSERT ON runs BEGIN ${addTo("NEW.thread_id", runBytes("NEW"))} END`,
  `CREATE TRIGGER runs_bytes_change AFTER UPDATE ON runs
    WHEN ${runBytes("NEW")} != ${runBytes("OLD")} OR NEW.thread_id != OLD.thread_id BEGIN
    ${addTo("OLD.thread_id", `-${runBytes("OLD")}`)}
    ${addTo("NEW.thread_id", runBytes("NEW"))}
  END`,
  `CREATE TRIGGER runs_bytes_out AFTER DELETE ON runs BEGIN ${addTo("OLD.thread_id", `-${runBytes("OLD")}`)} END`,
  `CREATE TRIGGER run_events_bytes_in AFTER INSERT ON run_events BEGIN
    ${addTo("NEW.thread_id", "octet_length(NEW.events)")}
  END`,
  `CREATE TRIGGER run_events_bytes_change AFTER UPDATE ON run_events BEGIN
    ${addTo("OLD.thread_id", "-octet_length(OLD.events)")}
    ${addTo("NEW.thread_id", "octet_length(NEW.events)")}
  END`,
  `CREATE TRIGGER run_events_bytes_out AFTER DELETE ON run_events BEGIN
    ${addTo("OLD.thread_id", "-octet_length(OLD.events)")}
  END`,
  `CREATE TRIGGER threads_bytes_owner AFTER UPDATE OF bytes ON threads WHEN NEW.bytes != OLD.bytes BEGIN
    INSERT INTO owner_bytes (owner, bytes) VALUES (COALESCE(NEW.owner, ''), NEW.bytes - OLD.bytes)
      ON CONFLICT (owner) DO UPDATE SET bytes = owner_bytes.bytes + excluded.bytes;
  END`,
  `CREATE TRIGGER threads_owner_moved AFTER UPDATE OF owner ON threads WHEN NEW.owner IS NOT OLD.owner BEGIN
    UPDATE owner_bytes SET bytes = bytes - OLD.bytes WHERE owner = COALESCE(OLD.owner, '');
    INSERT INTO owner_bytes (owner, bytes) VALUES (COALESCE(NEW.owner, ''), OLD.bytes)
      ON CONFLICT (owner) DO UPDATE SET bytes = owner_bytes.bytes + excluded.bytes;
  END`,
  `CREATE TRIGGER threads_bytes_gone AFTER DELETE ON threads WHEN OLD.bytes != 0 BEGIN
    UPDATE owner_bytes SET bytes = bytes - OLD.bytes WHERE owner = COALESCE(OLD.owner, '');
  END`,
  // the threads there were, counted once (their owners' counters follow, through the trigger above)
  `UPDATE threads SET bytes =
    COALESCE((SELECT SUM(octet_length(c.updates)) FROM checkpoints c WHERE c.thread_id = threads.thread_id), 0) +
    COALESCE((SELECT SUM(${runBytes("r")}) FROM runs r WHERE r.thread_id = threads.thread_id), 0) +
    COALESCE((SELECT SUM(octet_length(e.events)) FROM run_events e WHERE e.thread_id = threads.thread_id), 0)`
]

const metadataBytes = (row: string) => `COALESCE(octet_length(${row}.metadata), 0)`

/**
 * Version 8: a thread's metadata counts in its `bytes` (and so its owner's), as it is written and changed: a user's
 * threads could each keep 64 KiB of it outside the quotas.
 */
const METADATA_BYTES_MIGRATION: ReadonlyArray<string> = [
  `CREATE TRIGGER threads_metadata_bytes_in AFTER INSERT ON threads WHEN NEW.metadata IS NOT NULL BEGIN
    ${addTo("NEW.thread_id", metadataBytes("NEW"))}
  END`,
  `CREATE TRIGGER threads_metadata_bytes_change AFTER UPDATE OF metadata ON threads
    WHEN ${metadataBytes("NEW")} != ${metadataBytes("OLD")} BEGIN
    ${addTo("NEW.thread_id", `${metadataBytes("NEW")} - ${metadataBytes("OLD")}`)}
  END`,
  // the metadata there was, counted once
  `UPDATE threads SET bytes = bytes + octet_length(metadata) WHERE metadata IS NOT NULL`
]

/**
 * The schema, one entry per version: entry `i` takes a database from `user_version` i to i + 1. Entries are
 * only ever appended. Version 2: a checkpoint's `seq` is its rowid (increasing across the whole database, so
 * in step order within a thread) with an index by thread; an append inserts one row and touches nothing else.
 * Version 3: `leases`, one row per thread with an active run (see `ThreadStore.acquireLease`).
 * Version 4: a thread's `owner` and `metadata`, a run's `error` and `metadata` (the gateway's).
 * Version 5: `run_events`, a run's recorded events as one JSON text (see `ThreadStore.saveRunEvents`).
 * Version 6: threads indexed by owner (`ThreadStore.countOwned`, the gateway's thread quota).
 * Version 7: what a thread keeps, in bytes (`threads.bytes`), and what each owner's threads keep (`owner_bytes`, the
 * key `''` for threads made without one), kept by triggers with every write and delete (`ThreadStore.bytesOf`, the
 * gateway's quotas on them) and counted once for the threads there were. Version 8: a thread's metadata counts in
 * its `bytes` too.
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
  ],
  [
    `CREATE TABLE run_events (
      run_id TEXT PRIMARY KEY NOT NULL,
      thread_id TEXT NOT NULL,
      events TEXT NOT NULL
    )`,
    `CREATE INDEX run_events_by_thread ON run_events (thread_id)`
  ],
  [
    // the gateway's thread quota counts a user's threads at each new one
    `CREATE INDEX threads_by_owner ON threads (owner)`
  ],
  BYTES_MIGRATION,
  METADATA_BYTES_MIGRATION
]

/** The schema version this build writes. */
export const SCHEMA_VERSION = migrations.length

/**
 * Takes the database to `SCHEMA_VERSION`, inside a transaction the caller holds; `newer` is the error for a
 * database at a higher version.
 */
export const migrate = (
  conn: Connection,
  newer: (message: string) => StoreError
): Effect.Effect<void, SqlError | StoreError> =>
  Effect.gen(function*() {
    const rows = yield* conn.execute("PRAGMA user_version", [], undefined)
    const version = Number(rows[0]?.user_version ?? 0)
    if (version > SCHEMA_VERSION) {
      return yield* newer(
        `it has schema version ${version}, written by a newer Antler; this build reads up to ${SCHEMA_VERSION}`
      )
    }
    for (let v = version; v < SCHEMA_VERSION; v++) {
      for (const statement of migrations[v]!) yield* conn.executeRaw(statement, [])
    }
    if (version < SCHEMA_VERSION) yield* conn.executeRaw(`PRAGMA user_version = ${SCHEMA_VERSION}`, [])
  })
