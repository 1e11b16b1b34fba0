/**
 * The authorization port (DeerFlow's `deerflow.authz`): a provider that decides what a principal (a user and
 * their role) may use, enforced at three places from one policy:
 *
 * 1. what the model is shown: the tools of each model request are filtered by the provider (`visible`), so a
 *    tool the role may not use is never offered, and `tool_search` never lists it;
 * 2. what runs: each tool call is asked again (`asGuardrail`, the Guardrail middleware over it, DeerFlow's
 *    `GuardrailAuthorizationAdapter`), so a call of a hidden tool is refused with the reason;
 * 3. the gateway: each route's permission (`PERMISSIONS`) and the models a role may list and use.
 *
 * A provider failure (or an unknown role) denies under `fail_closed` (the default), else allows.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Guardrail from "./Guardrail.js"

/** Who asks, from trusted identity only (DeerFlow's `Principal`). */
export interface Principal {
  readonly user_id: string | null
  readonly role: string | null
  readonly is_internal: boolean
  readonly attributes: Readonly<Record<string, unknown>>
}

/** What is asked (DeerFlow's `AuthzRequest`): an action on a resource type's target. */
export interface AuthzRequest {
  readonly principal: Principal
  /** `tool`, `model`, `route`, ... */
  readonly resource: string
  /** `call`, `use`, `list`, `read`, ... */
  readonly action: string
  /** A tool's or model's name, a route permission (`threads:read`). */
  readonly target: string
  readonly context?: Readonly<Record<string, unknown>> | undefined
}

/** The provider's verdict, with DeerFlow's reason codes (`authz.allowed`, `authz.denied`, `authz.no_policy`). */
export type AuthzDecision = Guardrail.GuardrailDecision

/** The provider could not decide (an unknown role, a malformed request). */
export class AuthorizationError extends Schema.TaggedError<AuthorizationError>()("AuthorizationError", {
  message: Schema.String
}) {}

/**
 * `authorization.provider.use` names an operator's provider module (`module:Export`) that cannot be used: no such
 * module or export, it failed when imported or created, or what it gives has no `authorize`.
 */
export class AuthorizationConfigError extends Schema.TaggedError<AuthorizationConfigError>()(
  "AuthorizationConfigError",
  {
    reason: Schema.Literal("module_not_found", "import_failed", "export_missing", "not_provider", "init_failed"),
    /** The `use` value from the config. */
    use: Schema.String,
    message: Schema.String
  }
) {}

