/**
 * The notifications of MCP tasks (DeerFlow's outbox, migration 0013): when a task reaches a status the user must
 * hear of (`ATTENTION`: it ended, or it waits for input) or its tracking degrades, its record keeps that event (a
 * new `event_version` each time the event changes, by its fingerprint), written in the same statement as the poll
 * or cancel that saw it. A process then takes the event (a notification lease of its own), launches the run that
 * tells it on the thread (under an idempotency key: the task, the event's version and the launch attempt), and
 * follows that run: its success delivers the event; its failure is tried again, the wait doubling, until the fifth
 * failure in a row, which gives up (`dead_letter`). A newer event replaces one not yet launched.
 *
 * The columns live in the tasks' table (`Records`); rows are read through `Records`' decoder.
 */
import * as Crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { canonicalJson } from "../../../middleware/LoopDetection.js"
import type { NotificationStatus as Status, TaskRecord, TaskState } from "../../../services/McpTasks.js"
import { ATTENTION, NotificationStatus } from "../../../services/McpTasks.js"
import type { StoreError } from "../../../services/RunContext.js"
import type { JsonObject } from "../../../state/Message.js"
import type { Sql } from "../scheduler/TaskStore.js"

/** The columns (DeerFlow's names), as `CREATE TABLE` and `ALTER TABLE ... ADD COLUMN` write them. */
export const COLUMNS_SQL: ReadonlyArray<string> = [
  "notification_status TEXT NOT NULL DEFAULT 'none'",
  "event_fingerprint TEXT",
  "event_version INTEGER NOT NULL DEFAULT 0",
  "notified_version INTEGER NOT NULL DEFAULT 0",
  "dispatch_version INTEGER",
  "dispatch_attempt INTEGER NOT NULL DEFAULT 0",
  "dispatch_event TEXT",
  "notification_run_id TEXT",
  "notification_error TEXT",
  "notification_attempt_count INTEGER NOT NULL DEFAULT 0",
  "next_notification_at BIGINT",
  "notification_lease_owner TEXT",
  "notification_lease_expires_at BIGINT"
]

/** The columns' names. */
export const COLUMNS = [
  "notification_status",
  "event_fingerprint",
  "event_version",
  "notified_version",
  "dispatch_version",
  "dispatch_attempt",
  "dispatch_event",
  "notification_run_id",
  "notification_error",
  "notification_attempt_count",
  "next_notification_at",
  "notification_lease_owner",
  "notification_lease_expires_at"
] as const

/** The index the notifier's claim reads. */
export const INDEX_SQL = "CREATE INDEX IF NOT EXISTS antler_mcp_tasks_notify " +
  "ON antler_mcp_tasks (notification_status, next_notification_at)"

const Text = Schema.NullOr(Schema.String)
const Int = Schema.Union(Schema.Number, Schema.NumberFromString)

/** The columns as a row holds them (decoded with the rest of the row by `Records`). */
export const ROW_FIELDS = {
  notification_status: NotificationStatus,
  event_fingerprint: Text,
  event_version: Int,
  notified_version: Int,
  dispatch_version: Schema.NullOr(Int),
  dispatch_attempt: Int,
  dispatch_event: Schema.NullOr(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))),
  notification_run_id: Text,
  notification_error: Text,
  notification_attempt_count: Int,
  next_notification_at: Schema.NullOr(Int),
  notification_lease_owner: Text,
  notification_lease_expires_at: Schema.NullOr(Int)
}

/**
 * The columns on a table an earlier build made without them: each added when missing (the same statements on
 * SQLite and PostgreSQL, which answer a second ADD COLUMN with an error; of two processes adding one at once, the
 * loser finds it there).
 */
export const addColumns = (sql: Sql): Effect.Effect<void, StoreError> => {
  const probe = sql.query("SELECT notification_lease_expires_at FROM antler_mcp_tasks WHERE 1 = 0", [])
  return Effect.asVoid(probe.pipe(Effect.orElse(() =>
    Effect.zipRight(
      Effect.forEach(
        COLUMNS_SQL,
        (column) => Effect.ignore(sql.query(`ALTER TABLE antler_mcp_tasks ADD COLUMN ${column}`, [])),
        { discard: true }
      ),
      probe
    )
  )))
}

