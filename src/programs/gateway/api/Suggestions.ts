/**
 * DeerFlow's helpers of the composer, declared: the follow-up questions offered after an answer (their setting,
 * and one internal model call making them for a thread of the user's) and the rewriting of a draft before it is
 * sent. Neither touches a thread: the call is the gateway's own (`OneShot.ts`), in no thread and no stream.
 * Implemented in `handlers/Suggestions.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { MAX_SUGGESTIONS_LIMIT } from "../../../services/AppConfig.js"
import { ThreadPath } from "./Ids.js"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, ThreadNotFound } from "./Threads.js"

/** The longest message text read for suggestions, and how many messages. */
export const MAX_MESSAGE_CHARS = 20_000
export const MAX_MESSAGES = 20

/** DeerFlow's `SuggestionsConfigResponse`. */
export const SuggestionsConfig = Schema.Struct({
  enabled: Schema.Boolean,
  max_suggestions: Schema.Int
}).annotations({ identifier: "SuggestionsConfig" })

/** `POST /api/threads/{id}/suggestions` */
export const SuggestionsRequest = Schema.Struct({
  messages: Schema.Array(Schema.Struct({
    role: Schema.String.pipe(Schema.maxLength(32)),
    content: Schema.String.pipe(Schema.maxLength(MAX_MESSAGE_CHARS))
  })).pipe(Schema.maxItems(MAX_MESSAGES)),
  n: Schema.optional(Schema.Int.pipe(Schema.between(1, MAX_SUGGESTIONS_LIMIT))),
  model_name: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "SuggestionsRequest" })

/** The questions (none when they are off, or the model failed). */
export const Suggestions = Schema.Struct({ suggestions: Schema.Array(Schema.String) }).annotations({
  identifier: "Suggestions"
})

/** `POST /api/input-polish` */
export const InputPolishRequest = Schema.Struct({
  text: Schema.String,
  locale: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(64)))),
  thread_id: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "InputPolishRequest" })

/** The draft rewritten. */
export const InputPolished = Schema.Struct({
  rewritten_text: Schema.String,
  changed: Schema.Boolean
}).annotations({ identifier: "InputPolished" })

/** The suggestions group (served under `/api`). */
export const group = HttpApiGroup.make("suggestions")
  .add(
    HttpApiEndpoint.get("suggestionsConfig", "/suggestions/config")
      .addSuccess(SuggestionsConfig)
      .annotate(OpenApi.Summary, "Whether follow-up questions are offered, and how many")
  )
  .add(
    HttpApiEndpoint.post("suggest", "/threads/:thread_id/suggestions")
      .setPath(ThreadPath)
      .setPayload(SuggestionsRequest)
      .addSuccess(Suggestions)
      .addError(ThreadNotFound)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Follow-up questions the user might ask next (an internal model call)")
  )
  .add(
    HttpApiEndpoint.post("polishInput", "/input-polish")
      .setPayload(InputPolishRequest)
      .addSuccess(InputPolished)
      .addError(BodyRefusals)
      .addError(refusal(400, "No text, or more than input_polish.max_chars"))
      .addError(refusal(404, "Input polishing is off (input_polish.enabled: false)"))
      .addError(refusal(503, "The model could not rewrite the draft"))
      .annotate(OpenApi.Summary, "Rewrites a draft before it is sent (an internal model call; no run, no thread)")
  )
  .middlewareEndpoints(Authentication)
