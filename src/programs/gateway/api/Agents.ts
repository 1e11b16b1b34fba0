/**
 * DeerFlow's custom agents endpoints, declared (its agents gallery, "new agent" and agent settings screens): the
 * request's user's agents (`{home}/users/{user}/agents/{name}/`: `config.yaml` and `SOUL.md`), listed, checked
 * for a free name, created, read, changed and deleted. Names are DeerFlow's (letters, digits and `-`, stored in
 * lower case) and none of Antler's reserved ones. Implemented in `handlers/Agents.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { BodyRefusals, QueryValue } from "./Threads.js"

/** The longest description taken. */
export const MAX_DESCRIPTION_CHARS = 4096

/** The most tool groups or skills an agent lists, and the longest name of one. */
export const MAX_LIST_ITEMS = 256
export const MAX_ITEM_CHARS = 128

const Names = Schema.Array(Schema.String.pipe(Schema.maxLength(MAX_ITEM_CHARS))).pipe(Schema.maxItems(MAX_LIST_ITEMS))

/**
 * Per-agent model settings (`temperature` 0–2, `max_tokens`); any other key (`top_p`) is refused, as DeerFlow
 * refuses it, rather than dropped while the client believes it set.
 */
export const AgentModelSettings = Schema.Struct({
  temperature: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.between(0, 2)))),
  max_tokens: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.between(1, 200000))))
}).annotations({ identifier: "AgentModelSettings", parseOptions: { onExcessProperty: "error" } })

const ReasoningEffort = Schema.Literal("low", "medium", "high")

/** A custom agent, as DeerFlow answers it (`AgentResponse`). */
export const Agent = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  model: Schema.NullOr(Schema.String),
  tool_groups: Schema.NullOr(Schema.Array(Schema.String)),
  skills: Schema.NullOr(Schema.Array(Schema.String)),
  model_settings: Schema.NullOr(AgentModelSettings),
  thinking_enabled: Schema.NullOr(Schema.Boolean),
  reasoning_effort: Schema.NullOr(ReasoningEffort),
  soul: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Agent" })

/** The user's agents. */
export const AgentList = Schema.Struct({ agents: Schema.Array(Agent) }).annotations({ identifier: "AgentList" })

/** Whether a name is free. */
export const NameCheck = Schema.Struct({ available: Schema.Boolean, name: Schema.String }).annotations({
  identifier: "AgentNameCheck"
})

const fields = {
  description: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(MAX_DESCRIPTION_CHARS)))),
  model: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(MAX_ITEM_CHARS)))),
  tool_groups: Schema.optional(Schema.NullOr(Names)),
  skills: Schema.optional(Schema.NullOr(Names)),
  model_settings: Schema.optional(Schema.NullOr(AgentModelSettings)),
  thinking_enabled: Schema.optional(Schema.NullOr(Schema.Boolean)),
  reasoning_effort: Schema.optional(Schema.NullOr(ReasoningEffort)),
  soul: Schema.optional(Schema.NullOr(Schema.String))
}

/** `POST /agents` */
export const AgentCreate = Schema.Struct({ name: Schema.String.pipe(Schema.maxLength(MAX_ITEM_CHARS)), ...fields })

/**
 * `PUT /agents/{agent_name}`: the fields given change (null clears one), the others stay; `model_settings` is
 * merged the same way, sub-field by sub-field.
 */
export const AgentUpdate = Schema.Struct(fields)

const AgentPath = Schema.Struct({ agent_name: Schema.String })

const AgentNotFound = refusal(404, "No such agent (of this user)")
const BadName = refusal(422, "A name that is not an agent name (letters, digits and '-'), or a reserved one")
const Failed = refusal(500, "The agent's files could not be read or written")
const Disabled = refusal(403, "The custom agents API is switched off (agents_api.enabled: false)")

/** The agents group (served under `/api`). */
export const group = HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.get("listAgents", "/agents")
      .addSuccess(AgentList)
      .addError(Disabled)
      .annotate(OpenApi.Summary, "The user's custom agents (with their SOUL)")
  )
  .add(
    HttpApiEndpoint.get("checkAgentName", "/agents/check")
      .setUrlParams(Schema.Struct({ name: Schema.optional(QueryValue) }))
      .addSuccess(NameCheck)
      .addError(BadName)
      .addError(Disabled)
      .annotate(OpenApi.Summary, "Whether a name is free for a new agent (case-insensitive)")
  )
  .add(
    HttpApiEndpoint.post("createAgent", "/agents")
      .setPayload(AgentCreate)
      .addSuccess(Agent, { status: 201 })
      .addError(BodyRefusals)
      .addError(refusal(409, "The user has an agent of that name"))
      .addError(Failed)
      .addError(Disabled)
      .annotate(OpenApi.Summary, "Create a custom agent (config.yaml and SOUL.md)")
  )
  .add(
    HttpApiEndpoint.get("getAgent", "/agents/:agent_name")
      .setPath(AgentPath)
      .addSuccess(Agent)
      .addError(AgentNotFound)
      .addError(Failed)
      .addError(Disabled)
      .annotate(OpenApi.Summary, "A custom agent, with its SOUL")
  )
  .add(
    HttpApiEndpoint.put("updateAgent", "/agents/:agent_name")
      .setPath(AgentPath)
      .setPayload(AgentUpdate)
      .addSuccess(Agent)
      .addError(BodyRefusals)
      .addError(AgentNotFound)
      .addError(refusal(409, "An agent of the old shared layout (read-only)"))
      .addError(Failed)
      .addError(Disabled)
      .annotate(OpenApi.Summary, "Change a custom agent's settings or SOUL")
  )
  .add(
    HttpApiEndpoint.del("deleteAgent", "/agents/:agent_name")
      .setPath(AgentPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(AgentNotFound)
      .addError(refusal(409, "An agent of the old shared layout, or a directory that holds only memory"))
      .addError(Failed)
      .middleware(NoBody)
      .addError(Disabled)
      .annotate(OpenApi.Summary, "Delete a custom agent and its files (its memory included)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "The user's custom agents (DeerFlow's agents screens)")
