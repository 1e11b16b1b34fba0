/**
 * DeerFlow's endpoints about a thread's turns, declared (DeerFlow's paths and shapes, under `/api`): the pages of
 * its messages (a chat opened or reloaded), its token usage, a run's events and workspace changes, and the thread's
 * goal (the feedback on a run's answer: `Feedback.ts`). Implemented in `handlers/Turns.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { MAX_CONTINUATIONS, MAX_OBJECTIVE_CHARS } from "../../../state/GoalEvaluation.js"
import { GoalState } from "../../../state/ThreadState.js"
import { RunPath, ThreadPath } from "./Ids.js"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, JsonRecord, QueryValue, ThreadNotFound } from "./Threads.js"

const RunNotFound = refusal(404, "No such thread (of this user), or no such run of it")

/** A run's events. */
export const EventList = Schema.Array(JsonRecord)

/** The fields of one message a run wrote, as DeerFlow's run journal gives it (a thread's page adds its feedback). */
export const messageRowFields = {
  run_id: Schema.NullOr(Schema.String),
  seq: Schema.Number,
  thread_id: Schema.String,
  event_type: Schema.String,
  category: Schema.String,
  content: JsonRecord,
  metadata: JsonRecord,
  created_at: Schema.NullOr(Schema.String)
}

/** One message of a thread's page. */
export const MessageRow = Schema.Struct({
  ...messageRowFields,
  feedback: Schema.NullOr(Schema.Struct({
    feedback_id: Schema.String,
    rating: Schema.Number,
    comment: Schema.NullOr(Schema.String)
  }))
}).annotations({ identifier: "ThreadMessageRow" })

/** A page of a thread's messages, oldest first; `next_before_seq` reads the page before it. */
export const MessagesPage = Schema.Struct({
  data: Schema.Array(MessageRow),
  has_more: Schema.Boolean,
  next_before_seq: Schema.NullOr(Schema.Number)
}).annotations({ identifier: "ThreadMessagesPage" })

/** DeerFlow's legacy list of a thread's messages (`GET /api/threads/{id}/messages`), oldest first. */
export const MessageList = Schema.Array(MessageRow).annotations({ identifier: "ThreadMessageList" })

/** A thread's token usage (DeerFlow's `ThreadTokenUsageResponse`). */
export const TokenUsage = Schema.Struct({
  thread_id: Schema.String,
  total_tokens: Schema.Number,
  total_input_tokens: Schema.Number,
  total_output_tokens: Schema.Number,
  total_runs: Schema.Number,
  by_model: Schema.Record({
    key: Schema.String,
    value: Schema.Struct({ tokens: Schema.Number, runs: Schema.Number })
  }),
  by_caller: Schema.Struct({ lead_agent: Schema.Number, subagent: Schema.Number, middleware: Schema.Number }),
  context_usage: Schema.NullOr(Schema.Struct({
    token_count: Schema.Number,
    max_context_tokens: Schema.NullOr(Schema.Number),
    percentage: Schema.NullOr(Schema.Number)
  }))
}).annotations({ identifier: "ThreadTokenUsage" })

/** What a run changed in the thread's workspace and outputs (`available: false` when it changed nothing). */
export const WorkspaceChanges = Schema.Struct({
  available: Schema.Boolean,
  version: Schema.Number,
  run_id: Schema.String,
  thread_id: Schema.String,
  summary: JsonRecord,
  files: Schema.Array(JsonRecord),
  limits: JsonRecord
}).annotations({ identifier: "WorkspaceChanges" })

/** The thread's goal (null: none). */
export const GoalAnswer = Schema.Struct({ goal: Schema.NullOr(GoalState) }).annotations({ identifier: "ThreadGoal" })

/** `PUT /api/threads/{id}/goal` */
export const GoalRequest = Schema.Struct({
  objective: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_OBJECTIVE_CHARS)),
  max_continuations: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, MAX_CONTINUATIONS)))
})

const PageParams = Schema.Struct({
  limit: Schema.optional(QueryValue.annotations({ description: "At most this many messages (1-200, default 50)" })),
  before_seq: Schema.optional(QueryValue.annotations({ description: "Only messages before this seq" })),
  after_seq: Schema.optional(QueryValue.annotations({ description: "Refused: the pages go backwards only" }))
})

