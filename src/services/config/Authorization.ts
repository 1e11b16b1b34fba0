/**
 * DeerFlow's `authorization` section: role-based permissions (which tools, models, gateway routes, skills, MCP
 * servers and sandbox each role may use), decided by a provider. Antler has DeerFlow's built-in one,
 * `deerflow.authz.rbac:RbacAuthorizationProvider` (`layers/RbacAuthorization`), whose `config.roles` maps each role to
 * a policy per resource:
 *
 *   authorization:
 *     enabled: true
 *     fail_closed: true          # a provider failure or an unknown role denies (default)
 *     default_role: user         # the role of a caller without one (default "user")
 *     provider:
 *       use: deerflow.authz.rbac:RbacAuthorizationProvider
 *       config:
 *         roles:
 *           admin: {tools: {allow: "*"}}
 *           user: {tools: {allow: "*", deny: [bash]}, routes: {deny: ["threads:delete"]}}
 *
 * A resource key is `tools`, `models`, `skills`, `sandbox`, `mcp_servers`, `routes` or a name of the operator's
 * own; a policy has `allow` (`"*"`, `true`, `false` or a list of names; absent: all) and `deny` (a list; deny wins).
 * Everything is checked when the file loads, and only when `enabled` is true (DeerFlow resolves a disabled
 * provider never): a Python class path other than the built-in one, an unknown key, a `null` list, a singular
 * resource key (`tool`), or a `default_role` no role defines is an error naming the key. An operator's own provider
 * is a JavaScript module, `use: ./my-authz.mjs:MyAuthz` (`layers/ConfiguredAuthorization`): its `config` is its own,
 * loaded and checked when an agent is built.
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as UserModule from "../../internal/UserModule.js"
import { JsonRecord, withDefault } from "./Fields.js"

/** The built-in provider's class path, as DeerFlow names it. */
export const RBAC_USE = "deerflow.authz.rbac:RbacAuthorizationProvider"

/** The resource type of a request and its key in a role's policy (DeerFlow's `_RESOURCE_POLICY_KEYS`). */
export const RESOURCE_KEYS: Readonly<Record<string, string>> = {
  tool: "tools",
  model: "models",
  skill: "skills",
  sandbox: "sandbox",
  mcp_server: "mcp_servers",
  route: "routes"
}

const Name = Schema.String.pipe(Schema.minLength(1, { message: () => "a name must not be empty" }))

/** A role's policy for one resource: `allow` (absent: every name) and `deny` (deny wins). */
export const ResourcePolicy = Schema.Struct({
  allow: Schema.optional(Schema.Union(Schema.Literal("*"), Schema.Boolean, Schema.Array(Name))),
  deny: Schema.optional(Schema.Array(Name))
})
export type ResourcePolicy = typeof ResourcePolicy.Type

/** The built-in provider's `config`: `roles`, each a map of resource keys to policies. */
export const RbacConfig = Schema.Struct({
  roles: Schema.Record({ key: Name, value: Schema.Record({ key: Name, value: ResourcePolicy }) })
})
export type RbacConfig = typeof RbacConfig.Type

const decodeRbac = Schema.decodeUnknownEither(RbacConfig, { errors: "all", onExcessProperty: "error" })

/** `authorization.provider`: the provider's class path and its settings. */
export const AuthorizationProvider = Schema.Struct({
  use: Name,
  config: withDefault(JsonRecord, () => ({}))
})

type Issue = { readonly path: ReadonlyArray<PropertyKey>; readonly message: string }

/** What is wrong with an enabled section (pure): each problem at its key. None when disabled. */
export const problems = (section: {
  readonly enabled: boolean
  readonly default_role: string
  readonly provider?: typeof AuthorizationProvider.Type | null | undefined
}): ReadonlyArray<Issue> => {
  if (!section.enabled) return []
  const provider = section.provider
  if (provider == null) {
    return [{
      path: ["provider"],
      message: "authorization.enabled is true but no provider is configured; set authorization.provider.use to " +
        RBAC_USE
    }]
  }
  if (provider.use !== RBAC_USE) {
    if (UserModule.isScriptEntry(provider.use)) return []
    return [{
      path: ["provider", "use"],
      message: `"${provider.use.slice(0, 200)}" is not a provider Antler has: the built-in one is ${RBAC_USE}; ` +
        `your own is a JavaScript module and its export, e.g. "./my-authz.mjs:MyAuthz" (Antler cannot load Python ` +
        "classes)"
    }]
  }
  // (a singular key would be a policy nothing reads: DeerFlow refuses it as a reserved alias)
  const raw = provider.config.roles
  if (typeof raw === "object" && raw !== null) {
    for (const [role, resources] of Object.entries(raw)) {
      if (typeof resources !== "object" || resources === null) continue
      for (const key of Object.keys(resources)) {
        const plural = RESOURCE_KEYS[key]
        if (plural !== undefined && plural !== key) {
          return [{
            path: ["provider", "config", "roles", role, key],
            message: `'${key}' is a request's resource type; write '${plural}' in a role's policy`
          }]
        }
      }
    }
  }
  const decoded = decodeRbac(provider.config)
  if (decoded._tag === "Left") {
    return ParseResult.ArrayFormatter.formatErrorSync(decoded.left).map((issue) => ({
      path: ["provider", "config", ...issue.path],
      message: issue.message
    }))
  }
  const roles = Object.keys(decoded.right.roles)
  if (!roles.includes(section.default_role)) {
    return [{
      path: ["default_role"],
      message: `'${section.default_role}' is not defined; known roles: ${JSON.stringify(roles.sort())}`
    }]
  }
  return []
}

/** `authorization` (see the top of this module). */
export const AuthorizationConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  fail_closed: withDefault(Schema.Boolean, () => true),
  default_role: withDefault(Name, () => "user"),
  provider: Schema.optional(Schema.NullOr(AuthorizationProvider))
}).pipe(Schema.filter((section) => {
  const found = problems(section)
  return found.length === 0 ? true : found
}))
export type AuthorizationConfig = typeof AuthorizationConfig.Type
