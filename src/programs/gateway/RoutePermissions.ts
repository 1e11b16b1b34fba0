/**
 * The permission each gateway route needs with `authorization.enabled` (DeerFlow's `@require_permission`): one of
 * `threads:read|write|delete` and `runs:create|read|cancel`, asked of the provider as resource `route`, target the
 * permission, for the request's user and role. A role without it gets 403 `Permission denied: threads:delete`
 * (DeerFlow's detail). Routes DeerFlow gives no permission (models, skills, memory, agents, assistants, the store,
 * accounts, health) need none; models are filtered per role by their own endpoints (`handlers/Catalog.ts`).
 *
 * As DeerFlow: a thread's state, history, files, goal, token use, suggestions and scheduled tasks are `threads`,
 * a thread's runs and messages are `runs` (starting one, regenerating, polishing a draft: `runs:create`; cancelling
 * or deleting one: `runs:cancel`). Stricter than DeerFlow, which checks neither: listing or counting threads is
 * `threads:read`, making, copying or pruning threads `threads:write`.
 */
import * as Effect from "effect/Effect"
import * as Authz from "../../services/Authorization.js"
import { fail } from "./api/Problem.js"
import type { GatewayError } from "./api/Problem.js"
import type { Identity } from "./Auth.js"

const PREFIXES = ["/api/langgraph", "/api"]

/** A segment as the router reads it: percent-decoded, any case (one the router cannot decode matches no route). */
const decoded = (segment: string): string => {
  try {
    return decodeURIComponent(segment).toLowerCase()
  } catch {
    return segment.toLowerCase()
  }
}

/**
 * The segments of the path under the gateway's prefixes, as the router matches them: the path ends at its first
 * `?`, `;` or `#`, each segment is percent-decoded, and letters match in any case (else `/api/%74hreads/…`,
 * `/api/Threads/…` or `…/runs;x/wait` reached a route under another route's permission, or none).
 */
const routeOf = (url: string): ReadonlyArray<string> => {
  const parts = (url.split(/[?;#]/, 1)[0] ?? "").split("/").filter((p) => p !== "").map(decoded)
  for (const prefix of PREFIXES) {
    const head = prefix.split("/").filter((p) => p !== "")
    if (head.every((p, i) => parts[i] === p)) return parts.slice(head.length)
  }
  return parts
}

const byMethod = (method: string): Authz.Permission =>
  method === "GET" || method === "HEAD" ? "threads:read" : method === "DELETE" ? "threads:delete" : "threads:write"

/** The permission of a request (pure), or none for a route that needs none. */
export const permissionOf = (method: string, url: string): Authz.Permission | undefined => {
  const m = method.toUpperCase()
  const parts = routeOf(url)
  const [head, second, third, fourth, fifth] = parts
  if (head === "input-polish") return "runs:create"
  if (head === "scheduled-tasks") return m === "GET" ? "threads:read" : "threads:write"
  if (head === "runs") {
    // (stateless runs, batches, crons, a run's stream)
    if (second === "cancel") return "runs:cancel"
    if (m === "GET") return "runs:read"
    if (second === "crons" && m === "POST" && (third === "search" || third === "count")) return "runs:read"
    return "runs:create"
  }
  if (head !== "threads") return undefined
  if (second === undefined) return m === "GET" ? "threads:read" : "threads:write"
  if (third === undefined) {
    if (m === "POST") return second === "search" || second === "count" ? "threads:read" : "threads:write"
    return byMethod(m)
  }
  if (third === "runs" || third === "messages") {
    // (a run's feedback is the thread's, as DeerFlow's feedback router: rated, listed and removed as it)
    if (third === "runs" && fifth === "feedback") return byMethod(m)
    if (m === "GET") return "runs:read"
    if (fourth === undefined || fourth === "stream" || fourth === "wait" || fourth === "regenerate" ||
      fourth === "edit-regenerate" || fourth === "crons") {
      return "runs:create"
    }
    if (fifth === "cancel" || m === "DELETE") return "runs:cancel"
    // (joining a run's stream with POST, as DeerFlow's app does)
    return "runs:read"
  }
  if (third === "history" || third === "suggestions") return "threads:read"
  return byMethod(m)
}

/**
 * The permission a request needs besides its route's (pure), if any: making, triggering or resuming a scheduled
 * task starts runs of the agent, so it needs `runs:create` too (stricter than DeerFlow, whose `threads:write`
 * alone lets a role without `runs:create` run the agent through a task).
 */
export const alsoNeeded = (method: string, url: string): Authz.Permission | undefined => {
  const [head, second, third] = routeOf(url)
  if (head !== "scheduled-tasks" || method.toUpperCase() !== "POST") return undefined
  return second === undefined || third === "trigger" || third === "resume" ? "runs:create" : undefined
}

/**
 * Refuses (403) a request whose user's role lacks the route's permission (a provider failure: refused under
 * `fail_closed`). Nothing is asked without authorization, or for a route that needs no permission.
 */
export const check = (
  authz: Authz.Authorization | undefined,
  who: Identity,
  method: string,
  url: string
): Effect.Effect<void, GatewayError> => {
  if (authz === undefined) return Effect.void
  const principal = Authz.principalOf({ userId: who.user, role: who.role }, authz.defaultRole)
  const needed = [permissionOf(method, url), alsoNeeded(method, url)].filter((p) => p !== undefined)
  return Effect.forEach(needed, (permission) => {
    const [resource, action] = permission.split(":") as [string, string]
    return Effect.flatMap(
      Authz.allows(authz, principal, "route", action, permission),
      (allowed) => (allowed ? Effect.void : Effect.fail(fail("forbidden", `Permission denied: ${resource}:${action}`)))
    )
  }, { discard: true })
}