/** A provider (DeerFlow's `AuthorizationProvider` protocol). */
export interface Provider {
  readonly name: string
  readonly authorize: (request: AuthzRequest) => Effect.Effect<AuthzDecision, AuthorizationError>
  /** The candidates the principal may see, in their order (never one that was not a candidate). */
  readonly filterResources: (
    principal: Principal,
    resourceType: string,
    candidates: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>, AuthorizationError>
}

/** The authorization of an app: its provider and the section's settings. */
export interface Authorization {
  readonly provider: Provider
  readonly failClosed: boolean
  readonly defaultRole: string
}

/**
 * The principal of a caller (DeerFlow's `build_principal_from_context`): a missing or empty role is the default
 * role; an unknown one stays, for the provider to refuse.
 */
export const principalOf = (
  caller: { readonly userId?: string | null | undefined; readonly role?: string | null | undefined },
  defaultRole: string,
  isInternal = false
): Principal => ({
  user_id: caller.userId ?? null,
  role: caller.role == null || caller.role === "" ? defaultRole : caller.role,
  is_internal: isInternal,
  attributes: {}
})

/**
 * The candidates of a type the principal may see, in order (DeerFlow's `filter_tools_by_authorization`): a provider
 * failure hides every one under `fail_closed`, else shows them all.
 */
export const visible = (
  authz: Authorization,
  principal: Principal,
  resourceType: string,
  candidates: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string>> =>
  authz.provider.filterResources(principal, resourceType, candidates).pipe(
    Effect.map((allowed) => {
      const keep = new Set(allowed)
      return candidates.filter((name) => keep.has(name))
    }),
    Effect.catchAll((error) =>
      Effect.as(
        Effect.logWarning(`authorization: the provider failed while filtering ${resourceType}s: ${error.message}`),
        authz.failClosed ? [] : candidates
      )
    )
  )

/**
 * Whether the principal may do `action` on `target` (a provider failure: a denial under `fail_closed`), with the
 * decision's first reason.
 */
export const allows = (
  authz: Authorization,
  principal: Principal,
  resource: string,
  action: string,
  target: string
): Effect.Effect<boolean> =>
  authz.provider.authorize({ principal, resource, action, target }).pipe(
    Effect.map((decision) => decision.allow),
    Effect.catchAll((error) =>
      Effect.as(
        Effect.logWarning(`authorization: the provider failed on ${resource}:${action} ${target}: ${error.message}`),
        !authz.failClosed
      )
    )
  )

/**
 * The tools that run in the thread's sandbox (DeerFlow's `sandbox/tools.py`): with the role's `sandbox` policy
 * denying, they are hidden and refused as the tools of its `tools` policy are.
 */
export const SANDBOX_TOOLS: ReadonlyArray<string> = [
  "bash",
  "ls",
  "read_file",
  "write_file",
  "str_replace",
  "glob",
  "grep"
]

/** The sandbox's target in a `sandbox` / `execute` request: there is one sandbox per thread, DeerFlow's `default`. */
export const SANDBOX_TARGET = "default"

/** The MCP server of each MCP tool of an agent, by tool name (`ToolAssembly`'s entries). */
export type McpServers = ReadonlyMap<string, string>

/**
 * The tools the principal may see, in order: those its `tool` policy shows, less an MCP tool whose server its
 * `mcp_server` policy denies (`use`: a server it may not use contributes no tools), less the sandbox tools when its
 * `sandbox` policy denies `execute`. A provider failure hides under `fail_closed`, as `visible` does.
 */
export const visibleTools = (
  authz: Authorization,
  principal: Principal,
  names: ReadonlyArray<string>,
  servers: McpServers = new Map()
): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function*() {
    const tools = yield* visible(authz, principal, "tool", names)
    const used = [...new Set(tools.flatMap((name) => servers.get(name) ?? []))]
    const usable = new Set(used.length === 0 ? [] : yield* visible(authz, principal, "mcp_server", used))
    const sandbox = !tools.some((name) => SANDBOX_TOOLS.includes(name)) ||
      (yield* allows(authz, principal, "sandbox", "execute", SANDBOX_TARGET))
    return tools.filter((name) => {
      const server = servers.get(name)
      return (server === undefined || usable.has(server)) && (sandbox || !SANDBOX_TOOLS.includes(name))
    })
  })

/**
 * The provider as a guardrail (DeerFlow's `GuardrailAuthorizationAdapter`): a tool call is `tool` / `call` of its
 * name by the principal of the run (its user and role; a missing role is the default role); then, for an MCP tool,
 * `mcp_server` / `use` of its server, and for a sandbox tool `sandbox` / `execute` of `default`. The first denial
 * is the answer. A provider failure is the guardrail's `GuardrailError`, which the middleware turns into a denial
 * under `fail_closed`.
 */
export const asGuardrail = (authz: Authorization, servers: McpServers = new Map()): Guardrail.Service => ({
  name: "authorization",
  evaluate: (request) => {
    const principal = {
      ...principalOf({ userId: request.user_id, role: request.user_role }, authz.defaultRole, request.is_internal),
      attributes: request.authz_attributes ?? {}
    }
    const context = {
      thread_id: request.thread_id,
      run_id: request.run_id,
      tool_call_id: request.tool_call_id,
      is_subagent: request.is_subagent
    }
    const ask = (resource: string, action: string, target: string) =>
      authz.provider.authorize({ principal, resource, action, target, context })
    const server = servers.get(request.tool_name)
    const asks = [
      ask("tool", "call", request.tool_name),
      ...(server === undefined ? [] : [ask("mcp_server", "use", server)]),
      ...(SANDBOX_TOOLS.includes(request.tool_name) ? [ask("sandbox", "execute", SANDBOX_TARGET)] : [])
    ]
    return Effect.gen(function*() {
      let first: AuthzDecision | undefined
      for (const asked of asks) {
        const decision = yield* asked
        if (!decision.allow) return decision
        first ??= decision
      }
      return first!
    }).pipe(
      Effect.mapError((error) => new Guardrail.GuardrailError({ provider: "authorization", message: error.message }))
    )
  }
})

/**
 * The skills a run's principal may not load (its `skill` filter), with the refusal its file tools answer: set by
 * the Authorization middleware around each tool call, read by the sandbox's file gate (`SkillGate`).
 */
export class DeniedSkills extends Context.Tag("antler/DeniedSkills")<DeniedSkills, {
  readonly names: ReadonlySet<string>
  readonly role: string
}>() {}

/** What the model reads when a file tool asks for a skill its role may not load (DeerFlow's RBAC denial). */
export const skillRefusal = (role: string, name: string): string =>
  `Error: role '${role}' is denied '${name}' on resource 'skill'. Access to its files is blocked.`

/** The gateway's route permissions, DeerFlow's `resource:action` names (`app/gateway/authz.py`). */
export const PERMISSIONS = [
  "threads:read",
  "threads:write",
  "threads:delete",
  "runs:create",
  "runs:read",
  "runs:cancel"
] as const
export type Permission = (typeof PERMISSIONS)[number]
