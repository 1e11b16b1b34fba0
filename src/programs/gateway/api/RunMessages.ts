/**
 * DeerFlow's message lists of one run, declared (its paths and shapes, under `/api`): `GET
 * /threads/{id}/runs/{run_id}/messages` and `GET /runs/{run_id}/messages` (the run found by its id alone), pages of
 * `{data, has_more}` by `limit`, `before_seq` and `after_seq`. Implemented in `handlers/RunMessages.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { RunId, RunPath } from "./Ids.js"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { QueryValue } from "./Threads.js"
import { messageRowFields } from "./Turns.js"

/** One message a run wrote, as DeerFlow's run journal gives it. */
export const RunMessageRow = Schema.Struct(messageRowFields).annotations({ identifier: "RunMessageRow" })

/** A page of a run's messages, oldest first (DeerFlow's `{data, has_more}`). */
export const RunMessagesPage = Schema.Struct({
  data: Schema.Array(RunMessageRow),
  has_more: Schema.Boolean
}).annotations({ identifier: "RunMessagesPage" })

/** The paging of a run's messages (DeerFlow's: `limit` 1-200, 50; `before_seq`, `after_seq` from 1). */
export const PageParams = Schema.Struct({
  limit: Schema.optional(QueryValue.annotations({ description: "At most this many messages (1-200, default 50)" })),
  before_seq: Schema.optional(QueryValue.annotations({ description: "Only messages before this seq (the latest)" })),
  after_seq: Schema.optional(QueryValue.annotations({ description: "Only messages after this seq (the first)" }))
})

const BadCursor = refusal(422, "A limit, before_seq or after_seq that is not a positive integer (limit at most 200)")

/** The run messages group (served under `/api`). */
export const group = HttpApiGroup.make("runMessages")
  .add(
    HttpApiEndpoint.get("threadRunMessages", "/threads/:thread_id/runs/:run_id/messages")
      .setPath(RunPath)
      .setUrlParams(PageParams)
      .addSuccess(RunMessagesPage)
      .addError(refusal(404, "A thread id no thread could have"))
      .addError(BadCursor)
      .annotate(
        OpenApi.Summary,
        "A page of the messages a run of the thread wrote, oldest first (none for a run that wrote none, or a " +
          "thread that does not exist)"
      )
  )
  .add(
    HttpApiEndpoint.get("runMessages", "/runs/:run_id/messages")
      .setPath(Schema.Struct({ run_id: RunId }))
      .setUrlParams(PageParams)
      .addSuccess(RunMessagesPage)
      .addError(refusal(404, "No such run of this user's"))
      .addError(BadCursor)
      .annotate(OpenApi.Summary, "A page of the messages a run of the user's wrote, found by its id alone")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "The messages of one run, page by page (DeerFlow's)")
