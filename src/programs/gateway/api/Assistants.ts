/**
 * The assistants of the LangGraph API, declared: the lead agent and the user's custom agents (and the shared
 * ones), each an assistant of the one graph. Implemented in `handlers/Assistants.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { BodyRefusals, JsonRecord, QueryValue, selectOf } from "./Threads.js"

/** The filters of an assistant search and a count. */
const assistantFilters = {
  graph_id: Schema.optional(Schema.NullOr(Schema.String)),
  name: Schema.optional(Schema.NullOr(Schema.String)),
  /** Only the assistants whose metadata has these values. */
  metadata: Schema.optional(Schema.NullOr(JsonRecord))
}

/** `POST /assistants/count` */
export const AssistantCount = Schema.Struct(assistantFilters)

/** `POST /assistants/search` */
export const AssistantSearch = Schema.Struct({
  ...assistantFilters,
  limit: Schema.optional(Schema.NullOr(Schema.Number)),
  offset: Schema.optional(Schema.NullOr(Schema.Number)),
  sort_by: Schema.optional(
    Schema.NullOr(Schema.Literal("assistant_id", "graph_id", "name", "created_at", "updated_at"))
  ),
  sort_order: Schema.optional(Schema.NullOr(Schema.Literal("asc", "desc"))),
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

/** One version of an assistant (LangGraph's AssistantVersion: an assistant without `updated_at`). */
export const AssistantVersion = AssistantObject.pipe(Schema.omit("updated_at")).annotations({
  identifier: "AssistantVersion"
})

/** An assistant's versions, newest first. */
export const AssistantVersions = Schema.Array(AssistantVersion)

/** `POST /assistants/{id}/versions` */
export const AssistantVersionsRequest = Schema.Struct({
  metadata: Schema.optional(Schema.NullOr(JsonRecord)),
  limit: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.between(1, 1000)))),
  offset: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.nonNegative())))
})

/** `POST /assistants/{id}/latest` */
export const AssistantLatest = Schema.Struct({ version: Schema.Number.pipe(Schema.int()) })

/** `POST /assistants` (LangGraph's AssistantCreate; assistants here are DeerFlow agents, made by `/api/agents`). */
export const AssistantCreate = Schema.Struct({
  graph_id: Schema.String,
  assistant_id: Schema.optional(Schema.NullOr(Schema.String)),
  config: Schema.optional(Schema.NullOr(JsonRecord)),
  context: Schema.optional(Schema.NullOr(JsonRecord)),
  metadata: Schema.optional(Schema.NullOr(JsonRecord)),
  if_exists: Schema.optional(Schema.NullOr(Schema.Literal("raise", "do_nothing"))),
  name: Schema.optional(Schema.NullOr(Schema.String)),
  description: Schema.optional(Schema.NullOr(Schema.String))
})

/** `PATCH /assistants/{id}` */
export const AssistantPatch = Schema.Struct({
  graph_id: Schema.optional(Schema.NullOr(Schema.String)),
  config: Schema.optional(Schema.NullOr(JsonRecord)),
  context: Schema.optional(Schema.NullOr(JsonRecord)),
  metadata: Schema.optional(Schema.NullOr(JsonRecord)),
  name: Schema.optional(Schema.NullOr(Schema.String)),
  description: Schema.optional(Schema.NullOr(Schema.String))
})

/** An assistant's subgraphs by namespace (the lead agent exposes none: `{}`). */
export const AssistantSubgraphs = JsonRecord.annotations({ identifier: "AssistantSubgraphs" })

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

const SubgraphPath = Schema.Struct({ assistant_id: Schema.String, namespace: Schema.String })

const SubgraphParams = Schema.Struct({
  recurse: Schema.optional(QueryValue.annotations({ description: "true: the subgraphs' subgraphs too" }))
})

const AssistantNotFound = refusal(404, "No such assistant (of this user)")

/** The refusal of a change to an assistant: assistants are DeerFlow agents, made and changed by `/api/agents`. */
const AgentsOnly = refusal(422, "Assistants are DeerFlow agents: made, changed and deleted through /api/agents")

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
    HttpApiEndpoint.post("countAssistants", "/assistants/count")
      .setPayload(AssistantCount)
      .addSuccess(Schema.Int.annotations({ description: "How many of the user's assistants match" }))
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Count the assistants")
  )
  .add(
    HttpApiEndpoint.post("createAssistant", "/assistants")
      .setPayload(AssistantCreate)
      .addSuccess(AssistantObject)
      .addError(BodyRefusals)
      .addError(refusal(409, "The user has that assistant already (if_exists: raise)"))
      .addError(AgentsOnly)
      .annotate(
        OpenApi.Summary,
        "Create an assistant: only an existing one is answered (if_exists: do_nothing); make an agent with " +
          "POST /api/agents"
      )
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
  .add(
    HttpApiEndpoint.patch("patchAssistant", "/assistants/:assistant_id")
      .setPath(AssistantPath)
      .setPayload(AssistantPatch)
      .addSuccess(AssistantObject)
      .addError(AssistantNotFound)
      .addError(BodyRefusals)
      .addError(AgentsOnly)
      .annotate(OpenApi.Summary, "Update an assistant: refused, change the agent with PUT /api/agents/{name}")
  )
  .add(
    HttpApiEndpoint.del("deleteAssistant", "/assistants/:assistant_id")
      .setPath(AssistantPath)
      .setUrlParams(Schema.Struct({
        delete_threads: Schema.optional(QueryValue.annotations({ description: "true: its threads too" }))
      }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(AssistantNotFound)
      .addError(AgentsOnly)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Delete an assistant: refused, delete the agent with DELETE /api/agents/{name}")
  )
  .add(
    HttpApiEndpoint.get("getAssistantSubgraphs", "/assistants/:assistant_id/subgraphs")
      .setPath(AssistantPath)
      .setUrlParams(SubgraphParams)
      .addSuccess(AssistantSubgraphs)
      .addError(AssistantNotFound)
      .annotate(OpenApi.Summary, "An assistant's subgraphs (none)")
  )
  .add(
    HttpApiEndpoint.get("getAssistantSubgraphsOf", "/assistants/:assistant_id/subgraphs/:namespace")
      .setPath(SubgraphPath)
      .setUrlParams(SubgraphParams)
      .addSuccess(AssistantSubgraphs)
      .addError(AssistantNotFound)
      .annotate(OpenApi.Summary, "An assistant's subgraphs under a namespace (none)")
  )
  .add(
    HttpApiEndpoint.post("getAssistantVersions", "/assistants/:assistant_id/versions")
      .setPath(AssistantPath)
      .setPayload(AssistantVersionsRequest)
      .addSuccess(AssistantVersions)
      .addError(AssistantNotFound)
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "An assistant's versions, newest first (its one version, 1)")
  )
  .add(
    HttpApiEndpoint.post("setLatestAssistantVersion", "/assistants/:assistant_id/latest")
      .setPath(AssistantPath)
      .setPayload(AssistantLatest)
      .addSuccess(AssistantObject)
      .addError(refusal(404, "No such assistant (of this user), or no such version of it (it has version 1)"))
      .addError(BodyRefusals)
      .annotate(OpenApi.Summary, "Make a version an assistant's latest (its one version, 1)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "The lead agent and the user's custom agents")
