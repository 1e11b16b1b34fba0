/**
 * The catalog endpoints (declared in `api/Catalog.ts`): the models runs may choose, and the skills found in the
 * skills directory with whether each is enabled.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SkillsDirectory from "../../../layers/SkillsDirectory.js"
import * as AgentAuthorization from "../../AgentAuthorization.js"
import type { ModelConfig } from "../../../services/AppConfig.js"
import * as Authz from "../../../services/Authorization.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import { LiveConfig } from "../../../services/LiveConfig.js"
import type { Skill } from "../../../services/Skills.js"
import * as CatalogApi from "../api/Catalog.js"
import * as ExtensionsApi from "../api/Extensions.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, type GatewayError } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import { json } from "./Http.js"

/** A model as DeerFlow's models endpoints answer it. */
const modelObject = (m: ModelConfig): typeof CatalogApi.ModelObject.Type => ({
  name: m.name,
  model: m.model,
  display_name: m.display_name ?? m.name,
  description: m.description ?? null,
  supports_thinking: m.supports_thinking,
  supports_reasoning_effort: m.supports_reasoning_effort,
  supports_vision: m.supports_vision
})

/**
 * The models endpoints of `api` (DeerFlow's, under `/api`): `models`, the first the default, and whether the app
 * shows token usage (`token_usage.enabled`); one model by its name. With a `LiveConfig`, `config.yaml` as it is now
 * (an edit taken lists its models). With `authorization`, only the models the caller's role may see (DeerFlow's
 * `list_models`; a provider failure lists none under `fail_closed`), and one model only when the role may use it
 * (DeerFlow's `get_model`: 403, after the 404 of a name none has).
 */
export const modelsLayer = (api: DeerFlowApi, models: ReadonlyArray<ModelConfig>, authz?: Authz.Authorization) =>
  HttpApiBuilder.group(api, "models", (handlers) =>
    Effect.map(Effect.all([Effect.serviceOption(LiveConfig), AppConfigService]), ([live, app]) => {
      const config = Option.isSome(live)
        ? Effect.map(live.value.current, (now) => ({ models: now.models, token_usage: now.app.config.token_usage }))
        : Effect.succeed({ models, token_usage: app.config.token_usage })
      const principal = Effect.map(
        CurrentIdentity,
        (who) => Authz.principalOf({ userId: who.user, role: who.role }, authz?.defaultRole ?? "user")
      )
      return handlers
        .handleRaw("listModels", () =>
          Effect.gen(function*() {
            const { models: all, token_usage } = yield* config
            const shown = authz === undefined
              ? undefined
              : new Set(yield* Authz.visible(authz, yield* principal, "model", all.map((m) => m.name)))
            const now = shown === undefined ? all : all.filter((m) => shown.has(m.name))
            return json(CatalogApi.ModelList, {
              models: now.map(modelObject),
              token_usage: { enabled: token_usage.enabled }
            })
          }))
        .handleRaw("getModel", ({ path }) =>
          Effect.gen(function*() {
            const name = path.model_name
            const model = (yield* config).models.find((m) => m.name === name)
            if (model === undefined) return yield* fail("not_found", `Model '${name}' not found`)
            if (authz !== undefined && !(yield* Authz.allows(authz, yield* principal, "model", "use", name))) {
              return yield* fail("forbidden", `Model '${name}' is not available for your role`)
            }
            return json(CatalogApi.ModelObject, modelObject(model))
          }))
    }))

/**
 * Refuses (403) a model a gateway call of the caller's names (`field`) that their role may not use (a provider
 * failure: refused under `fail_closed`); nothing is asked without `authorization` or a name.
 */
export const usableModel = (
  authz: Authz.Authorization | undefined,
  who: { readonly user: string; readonly role?: string | undefined },
  name: string | undefined,
  field: string
): Effect.Effect<void, GatewayError> =>
  authz === undefined || name === undefined
    ? Effect.void
    : Effect.flatMap(
      Authz.allows(
        authz,
        Authz.principalOf({ userId: who.user, role: who.role }, authz.defaultRole),
        "model",
        "use",
        name
      ),
      (allowed) => {
        if (allowed) return Effect.void
        const refused = `${field}: the model ${JSON.stringify(name)} is not available for your role.`
        return Effect.fail(fail("forbidden", refused))
      }
    )

/**
 * The model a gateway call made for the caller uses (with `authorization`): the one the request names, refused (403)
 * when their role may not use it (`usableModel`); else `fallback` (a model the configuration names for the call, or
 * the default), or, when the role may not use that, the first configured model it may use
 * (`AgentAuthorization.allowedModel`); none: 403 with the runs' refusal. Without `authorization`, the named model
 * (none: the default).
 */
export const modelFor = (
  authz: Authz.Authorization | undefined,
  who: { readonly user: string; readonly role?: string | undefined },
  models: ReadonlyArray<ModelConfig>,
  named: string | undefined,
  field: string,
  fallback: string | undefined = undefined
): Effect.Effect<string | undefined, GatewayError> => {
  if (authz === undefined) return Effect.succeed(named ?? fallback)
  if (named !== undefined) return Effect.as(usableModel(authz, who, named, field), named)
  const wanted = fallback ?? models[0]?.name
  if (wanted === undefined) return Effect.succeed(undefined)
  const principal = Authz.principalOf({ userId: who.user, role: who.role }, authz.defaultRole)
  return AgentAuthorization.allowedModel(authz, principal, models.map((m) => m.name), wanted).pipe(
    Effect.tap((chosen) =>
      chosen === wanted ? Effect.void : Effect.logInfo(
        `The model ${JSON.stringify(wanted)} is not available for role ${principal.role}; using ${chosen}.`
      )
    ),
    Effect.mapError((error) => fail("forbidden", error.message))
  )
}

/** A skill as DeerFlow's skills endpoints answer it. */
export const skillObject = (skill: Skill) => ({
  name: skill.name,
  description: skill.description,
  category: skill.category,
  enabled: skill.enabled,
  license: skill.license ?? null,
  // (DeerFlow's field: a custom skill is the user's to change)
  editable: skill.category === "custom"
})

/** The skills endpoint of `api` (DeerFlow's, under `/api`). */
export const skillsLayer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "skills", (handlers) =>
    Effect.map(AppConfigService, (app) =>
      handlers
        .handleRaw("listSkills", () =>
          Effect.sync(() => {
            const skills = SkillsDirectory.catalogOf(app).skills.map((skill) => ({
              ...skillObject(skill),
              location: skill.location
            }))
            return json(CatalogApi.SkillList, { skills })
          }))
        .handleRaw("getSkill", ({ path }) =>
          Effect.gen(function*() {
            // (DeerFlow's: any user reads a skill's name and description, as the list shows them)
            const skill = SkillsDirectory.catalogOf(app).skills.find((s) => s.name === path.skill_name)
            if (skill === undefined) return yield* fail("not_found", `Skill '${path.skill_name}' not found`)
            return json(ExtensionsApi.SkillObject, skillObject(skill))
          }))))
