/**
 * The assistants of the LangGraph API, declared: the lead agent and the user's custom agents (and the shared
 * ones), each an assistant of the one graph. Implemented in `handlers/Assistants.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, JsonRecord, selectOf } from "./Threads.js"

/** `POST /assistants/search` */
export const AssistantSearch = Schema.Struct({
  graph_id: Schema.optional(Schema.NullOr(Schema.String)),
  name: Schema.optional(Schema.NullOr(Schema.String)),
  limit: Schema.optional(Schema.NullOr(Schema.Number)),
  offset: Schema.optional(Schema.NullOr(Schema.Number)),
  select: Schema.optional(Schema.NullOr(selectOf(
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "created_at",
    "updated_at",
    "metadata",
    "version"
  )))
})

/** LangGraph's Assistant object. */
export const AssistantObject = Schema.Struct({
  assistant_id: Schema.String,
  graph_id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  config: JsonRecord,
  context: JsonRecord,
  metadata: JsonRecord,
  version: Schema.Number,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "Assistant" })

/** Assistants found (with `select`, only the fields selected). */
export const AssistantList = Schema.Array(Schema.partial(AssistantObject))

/** The graph every assistant runs: the ReAct loop. */
export const AssistantGraph = Schema.Struct({
  nodes: Schema.Array(Schema.Struct({ id: Schema.String })),
  edges: Schema.Array(Schema.Struct({
    source: Schema.String,
    target: Schema.String,
    conditional: Schema.optional(Schema.Boolean)
  }))
}).annotations({ identifier: "AssistantGraph" })

/** An assistant's schemas (none declared). */
export const AssistantSchemas = Schema.Struct({
  graph_id: Schema.String,
  input_schema: JsonRecord,
  output_schema: JsonRecord,
  state_schema: JsonRecord,
  config_schema: JsonRecord
}).annotations({ identifier: "AssistantSchemas" })

const AssistantPath = Schema.Struct({ assistant_id: Schema.String })

const AssistantNotFound = refusal(404, "No such assistant (of this user)")

/** The assistants group. */
export const group = HttpApiGroup.make("assistants")
  .add(
    HttpApiEndpoint.post("searchAssistants", "/assistants/search")
      .setPayload(AssistantSearch)
      .addSuccess(AssistantList)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Search the assistants")
  )
  .add(
    HttpApiEndpoint.get("getAssistant", "/assistants/:assistant_id")
      .setPath(AssistantPath)
      .addSuccess(AssistantObject)
      .addError(AssistantNotFound)
      .annotate(OpenApi.Summary, "Get an assistant")
  )
  .add(
    HttpApiEndpoint.get("getAssistantGraph", "/assistants/:assistant_id/graph")
      .setPath(AssistantPath)
      .addSuccess(AssistantGraph)
      .addError(AssistantNotFound)
      .annotate(OpenApi.Summary, "Get an assistant's graph")
  )
  .add(
    HttpApiEndpoint.get("getAssistantSchemas", "/assistants/:assistant_id/schemas")
      .setPath(AssistantPath)
      .addSuccess(AssistantSchemas)
      .addError(AssistantNotFound)
      .annotate(OpenApi.Summary, "Get an assistant's schemas")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "The lead agent and the user's custom agents")
