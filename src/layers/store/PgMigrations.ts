/**
 * The PostgreSQL store's schema, one entry per version, and `migrate`, which takes a database to this build's when
 * the store opens it (under an advisory lock, so processes starting at once migrate one at a time).
 */
import * as Effect from "effect/Effect"
import { StoreError } from "../../services/RunContext.js"
import type * as PgAccess from "./PgAccess.js"

// What a run's record keeps (what it was asked with, why it failed), in bytes.
const runBytes = (row: string) =>
  `(COALESCE(octet_length(${row}.metadata), 0) + COALESCE(octet_length(${row}.error), 0))`
const addTo = (thread: string, bytes: string) =>
  `UPDATE antler_threads SET bytes = bytes + ${bytes} WHERE thread_id = ${thread};`
const addToOwner = (owner: string, bytes: string) =>
  `INSERT INTO antler_owner_bytes (owner, bytes) VALUES (COALESCE(${owner}, ''), ${bytes})
      ON CONFLICT (owner) DO UPDATE SET bytes = antler_owner_bytes.bytes + excluded.bytes;`

/**
 * Version 4: what a thread keeps, in bytes (`antler_threads.bytes`), and what each owner's threads keep
 * (`antler_owner_bytes`, the key `''` for threads made without one), as the SQLite store's version 7: each write of a
 * checkpoint, a run's record or its events adds what it keeps to its thread's counter (a delete subtracts it), each
 * change of that counter, and the thread's deletion, its owner's. An appender holds its thread's row, then its
 * owner's (always in that order: no deadlock), until it commits.
 */
const BYTES_MIGRATION: ReadonlyArray<string> = [
  `ALTER TABLE antler_threads ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0`,
  `CREATE TABLE antler_owner_bytes (owner TEXT PRIMARY KEY, bytes BIGINT NOT NULL)`,
  `CREATE FUNCTION antler_checkpoints_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP = 'INSERT' THEN ${addTo("NEW.thread_id", "octet_length(NEW.updates)")}
    ELSE ${addTo("OLD.thread_id", "-octet_length(OLD.updates)")} END IF;
    RETURN NULL;
  END $$`,
  `CREATE TRIGGER antler_checkpoints_bytes AFTER INSERT OR DELETE ON antler_checkpoints
    FOR EACH ROW EXECUTE FUNCTION antler_checkpoints_bytes()`,
  `CREATE FUNCTION antler_runs_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP <> 'INSERT' THEN ${addTo("OLD.thread_id", `-${runBytes("OLD")}`)} END IF;
    IF TG_OP <> 'DELETE' THEN ${addTo("NEW.thread_id", runBytes("NEW"))} END IF;
    RETURN NULL;
  END $$`,
  `CREATE TRIGGER antler_runs_bytes AFTER INSERT OR DELETE ON antler_runs
    FOR EACH ROW EXECUTE FUNCTION antler_runs_bytes()`,
  `CREATE TRIGGER antler_runs_bytes_change AFTER UPDATE ON antler_runs FOR EACH ROW
    WHEN (${runBytes("NEW")} <> ${runBytes("OLD")} OR NEW.thread_id <> OLD.thread_id)
    EXECUTE FUNCTION antler_runs_bytes()`,
  `CREATE FUNCTION antler_run_events_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP <> 'INSERT' THEN ${addTo("OLD.thread_id", "-octet_length(OLD.events)")} END IF;
    IF TG_OP <> 'DELETE' THEN ${addTo("NEW.thread_id", "octet_length(NEW.events)")} END IF;
    RETURN NULL;
  END $$`,
  `CREATE TRIGGER antler_run_events_bytes AFTER INSERT OR UPDATE OR DELETE ON antler_run_events
    FOR EACH ROW EXECUTE FUNCTION antler_run_events_bytes()`,
  `CREATE FUNCTION antler_threads_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP = 'DELETE' THEN
      UPDATE antler_owner_bytes SET bytes = bytes - OLD.bytes WHERE owner = COALESCE(OLD.owner, '');
    ELSIF NEW.owner IS DISTINCT FROM OLD.owner THEN
      UPDATE antler_owner_bytes SET bytes = bytes - OLD.bytes WHERE owner = COALESCE(OLD.owner, '');
      ${addToOwner("NEW.owner", "NEW.bytes")}
    ELSE ${addToOwner("NEW.owner", "NEW.bytes - OLD.bytes")} END IF;
    RETURN NULL;
  END $$`,
  `CREATE TRIGGER antler_threads_bytes AFTER UPDATE OF bytes, owner ON antler_threads FOR EACH ROW
    WHEN (NEW.bytes <> OLD.bytes OR NEW.owner IS DISTINCT FROM OLD.owner) EXECUTE FUNCTION antler_threads_bytes()`,
  `CREATE TRIGGER antler_threads_bytes_gone AFTER DELETE ON antler_threads FOR EACH ROW
    WHEN (OLD.bytes <> 0) EXECUTE FUNCTION antler_threads_bytes()`,
  // the threads there were, counted once (their owners' counters follow, through the trigger above)
  `UPDATE antler_threads t SET bytes =
    COALESCE((SELECT SUM(octet_length(c.updates)) FROM antler_checkpoints c WHERE c.thread_id = t.thread_id), 0) +
    COALESCE((SELECT SUM(${runBytes("r")}) FROM antler_runs r WHERE r.thread_id = t.thread_id), 0) +
    COALESCE((SELECT SUM(octet_length(e.events)) FROM antler_run_events e WHERE e.thread_id = t.thread_id), 0)`
]

