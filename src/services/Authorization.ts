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
 * The provider as a guardrail (DeerFlow's `GuardrailAuthorizationAdapter`): a tool call is `tool` / `call` of its
 * name by the principal of the run (its user and role; a missing role is the default role). A provider failure is
 * the guardrail's `GuardrailError`, which the middleware turns into a denial under `fail_closed`.
 */
export const asGuardrail = (authz: Authorization): Guardrail.Service => ({
  name: "authorization",
  evaluate: (request) =>
    authz.provider.authorize({
      principal: {
        ...principalOf({ userId: request.user_id, role: request.user_role }, authz.defaultRole, request.is_internal),
        attributes: request.authz_attributes ?? {}
      },
      resource: "tool",
      action: "call",
      target: request.tool_name,
      context: {
        thread_id: request.thread_id,
        run_id: request.run_id,
        tool_call_id: request.tool_call_id,
        is_subagent: request.is_subagent
      }
    }).pipe(
      Effect.mapError((error) => new Guardrail.GuardrailError({ provider: "authorization", message: error.message }))
    )
})

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