/** Failed tellings of an event after which it is given up (DeerFlow's `_MAX_NOTIFICATION_ATTEMPTS`). */
export const MAX_ATTEMPTS = 5

/** A task's event as the notification run reads it (DeerFlow's `_notification_event`). */
export interface Event extends JsonObject {
  readonly task_id: string
  readonly task_name: string
  readonly status: string
  readonly result: unknown
  readonly result_preview: string | null
  readonly result_truncated: boolean
  readonly result_artifact: unknown
  readonly error: string | null
  readonly input_required: JsonObject | null
  readonly tracking_degraded: boolean
  readonly last_poll_error: string | null
}

/** What an event is made of: the task's state, with its id and name. */
export type Source = TaskState & Pick<TaskRecord, "id" | "task_name">

/** The event of a task in that state (none: nothing to tell; `lastPollError` only when its tracking degraded). */
export const eventOf = (task: Source, degraded: boolean, lastPollError: string | null): Event | undefined =>
  !ATTENTION.includes(task.status) && !degraded ? undefined : {
    task_id: task.id,
    task_name: task.task_name,
    status: task.status,
    result: task.result ?? null,
    result_preview: task.result_preview,
    result_truncated: task.result_truncated,
    result_artifact: task.result_artifact,
    error: task.error,
    input_required: task.input_required,
    tracking_degraded: degraded,
    last_poll_error: degraded ? lastPollError : null
  }

/** An event's fingerprint: sha256 of its canonical JSON. */
export const fingerprint = (event: Event): string =>
  Crypto.createHash("sha256").update(canonicalJson(event)).digest("hex")

const IN_FLIGHT = "notification_status IN ('claimed', 'dispatched', 'retry')"

/**
 * The `SET` text and values that record `event` in an UPDATE of the task (DeerFlow's `_record_event_if_changed`),
 * none when there is no event: a changed event is one more version; unless one is in flight, it is pending now.
 */
export const recordEvent = (event: Event | undefined, now: number) => {
  if (event === undefined) return { text: "", values: [] as Array<unknown> }
  const print = fingerprint(event)
  const changed = "(event_fingerprint IS NULL OR event_fingerprint <> ?)"
  const idle = `${changed} AND NOT ${IN_FLIGHT}`
  const parts: Array<[string, string, ReadonlyArray<unknown>]> = [
    ["event_version", `CASE WHEN ${changed} THEN event_version + 1 ELSE event_version END`, [print]],
    ["notification_status", `CASE WHEN ${idle} THEN 'pending' ELSE notification_status END`, [print]],
    // (a time in a CASE is cast: PostgreSQL would read a bare parameter there as text)
    ["next_notification_at", `CASE WHEN ${idle} THEN CAST(? AS BIGINT) ELSE next_notification_at END`, [
      print,
      now
    ]],
    ["notification_error", `CASE WHEN ${idle} THEN NULL ELSE notification_error END`, [print]],
    ["notification_attempt_count", `CASE WHEN ${idle} THEN 0 ELSE notification_attempt_count END`, [print]],
    ["dispatch_version", `CASE WHEN ${idle} THEN NULL ELSE dispatch_version END`, [print]],
    ["dispatch_attempt", `CASE WHEN ${idle} THEN 0 ELSE dispatch_attempt END`, [print]],
    ["dispatch_event", `CASE WHEN ${idle} THEN NULL ELSE dispatch_event END`, [print]],
    ["notification_run_id", `CASE WHEN ${idle} THEN NULL ELSE notification_run_id END`, [print]],
    ["event_fingerprint", "?", [print]]
  ]
  return {
    text: parts.map(([column, value]) => `, ${column} = ${value}`).join(""),
    values: parts.flatMap(([, , values]) => values)
  }
}

/** Reads tasks (`Records`' statement and decoder). */
export type Read = (
  where: string,
  params: ReadonlyArray<unknown>
) => Effect.Effect<ReadonlyArray<TaskRecord>, StoreError>

const ACTIVE_EVENT = "event_version > notified_version AND notification_status IN " +
  "('pending', 'claimed', 'retry', 'dispatched')"