const metadataBytes = (row: string) => `COALESCE(octet_length(${row}.metadata), 0)`

/**
 * Version 5: a thread's metadata counts in its `bytes` (and so its owner's), as the SQLite store's version 8: set
 * as the row is written (a new thread's counter starts at its metadata, its owner's follows), changed as it changes.
 * An update holds the thread's row, then its owner's, as an appender does.
 */
const METADATA_BYTES_MIGRATION: ReadonlyArray<string> = [
  `CREATE FUNCTION antler_threads_metadata_bytes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP = 'INSERT' THEN NEW.bytes := NEW.bytes + ${metadataBytes("NEW")};
    ELSE
      NEW.bytes := NEW.bytes + ${metadataBytes("NEW")} - ${metadataBytes("OLD")};
      -- (a change a BEFORE trigger makes fires no UPDATE OF bytes trigger: the owner's counter is moved here, unless
      -- the owner changes too, when the version 4 trigger moves the whole counter)
      IF NEW.owner IS NOT DISTINCT FROM OLD.owner THEN
        ${addToOwner("NEW.owner", `${metadataBytes("NEW")} - ${metadataBytes("OLD")}`)}
      END IF;
    END IF;
    RETURN NEW;
  END $$`,
  `CREATE TRIGGER antler_threads_metadata_in BEFORE INSERT ON antler_threads FOR EACH ROW
    WHEN (NEW.metadata IS NOT NULL) EXECUTE FUNCTION antler_threads_metadata_bytes()`,
  `CREATE TRIGGER antler_threads_metadata_change BEFORE UPDATE OF metadata ON antler_threads FOR EACH ROW
    WHEN (${metadataBytes("NEW")} <> ${metadataBytes("OLD")}) EXECUTE FUNCTION antler_threads_metadata_bytes()`,
  `CREATE FUNCTION antler_threads_born() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    ${addToOwner("NEW.owner", "NEW.bytes")}
    RETURN NULL;
  END $$`,
  `CREATE TRIGGER antler_threads_born AFTER INSERT ON antler_threads FOR EACH ROW WHEN (NEW.bytes <> 0)
    EXECUTE FUNCTION antler_threads_born()`,
  // the metadata there was, counted once (its owners' counters follow, through the version 4 trigger)
  `UPDATE antler_threads SET bytes = bytes + octet_length(metadata) WHERE metadata IS NOT NULL`
]

/**
 * The schema, one entry per version (entry `i` takes the database from version i to i + 1). Version 1: the
 * SQLite store's tables as of its version 4. Version 2: `antler_run_events` (the SQLite store's version 5).
 * Version 3: threads indexed by owner (the SQLite store's version 6). Version 4: the byte counters of threads and
 * owners, kept by triggers (the SQLite store's version 7; see `BYTES_MIGRATION`). Version 5: a thread's metadata in
 * its counter (the SQLite store's version 8).
 */
export const migrations: ReadonlyArray<ReadonlyArray<string>> = [
  [
    `CREATE TABLE antler_threads (
      thread_id TEXT PRIMARY KEY,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      title TEXT,
      owner TEXT,
      metadata TEXT,
      ord BIGSERIAL
    )`,
    `CREATE TABLE antler_checkpoints (
      seq BIGSERIAL PRIMARY KEY,
      thread_id TEXT NOT NULL,
      run_id TEXT NOT NULL,
      created_at TEXT NOT NULL,
      updates TEXT NOT NULL
    )`,
    `CREATE INDEX antler_checkpoints_by_thread ON antler_checkpoints (thread_id, seq)`,
    `CREATE TABLE antler_runs (
      run_id TEXT PRIMARY KEY,
      thread_id TEXT NOT NULL,
      status TEXT NOT NULL,
      stop_reason TEXT,
      started_at TEXT NOT NULL,
      ended_at TEXT,
      error TEXT,
      metadata TEXT,
      ord BIGSERIAL
    )`,
    `CREATE INDEX antler_runs_by_thread ON antler_runs (thread_id, started_at)`,
    `CREATE INDEX antler_runs_by_status ON antler_runs (status)`,
    `CREATE TABLE antler_leases (
      thread_id TEXT PRIMARY KEY,
      run_id TEXT NOT NULL,
      owner TEXT NOT NULL,
      expires_at BIGINT NOT NULL
    )`
  ],
  [
    `CREATE TABLE antler_run_events (
      run_id TEXT PRIMARY KEY,
      thread_id TEXT NOT NULL,
      events TEXT NOT NULL
    )`,
    `CREATE INDEX antler_run_events_by_thread ON antler_run_events (thread_id)`
  ],
  [`CREATE INDEX antler_threads_by_owner ON antler_threads (owner)`],
  BYTES_MIGRATION,
  METADATA_BYTES_MIGRATION
]

/** The schema version this build writes. */
export const SCHEMA_VERSION = migrations.length

// An arbitrary constant: the advisory lock that serialises migrations of processes starting at once.
const MIGRATION_LOCK = 7_246_114_337

/** Takes the database to this build's schema; one a newer build wrote (a higher version) is refused, not misread. */
export const migrate = ({ q, transaction }: PgAccess.Access, where: string): Effect.Effect<void, StoreError> =>
  transaction(
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
