/**
 * What a role changes in the agent of a run (`authorization.enabled`): the model it may use, the deferred tools
 * `tool_search` may list (a tool its `tools` policy hides, or whose MCP server its `mcp_servers` policy denies), and
 * the skills the agent lists and activates (its `skills` policy). The tools each request offers and each call are
 * decided by the Authorization middleware.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { ModelConfig } from "../services/AppConfig.js"
import * as Authz from "../services/Authorization.js"
import type * as Skills from "../services/Skills.js"
import type { Deferred } from "./Chains.js"

/** What of a resolved run the model choice changes (`Factory.Resolved`). */
interface ModelChoice {
  readonly modelName: string | undefined
  readonly model: ModelConfig | undefined
  readonly vision: boolean
  readonly thinkingEnabled: boolean
  readonly reasoningEffort: string | undefined
  readonly warnings: ReadonlyArray<string>
}

/** The refusal when a role may use none of the configured models (a run's, a gateway call's). */
export const NO_MODEL = "No models are authorized for the current role."

/**
 * The model `principal` may use for a call that wants `wanted` (DeerFlow's `_authorize_model_name`): `wanted` when
 * the role may use it, else the first of `models` (the default first) it may see and use; none is refused with
 * `NO_MODEL` under `fail_closed` (else `wanted`). Every model call made for a user goes through it: a run's, its
 * title, summary and memory update, and the gateway's own calls (follow-up questions, a compaction, a polish).
 */
export const allowedModel = (
  authz: Authz.Authorization,
  principal: Authz.Principal,
  models: ReadonlyArray<string>,
  wanted: string
): Effect.Effect<string, Authz.AuthorizationError> =>
  Effect.gen(function*() {
    if (yield* Authz.allows(authz, principal, "model", "use", wanted)) return wanted
    for (const candidate of yield* Authz.visible(authz, principal, "model", models)) {
      if (candidate !== wanted && (yield* Authz.allows(authz, principal, "model", "use", candidate))) return candidate
    }
    if (!authz.failClosed) return wanted
    return yield* new Authz.AuthorizationError({ message: NO_MODEL })
  })

/**
 * The model a role may use (`allowedModel`): the resolved one when the role may use it, else the first model it
 * may see and use (with a warning); none: the run is refused under `fail_closed`.
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
    const chosen = yield* allowedModel(authz, principal, models.map((m) => m.name), name)
    const model = models.find((m) => m.name === chosen)
    if (chosen === name || model === undefined) return resolved
    return {
      ...resolved,
      modelName: model.name,
      model,
      vision: model.supports_vision === true,
      ...thinkingFor(model, resolved),
      warnings: [
        ...resolved.warnings,
        `The model "${name}" is not available for your role; using "${model.name}".`
      ]
    }
  })

/**
 * A run's thinking settings moved to the model a role substitutes: thinking stays on only for a model that
 * `supports_thinking` (off, the model's `when_thinking_disabled` applies, as DeerFlow turns it off for such a model),
 * and a `reasoning_effort` only for one that `supports_reasoning_effort`. Unset stays unset.
 */
export const thinkingFor = <S extends { readonly thinkingEnabled?: boolean | undefined }>(
  model: ModelConfig,
  settings: S & { readonly reasoningEffort?: string | undefined }
): { readonly thinkingEnabled: S["thinkingEnabled"]; readonly reasoningEffort: string | undefined } => ({
  thinkingEnabled: (settings.thinkingEnabled === undefined
    ? undefined
    : settings.thinkingEnabled && model.supports_thinking === true) as S["thinkingEnabled"],
  reasoningEffort: model.supports_reasoning_effort ? settings.reasoningEffort : undefined
})

/** The model a run of a library's `LeadAgent` goes to (`runModel`), and why it is not the one the run named. */
export interface RunModel {
  readonly modelName: string | undefined
  readonly warning: string | undefined
}

/**
 * The model of a run that the factory did not choose (a library's `LeadAgent` used directly), as `authorizeModel`
 * chooses a factory's: the run's `modelName` (none: the first of `models`, the model service's default) when the
 * run's role may use it, else the first model it may use (with a warning); none: refused with `NO_MODEL` under
 * `fail_closed`. The role is the run's own (`extra.user_role`), else `role` (the agent's). No models configured:
 * the run's as it is (the model service has one model of its own).
 */
