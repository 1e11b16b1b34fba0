/**
 * The runs of the LangGraph API, declared: runs of a thread and stateless runs (a thread of their own, deleted
 * after), started in the background, streamed (server-sent events) or waited for; joined (streamed again from
 * any event, `Last-Event-ID`), listed, cancelled. Implemented in `handlers/Runs.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { RecordStopReason } from "../../../services/RunEvents.js"
import { RunId, RunPath, ThreadPath } from "./Ids.js"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { BodyRefusals, JsonRecord, QueryValue, selectOf, StoredMetadata, ThreadNotFound } from "./Threads.js"

// ---------------------------------------------------------------------------------------------------------
// Requests

/**
 * The stream modes a run may ask for (SPEC §12.2); `messages-tuple` is sent as SSE event `messages`, `messages`
 * as LangGraph's `messages/metadata`, `messages/partial` and `messages/complete`, `events` as LangChain's callback
 * events (`CallbackEvents`). `debug`, `tasks` and `checkpoints` are accepted (DeerFlow accepts them) and produce no
 * events.
 */
const STREAM_MODES = [
  "values",
  "messages-tuple",
  "messages",
  "updates",
  "custom",
  "events",
  "debug",
  "tasks",
  "checkpoints"
] as const

export const StreamMode = Schema.Literal(...STREAM_MODES).annotations({
  message: (issue) => ({
    message: `Expected one of ${STREAM_MODES.join(", ")}, actual ${JSON.stringify(issue.actual)}`,
    override: true
  })
})
export type StreamMode = typeof StreamMode.Type

/** `stream_mode`: one mode or a list (default `["values"]`). */
export const StreamModes = Schema.Union(StreamMode, Schema.Array(StreamMode))

/**
 * A run's `config`: its recursion limit, `configurable` and `context` (the run's settings, with the request's
 * `context`; LangGraph 0.6's place for them, where DeerFlow's clients also put `secrets`) and `metadata`.
 */
export const RunConfig = Schema.Struct({
  recursion_limit: Schema.optional(Schema.NullOr(Schema.Number)),
  configurable: Schema.optional(Schema.NullOr(JsonRecord)),
  context: Schema.optional(Schema.NullOr(JsonRecord)),
  metadata: Schema.optional(Schema.NullOr(StoredMetadata)),
  tags: Schema.optional(Schema.Unknown)
})

/** What a new run does to the thread's run in progress. */
export const MultitaskStrategy = Schema.Literal("reject", "interrupt", "rollback", "enqueue")

/** `POST /threads/{id}/runs[/stream|/wait]` and the stateless `/runs...` (SPEC §12.1). */
export const RunCreate = Schema.Struct({
  assistant_id: Schema.optional(Schema.NullOr(Schema.String)),
  input: Schema.optional(Schema.NullOr(Schema.Unknown)),
  command: Schema.optional(Schema.NullOr(Schema.Struct({ resume: Schema.optional(Schema.Unknown) }))),
  config: Schema.optional(Schema.NullOr(RunConfig)),
  context: Schema.optional(Schema.NullOr(JsonRecord)),
  metadata: Schema.optional(Schema.NullOr(StoredMetadata)),
  stream_mode: Schema.optional(Schema.NullOr(StreamModes)),
  stream_subgraphs: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_resumable: Schema.optional(Schema.NullOr(Schema.Boolean)),
  on_disconnect: Schema.optional(Schema.NullOr(Schema.Literal("cancel", "continue"))),
  multitask_strategy: Schema.optional(Schema.NullOr(MultitaskStrategy)),
  on_completion: Schema.optional(Schema.NullOr(Schema.Literal("delete", "keep"))),
  if_not_exists: Schema.optional(Schema.NullOr(Schema.Literal("create", "reject"))),
  interrupt_before: Schema.optional(Schema.NullOr(Schema.Unknown)),
  interrupt_after: Schema.optional(Schema.NullOr(Schema.Unknown)),
  checkpoint_id: Schema.optional(Schema.NullOr(Schema.String)),
  checkpoint: Schema.optional(Schema.NullOr(Schema.Unknown)),
  webhook: Schema.optional(Schema.NullOr(Schema.String)),
  after_seconds: Schema.optional(Schema.NullOr(Schema.Number))
})
export type RunCreate = typeof RunCreate.Type