/** The notification operations over a database's `Sql`, reading rows with `read`. */
export const make = (sql: Sql, read: Read) => {
  const update = (text: string, params: ReadonlyArray<unknown>) =>
    Effect.map(sql.query(`UPDATE antler_mcp_tasks SET ${text} RETURNING id`, params), (rows) => rows.length === 1)
  const LEASE_FREE = "(notification_lease_expires_at IS NULL OR notification_lease_expires_at < ?)"
  const HELD = "notification_lease_owner = ? AND notification_lease_expires_at >= ?"

  /**
   * Takes the events due at `now` for `owner` until `now + leaseMs`: at most `limit`, oldest due first, one per
   * thread, and none of a thread whose earlier event's run is still going (a storm of events is told one by one);
   * while `limit` notification runs go (of every process sharing the database), none is launched, only followed.
   * An event not yet launched is rebuilt from the task as it is now (its latest; its tracking degraded after
   * `degradedAfter` failed polls in a row).
   */
  const claim = (now: number, owner: string, leaseMs: number, limit: number, degradedAfter: number) =>
    Effect.gen(function*() {
      const found = yield* read(
        `WHERE ${ACTIVE_EVENT} AND (next_notification_at IS NULL OR next_notification_at <= ?) AND ${LEASE_FREE} ` +
          "AND (notification_status = 'dispatched' OR NOT EXISTS (SELECT 1 FROM antler_mcp_tasks o " +
          "WHERE o.thread_id = antler_mcp_tasks.thread_id AND o.id <> antler_mcp_tasks.id " +
          "AND o.notification_status = 'dispatched')) ORDER BY next_notification_at, id LIMIT ?",
        [now, now, limit * 4]
      )
      const going = yield* sql.query(
        "SELECT COUNT(*) AS n FROM antler_mcp_tasks WHERE notification_status = 'dispatched'",
        []
      )
      let slots = limit - Number(going[0]?.n ?? 0)
      const threads = new Set<string>()
      const taken: Array<TaskRecord> = []
      for (const row of found) {
        if (taken.length === limit) break
        const launching = row.notification_status !== "dispatched"
        if (launching && (threads.has(row.thread_id) || slots <= 0)) continue
        const rebuild = row.notification_status === "pending" || row.notification_status === "claimed" ||
          (row.notification_status === "retry" && row.dispatch_version !== row.event_version)
        const fresh = row.dispatch_version !== row.event_version
        const degraded = row.consecutive_poll_error_count >= degradedAfter
        const event = rebuild ? eventOf(row, degraded, row.last_poll_error) : undefined
        const set = rebuild
          ? ", dispatch_version = ?, dispatch_event = ?, notification_run_id = NULL, notification_status = 'claimed'" +
            (fresh ? ", dispatch_attempt = 0, notification_attempt_count = 0" : "")
          : ""
        const values = rebuild ? [row.event_version, event === undefined ? null : JSON.stringify(event)] : []
        const took = yield* update(
          `notification_lease_owner = ?, notification_lease_expires_at = ?${set} ` +
            `WHERE id = ? AND ${LEASE_FREE} AND event_version = ? AND notification_status = ?`,
          [owner, now + leaseMs, ...values, row.id, now, row.event_version, row.notification_status]
        )
        if (!took) continue
        if (launching) {
          threads.add(row.thread_id)
          slots--
        }
        const current = yield* read("WHERE id = ?", [row.id])
        taken.push(...current)
      }
      return taken
    })

  const guard = (statuses: ReadonlyArray<Status>) =>
    `id = ? AND ${HELD} AND dispatch_version = ? AND notification_status IN (${
      statuses.map((s) => `'${s}'`).join(", ")
    })`

  return {
    claim,
    /** The event's run started: followed from now on. */
    dispatched: (id: string, owner: string, version: number, runId: string, now: number) =>
      update(
        "notification_status = 'dispatched', notification_run_id = ?, notification_error = NULL, " +
          "next_notification_at = ?, notification_lease_owner = NULL, notification_lease_expires_at = NULL " +
          `WHERE ${guard(["claimed", "retry"])}`,
        [runId, now, id, owner, now, version]
      ),
    /**
     * The run could not be launched: tried again at `next` (`latest`: as the task's latest event, rebuilt then;
     * `failure`: one more failure in a row).
     */
    release: (id: string, owner: string, next: number, error: string, latest: boolean, failure: boolean) =>
      update(
        `notification_status = ?, notification_error = ?, next_notification_at = ?, ` +
          "notification_lease_owner = NULL, notification_lease_expires_at = NULL" +
          (latest ? ", dispatch_event = NULL, notification_run_id = NULL" : "") +
          (failure ? ", notification_attempt_count = notification_attempt_count + 1" : "") +
          " WHERE id = ? AND notification_lease_owner = ?",
        [latest ? "pending" : "retry", error, next, id, owner]
      ),
    /**
     * The event's run ended: delivered (a newer event is then pending), or failed (tried again at `next`, under
     * the next attempt's key).
     */
    finish: (id: string, owner: string, version: number, delivered: boolean, next: number | null, error: string | null,
      now: number) =>
      delivered
        ? update(
          "notified_version = ?, " +
            "notification_status = CASE WHEN event_version > ? THEN 'pending' ELSE 'delivered' END, " +
            "next_notification_at = CASE WHEN event_version > ? THEN CAST(? AS BIGINT) ELSE NULL END, " +
            "dispatch_version = NULL, " +
            "dispatch_attempt = 0, dispatch_event = NULL, notification_run_id = NULL, notification_error = NULL, " +
            "notification_attempt_count = 0, notification_lease_owner = NULL, notification_lease_expires_at = NULL " +
            `WHERE ${guard(["dispatched"])}`,
          [version, version, version, now, id, owner, now, version]
        )
        : update(
          "notification_status = 'retry', dispatch_attempt = dispatch_attempt + 1, " +
            "notification_attempt_count = notification_attempt_count + 1, notification_run_id = NULL, " +
            "notification_error = ?, next_notification_at = ?, notification_lease_owner = NULL, " +
            `notification_lease_expires_at = NULL WHERE ${guard(["dispatched"])}`,
          [error, next, id, owner, now, version]
        ),
    /** The event's run is still going: looked at again at `next`. */
    defer: (id: string, owner: string, version: number, next: number, now: number) =>
      update(
        "next_notification_at = ?, notification_lease_owner = NULL, notification_lease_expires_at = NULL " +
          `WHERE ${guard(["dispatched"])}`,
        [next, id, owner, now, version]
      ),
    /**
     * The user's task's event `version` was told to its user another way (`antler run` showed it): delivered, as its
     * notification run's success would have it; not while a process tells it (claimed or dispatched), nor once a
     * newer event came (that one is still told).
     */
    told: (id: string, userId: string, version: number, now: number) =>
      update(
        "notified_version = ?, notification_status = 'delivered', next_notification_at = NULL, " +
          "dispatch_version = NULL, dispatch_attempt = 0, dispatch_event = NULL, notification_run_id = NULL, " +
          "notification_error = NULL, notification_attempt_count = 0 " +
          `WHERE id = ? AND user_id = ? AND event_version = ? AND notified_version < ? AND ${LEASE_FREE} ` +
          "AND notification_status IN ('pending', 'retry')",
        [version, id, userId, version, version, now]
      ),
    /** Gives the event up (a newer one is pending instead). */
    deadLetter: (id: string, owner: string, version: number, error: string, failure: boolean, now: number) =>
      update(
        "notification_status = CASE WHEN event_version > ? THEN 'pending' ELSE 'dead_letter' END, " +
          "notification_error = CASE WHEN event_version > ? THEN NULL ELSE ? END, " +
          "next_notification_at = CASE WHEN event_version > ? THEN CAST(? AS BIGINT) ELSE NULL END, " +
          "notification_attempt_count = CASE WHEN event_version > ? THEN 0 ELSE notification_attempt_count + ? END, " +
          "dispatch_version = NULL, dispatch_attempt = 0, dispatch_event = NULL, notification_run_id = NULL, " +
          "notification_lease_owner = NULL, notification_lease_expires_at = NULL " +
          `WHERE ${guard(["claimed", "retry", "dispatched"])}`,
        [version, version, error, version, now, version, failure ? 1 : 0, id, owner, now, version]
      )
  }
}

/** The notification operations. */
export type Service = ReturnType<typeof make>
