/**
 * DeerFlow's catalog endpoints, declared: the models runs may choose and the skills the agent has. Implemented
 * in `handlers/Catalog.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { Authentication } from "./Security.js"

/** The configured models (the first is the default). */
export const ModelList = Schema.Struct({
  models: Schema.Array(Schema.Struct({
    name: Schema.String,
    model: Schema.String,
    display_name: Schema.String,
    supports_thinking: Schema.Boolean,
    supports_reasoning_effort: Schema.Boolean,
    supports_vision: Schema.Boolean
  }))
}).annotations({ identifier: "ModelList" })

/** The skills found, enabled or not. */
export const SkillList = Schema.Struct({
  skills: Schema.Array(Schema.Struct({
    name: Schema.String,
    description: Schema.String,
    category: Schema.Literal("public", "custom"),
    location: Schema.String,
    enabled: Schema.Boolean,
    license: Schema.NullOr(Schema.String),
    editable: Schema.Boolean
  }))
}).annotations({ identifier: "SkillList" })

/** The models group (served under `/api`). */
export const models = HttpApiGroup.make("models")
  .add(
    HttpApiEndpoint.get("listModels", "/models")
      .addSuccess(ModelList)
      .annotate(OpenApi.Summary, "The models runs may choose (model_name)")
  )
  .middlewareEndpoints(Authentication)

/** The skills group (served under `/api`). */
export const skills = HttpApiGroup.make("skills")
  .add(
    HttpApiEndpoint.get("listSkills", "/skills")
      .addSuccess(SkillList)
      .annotate(OpenApi.Summary, "The agent's skills")
  )
  .middlewareEndpoints(Authentication)
