/**
 * Authorization (SPEC §4.1 slot 9, §4.2 slot 8, with `authorization.enabled`): the role of the run's user decides
 * which tools exist for it. Each model request is sent with only the tools the provider lets the run's principal
 * see (DeerFlow's assembly-time filter: the model never sees the others), and each tool call is asked again
 * through the Guardrail middleware over the provider (DeerFlow's `GuardrailAuthorizationAdapter`), so a hidden
 * tool called anyway does not run and the model reads why (`Guardrail denied: ... (authz.denied). Reason: role
 * 'user' is denied 'bash' on resource 'tool'...`). A generated `tool_search` is exempt: its catalog is of visible
 * tools only.
 * Besides a tool's own policy, an MCP tool needs its server's (`mcp_server` / `use`) and a sandbox tool the
 * sandbox's (`sandbox` / `execute`). A skill the role may not load (its `skill` filter) is refused to the file
 * tools (`DeniedSkills`, read by the sandbox's skill gate) for the run.
 * The principal is the run's user and role (`RunOptions.extra.user_role`; none: `default_role`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Authz from "../services/Authorization.js"
import { RunContext } from "../services/RunContext.js"
import type * as Skills from "../services/Skills.js"
import * as Chain from "./Chain.js"
import * as GuardrailMW from "./Guardrail.js"
import * as Middleware from "./Middleware.js"

/** The tool `tool_search` generates over the deferred tools (already filtered), never asked about. */
const EXEMPT = ["tool_search"]

/** What, besides the provider, the middleware asks about. */
export interface Options {
  /** The MCP server of each MCP tool (its `mcp_servers` policy); none: no MCP tools. */
  readonly mcpServers?: Authz.McpServers | undefined
  /** The app's skills (their `skills` policy for the file tools); none: not asked. */
  readonly skills?: Skills.Registry | undefined
}

/** The principal of a run (its user, its role: `extra.user_role`; none: `default_role`). */
export const principalOfRun = (authz: Authz.Authorization, context: RunContext["Type"]) => {
  const role = context.options.extra?.user_role
  return Authz.principalOf(
    { userId: context.userId, role: typeof role === "string" ? role : null },
    authz.defaultRole,
    context.options.extra?.is_internal === true
  )
}

/** The principal of the current run. */
export const runPrincipal = (authz: Authz.Authorization) =>
  Effect.map(RunContext, (context) => principalOfRun(authz, context))

/**
 * The model an internal call of the run (a title, a summary) asks for, when the configuration names `configured`:
 * it when the run's role may use it, else none (the caller falls back to the run's own model, or to no call),
 * logged. Without `authorization`, `configured`.
 */
export const configuredModel = (
  authz: Authz.Authorization | undefined,
  configured: string | null | undefined,
  purpose: string
): Effect.Effect<string | null | undefined, never, RunContext> =>
  authz === undefined || configured == null
    ? Effect.succeed(configured)
    : Effect.flatMap(runPrincipal(authz), (principal) =>
      Effect.flatMap(Authz.allows(authz, principal, "model", "use", configured), (allowed) =>
        allowed ? Effect.succeed(configured) : Effect.as(
          Effect.logInfo(
            `${purpose}: the model ${configured} is not available for role ${principal.role}; it is not used`
          ),
          null
        )))

/** The skills of a catalog the principal may not load (a shadowed one too: its files are still mounted). */
export const deniedSkills = (authz: Authz.Authorization, principal: Authz.Principal, catalog: Skills.Catalog) =>
  Effect.gen(function*() {
    const names = [...new Set([...catalog.skills, ...catalog.shadowed].map((s) => s.name))]
    if (names.length === 0) return new Set<string>()
    const allowed = new Set(yield* Authz.visible(authz, principal, "skill", names))
    return new Set(names.filter((name) => !allowed.has(name)))
  })

/** The middleware that shows each model request only the tools the run's principal may see. */
export const hiding = (authz: Authz.Authorization, options: Options = {}) =>
  Middleware.make(Effect.gen(function*() {
    const principal = yield* runPrincipal(authz)
    const denied = options.skills === undefined
      ? new Set<string>()
      : yield* deniedSkills(authz, principal, yield* options.skills.catalog)
    const skillAccess = { names: denied, role: principal.role ?? authz.defaultRole }
    return {
      model: (request, next) =>
        Effect.flatMap(
          Authz.visibleTools(
            authz,
            principal,
            request.tools.map((t) => t.name).filter((n) => !EXEMPT.includes(n)),
            options.mcpServers
          ),
          (names) => {
            const keep = new Set([...names, ...EXEMPT])
            const tools = request.tools.filter((t) => keep.has(t.name))
            return next(tools.length === request.tools.length ? request : { ...request, tools })
          }
        ),
      ...(denied.size === 0 ? {} : {
        tool: (call, next) => Effect.provideService(next(call), Authz.DeniedSkills, skillAccess)
      })
    } satisfies Middleware.Wrappers
  }), { name: "Authorization" })

/** Both halves: the request's tools filtered, then each call asked (the provider's refusal as the tool's result). */
export const layer = (authz: Authz.Authorization, options: Options = {}): Middleware.Middleware<RunContext> =>
  Layer.provide(
    hiding(authz, options),
    GuardrailMW.layerWith(Authz.asGuardrail(authz, options.mcpServers), {
      failClosed: authz.failClosed,
      exempt: EXEMPT
    })
  ) as unknown as Middleware.Middleware<RunContext>

/** Its chain entry: outside the configured guardrail, which then never sees a call the role may not make. */
export const entry = (authz: Authz.Authorization, options: Options = {}) =>
  Chain.entry("Authorization", () => layer(authz, options), [
    { outside: "Guardrail", reason: "the role's refusal comes before any configured policy (DeerFlow slot 9)" },
    { outside: "SandboxAudit", reason: "a refused tool is never audited as if it ran" }
  ])
