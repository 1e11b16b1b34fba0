/**
 * DeerFlow's scheduled tasks, declared (its `routers/scheduled_tasks.py` paths and shapes, served under `/api`):
 * a task runs its prompt as a run of the agent at its schedule (`once` at `schedule_spec.run_at`, or `cron` at
 * `schedule_spec.cron` in its `timezone`), on a new thread per run or on one thread of its user. Each user sees
 * and changes only their own tasks: another's is "not found". Implemented in `handlers/ScheduledTasks.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ThreadPath } from "./Ids.js"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { BodyRefusals, JsonRecord, QueryValue, ThreadNotFound } from "./Threads.js"

/** The longest title of a task. */
export const MAX_TITLE = 200
/** The longest prompt of a task. */
export const MAX_PROMPT = 20_000

const ContextMode = Schema.Literal("fresh_thread_per_run", "reuse_thread").annotations({
  description: "fresh_thread_per_run: each run on a new thread; reuse_thread: every run on thread_id"
})
const Title = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_TITLE))
const Prompt = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_PROMPT))
const Timezone = Schema.String.annotations({ description: "An IANA time zone (UTC, Asia/Shanghai...)" })
const Spec = JsonRecord.annotations({
  description: "once: {run_at: ISO 8601 time}; cron: {cron: five fields, read in the task's timezone}"
})

/** `POST /api/scheduled-tasks` */
export const TaskCreate = Schema.Struct({
  thread_id: Schema.optional(Schema.NullOr(Schema.String)),
  context_mode: Schema.optional(ContextMode),
  title: Title,
  prompt: Prompt,
  schedule_type: Schema.Literal("once", "cron"),
  schedule_spec: Spec,
  timezone: Timezone
})

/** `PATCH /api/scheduled-tasks/{task_id}`: the fields to change. */
export const TaskPatch = Schema.Struct({
  context_mode: Schema.optional(Schema.NullOr(ContextMode)),
  thread_id: Schema.optional(Schema.NullOr(Schema.String)),
  title: Schema.optional(Schema.NullOr(Title)),
  prompt: Schema.optional(Schema.NullOr(Prompt)),
  schedule_spec: Schema.optional(Schema.NullOr(Spec)),
  timezone: Schema.optional(Schema.NullOr(Timezone))
})

/** A scheduled task, as DeerFlow's app reads it. */
export const TaskObject = Schema.Struct({
  id: Schema.String,
  thread_id: Schema.NullOr(Schema.String),
  context_mode: ContextMode,
  assistant_id: Schema.String,
  title: Schema.String,
  prompt: Schema.String,
  schedule_type: Schema.Literal("once", "cron"),
  schedule_spec: JsonRecord,
  timezone: Schema.String,
  status: Schema.Literal("enabled", "paused", "running", "completed", "failed", "cancelled"),
  next_run_at: Schema.NullOr(Schema.String),
  last_run_at: Schema.NullOr(Schema.String),
  last_run_id: Schema.NullOr(Schema.String),
  last_thread_id: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String),
  run_count: Schema.Number,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "ScheduledTask" })

/** Tasks found. */
export const TaskList = Schema.Array(TaskObject)

/** A run of a task. */
export const TaskRunObject = Schema.Struct({
  id: Schema.String,
  task_id: Schema.String,
  thread_id: Schema.String,
  run_id: Schema.NullOr(Schema.String),
  scheduled_for: Schema.String,
  trigger: Schema.Literal("scheduled", "manual"),
  status: Schema.Literal("queued", "running", "success", "failed", "skipped", "interrupted"),
  error: Schema.NullOr(Schema.String),
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String),
  created_at: Schema.String
}).annotations({ identifier: "ScheduledTaskRun" })

/** A task's runs, newest first. */
export const TaskRunList = Schema.Array(TaskRunObject)

/** What a trigger answers. */
export const Triggered = Schema.Struct({ id: Schema.String, triggered: Schema.Boolean })

/** What a deletion answers. */
export const Deleted = Schema.Struct({ id: Schema.String, deleted: Schema.Boolean })

