/**
 * DeerFlow's feedback endpoints, declared (its feedback router and `GET /api/runs/{run_id}/feedback`, under `/api`):
 * thumbs up or down on a run's answer, the user's one rating (`PUT`, `DELETE`) and ratings given one by one,
 * possibly on one message (`POST`, `DELETE .../feedback/{feedback_id}`), listed and counted. Implemented in
 * `handlers/Feedback.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { MAX_MORE } from "../RunFeedback.js"
import { RunId, RunPath } from "./Ids.js"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals } from "./Threads.js"

const RunNotFound = refusal(404, "No such thread (of this user), or no such run of it")
const BadRating = refusal(400, "A rating that is not 1 or -1")

/** Feedback on a run's answer (DeerFlow's `FeedbackResponse`). */
export const Feedback = Schema.Struct({
  feedback_id: Schema.String,
  run_id: Schema.String,
  thread_id: Schema.String,
  user_id: Schema.NullOr(Schema.String),
  message_id: Schema.NullOr(Schema.String),
  rating: Schema.Literal(1, -1),
  comment: Schema.NullOr(Schema.String),
  created_at: Schema.String
}).annotations({ identifier: "Feedback" })

/** The feedback on a run, oldest first. */
export const FeedbackList = Schema.Array(Feedback)

/** A deletion done. */
export const Success = Schema.Struct({ success: Schema.Boolean })

const Comment = Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(10_000))))

/** `PUT .../runs/{run_id}/feedback`: thumbs up (1) or down (-1), with an optional comment. */
export const FeedbackUpsert = Schema.Struct({ rating: Schema.Number, comment: Comment })

/** `POST .../runs/{run_id}/feedback`: a rating of its own, optionally of one message of the run. */
export const FeedbackCreate = Schema.Struct({
  rating: Schema.Number,
  comment: Comment,
  message_id: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))))
})

/** How a run was rated (DeerFlow's `FeedbackStatsResponse`). */
export const FeedbackStats = Schema.Struct({
  run_id: Schema.String,
  total: Schema.Number,
  positive: Schema.Number,
  negative: Schema.Number
}).annotations({ identifier: "FeedbackStats" })

const FeedbackPath = Schema.Struct({ ...RunPath.fields, feedback_id: Schema.String })

/** The feedback group (served under `/api`). */
export const group = HttpApiGroup.make("feedback")
  .add(
    HttpApiEndpoint.put("putFeedback", "/threads/:thread_id/runs/:run_id/feedback")
      .setPath(RunPath)
      .setPayload(FeedbackUpsert)
      .addSuccess(Feedback)
      .addError(RunNotFound)
      .addError(BodyRefusals)
      .addError(BadRating)
      .annotate(OpenApi.Summary, "Rate a run's answer (replaces the user's earlier rating)")
  )
  .add(
    HttpApiEndpoint.post("postFeedback", "/threads/:thread_id/runs/:run_id/feedback")
      .setPath(RunPath)
      .setPayload(FeedbackCreate)
      .addSuccess(Feedback)
      .addError(RunNotFound)
      .addError(BodyRefusals)
      .addError(BadRating)
      .addError(refusal(409, `The run has ${MAX_MORE} ratings given one by one already`))
      .annotate(OpenApi.Summary, "Add a rating of the run, or of one of its messages (message_id)")
  )
  .add(
    HttpApiEndpoint.get("getFeedback", "/threads/:thread_id/runs/:run_id/feedback")
      .setPath(RunPath)
      .addSuccess(FeedbackList)
      .addError(RunNotFound)
      .annotate(OpenApi.Summary, "The feedback on a run, oldest first")
  )
  .add(
    HttpApiEndpoint.get("feedbackStats", "/threads/:thread_id/runs/:run_id/feedback/stats")
      .setPath(RunPath)
      .addSuccess(FeedbackStats)
      .addError(RunNotFound)
      .annotate(OpenApi.Summary, "How many ratings the run has, up and down")
  )
  .add(
    HttpApiEndpoint.del("deleteFeedback", "/threads/:thread_id/runs/:run_id/feedback")
      .setPath(RunPath)
      .addSuccess(Success)
      .addError(refusal(404, "No such thread or run (of this user), or no feedback on it"))
      .annotate(OpenApi.Summary, "Remove the user's rating of a run's answer")
  )
  .add(
    HttpApiEndpoint.del("deleteFeedbackById", "/threads/:thread_id/runs/:run_id/feedback/:feedback_id")
      .setPath(FeedbackPath)
      .addSuccess(Success)
      .addError(refusal(404, "No such thread or run (of this user), or no such feedback of it"))
      .annotate(OpenApi.Summary, "Remove one rating of a run")
  )
  .add(
    HttpApiEndpoint.get("runFeedback", "/runs/:run_id/feedback")
      .setPath(Schema.Struct({ run_id: RunId }))
      .addSuccess(FeedbackList)
      .addError(refusal(404, "No such run of this user's"))
      .annotate(OpenApi.Summary, "The feedback on a run of the user's, found by its id alone")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Thumbs up or down on a run's answer (DeerFlow's)")
