/**
 * LangGraph's crons, declared (the paths and shapes of LangGraph's server, which `@langchain/langgraph-sdk`'s
 * `client.crons` calls): a cron starts a run of the agent at each tick of its schedule (five cron fields, read in
 * its `timezone`, UTC by default), on its thread (`POST /threads/{id}/runs/crons`) or on a new thread per run
 * (`POST /runs/crons`, the thread deleted after the run unless `on_run_completed` is `keep`). Each user sees and
 * changes only their own crons: another's is "not found". Ticked by the gateway's scheduler, as DeerFlow's
 * scheduled tasks are (once per tick across the processes sharing the database). Implemented in
 * `handlers/Crons.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { SafeId } from "../../../services/Sandbox.js"
import { ThreadPath } from "./Ids.js"
import { refusal } from "./Problem.js"
import { MultitaskStrategy, RunConfig, StreamModes } from "./Runs.js"
import { Authentication, NoBody } from "./Security.js"
import { BodyRefusals, JsonRecord } from "./Threads.js"

/** The longest assistant id, time zone, end time or webhook kept. */
const MAX_TEXT = 2048

const Text = Schema.String.pipe(Schema.maxLength(MAX_TEXT))

const Schedule = Schema.String.annotations({
  description: "Five cron fields (minute hour day-of-month month day-of-week), read in timezone"
})
const Timezone = Schema.String.annotations({ description: "An IANA time zone (default UTC)" })
const EndTime = Schema.String.annotations({ description: "An ISO 8601 time after which the cron runs no more" })
const OnRunCompleted = Schema.Literal("delete", "keep").annotations({
  description: "A stateless cron's thread after each run: deleted (default) or kept"
})

/** The fields of a run a cron starts at each tick (LangGraph's cron `payload`). */
export const runFields = {
  input: Schema.optional(Schema.NullOr(Schema.Unknown)),
  config: Schema.optional(Schema.NullOr(RunConfig)),
  context: Schema.optional(Schema.NullOr(JsonRecord)),
  metadata: Schema.optional(Schema.NullOr(JsonRecord)),
  interrupt_before: Schema.optional(Schema.NullOr(Schema.Unknown)),
  interrupt_after: Schema.optional(Schema.NullOr(Schema.Unknown)),
  webhook: Schema.optional(Schema.NullOr(Text)),
  stream_mode: Schema.optional(Schema.NullOr(StreamModes)),
  stream_subgraphs: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_resumable: Schema.optional(Schema.NullOr(Schema.Boolean)),
  durability: Schema.optional(Schema.NullOr(Text)),
  checkpoint_during: Schema.optional(Schema.NullOr(Schema.Boolean))
}

/** `POST /threads/{thread_id}/runs/crons` and `POST /runs/crons` */
export const CronCreate = Schema.Struct({
  schedule: Schedule,
  assistant_id: Schema.optional(Schema.NullOr(Text)),
  timezone: Schema.optional(Schema.NullOr(Timezone)),
  end_time: Schema.optional(Schema.NullOr(EndTime)),
  enabled: Schema.optional(Schema.NullOr(Schema.Boolean)),
  on_run_completed: Schema.optional(Schema.NullOr(OnRunCompleted)),
  multitask_strategy: Schema.optional(Schema.NullOr(MultitaskStrategy)),
  ...runFields
})
export type CronCreate = typeof CronCreate.Type

/** `PATCH /runs/crons/{cron_id}`: the fields to change (`end_time: null` clears it). */
export const CronPatch = Schema.Struct({
  schedule: Schema.optional(Schema.NullOr(Schedule)),
  timezone: Schema.optional(Schema.NullOr(Timezone)),
  end_time: Schema.optional(Schema.NullOr(EndTime)),
  enabled: Schema.optional(Schema.NullOr(Schema.Boolean)),
  on_run_completed: Schema.optional(Schema.NullOr(OnRunCompleted)),
  ...runFields
})
export type CronPatch = typeof CronPatch.Type

/** What a cron may be sorted by. */
export const CronSortBy = Schema.Literal(
  "cron_id",
  "assistant_id",
  "thread_id",
  "created_at",
  "updated_at",
  "next_run_date"
)