const TaskPath = Schema.Struct({
  task_id: Schema.String.annotations({ description: "The task's id (task-...)" })
})

const TaskNotFound = refusal(404, "No such scheduled task (of this user)")
const TaskBusy = refusal(409, "The task's run is going (a once task's, or the one a trigger would overlap)")

/** The scheduled tasks group (served under `/api`). */
export const group = HttpApiGroup.make("scheduledTasks")
  .add(
    HttpApiEndpoint.get("listScheduledTasks", "/scheduled-tasks")
      .addSuccess(TaskList)
      .annotate(OpenApi.Summary, "The user's scheduled tasks, newest first")
  )
  .add(
    HttpApiEndpoint.post("createScheduledTask", "/scheduled-tasks")
      .setPayload(TaskCreate)
      .addSuccess(TaskObject)
      .addError(BodyRefusals)
      .addError(refusal(404, "reuse_thread names a thread the user does not have"))
      .annotate(OpenApi.Summary, "Create a scheduled task")
  )
  .add(
    HttpApiEndpoint.get("getScheduledTask", "/scheduled-tasks/:task_id")
      .setPath(TaskPath)
      .addSuccess(TaskObject)
      .addError(TaskNotFound)
      .annotate(OpenApi.Summary, "Get a scheduled task")
  )
  .add(
    HttpApiEndpoint.patch("updateScheduledTask", "/scheduled-tasks/:task_id")
      .setPath(TaskPath)
      .setPayload(TaskPatch)
      .addSuccess(TaskObject)
      .addError(BodyRefusals)
      .addError(TaskNotFound)
      .addError(TaskBusy)
      .annotate(OpenApi.Summary, "Change a scheduled task")
  )
  .add(
    HttpApiEndpoint.del("deleteScheduledTask", "/scheduled-tasks/:task_id")
      .setPath(TaskPath)
      .addSuccess(Deleted)
      .addError(TaskNotFound)
      .annotate(OpenApi.Summary, "Delete a scheduled task and its runs' records (not their threads)")
  )
  .add(
    HttpApiEndpoint.post("pauseScheduledTask", "/scheduled-tasks/:task_id/pause")
      .setPath(TaskPath)
      .addSuccess(TaskObject)
      .addError(TaskNotFound)
      .addError(TaskBusy)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Pause a scheduled task (its ticks are not run)")
  )
  .add(
    HttpApiEndpoint.post("resumeScheduledTask", "/scheduled-tasks/:task_id/resume")
      .setPath(TaskPath)
      .addSuccess(TaskObject)
      .addError(TaskNotFound)
      .addError(TaskBusy)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Resume a paused task (a cron task from its next tick after now)")
  )
  .add(
    HttpApiEndpoint.post("triggerScheduledTask", "/scheduled-tasks/:task_id/trigger")
      .setPath(TaskPath)
      .addSuccess(Triggered)
      .addError(TaskNotFound)
      .addError(TaskBusy)
      .addError(refusal(502, "The run could not be started (the detail says why)"))
      .addError(QuotaRefusal)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Run a scheduled task now")
  )
  .add(
    HttpApiEndpoint.get("listScheduledTaskRuns", "/scheduled-tasks/:task_id/runs")
      .setPath(TaskPath)
      .setUrlParams(Schema.Struct({
        limit: Schema.optional(QueryValue.annotations({ description: "At most this many (1-200, default 50)" })),
        offset: Schema.optional(QueryValue.annotations({ description: "Skip this many" }))
      }))
      .addSuccess(TaskRunList)
      .addError(TaskNotFound)
      .addError(refusal(422, "A limit or offset that is not one"))
      .annotate(OpenApi.Summary, "A scheduled task's runs, newest first")
  )
  .add(
    HttpApiEndpoint.get("listThreadScheduledTasks", "/threads/:thread_id/scheduled-tasks")
      .setPath(ThreadPath)
      .addSuccess(TaskList)
      .addError(ThreadNotFound)
      .annotate(OpenApi.Summary, "The user's scheduled tasks that run on a thread")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Prompts run as the agent's runs on a schedule (DeerFlow's scheduled tasks)")
