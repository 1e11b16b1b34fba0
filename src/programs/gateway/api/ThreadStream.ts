/**
 * The thread stream endpoint (LangGraph's `GET /threads/{thread_id}/stream`, the SDK's `threads.joinStream`): the
 * events of a thread's runs, one after the other, until the client closes it (`ThreadStream`).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ThreadPath } from "./Ids.js"
import { refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { QueryValue, ThreadNotFound } from "./Threads.js"

const Modes = "run_modes (every event of the runs, the default), lifecycle (their metadata, error and end), " +
  "state_update (their values)"

/** The thread stream's endpoint. */
export const group = HttpApiGroup.make("threadStream")
  .add(
    HttpApiEndpoint.get("joinThreadStream", "/threads/:thread_id/stream")
      .setPath(ThreadPath)
      .setUrlParams(Schema.Struct({
        stream_mode: Schema.optional(QueryValue.annotations({ description: `What to stream: ${Modes}` })),
        stream_modes: Schema.optional(QueryValue.annotations({ description: "The same as stream_mode" }))
      }))
      .setHeaders(Schema.Struct({
        "last-event-id": Schema.optional(Schema.String.annotations({
          description: "Stream from after this event (`<run id>:<event id>`); `-`: from the latest run's first"
        }))
      }))
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
        description: "Server-sent events of the thread's runs (`event`, `data`, `id: <run id>:<event id>`), " +
          "`gap` when the events asked for are no longer kept; open until the client closes it"
      }))
      .addError(ThreadNotFound)
      .addError(refusal(400, "A Last-Event-ID that is not an event id"))
      .addError(refusal(422, "A stream mode that is not one"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Stream the events of a thread's runs, one after the other")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "A thread's runs' events, as they come")