/** The most runs one batch starts, and the most run ids one bulk cancel names. */
export const MAX_BATCH_RUNS = 100
export const MAX_CANCEL_RUNS = 1000

/** `POST /runs/batch`: stateless runs, started together. */
export const RunBatch = Schema.Array(RunCreate).pipe(Schema.minItems(1), Schema.maxItems(MAX_BATCH_RUNS))

/**
 * `POST /runs/cancel`: the runs `run_ids` of thread `thread_id`, or the runs of a `status` (`all`: pending and
 * running), of `thread_id` or of all the user's threads.
 */
export const RunsCancel = Schema.Struct({
  thread_id: Schema.optional(Schema.NullOr(Schema.String)),
  run_ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.String).pipe(Schema.maxItems(MAX_CANCEL_RUNS)))),
  status: Schema.optional(Schema.NullOr(Schema.Literal("pending", "running", "all")))
})

// ---------------------------------------------------------------------------------------------------------
// Answers

/** LangGraph's Run object. */
export const RunObject = Schema.Struct({
  run_id: Schema.String,
  thread_id: Schema.String,
  assistant_id: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  status: Schema.Literal("pending", "running", "success", "error", "interrupted"),
  metadata: Schema.Unknown,
  multitask_strategy: Schema.Unknown,
  kwargs: JsonRecord,
  stop_reason: Schema.NullOr(RecordStopReason),
  error: Schema.optional(Schema.String),
  // DeerFlow's counts of what the run used and wrote (0 until it has)
  total_input_tokens: Schema.Number,
  total_output_tokens: Schema.Number,
  total_tokens: Schema.Number,
  llm_call_count: Schema.Number,
  lead_agent_tokens: Schema.Number,
  subagent_tokens: Schema.Number,
  middleware_tokens: Schema.Number,
  message_count: Schema.Number
}).annotations({ identifier: "Run" })

/** The fields of a run a list may select (the SDK's `RunSelectField`, `stop_reason`, `error` and DeerFlow's counts). */
export const RunSelect = selectOf(
  "run_id",
  "thread_id",
  "assistant_id",
  "created_at",
  "updated_at",
  "status",
  "metadata",
  "kwargs",
  "multitask_strategy",
  "cancel_reason",
  "stop_reason",
  "error",
  "total_input_tokens",
  "total_output_tokens",
  "total_tokens",
  "llm_call_count",
  "lead_agent_tokens",
  "subagent_tokens",
  "middleware_tokens",
  "message_count"
)

/** Runs of a thread (with `select`, only the fields selected). */
export const RunList = Schema.Array(Schema.partial(RunObject))

/** The thread's values once a run ended (with `__error__` when it failed). */
export const RunValues = JsonRecord.annotations({
  identifier: "RunValues",
  description: "The thread's values once the run ended; `__error__` says why when it failed"
})

/** A run's events as server-sent events, with heartbeats, ending with `end` (or `gap`). */
export const RunStream = HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
  description: "Server-sent events (`event`, `data`, `id`): `metadata`, the stream modes' events, `error`, `end`; " +
    "`gap` when the events asked for are no longer kept"
})

const RunCreateRefusals = Schema.Union(
  refusal(400, "A model that is not configured, or a bootstrap run of the default agent without an admin token"),
  refusal(409, "The thread has an active run (multitask_strategy: reject)"),
  refusal(422, "Input messages, settings or options the agent cannot run with (interrupts)")
)

// ---------------------------------------------------------------------------------------------------------
// Endpoints

const JoinParams = Schema.Struct({
  stream_mode: Schema.optional(QueryValue.annotations({
    description: `The modes to stream (${StreamMode.literals.join(", ")}; default: the run's)`
  })),
  cancel_on_disconnect: Schema.optional(
    QueryValue.annotations({ description: "true: cancel the run if this client goes" })
  )
})

const JoinHeaders = Schema.Struct({
  "last-event-id": Schema.optional(Schema.String.annotations({ description: "Stream from after this event" }))
})

