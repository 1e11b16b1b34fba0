/**
 * The feedback endpoints (declared in `api/Feedback.ts`), over the run's record (`RunFeedback`, changed with
 * `ThreadStore.updateRun`, so that no rating is lost to another one or to the run's start or end): the user's rating
 * of a run's answer (`PUT` replaces it, `DELETE` removes it), ratings given one by one (`POST`, at most
 * `RunFeedback.MAX_MORE` a run; `DELETE .../feedback/{feedback_id}` removes one of either kind), listed oldest
 * first and counted (`.../stats`), and listed by the run's id alone (`GET /api/runs/{run_id}/feedback`). Another
 * user's thread or run is a 404, as a run of another thread. The run's record counts against the storage quotas, so a
 * rating that grows it is admitted as the thread's other writes are (`Access.withinStorage`: 403 past a quota).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { RunRecord } from "../../../services/ThreadStore.js"
import * as M from "../../../state/Message.js"
import * as FeedbackApi from "../api/Feedback.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, notFound } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import * as InputBounds from "../InputBounds.js"
import * as RunFeedback from "../RunFeedback.js"
import * as ThreadIds from "../ThreadIds.js"
import * as Access from "./Access.js"
import { json } from "./Http.js"

/** The writer a rating's admission is reserved under (see `Access.withinStorage`). */
const FEEDBACK_WRITER = "feedback-"

const ratingOf = (rating: number) =>
  rating === 1 || rating === -1
    ? Effect.succeed(rating as 1 | -1)
    : Effect.fail(fail("bad_request", `rating must be +1 or -1, got ${rating}.`))

/** The feedback endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "feedback", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const { store, storeFailed } = access

      /** The user, their thread of `path` and its run of `path`, or 404. */
      const runOf = (path: { readonly thread_id: string; readonly run_id: string }) =>
        Effect.gen(function*() {
          const { user } = yield* CurrentIdentity
          const thread = yield* access.threadRef(user, path.thread_id)
          const record = yield* access.ownedRun(thread.stored, path.run_id)
          return { user, thread, record }
        })

      /**
       * Changes the run's feedback as stored at this moment (`ThreadStore.updateRun`: nothing written in between, by
       * another rating or by the run's own start or end); none when `change` answered none. What the change grows the
       * thread by (as the record read shows it) is admitted first, as the thread's other writes are (else 403).
       */
      const update = (
        user: string,
        record: RunRecord,
        change: (run: RunRecord) => RunRecord["metadata"] | undefined
      ) => {
        const write = Effect.mapError(
          store.updateRun(record.thread_id, record.run_id, (run) => change(run) ?? undefined),
          storeFailed
        )
        const after = change(record)
        const growth = after === undefined
          ? 0
          : InputBounds.jsonBytes(after) - InputBounds.jsonBytes(record.metadata ?? {})
        return growth > 0
          ? access.withinStorage(user, record.thread_id, `${FEEDBACK_WRITER}${M.newId()}`, growth, write)
          : write
      }

      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

      return handlers
        .handleRaw("putFeedback", ({ path }) =>
          Effect.gen(function*() {
            const { record, thread, user } = yield* runOf(path)
            const request = yield* Body.json(FeedbackApi.FeedbackUpsert)
            const rating = yield* ratingOf(request.rating)
            const feedback: RunFeedback.Feedback = {
              feedback_id: M.newId(),
              run_id: path.run_id,
              thread_id: thread.threadId,
              user_id: user,
              message_id: null,
              rating,
              comment: request.comment ?? null,
              created_at: yield* now
            }
            // (a rating replaced keeps its id)
            const written = yield* update(user, record, (run) =>
              RunFeedback.rated(run.metadata ?? {}, {
                ...feedback,
                feedback_id: RunFeedback.rating(run)?.feedback_id ?? feedback.feedback_id
              }))
            const saved = RunFeedback.rating(written)
            if (saved === undefined) return yield* notFound(`Run ${path.run_id}`)
            return json(FeedbackApi.Feedback, saved)
          }))
        .handleRaw("postFeedback", ({ path }) =>
          Effect.gen(function*() {
            const { record, thread, user } = yield* runOf(path)
            const request = yield* Body.json(FeedbackApi.FeedbackCreate)
            const rating = yield* ratingOf(request.rating)
            const full = fail(
              "conflict",
              `Run ${path.run_id} has ${RunFeedback.MAX_MORE} ratings already; delete one to add another.`
            )
            if (RunFeedback.more(record).length >= RunFeedback.MAX_MORE) return yield* full
            const feedback: RunFeedback.Feedback = {
              feedback_id: M.newId(),
              run_id: path.run_id,
              thread_id: thread.threadId,
              user_id: user,
              message_id: request.message_id ?? null,
              rating,
              comment: request.comment ?? null,
              created_at: yield* now
            }
            const written = yield* update(user, record, (run) =>
              RunFeedback.more(run).length >= RunFeedback.MAX_MORE ? undefined : RunFeedback.added(run, feedback))
            if (written === undefined) return yield* full
            return json(FeedbackApi.Feedback, feedback)
          }))
        .handleRaw("getFeedback", ({ path }) =>
          Effect.map(runOf(path), ({ record }) => json(FeedbackApi.FeedbackList, RunFeedback.all(record))))
        .handleRaw("feedbackStats", ({ path }) =>
          Effect.map(runOf(path), ({ record }) => json(FeedbackApi.FeedbackStats, RunFeedback.stats(record))))
        .handleRaw("deleteFeedback", ({ path }) =>
          Effect.gen(function*() {
            const { record, user } = yield* runOf(path)
            const written = yield* update(user, record, (run) => {
              const feedback = RunFeedback.rating(run)
              return feedback === undefined ? undefined : RunFeedback.without(run, feedback.feedback_id)
            })
            if (written === undefined) return yield* notFound("Feedback on this run")
            return json(FeedbackApi.Success, { success: true })
          }))
        .handleRaw("deleteFeedbackById", ({ path }) =>
          Effect.gen(function*() {
            const { record, user } = yield* runOf(path)
            const written = yield* update(user, record, (run) => RunFeedback.without(run, path.feedback_id))
            if (written === undefined) return yield* notFound(`Feedback ${path.feedback_id}`)
            return json(FeedbackApi.Success, { success: true })
          }))
        .handleRaw("runFeedback", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const [record] = yield* Effect.mapError(store.runs({ runId: path.run_id }), storeFailed)
            if (record === undefined) return yield* notFound(`Run ${path.run_id}`)
            // (the run of the user's thread, or none: another user's run is a run this user does not have)
            const thread = yield* access.threadRef(user, ThreadIds.publicIdOf(user, record.thread_id)).pipe(
              Effect.catchIf((error) => error.reason === "not_found", () => notFound(`Run ${path.run_id}`))
            )
            if (thread.stored !== record.thread_id) return yield* notFound(`Run ${path.run_id}`)
            return json(FeedbackApi.FeedbackList, RunFeedback.all(record))
          }))
    }))
