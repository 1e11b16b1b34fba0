/**
 * The SQL text of the SQLite thread store (tables as of `Migrations.SCHEMA_VERSION`), one constant per statement:
 * prepared once by the connection and kept by their text.
 */

// Inserts only when the thread row exists (a read of it, no write): no row, nothing inserted.
export const APPEND_CHECKPOINT = `INSERT INTO checkpoints (thread_id, run_id, created_at, updates)
  SELECT thread_id, ?, ?, ? FROM threads WHERE thread_id = ?`
// APPEND_CHECKPOINT answering what its thread keeps once it is kept, and its owner's threads (those made without an
// owner too when the owner is the last parameter, given twice, or none): the append and the quota's read in one
// statement. RETURNING is computed before the AFTER INSERT triggers add the checkpoint to the counters
// (`Migrations.BYTES_MIGRATION`), so it adds the checkpoint's bytes itself, as they do (a test compares it with
// `THREAD_BYTES` read after).
const MEASURED = `
  RETURNING (SELECT t.bytes FROM threads t WHERE t.thread_id = checkpoints.thread_id) + octet_length(updates) AS bytes,
  (SELECT t.owner FROM threads t WHERE t.thread_id = checkpoints.thread_id) AS owner,
  (SELECT COALESCE(SUM(o.bytes), 0) FROM threads t JOIN owner_bytes o ON o.owner = COALESCE(t.owner, '')
    OR (COALESCE(t.owner, '') IN ('', ?) AND o.owner IN ('', ?))
    WHERE t.thread_id = checkpoints.thread_id) + octet_length(updates) AS owned`
export const APPEND_CHECKPOINT_MEASURED = `${APPEND_CHECKPOINT}${MEASURED}`
// APPEND_CHECKPOINT fenced by the run's lease (`ThreadStore.AppendOptions.leased`): inserted only while the thread's
// lease row is the run's (its run id, then its owner, after the thread's id), as the insert itself reads it: no other
// process takes the lease between the check and the write.
export const APPEND_CHECKPOINT_LEASED = `${APPEND_CHECKPOINT}
  AND EXISTS (SELECT 1 FROM leases l WHERE l.thread_id = threads.thread_id AND l.run_id = ? AND l.owner = ?)`
export const APPEND_CHECKPOINT_MEASURED_LEASED = `${APPEND_CHECKPOINT_LEASED}${MEASURED}`
export const SET_TITLE = `UPDATE threads SET title = ? WHERE thread_id = ?`
export const ENSURE_THREAD = `INSERT INTO threads (thread_id, created_at, updated_at) VALUES (?, ?, ?)
  ON CONFLICT (thread_id) DO NOTHING`
export const CREATE_THREAD =
  `INSERT INTO threads (thread_id, created_at, updated_at, owner, metadata) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (thread_id) DO NOTHING`
const COUNT_CHECKPOINTS = `(SELECT COUNT(*) FROM checkpoints c WHERE c.thread_id = t.thread_id)`
const LAST_CHECKPOINT_AT =
  `(SELECT c.created_at FROM checkpoints c WHERE c.thread_id = t.thread_id ORDER BY c.seq DESC LIMIT 1)`
export const SELECT_THREAD =
  `SELECT t.thread_id, ${COUNT_CHECKPOINTS} AS checkpoints FROM threads t WHERE t.thread_id = ?`
export const SELECT_CHECKPOINTS =
  `SELECT seq, updates FROM checkpoints WHERE thread_id = ? AND seq > ? ORDER BY seq`
export const SELECT_SNAPSHOT = `SELECT seq, state FROM snapshots WHERE thread_id = ?`
export const UPSERT_SNAPSHOT = `INSERT INTO snapshots (thread_id, seq, created_at, state) VALUES (?, ?, ?, ?)
  ON CONFLICT (thread_id) DO UPDATE SET seq = excluded.seq, created_at = excluded.created_at, state = excluded.state
  WHERE excluded.seq >= snapshots.seq`
export const RUN_COLUMNS = `run_id, thread_id, status, stop_reason, started_at, ended_at, error, metadata`
export const SELECT_RUNS = `SELECT ${RUN_COLUMNS} FROM runs WHERE thread_id = ? ORDER BY started_at, rowid`
export const UPSERT_RUN = `INSERT INTO runs (${RUN_COLUMNS})
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
export const LIST_THREADS =
  `SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} ORDER BY updated_at DESC, t.rowid DESC`
export const LIST_OWNED = `SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM}
  WHERE t.owner = ? OR (? = 1 AND t.owner IS NULL) ORDER BY updated_at DESC, t.rowid DESC`
export const COUNT_OWNED = `SELECT COUNT(*) AS n FROM threads WHERE owner = ? OR (? = 1 AND owner IS NULL)`
export const THREAD_INFO = `SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} WHERE t.thread_id = ?`
export const SELECT_METADATA = `SELECT metadata FROM threads WHERE thread_id = ?`
export const SET_METADATA = `UPDATE threads SET metadata = ?, updated_at = COALESCE(?, updated_at) WHERE thread_id = ?`
export const THREAD_BYTES = `SELECT t.bytes, t.owner, COALESCE(o.bytes, 0) AS owned FROM threads t
  LEFT JOIN owner_bytes o ON o.owner = COALESCE(t.owner, '') WHERE t.thread_id = ?`
export const OWNED_BYTES =
  `SELECT COALESCE(SUM(bytes), 0) AS n FROM owner_bytes WHERE owner = ? OR (? = 1 AND owner = '')`
// (after DELETE_THREAD_ROW: the thread's row gone first, its owner's byte counter changes once, not per checkpoint)
export const DELETE_THREAD: ReadonlyArray<string> = [
  `DELETE FROM checkpoints WHERE thread_id = ?`,
  `DELETE FROM runs WHERE thread_id = ?`,
  `DELETE FROM run_events WHERE thread_id = ?`,
  `DELETE FROM snapshots WHERE thread_id = ?`,
  `DELETE FROM leases WHERE thread_id = ?`
]
export const DELETE_THREAD_ROW = `DELETE FROM threads WHERE thread_id = ? RETURNING thread_id`
export const SELECT_ALL_CHECKPOINTS =
  `SELECT seq, run_id, created_at, updates FROM checkpoints WHERE thread_id = ? ORDER BY seq`
export const DELETE_RUN_CHECKPOINTS = `DELETE FROM checkpoints WHERE thread_id = ? AND run_id = ?`
export const DELETE_ENDED_RUN = `DELETE FROM runs WHERE thread_id = ? AND run_id = ?
  AND status NOT IN ('pending', 'running') RETURNING run_id`
export const DELETE_RUN_EVENTS = `DELETE FROM run_events WHERE thread_id = ? AND run_id = ?`

export const SELECT_LEASE = `SELECT run_id, owner, expires_at FROM leases WHERE thread_id = ?`
export const UPSERT_LEASE = `INSERT INTO leases (thread_id, run_id, owner, expires_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (thread_id) DO UPDATE SET run_id = excluded.run_id, owner = excluded.owner,
  expires_at = excluded.expires_at`
export const DELETE_LEASE = `DELETE FROM leases WHERE thread_id = ? AND run_id = ? AND owner = ?`
