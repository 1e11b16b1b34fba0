/**
 * DeerFlow's manual compaction of a thread's context, declared (DeerFlow's path and shapes, under `/api`):
 * `POST /api/threads/{thread_id}/compact` summarises the thread's older messages as the Summarization middleware
 * does when a trigger fires, and answers what it did. Implemented in `handlers/Compact.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ContextSize } from "../../../services/AppConfig.js"
import { AgentName } from "../../CustomAgents.js"
import { ThreadPath } from "./Ids.js"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, ThreadNotFound } from "./Threads.js"

const Name = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128))

/** `POST /api/threads/{id}/compact` (DeerFlow's `ThreadCompactRequest`). */
export const CompactRequest = Schema.Struct({
  force: Schema.optionalWith(Schema.Boolean, { default: () => true }).annotations({
    description: "Compact even when no summarization trigger fires (default true)"
  }),
  keep: Schema.optional(Schema.NullOr(ContextSize)).annotations({
    description: "A retention policy for this compaction only (default: summarization.keep)"
  }),
  agent_name: Schema.optional(Schema.NullOr(AgentName)).annotations({
    description: "The thread's custom agent (memory attribution of the summarised messages)"
  }),
  model_name: Schema.optional(Schema.NullOr(Name)).annotations({
    description: "The thread's model (the summary falls back to it; default: the custom agent's, else the first " +
      "configured model)"
  })
})

/** What a compaction did (DeerFlow's `ThreadCompactResponse`). */
export const CompactResponse = Schema.Struct({
  thread_id: Schema.String,
  compacted: Schema.Boolean,
  reason: Schema.NullOr(Schema.String),
  removed_message_count: Schema.Number,
  preserved_message_count: Schema.Number,
  summary_updated: Schema.Boolean,
  checkpoint_id: Schema.NullOr(Schema.String),
  total_tokens: Schema.Number
}).annotations({ identifier: "ThreadCompactResponse" })

/** The compaction group (served under `/api`). */
export const group = HttpApiGroup.make("compact")
  .add(
    HttpApiEndpoint.post("compact", "/threads/:thread_id/compact")
      .setPath(ThreadPath)
      .setPayload(CompactRequest)
      .addSuccess(CompactResponse)
      .addError(ThreadNotFound)
      .addError(BodyRefusals)
      .addError(refusal(409, "The thread has a run in progress, or compaction is disabled"))
      .addError(refusal(500, "The summary could not be made (the thread is unchanged)"))
      .annotate(
        OpenApi.Summary,
        "Summarise the thread's older messages (as automatic summarization does); `compacted: false` with a " +
          "reason when there is nothing to compact"
      )
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "Manual compaction of a thread's context (DeerFlow's)")
