/**
 * DeerFlow's catalog endpoints, declared: the models runs may choose and the skills the agent has. Implemented
 * in `handlers/Catalog.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { SkillObject } from "./Extensions.js"
import { refusal } from "./Problem.js"
import { Authentication } from "./Security.js"

/** One configured model, as DeerFlow's `ModelResponse` (with `supports_vision`). */
export const ModelObject = Schema.Struct({
  name: Schema.String,
  model: Schema.String,
  display_name: Schema.String,
  description: Schema.NullOr(Schema.String),
  supports_thinking: Schema.Boolean,
  supports_reasoning_effort: Schema.Boolean,
  supports_vision: Schema.Boolean
}).annotations({ identifier: "Model" })

/** The configured models (the first is the default), and whether the app shows token usage (`token_usage`). */
export const ModelList = Schema.Struct({
  models: Schema.Array(ModelObject),
  token_usage: Schema.Struct({ enabled: Schema.Boolean })
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
  .add(
    HttpApiEndpoint.get("getModel", "/models/:model_name")
      .setPath(Schema.Struct({ model_name: Schema.String }))
      .addSuccess(ModelObject)
      .addError(refusal(403, "With authorization: the caller's role may not use the model"))
      .addError(refusal(404, "No model of that name"))
      .annotate(OpenApi.Summary, "One model, by its name")
  )
  .middlewareEndpoints(Authentication)

/** The skills group (served under `/api`). */
export const skills = HttpApiGroup.make("skills")
  .add(
    HttpApiEndpoint.get("listSkills", "/skills")
      .addSuccess(SkillList)
      .annotate(OpenApi.Summary, "The agent's skills")
  )
  .add(
    HttpApiEndpoint.get("getSkill", "/skills/:skill_name")
      .setPath(Schema.Struct({ skill_name: Schema.String }))
      .addSuccess(SkillObject)
      .addError(refusal(404, "No skill of that name"))
      .annotate(OpenApi.Summary, "One skill, by its name")
  )
  .middlewareEndpoints(Authentication)
