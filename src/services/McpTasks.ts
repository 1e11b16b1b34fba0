/**
 * The MCP task port: DeerFlow's durable background tasks for the MCP tools configured as `task_toolsets`. The
 * model's call of such a tool submits the work and returns at once with a task id; the runtime (the gateway's, or
 * `antler run`'s while it runs) keeps the task's record (beside its threads), polls the server until the task
 * ends, and cancels it when asked. Every operation names its user and thread: another user's task is one nobody
 * has. Absent: no task runtime (`mcp_tasks.enabled` off).
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { McpTaskToolset } from "./Extensions.js"
import type { JsonObject } from "../state/Message.js"
import type { RequestSecrets } from "./SkillSecrets.js"

/** DeerFlow's task statuses. */
export const TaskStatus = Schema.Literal("submitted", "working", "input_required", "completed", "failed", "cancelled")
export type TaskStatus = typeof TaskStatus.Type

/** Statuses of a task still going (polled). */
export const ACTIVE: ReadonlyArray<TaskStatus> = ["submitted", "working", "input_required"]
/** Statuses of a task that ended. */
export const TERMINAL: ReadonlyArray<TaskStatus> = ["completed", "failed", "cancelled"]

/** Statuses whose snapshot is told to the user: a notification run on the thread (DeerFlow's `ATTENTION`). */
export const ATTENTION: ReadonlyArray<TaskStatus> = ["input_required", "completed", "failed", "cancelled"]

/**
 * Where the telling of a task's latest event stands (DeerFlow's `notification_status`): `none` (nothing to tell),
 * `pending`, `claimed` (a process is launching its run), `dispatched` (its run started), `retry`, `delivered`
 * (its run succeeded), `dead_letter` (given up).
 */
export const NotificationStatus = Schema.Literal(
  "none",
  "pending",
  "claimed",
  "dispatched",
  "retry",
  "delivered",
  "dead_letter"
)
export type NotificationStatus = typeof NotificationStatus.Type

/** A result kept elsewhere by the server (DeerFlow's `result_artifact`). */
export interface ResultArtifact {
  readonly uri: string
  readonly mime_type: string
}

/** Where a task stands: its status and what it gave (a record's, and a status or cancel call's answer). */
export interface TaskState {
  readonly status: TaskStatus
  readonly result: unknown
  readonly result_preview: string | null
  readonly result_truncated: boolean
  readonly result_artifact: ResultArtifact | null
  readonly error: string | null
  readonly input_required: JsonObject | null
}

/** A task just submitted: nothing given yet. */
export const SUBMITTED: TaskState = {
  status: "submitted",
  result: null,
  result_preview: null,
  result_truncated: false,
  result_artifact: null,
  error: null,
  input_required: null
}

/** A task as stored. Times are epoch milliseconds. `thread_id` is the stored thread id. */
export interface TaskRecord extends TaskState {
  readonly id: string
  readonly user_id: string
  readonly thread_id: string
  readonly run_id: string | null
  readonly tool_call_id: string | null
  readonly server_name: string
  readonly driver_name: string
  readonly remote_task_id: string
  readonly task_name: string
  /** The raw names of the task's tools (`submit_tool`, `status_tool`, `cancel_tool`). */
  readonly driver_data: Readonly<Record<string, string>>
  readonly next_poll_at: number | null
  readonly last_polled_at: number | null
  readonly last_poll_error: string | null
  readonly poll_attempt_count: number
  readonly consecutive_poll_error_count: number
  readonly lease_owner: string | null
  readonly lease_expires_at: number | null
  readonly cancel_requested_at: number | null
  readonly cancel_attempt_count: number
  readonly next_cancel_at: number | null
  readonly last_cancel_error: string | null
  readonly completed_at: number | null
  readonly created_at: number
  readonly updated_at: number
  /** Its notifications (DeerFlow's outbox columns): see `mcptasks/Notifications`. */
  readonly notification_status: NotificationStatus
  /** sha256 of the latest event told or to tell (its canonical JSON). */
  readonly event_fingerprint: string | null
  /** Events seen (one more each time the event changes), and the last one told. */
  readonly event_version: number
  readonly notified_version: number
  /** The event being told: its version, its launch attempt (its run's idempotency key) and its snapshot. */
  readonly dispatch_version: number | null
  readonly dispatch_attempt: number
  readonly dispatch_event: JsonObject | null
  readonly notification_run_id: string | null
  readonly notification_error: string | null
  /** Failed tellings of the event in a row (five: dead letter). */
  readonly notification_attempt_count: number
  readonly next_notification_at: number | null
  readonly notification_lease_owner: string | null
  readonly notification_lease_expires_at: number | null
  /**
   * The request secrets of the run that started it, sealed (`mcptasks/TaskSecrets`) while it is active, so that
   * what its server says after that run ended is masked with them; null when it had none or once it ended.
   */
  readonly sealed_secrets?: string | null | undefined
}