/** An endpoint starting a run of a thread. */
const threadRun = <const Name extends string>(name: Name, path: HttpApiEndpoint.PathSegment) =>
  HttpApiEndpoint.post(name, path)
    .setPath(ThreadPath)
    .setPayload(RunCreate)
    .addError(refusal(404, "No such thread (of this user), or no such assistant (an agent of this user's)"))
    .addError(BodyRefusals)
    .addError(RunCreateRefusals)
    .addError(QuotaRefusal)

/** An endpoint starting a stateless run. */
const statelessRun = <const Name extends string>(name: Name, path: HttpApiEndpoint.PathSegment) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(RunCreate)
    .addError(refusal(404, "No such assistant (an agent of this user's)"))
    .addError(BodyRefusals)
    .addError(RunCreateRefusals)
    .addError(QuotaRefusal)

/** The runs group. */
export const group = HttpApiGroup.make("runs")
  .add(
    threadRun("createRun", "/threads/:thread_id/runs")
      .addSuccess(RunObject)
      .annotate(OpenApi.Summary, "Start a run in the background")
  )
  .add(
    threadRun("streamRun", "/threads/:thread_id/runs/stream")
      .addSuccess(RunStream)
      .annotate(OpenApi.Summary, "Start a run and stream its events")
  )
  .add(
    threadRun("waitRun", "/threads/:thread_id/runs/wait")
      .addSuccess(RunValues)
      .annotate(OpenApi.Summary, "Start a run and wait for its end")
  )
  .add(
    HttpApiEndpoint.get("listRuns", "/threads/:thread_id/runs")
      .setPath(ThreadPath)
      .setUrlParams(Schema.Struct({
        limit: Schema.optional(QueryValue.annotations({ description: "At most this many (1-1000, default 10)" })),
        offset: Schema.optional(QueryValue.annotations({ description: "Skip this many" })),
        status: Schema.optional(QueryValue.annotations({ description: "Only runs of this status" })),
        select: Schema.optional(QueryValue.annotations({
          description: `Only these fields of each run (repeated: ${RunSelect.value.literals.join(", ")})`
        }))
      }))
      .addSuccess(RunList)
      .addError(ThreadNotFound)
      .addError(refusal(422, "A field to select that a run does not have"))
      .annotate(OpenApi.Summary, "A thread's runs, newest first")
  )
  .add(
    HttpApiEndpoint.get("getRun", "/threads/:thread_id/runs/:run_id")
      .setPath(RunPath)
      .addSuccess(RunObject)
      .addError(refusal(404, "No such thread (of this user), or no such run of it"))
      .annotate(OpenApi.Summary, "Get a run")
  )
  .add(
    HttpApiEndpoint.del("deleteRun", "/threads/:thread_id/runs/:run_id")
      .setPath(RunPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(refusal(404, "No such thread (of this user), or no such run of it"))
      .addError(refusal(409, "The run has not ended (pending or running): cancel it first"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Delete a run that has ended: its record and events (its checkpoints stay)")
  )
  .add(
    HttpApiEndpoint.get("joinStream", "/threads/:thread_id/runs/:run_id/stream")
      .setPath(RunPath)
      .setUrlParams(JoinParams)
      .setHeaders(JoinHeaders)
      .addSuccess(RunStream)
      .addError(refusal(404, "No such thread (of this user), or no such run of it"))
      .addError(refusal(400, "A Last-Event-ID that is not an event id"))
      .addError(refusal(422, "A stream mode that is not one"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Stream a run's events (again, from after Last-Event-ID)")
  )
  .add(
    HttpApiEndpoint.post("joinStreamPost", "/threads/:thread_id/runs/:run_id/stream")
      .setPath(RunPath)
      .setUrlParams(Schema.Struct({
        ...JoinParams.fields,
        action: Schema.optional(QueryValue.annotations({
          description: "interrupt or rollback: cancel the run first (DeerFlow's stop), then stream what is left"
        })),
        wait: Schema.optional(QueryValue.annotations({ description: "with action, true: answer 204 once it ended" }))
      }))
      .setHeaders(JoinHeaders)
      .addSuccess(RunStream)
      .addSuccess(HttpApiSchema.Empty(204).annotations({ description: "Cancelled and ended (action with wait)" }))
      .addError(refusal(404, "No such thread (of this user), or no such run of it"))
      .addError(refusal(400, "A Last-Event-ID that is not an event id"))
      .addError(refusal(409, "With action: the run has ended other than cancelled"))
      .addError(refusal(422, "A stream mode that is not one, or an action not interrupt or rollback"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Stream a run's events (again, from after Last-Event-ID); with action, stop it first")
  )
  .add(
    HttpApiEndpoint.get("joinRunStream", "/runs/:run_id/stream")
      .setPath(Schema.Struct({ run_id: RunId }))
      .setUrlParams(JoinParams)
      .setHeaders(JoinHeaders)
      .addSuccess(RunStream)
      .addError(refusal(404, "No such run of this user's (a stateless run's is gone with its thread once it ended)"))
      .addError(refusal(400, "A Last-Event-ID that is not an event id"))
      .addError(refusal(422, "A stream mode that is not one"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Stream a run's events by its id alone (again, from after Last-Event-ID)")
  )
  .add(
    HttpApiEndpoint.get("joinRun", "/threads/:thread_id/runs/:run_id/join")
      .setPath(RunPath)
      .addSuccess(RunValues)
      .addError(refusal(404, "No such thread (of this user), or no such run of it"))
      .annotate(OpenApi.Summary, "Wait for a run's end")
  )
  .add(
    HttpApiEndpoint.post("cancelRun", "/threads/:thread_id/runs/:run_id/cancel")
      .setPath(RunPath)
      .setUrlParams(Schema.Struct({
        wait: Schema.optional(QueryValue.annotations({ description: "true: answer once the run ended" })),
        action: Schema.optional(QueryValue.annotations({ description: "interrupt (default) or rollback" }))
      }))
      .addSuccess(HttpApiSchema.Empty(204).annotations({ description: "The run was cancelled and has ended (wait)" }))
      .addSuccess(HttpApiSchema.Empty(202).annotations({ description: "The run is being cancelled (without wait)" }))
      .addError(refusal(404, "No such thread (of this user), or no such run of it"))
      .addError(refusal(409, "The run has ended other than cancelled (a cancelled run answers 202 again)"))
      .addError(refusal(422, "An action that is not interrupt or rollback"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Cancel a run (interrupt, or roll back its changes)")
  )
  .add(
    HttpApiEndpoint.post("cancelRuns", "/runs/cancel")
      .setPayload(RunsCancel)
      .setUrlParams(Schema.Struct({
        action: Schema.optional(QueryValue.annotations({ description: "interrupt (default) or rollback" }))
      }))
      .addSuccess(HttpApiSchema.NoContent.annotations({ description: "The runs are being cancelled" }))
      .addError(refusal(404, "No such thread (of this user), or a run id of no run of it"))
      .addError(refusal(409, "A run runs in another gateway process (cancel it there)"))
      .addError(BodyRefusals)
      .addError(refusal(
        422,
        "Neither run_ids (with thread_id) nor status, or both; an action not interrupt or rollback"
      ))
      .annotate(OpenApi.Summary, "Cancel runs of the user's: by thread and run ids, or by status")
  )
  .add(
    HttpApiEndpoint.post("createStatelessRunBatch", "/runs/batch")
      .setPayload(RunBatch)
      .addSuccess(RunList)
      .addError(refusal(404, "No such assistant (an agent of this user's)"))
      .addError(BodyRefusals)
      .addError(RunCreateRefusals)
      .addError(QuotaRefusal)
      .annotate(OpenApi.Summary, "Start stateless runs in the background: all of them, or none")
  )
  .add(
    statelessRun("createStatelessRun", "/runs")
      .addSuccess(RunObject)
      .annotate(OpenApi.Summary, "Start a stateless run in the background")
  )
  .add(
    statelessRun("streamStatelessRun", "/runs/stream")
      .addSuccess(RunStream)
      .annotate(OpenApi.Summary, "Start a stateless run and stream its events")
  )
  .add(
    statelessRun("waitStatelessRun", "/runs/wait")
      .addSuccess(RunValues)
      .annotate(OpenApi.Summary, "Start a stateless run and wait for its end")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Runs of the agent on a thread, and stateless runs")