/** The fields of a cron a search may select. */
export const CronField = Schema.Literal(
  "cron_id",
  "assistant_id",
  "thread_id",
  "end_time",
  "schedule",
  "created_at",
  "updated_at",
  "user_id",
  "payload",
  "next_run_date",
  "metadata",
  "now",
  "timezone",
  "enabled",
  "on_run_completed"
)

/** The filters of a search and a count. */
const filters = {
  assistant_id: Schema.optional(Schema.NullOr(Text)),
  thread_id: Schema.optional(Schema.NullOr(Text)),
  metadata: Schema.optional(Schema.NullOr(JsonRecord.annotations({ description: "Each key's value, exactly" })))
}

/** `POST /runs/crons/search` */
export const CronSearch = Schema.Struct({
  ...filters,
  enabled: Schema.optional(Schema.NullOr(Schema.Boolean)),
  limit: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 1000)))),
  offset: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.nonNegative()))),
  sort_by: Schema.optional(Schema.NullOr(CronSortBy)),
  sort_order: Schema.optional(Schema.NullOr(Schema.Literal("asc", "desc"))),
  select: Schema.optional(Schema.NullOr(Schema.Array(CronField).pipe(Schema.maxItems(CronField.literals.length))))
})

/** `POST /runs/crons/count` */
export const CronCount = Schema.Struct(filters)

/** LangGraph's Cron object. */
export const CronObject = Schema.Struct({
  cron_id: Schema.String,
  assistant_id: Schema.String,
  thread_id: Schema.NullOr(Schema.String),
  on_run_completed: Schema.optional(OnRunCompleted),
  end_time: Schema.NullOr(Schema.String),
  schedule: Schema.String,
  timezone: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  payload: JsonRecord,
  user_id: Schema.String,
  next_run_date: Schema.NullOr(Schema.String),
  metadata: JsonRecord,
  enabled: Schema.Boolean
}).annotations({ identifier: "Cron" })

/** Crons found (with `select`, only the fields selected). */
export const CronList = Schema.Array(JsonRecord)

const CronPath = Schema.Struct({
  cron_id: SafeId.annotations({
    description: "The cron's id",
    message: (issue) => `Cron ${JSON.stringify(issue.actual)} not found.`
  })
})

const CronNotFound = refusal(404, "No such cron (of this user)")
const CronRefusals = Schema.Union(
  refusal(409, "The user has as many crons as they may"),
  refusal(422, "A schedule, time zone, end time, input or settings the cron cannot run with (the field named)")
)

/** The crons group. */
export const group = HttpApiGroup.make("crons")
  .add(
    HttpApiEndpoint.post("createThreadCron", "/threads/:thread_id/runs/crons")
      .setPath(ThreadPath)
      .setPayload(CronCreate)
      .addSuccess(CronObject)
      .addError(refusal(404, "No such thread (of this user), or no such assistant (an agent of this user's)"))
      .addError(BodyRefusals)
      .addError(CronRefusals)
      .annotate(OpenApi.Summary, "Create a cron running on the thread")
  )
  .add(
    HttpApiEndpoint.post("createCron", "/runs/crons")
      .setPayload(CronCreate)
      .addSuccess(CronObject)
      .addError(refusal(404, "No such assistant (an agent of this user's)"))
      .addError(BodyRefusals)
      .addError(CronRefusals)
      .annotate(OpenApi.Summary, "Create a cron running on a new thread each time")
  )
  .add(
    HttpApiEndpoint.post("searchCrons", "/runs/crons/search")
      .setPayload(CronSearch)
      .addSuccess(CronList)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "The user's crons")
  )
  .add(
    HttpApiEndpoint.post("countCrons", "/runs/crons/count")
      .setPayload(CronCount)
      .addSuccess(Schema.Int)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "How many crons of the user match")
  )
  .add(
    HttpApiEndpoint.patch("updateCron", "/runs/crons/:cron_id")
      .setPath(CronPath)
      .setPayload(CronPatch)
      .addSuccess(CronObject)
      .addError(CronNotFound)
      .addError(BodyRefusals)
      .addError(CronRefusals)
      .annotate(OpenApi.Summary, "Change a cron")
  )
  .add(
    HttpApiEndpoint.del("deleteCron", "/runs/crons/:cron_id")
      .setPath(CronPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(CronNotFound)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Delete a cron (the runs it started stay)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Runs of the agent on a schedule (LangGraph's crons)")
