/**
 * DeerFlow's built-in RBAC provider (`deerflow.authz.rbac:RbacAuthorizationProvider`): `config.roles` maps each
 * role to a policy per resource key (`tools`, `models`, `routes`, ...), compiled once. A role without a policy for a
 * resource may use all of it (`authz.no_policy`); with one, a target is allowed when `allow` lets it (`"*"`, `true`,
 * a list; absent: all) and `deny` does not (deny wins). A principal without a role, or with a role the policy does
 * not define, cannot be decided: an `AuthorizationError`, which `fail_closed` turns into a denial. The request's
 * action is not a rule dimension, as in DeerFlow.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { AuthorizationConfig, ResourcePolicy } from "../services/config/Authorization.js"
import { RBAC_USE, RbacConfig, RESOURCE_KEYS } from "../services/config/Authorization.js"
import type * as Authorization from "../services/Authorization.js"
import { AuthorizationError } from "../services/Authorization.js"

/** A compiled policy: whether a target may be used. */
type Compiled = (target: string) => boolean

const compile = (policy: ResourcePolicy): Compiled => {
  const denied = new Set(policy.deny ?? [])
  const allow = policy.allow
  const allowed = allow === undefined || allow === "*" || allow === true
    ? undefined
    : allow === false
    ? new Set<string>()
    : new Set(allow)
  return (target) => !denied.has(target) && (allowed === undefined || allowed.has(target))
}

/** The provider over a decoded `config` (see the top of this module). */
export const make = (config: RbacConfig): Authorization.Provider => {
  const policies = new Map<string, Map<string, Compiled>>()
  for (const [role, resources] of Object.entries(config.roles)) {
    policies.set(role, new Map(Object.entries(resources).map(([key, policy]) => [key, compile(policy)])))
  }
  const known = JSON.stringify([...policies.keys()].sort())
  const policyOf = (principal: Authorization.Principal, resource: string) => {
    const role = principal.role
    if (role === null || role === "") {
      return Effect.fail(new AuthorizationError({ message: "Principal has no role; cannot evaluate RBAC policy" }))
    }
    const resources = policies.get(role)
    if (resources === undefined) {
      return Effect.fail(new AuthorizationError({ message: `Unknown role '${role}'; known roles: ${known}` }))
    }
    if (resource === "") {
      return Effect.fail(new AuthorizationError({ message: "resource must be a non-empty string" }))
    }
    return Effect.succeed(resources.get(RESOURCE_KEYS[resource] ?? resource))
  }
  return {
    name: "rbac",
    authorize: (request) =>
      Effect.flatMap(policyOf(request.principal, request.resource), (policy): Effect.Effect<
        Authorization.AuthzDecision,
        AuthorizationError
      > => {
        if (request.target === "") {
          return Effect.fail(new AuthorizationError({ message: "target must be a non-empty string" }))
        }
        if (policy === undefined) {
          return Effect.succeed({
            allow: true,
            reasons: [{ code: "authz.no_policy", message: "no policy configured" }],
            policy_id: "rbac:unrestricted"
          })
        }
        return Effect.succeed(
          policy(request.target)
            ? { allow: true, reasons: [{ code: "authz.allowed", message: "" }], policy_id: "rbac:allow" }
            : {
              allow: false,
              reasons: [{
                code: "authz.denied",
                message: `role '${request.principal.role}' is denied '${request.target}' on resource ` +
                  `'${request.resource}'`
              }],
              policy_id: "rbac:deny"
            }
        )
      }),
    filterResources: (principal, resourceType, candidates) =>
      Effect.map(policyOf(principal, resourceType), (policy) =>
        policy === undefined ? candidates : candidates.filter((name) => name !== "" && policy(name)))
  }
}

/**
 * The authorization of a configuration with the built-in provider: none when `authorization.enabled` is false or
 * the provider is another (`ConfiguredAuthorization` loads that one). The section was checked when the file loaded
 * (`config/Authorization`), so an enabled one with the built-in provider has roles that decode.
 */
export const fromConfig = (section: AuthorizationConfig): Authorization.Authorization | undefined => {
  if (!section.enabled || section.provider == null || section.provider.use !== RBAC_USE) return undefined
  return {
    provider: make(Schema.decodeUnknownSync(RbacConfig)(section.provider.config)),
    failClosed: section.fail_closed,
    defaultRole: section.default_role
  }
}
