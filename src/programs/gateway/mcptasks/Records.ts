/**
 * Where MCP tasks are kept: one table beside the threads (the SQLite file, or the PostgreSQL database of
 * `database.url`: see `SqliteRecords` / `PgRecords`), written once over `Sql`. A task survives a restart, and
 * several gateway processes sharing the database poll each task once: a process takes a task for a while (a lease,
 * `lease_owner` / `lease_expires_at`) with a conditional UPDATE before polling or cancelling it, and writes what it
 * learnt only while it still holds it. A cancel request fences a poll in flight (its answer is dropped).
 *
 * Rows are decoded with Schema when read (another process or an older build may have written them).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { StoreError } from "../../../services/RunContext.js"
import type { TaskRecord } from "../../../services/McpTasks.js"
import { ACTIVE, TaskStatus, TERMINAL } from "../../../services/McpTasks.js"
import type { Snapshot } from "../../../layers/mcp/TaskDriver.js"
import type { Sql } from "../scheduler/TaskStore.js"
import * as Notifications from "./Notifications.js"

/** The table (the same statements for SQLite and PostgreSQL). */
export const MIGRATIONS: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS antler_mcp_tasks (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    run_id TEXT,
    tool_call_id TEXT,
    server_name TEXT NOT NULL,
    driver_name TEXT NOT NULL,
    remote_task_id TEXT NOT NULL,
    task_name TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    result_preview TEXT,
    result_truncated INTEGER NOT NULL,
    result_artifact TEXT,
    error TEXT,
    input_required TEXT,
    driver_data TEXT NOT NULL,
    next_poll_at BIGINT,
    last_polled_at BIGINT,
    last_poll_error TEXT,
    poll_attempt_count INTEGER NOT NULL,
    consecutive_poll_error_count INTEGER NOT NULL,
    lease_owner TEXT,
    lease_expires_at BIGINT,
    cancel_requested_at BIGINT,
    cancel_attempt_count INTEGER NOT NULL,
    next_cancel_at BIGINT,
    last_cancel_error TEXT,
    completed_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    ${Notifications.COLUMNS_SQL.join(",\n    ")},
    sealed_secrets TEXT
  )`,
  // (one record per remote task of a server and user: DeerFlow's uq_mcp_tasks_user_server_remote)
  `CREATE UNIQUE INDEX IF NOT EXISTS antler_mcp_tasks_remote
    ON antler_mcp_tasks (user_id, server_name, remote_task_id)`,
  `CREATE INDEX IF NOT EXISTS antler_mcp_tasks_thread ON antler_mcp_tasks (thread_id, user_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS antler_mcp_tasks_due ON antler_mcp_tasks (status, next_poll_at)`,
  `CREATE INDEX IF NOT EXISTS antler_mcp_tasks_cancel ON antler_mcp_tasks (cancel_requested_at, next_cancel_at)`
]

/** What runs after `MIGRATIONS` on a table an earlier build made: the notification columns (`Notifications`). */
export const LATER = [Notifications.INDEX_SQL]

const COLUMNS = [
  "id",
  "user_id",
  "thread_id",
  "run_id",
  "tool_call_id",
  "server_name",
  "driver_name",
  "remote_task_id",
  "task_name",
  "status",
  "result",
  "result_preview",
  "result_truncated",
  "result_artifact",
  "error",
  "input_required",
  "driver_data",
  "next_poll_at",
  "last_polled_at",
  "last_poll_error",
  "poll_attempt_count",
  "consecutive_poll_error_count",
  "lease_owner",
  "lease_expires_at",
  "cancel_requested_at",
  "cancel_attempt_count",
  "next_cancel_at",
  "last_cancel_error",
  "completed_at",
  "created_at",
  "updated_at",
  ...Notifications.COLUMNS,
  "sealed_secrets"
] as const

const Text = Schema.NullOr(Schema.String)
/** A number as a driver gives it (PostgreSQL's BIGINT is a string). */
const Int = Schema.Union(Schema.Number, Schema.NumberFromString)
const Time = Schema.NullOr(Int)
const JsonText = Schema.NullOr(Schema.parseJson())

const Row = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  thread_id: Schema.String,
  run_id: Text,
  tool_call_id: Text,
  server_name: Schema.String,
  driver_name: Schema.String,
  remote_task_id: Schema.String,
  task_name: Schema.String,
  status: TaskStatus,
  result: JsonText,
  result_preview: Text,
  result_truncated: Int,
  result_artifact: Schema.NullOr(Schema.parseJson(Schema.Struct({ uri: Schema.String, mime_type: Schema.String }))),
  error: Text,
  input_required: Schema.NullOr(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))),
  driver_data: Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.String })),
  next_poll_at: Time,
  last_polled_at: Time,
  last_poll_error: Text,
  poll_attempt_count: Int,
  consecutive_poll_error_count: Int,
  lease_owner: Text,
  lease_expires_at: Time,
  cancel_requested_at: Time,
  cancel_attempt_count: Int,
  next_cancel_at: Time,
  last_cancel_error: Text,
  completed_at: Time,
  created_at: Int,
  updated_at: Int,
  ...Notifications.ROW_FIELDS,
  sealed_secrets: Text
})
const decodeRows = Schema.decodeUnknownEither(Schema.Array(Row))

const recordsOf = (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<TaskRecord>, StoreError> =>
  Either.match(decodeRows(rows), {
    onLeft: (error) =>
      Effect.fail(new StoreError({
        operation: "read",
        message: `A row of the MCP tasks is not one this build reads: ${error.message}`
      })),
    onRight: (decoded) =>
      Effect.succeed(decoded.map((row): TaskRecord => ({
        ...row,
        result_truncated: row.result_truncated !== 0,
        input_required: row.input_required as TaskRecord["input_required"],
        dispatch_event: row.dispatch_event as TaskRecord["dispatch_event"]
      })))
  })

const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value))

const columnValue = (key: (typeof COLUMNS)[number], record: TaskRecord): unknown => {
  switch (key) {
    case "result":
    case "result_artifact":
    case "input_required":
    case "dispatch_event":
    case "driver_data":
      return json(record[key])
    case "result_truncated":
      return record.result_truncated ? 1 : 0
    default:
      return record[key] ?? null
  }
}

const list = (values: ReadonlyArray<string>) => values.map((v) => `'${v}'`).join(", ")
const ACTIVE_IN = `status IN (${list(ACTIVE)})`
const NOT_ENDED = `status NOT IN (${list(TERMINAL)})`

/** The snapshot's columns (`SET` text and values). */
const snapshotSet = (snapshot: Snapshot) => ({
  text: "status = ?, result = ?, result_preview = ?, result_truncated = ?, result_artifact = ?, error = ?, " +
    "input_required = ?",
  values: [
    snapshot.status,
    json(snapshot.result),
    snapshot.result_preview,
    snapshot.result_truncated ? 1 : 0,
    json(snapshot.result_artifact),
    snapshot.error,
    json(snapshot.input_required)
  ]
})

/** A record of that remote task of that server and user exists already. */
export class Duplicate {
  readonly _tag = "Duplicate"
}

/** The store of MCP tasks over a database's `Sql` (its table made when missing). */
export const make = (sql: Sql) =>
  Effect.gen(function*() {
    for (const statement of MIGRATIONS) yield* sql.query(statement, [])
    yield* Notifications.addColumns(sql)
    // (a table an earlier build made: the run's sealed secrets, `TaskSecrets`)
    yield* Effect.ignore(Effect.orElse(
      sql.query("SELECT sealed_secrets FROM antler_mcp_tasks WHERE 1 = 0", []),
      () => sql.query("ALTER TABLE antler_mcp_tasks ADD COLUMN sealed_secrets TEXT", [])
    ))
    for (const statement of LATER) yield* sql.query(statement, [])
    const SELECT = `SELECT ${COLUMNS.join(", ")} FROM antler_mcp_tasks`
    const notifications = Notifications.make(
      sql,
      (where, params) => Effect.flatMap(sql.query(`${SELECT} ${where}`, params), recordsOf)
    )
    const byId = (id: string) =>
      Effect.map(
        Effect.flatMap(sql.query(`${SELECT} WHERE id = ?`, [id]), recordsOf),
        (rows) => Option.fromNullable(rows[0])
      )

    /** Takes the rows `candidates` finds for `owner` until `now + leaseMs`, each with a conditional UPDATE. */
    const claim = (
      candidates: string,
      params: ReadonlyArray<unknown>,
      counter: "poll_attempt_count" | "cancel_attempt_count",
      guard: string,
      now: number,
      owner: string,
      leaseMs: number
    ) =>
      Effect.gen(function*() {
        const found = yield* Effect.flatMap(sql.query(candidates, params), recordsOf)
        const taken: Array<TaskRecord> = []
        for (const row of found) {
          const updated = yield* sql.query(
            `UPDATE antler_mcp_tasks SET lease_owner = ?, lease_expires_at = ?, ${counter} = ${counter} + 1, ` +
              `updated_at = ? WHERE id = ? AND ${guard} AND (lease_expires_at IS NULL OR lease_expires_at < ?) ` +
              "RETURNING id",
            [owner, now + leaseMs, now, row.id, now]
          )
          if (updated.length === 1) taken.push(...Option.toArray(yield* byId(row.id)))
        }
        return taken
      })

    return {
      /** Records a new task; `Duplicate` when its remote task is recorded already for its user and server. */
      create: (record: TaskRecord): Effect.Effect<void, StoreError | Duplicate> =>
        Effect.flatMap(
          sql.query(
            `INSERT INTO antler_mcp_tasks (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map(() => "?").join(", ")}) ` +
              "ON CONFLICT DO NOTHING RETURNING id",
            COLUMNS.map((column) => columnValue(column, record))
          ),
          (rows) => (rows.length === 1 ? Effect.void : Effect.fail(new Duplicate()))
        ),
      get: (id: string, userId: string) =>
        Effect.map(
          Effect.flatMap(sql.query(`${SELECT} WHERE id = ? AND user_id = ?`, [id, userId]), recordsOf),
          (rows) => Option.fromNullable(rows[0])
        ),
      list: (threadId: string, userId: string, limit: number, activeOnly: boolean) =>
        Effect.flatMap(
          sql.query(
            `${SELECT} WHERE thread_id = ? AND user_id = ?${activeOnly ? ` AND ${ACTIVE_IN}` : ""} ` +
              "ORDER BY created_at DESC, id DESC LIMIT ?",
            [threadId, userId, limit]
          ),
          recordsOf
        ),
      /** Takes the tasks due for a poll at `now`, at most `limit`, oldest due first. */
      claimDue: (now: number, owner: string, leaseMs: number, limit: number) =>
        claim(
          `${SELECT} WHERE ${ACTIVE_IN} AND cancel_requested_at IS NULL AND next_poll_at IS NOT NULL ` +
            "AND next_poll_at <= ? AND (lease_expires_at IS NULL OR lease_expires_at < ?) " +
            "ORDER BY next_poll_at, id LIMIT ?",
          [now, now, limit],
          "poll_attempt_count",
          `${ACTIVE_IN} AND cancel_requested_at IS NULL`,
          now,
          owner,
          leaseMs
        ),
      /**
       * Writes a poll's answer, if `owner` still holds the task (and no cancel was asked), with its event when it
       * has one (`Notifications`); whether it did.
       */
      applySnapshot: (task: TaskRecord, owner: string, snapshot: Snapshot, nextPollAt: number | null, now: number) => {
        const set = snapshotSet(snapshot)
        const event = Notifications.recordEvent(Notifications.eventOf({ ...task, ...snapshot }, false, null), now)
        const ended = TERMINAL.includes(snapshot.status)
        return Effect.map(
          sql.query(
            `UPDATE antler_mcp_tasks SET ${set.text}, next_poll_at = ?, last_polled_at = ?, last_poll_error = NULL, ` +
              "consecutive_poll_error_count = 0, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?, " +
              `completed_at = ?${ended ? ", sealed_secrets = NULL" : ""}${event.text} WHERE id = ? ` +
              `AND lease_owner = ? AND lease_expires_at >= ? AND ${NOT_ENDED} AND cancel_requested_at IS NULL ` +
              "RETURNING id",
            [...set.values, nextPollAt, now, now, ended ? now : null, ...event.values, task.id, owner, now]
          ),
          (rows) => rows.length === 1
        )
      },
      /**
       * Gives a task back after a failed poll: polled again at `nextPollAt`, one more error in a row; with the
       * event of its tracking degraded once that makes `degradedAfter`.
       */
      releasePoll: (task: TaskRecord, owner: string, nextPollAt: number, error: string, now: number,
        degradedAfter: number) => {
        const degraded = task.consecutive_poll_error_count + 1 >= degradedAfter
        const event = Notifications.recordEvent(
          degraded ? Notifications.eventOf(task, true, error) : undefined,
          now
        )
        return Effect.asVoid(sql.query(
          "UPDATE antler_mcp_tasks SET next_poll_at = ?, last_poll_error = ?, " +
            "consecutive_poll_error_count = consecutive_poll_error_count + 1, lease_owner = NULL, " +
            `lease_expires_at = NULL, updated_at = ?${event.text} WHERE id = ? AND lease_owner = ?`,
          [nextPollAt, error, now, ...event.values, task.id, owner]
        ))
      },
      /**
       * Asks for the user's task of that thread to be cancelled (once: a second request changes nothing), and
       * drops a poll's lease so the cancel is not held up; the task as it is then, or none.
       */
      requestCancel: (id: string, threadId: string, userId: string, now: number) =>
        Effect.gen(function*() {
          yield* sql.query(
            "UPDATE antler_mcp_tasks SET cancel_requested_at = ?, next_cancel_at = COALESCE(next_cancel_at, ?), " +
              "lease_owner = NULL, lease_expires_at = NULL, updated_at = ? " +
              `WHERE id = ? AND user_id = ? AND thread_id = ? AND ${NOT_ENDED} AND cancel_requested_at IS NULL`,
            [now, now, now, id, userId, threadId]
          )
          const rows = yield* Effect.flatMap(
            sql.query(`${SELECT} WHERE id = ? AND user_id = ? AND thread_id = ?`, [id, userId, threadId]),
            recordsOf
          )
          return Option.fromNullable(rows[0])
        }),
      /** Takes the tasks whose cancel is due at `now`. */
      claimCancels: (now: number, owner: string, leaseMs: number, limit: number) =>
        claim(
          `${SELECT} WHERE cancel_requested_at IS NOT NULL AND ${NOT_ENDED} AND next_cancel_at IS NOT NULL ` +
            "AND next_cancel_at <= ? AND (lease_expires_at IS NULL OR lease_expires_at < ?) " +
            "ORDER BY next_cancel_at, id LIMIT ?",
          [now, now, limit],
          "cancel_attempt_count",
          `cancel_requested_at IS NOT NULL AND ${NOT_ENDED}`,
          now,
          owner,
          leaseMs
        ),
      /** Writes a cancel's answer (a status that ended), if `owner` still holds the task. */
      applyCancel: (task: TaskRecord, owner: string, snapshot: Snapshot, now: number) => {
        const set = snapshotSet(snapshot)
        const event = Notifications.recordEvent(Notifications.eventOf({ ...task, ...snapshot }, false, null), now)
        return Effect.map(
          sql.query(
            `UPDATE antler_mcp_tasks SET ${set.text}, next_poll_at = NULL, next_cancel_at = NULL, ` +
              "last_cancel_error = NULL, lease_owner = NULL, lease_expires_at = NULL, completed_at = ?, " +
              `updated_at = ?, sealed_secrets = NULL${event.text} ` +
              `WHERE id = ? AND lease_owner = ? AND lease_expires_at >= ? AND ${NOT_ENDED} RETURNING id`,
            [...set.values, now, now, ...event.values, task.id, owner, now]
          ),
          (rows) => rows.length === 1
        )
      },
      /** Gives a task back after a failed cancel: tried again at `nextCancelAt`. */
      releaseCancel: (id: string, owner: string, nextCancelAt: number, error: string, now: number) =>
        Effect.asVoid(sql.query(
          "UPDATE antler_mcp_tasks SET next_cancel_at = ?, last_cancel_error = ?, lease_owner = NULL, " +
            "lease_expires_at = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?",
          [nextCancelAt, error, now, id, owner]
        )),
      /**
       * Gives back a task `owner` claimed and stopped polling or cancelling before it had an answer (its process
       * stopping): due again at once for whichever process polls next, not held until its lease ends.
       */
      unclaim: (id: string, owner: string) =>
        Effect.asVoid(sql.query(
          "UPDATE antler_mcp_tasks SET lease_owner = NULL, lease_expires_at = NULL WHERE id = ? AND lease_owner = ?",
          [id, owner]
        )),
      /** The notifications of the tasks (see `Notifications`). */
      notifications
    }
  })

/** The store of MCP tasks. */
export type Service = Effect.Effect.Success<ReturnType<typeof make>>

/** The MCP task store of a gateway. */
export class Records extends Context.Tag("antler/gateway/McpTaskRecords")<Records, Service>() {}