export const runModel = (
  authz: Authz.Authorization,
  role: string | null | undefined,
  models: ReadonlyArray<ModelConfig>,
  run: {
    readonly userId?: string | undefined
    readonly modelName?: string | undefined
    readonly extra?: Readonly<Record<string, unknown>> | undefined
  }
): Effect.Effect<RunModel, Authz.AuthorizationError> =>
  Effect.gen(function*() {
    const wanted = run.modelName ?? models[0]?.name
    if (wanted === undefined) return { modelName: run.modelName, warning: undefined }
    const own = run.extra?.user_role
    const principal = Authz.principalOf(
      { userId: run.userId, role: typeof own === "string" ? own : role },
      authz.defaultRole,
      run.extra?.is_internal === true
    )
    const chosen = yield* allowedModel(authz, principal, models.map((m) => m.name), wanted)
    if (chosen === wanted) return { modelName: run.modelName, warning: undefined }
    return {
      modelName: chosen,
      warning: `The model "${wanted}" is not available for your role; using "${chosen}".`
    }
  })

/** The MCP server of each MCP tool of an assembly (`ToolAssembly`'s entries). */
export const mcpServersOf = (
  entries: ReadonlyArray<{ readonly name: string; readonly source: string; readonly server?: string | undefined }>
): Authz.McpServers =>
  new Map(entries.flatMap((e) => e.source === "mcp" && e.server !== undefined ? [[e.name, e.server] as const] : []))

/**
 * The MCP server of each MCP tool among `tools` (`Tool.mcpServer`), with `given` (an assembly's, `mcpServersOf`) over
 * them: an agent given MCP tools without their servers (a library's `LeadAgent.layer({ tools })`) still asks each
 * one's server.
 */
export const mcpServersWith = (
  tools: ReadonlyArray<{ readonly name: string; readonly mcpServer?: string | undefined }>,
  given: Authz.McpServers | undefined
): Authz.McpServers => {
  const servers = new Map(tools.flatMap((t) => t.mcpServer === undefined ? [] : [[t.name, t.mcpServer] as const]))
  for (const [name, server] of given ?? []) servers.set(name, server)
  return servers
}

/** The deferred tools of an agent built for `role`, without those the role may not see. */
export const deferredFor = (
  authz: Authz.Authorization | undefined,
  role: string | null | undefined,
  deferred: Deferred | undefined,
  servers: Authz.McpServers = new Map()
): Effect.Effect<Deferred | undefined> =>
  Effect.gen(function*() {
    if (authz === undefined || deferred === undefined) return deferred
    const names = new Set(yield* Authz.visibleTools(
      authz,
      Authz.principalOf({ role }, authz.defaultRole),
      deferred.tools.map((t) => t.name),
      servers
    ))
    if (names.size === deferred.tools.length) return deferred
    return {
      ...deferred,
      tools: deferred.tools.filter((t) => names.has(t.name)),
      routes: deferred.routes?.filter((route) => names.has(route.name))
    }
  })

/**
 * The skills an agent built for `role` may use: its `allowlist` (undefined: all) less the skills of the catalog the
 * role may not load. Undefined (no limit) when the role is refused none and there was no allowlist.
 */
export const skillsFor = (
  authz: Authz.Authorization | undefined,
  role: string | null | undefined,
  catalog: Skills.Catalog,
  allowlist: ReadonlyArray<string> | undefined
): Effect.Effect<ReadonlyArray<string> | undefined> =>
  Effect.gen(function*() {
    if (authz === undefined) return allowlist
    const names = [...new Set(catalog.skills.map((s) => s.name))]
      .filter((name) => allowlist === undefined || allowlist.includes(name))
    const allowed = yield* Authz.visible(authz, Authz.principalOf({ role }, authz.defaultRole), "skill", names)
    return allowlist === undefined && allowed.length === names.length ? undefined : allowed
  })

/**
 * The warnings of an agent's assembly a run of `role` is told: an MCP server's problems (it failed, it lists its
 * tools only with request secrets the run did not give) only when the role may use the server, as its tools are: its
 * name, its secrets' names and its failure's text are not told to a user whose role may not use it.
 */
export const warningsFor = (
  provider: Either.Either<Authz.Authorization | undefined, unknown>,
  role: string | null | undefined,
  assembly: { readonly warnings: ReadonlyArray<string>; readonly mcpWarnings?: ReadonlyMap<string, string> | undefined }
): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function*() {
    const servers = assembly.mcpWarnings
    if (servers === undefined || servers.size === 0) return assembly.warnings
    // (a provider that could not be made: no server's problems are told)
    if (Either.isLeft(provider)) return assembly.warnings.filter((warning) => !servers.has(warning))
    const authz = provider.right
    if (authz === undefined) return assembly.warnings
    const named = [...new Set(servers.values())]
    const principal = Authz.principalOf({ role }, authz.defaultRole)
    const usable = new Set(yield* Authz.visible(authz, principal, "mcp_server", named))
    return assembly.warnings.filter((warning) => {
      const server = servers.get(warning)
      return server === undefined || usable.has(server)
    })
  })