/** What names a new task: whose, where, on which server, and its first poll. */
export type NewTask = Pick<
  TaskRecord,
  | "id"
  | "user_id"
  | "thread_id"
  | "run_id"
  | "tool_call_id"
  | "server_name"
  | "driver_name"
  | "remote_task_id"
  | "task_name"
  | "driver_data"
  | "next_poll_at"
>

/** The record of a task submitted at `now`: nothing polled, cancelled or leased yet. */
export const submitted = (task: NewTask, now: number): TaskRecord => ({
  ...SUBMITTED,
  ...task,
  last_polled_at: null,
  last_poll_error: null,
  poll_attempt_count: 0,
  consecutive_poll_error_count: 0,
  lease_owner: null,
  lease_expires_at: null,
  cancel_requested_at: null,
  cancel_attempt_count: 0,
  next_cancel_at: null,
  last_cancel_error: null,
  completed_at: null,
  created_at: now,
  updated_at: now,
  notification_status: "none",
  event_fingerprint: null,
  event_version: 0,
  notified_version: 0,
  dispatch_version: null,
  dispatch_attempt: 0,
  dispatch_event: null,
  notification_run_id: null,
  notification_error: null,
  notification_attempt_count: 0,
  next_notification_at: null,
  notification_lease_owner: null,
  notification_lease_expires_at: null
})

/** Why a task operation failed. */
export class McpTaskError extends Schema.TaggedError<McpTaskError>()("McpTaskError", {
  reason: Schema.Literal("not_found", "ambiguous", "protocol", "call", "duplicate", "store"),
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** A model's call of a task tool: what to submit, for whom. */
export interface SubmitRequest {
  readonly userId: string
  readonly threadId: string
  readonly runId: string | null
  readonly toolCallId: string | null
  readonly server: string
  readonly toolset: McpTaskToolset
  readonly arguments: JsonObject
  /** The run's request secrets: what the task says later is masked with them (see `TaskRecord.sealed_secrets`). */
  readonly secrets?: RequestSecrets | undefined
}

/** The task runtime. */
export interface Service {
  /** Submits the work on its server and records the task (before answering: it is never untracked). */
  readonly submit: (request: SubmitRequest) => Effect.Effect<TaskRecord, McpTaskError>
  /** The user's tasks of a thread, newest first. */
  readonly list: (
    threadId: string,
    userId: string,
    options: { readonly limit: number; readonly activeOnly: boolean }
  ) => Effect.Effect<ReadonlyArray<TaskRecord>, McpTaskError>
  /** The user's task of that id. */
  readonly get: (id: string, userId: string) => Effect.Effect<Option.Option<TaskRecord>, McpTaskError>
  /** Asks for the user's task of that thread to be cancelled (the poller cancels it on its server); none: no task. */
  readonly cancel: (
    id: string,
    threadId: string,
    userId: string
  ) => Effect.Effect<Option.Option<TaskRecord>, McpTaskError>
  /**
   * Cancels the one active task of the thread named `task` (its id or exact name, case-insensitive), or the only
   * active one: `not_found` when none matches, `ambiguous` when several do.
   */
  readonly cancelMatching: (
    threadId: string,
    userId: string,
    task: string | undefined
  ) => Effect.Effect<TaskRecord, McpTaskError>
  /**
   * Records the user's task's event `version` (its record's `event_version` when shown) as told to the user without a
   * notification run (`antler run` showed it): no notification run tells it again. False when nothing changed (it
   * was told already, a process is telling it, or a newer event came, which is still told).
   */
  readonly told: (id: string, userId: string, version: number) => Effect.Effect<boolean, McpTaskError>
  /** Failed polls in a row after which a task's tracking reads as degraded. */
  readonly trackingDegradedAfter: number
}

/** The MCP task runtime of a gateway. */
export class McpTasks extends Context.Tag("antler/McpTasks")<McpTasks, Service>() {}
