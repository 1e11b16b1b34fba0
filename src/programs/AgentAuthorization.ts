/**
 * What a role changes in the agent of a run (`authorization.enabled`): the model it may use, and the deferred tools
 * `tool_search` may list. The tools each request offers and each call are decided by the Authorization middleware.
 */
import * as Effect from "effect/Effect"
import * as RbacAuthorization from "../layers/RbacAuthorization.js"
import type { AppConfig, ModelConfig } from "../services/AppConfig.js"
import * as Authz from "../services/Authorization.js"
import type * as ToolAssembly from "./ToolAssembly.js"

/** What of a resolved run the model choice changes (`Factory.Resolved`). */
interface ModelChoice {
  readonly modelName: string | undefined
  readonly model: ModelConfig | undefined
  readonly vision: boolean
  readonly thinkingEnabled: boolean
  readonly reasoningEffort: string | undefined
  readonly warnings: ReadonlyArray<string>
}

/**
 * The model a role may use (DeerFlow's `_authorize_model_name`): the resolved one when the role may use it, else
 * the first model it may see and use (with a warning); none: the run is refused under `fail_closed`.
 */
export const authorizeModel = <R extends ModelChoice>(
  authz: Authz.Authorization,
  role: string | undefined,
  models: ReadonlyArray<ModelConfig>,
  resolved: R
): Effect.Effect<R, Authz.AuthorizationError> =>
  Effect.gen(function*() {
    const name = resolved.modelName
    if (name === undefined) return resolved
    const principal = Authz.principalOf({ role }, authz.defaultRole)
    if (yield* Authz.allows(authz, principal, "model", "use", name)) return resolved
    for (const candidate of yield* Authz.visible(authz, principal, "model", models.map((m) => m.name))) {
      if (candidate === name || !(yield* Authz.allows(authz, principal, "model", "use", candidate))) continue
      const model = models.find((m) => m.name === candidate)!
      return {
        ...resolved,
        modelName: model.name,
        model,
        vision: model.supports_vision === true,
        thinkingEnabled: resolved.thinkingEnabled && model.supports_thinking === true,
        reasoningEffort: model.supports_reasoning_effort ? resolved.reasoningEffort : undefined,
        warnings: [
          ...resolved.warnings,
          `The model "${name}" is not available for your role; using "${model.name}".`
        ]
      }
    }
    if (!authz.failClosed) return resolved
    return yield* new Authz.AuthorizationError({ message: "No models are authorized for the current role." })
  })

/** The deferred tools of an agent built for `role`, without those the role may not see. */
export const deferredFor = (
  config: AppConfig,
  role: string | undefined,
  deferred: ToolAssembly.Assembly["deferred"]
): Effect.Effect<ToolAssembly.Assembly["deferred"]> =>
  Effect.gen(function*() {
    const authz = RbacAuthorization.fromConfig(config.authorization)
    if (authz === undefined || deferred === undefined) return deferred
    const names = new Set(yield* Authz.visible(
      authz,
      Authz.principalOf({ role }, authz.defaultRole),
      "tool",
      deferred.tools.map((t) => t.name)
    ))
    if (names.size === deferred.tools.length) return deferred
    return {
      ...deferred,
      tools: deferred.tools.filter((t) => names.has(t.name)),
      routes: deferred.routes?.filter((route) => names.has(route.name))
    }
  })