const ListParams = Schema.Struct({
  limit: Schema.optional(QueryValue.annotations({ description: "At most this many messages (1-200, default 50)" })),
  before_seq: Schema.optional(QueryValue.annotations({ description: "Only messages before this seq (the latest)" })),
  after_seq: Schema.optional(QueryValue.annotations({ description: "Only messages after this seq (the first)" }))
})

const EventParams = Schema.Struct({
  event_types: Schema.optional(QueryValue),
  task_id: Schema.optional(QueryValue),
  limit: Schema.optional(QueryValue),
  after_seq: Schema.optional(QueryValue)
})

const ChangeParams = Schema.Struct({
  include_files: Schema.optional(QueryValue),
  include_diff: Schema.optional(QueryValue)
})

/** The turns group (served under `/api`). */
export const group = HttpApiGroup.make("turns")
  .add(
    HttpApiEndpoint.get("messagesPage", "/threads/:thread_id/messages/page")
      .setPath(ThreadPath)
      .setUrlParams(PageParams)
      .addSuccess(MessagesPage)
      .addError(ThreadNotFound)
      .addError(refusal(422, "A limit or before_seq that is not a positive integer, or after_seq"))
      .annotate(OpenApi.Summary, "A page of the thread's messages, newest page first")
  )
  .add(
    HttpApiEndpoint.get("messageList", "/threads/:thread_id/messages")
      .setPath(ThreadPath)
      .setUrlParams(ListParams)
      .addSuccess(MessageList)
      .addError(ThreadNotFound)
      .addError(refusal(422, "A limit, before_seq or after_seq that is not a positive integer (limit at most 200)"))
      .annotate(
        OpenApi.Summary,
        "DeerFlow's legacy list of the thread's messages, oldest first: the last `limit` (before `before_seq`), " +
          "or the first after `after_seq` (none for a thread that does not exist)"
      )
  )
  .add(
    HttpApiEndpoint.get("tokenUsage", "/threads/:thread_id/token-usage")
      .setPath(ThreadPath)
      .setUrlParams(Schema.Struct({ include_active: Schema.optional(QueryValue) }))
      .addSuccess(TokenUsage)
      .addError(ThreadNotFound)
      .addError(refusal(422, "An include_active that is not true or false"))
      .annotate(OpenApi.Summary, "The thread's token usage, by model and by caller")
  )
  .add(
    HttpApiEndpoint.get("runEvents", "/threads/:thread_id/runs/:run_id/events")
      .setPath(RunPath)
      .setUrlParams(EventParams)
      .addSuccess(EventList)
      .addError(RunNotFound)
      .annotate(
        OpenApi.Summary,
        "A run's recorded events in order (messages, subagent steps, its end); `event_types`, `task_id`, " +
          "`limit` (1-2000, 500) and `after_seq` select them"
      )
  )
  .add(
    HttpApiEndpoint.get("workspaceChanges", "/threads/:thread_id/runs/:run_id/workspace-changes")
      .setPath(RunPath)
      .setUrlParams(ChangeParams)
      .addSuccess(WorkspaceChanges)
      .addError(RunNotFound)
      .addError(refusal(422, "An include_files or include_diff that is not true or false"))
      .annotate(OpenApi.Summary, "What a run changed in the thread's workspace and outputs, with diffs")
  )
  .add(
    HttpApiEndpoint.get("getGoal", "/threads/:thread_id/goal")
      .setPath(ThreadPath)
      .addSuccess(GoalAnswer)
      .addError(ThreadNotFound)
      .annotate(OpenApi.Summary, "The thread's goal (none for a new chat's id, whose thread does not exist yet)")
  )
  .add(
    HttpApiEndpoint.put("putGoal", "/threads/:thread_id/goal")
      .setPath(ThreadPath)
      .setPayload(GoalRequest)
      .addSuccess(GoalAnswer)
      .addError(BodyRefusals)
      .addError(refusal(409, "The thread has a run in progress"))
      .addError(QuotaRefusal)
      .annotate(OpenApi.Summary, "Set the thread's goal (makes the thread when it does not exist yet)")
  )
  .add(
    HttpApiEndpoint.del("deleteGoal", "/threads/:thread_id/goal")
      .setPath(ThreadPath)
      .addSuccess(GoalAnswer)
      .addError(ThreadNotFound)
      .addError(refusal(409, "The thread has a run in progress"))
      .annotate(OpenApi.Summary, "Clear the thread's goal")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "A thread's messages page by page, token usage, goal (DeerFlow's)")
