/**
 * The answer to a request no route takes. DeerFlow's auth middleware checks every request before its routes are
 * looked for, so on a gateway that needs a session or a token a path under `/api` that DeerFlow does not make public
 * is checked first: without a session (or token) a 401 with DeerFlow's `code`, a session's change without its CSRF
 * token a 403; only a request that passes is told there is no such route. Elsewhere, and on an open gateway, a 404.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import type { AccountStore } from "./accounts/AccountStore.js"
import { problem, respondError } from "./api/Problem.js"
import type { Authenticator } from "./Auth.js"
import { identifyRequest } from "./handlers/Security.js"

/** The paths under `/api` DeerFlow's auth middleware lets through without a session (`_is_public`), exact... */
const PUBLIC_EXACT: ReadonlySet<string> = new Set([
  "/api/v1/auth/login/local",
  "/api/v1/auth/register",
  "/api/v1/auth/logout",
  "/api/v1/auth/setup-status",
  "/api/v1/auth/initialize",
  "/api/v1/auth/providers"
])

/** ...and by prefix. */
const PUBLIC_PREFIXES = ["/api/v1/auth/oauth/", "/api/v1/auth/callback/", "/api/webhooks/"]

/** Whether a request to `path` needs a session first, as DeerFlow's middleware decides it. */
export const guarded = (path: string): boolean =>
  (path === "/api" || path.startsWith("/api/")) &&
  !PUBLIC_EXACT.has(path.replace(/\/+$/, "")) &&
  !PUBLIC_PREFIXES.some((prefix) => path.startsWith(prefix))

/** The 404 problem naming what was asked (at most 200 characters of it). */
const notRouted = (request: HttpServerRequest.HttpServerRequest) => {
  const asked = `${request.method} ${request.url}`
  return problem(404, `The gateway has no route for ${asked.length > 200 ? `${asked.slice(0, 200)}...` : asked}.`)
}

/** The answer to `request`, which no route takes, on a gateway with these tokens (and accounts, when it has them). */
export const answer = (auth: Authenticator, accounts: AccountStore | undefined) =>
(request: HttpServerRequest.HttpServerRequest) => {
  const path = request.url.split("?")[0]!.split("#")[0]!
  if ((!auth.required && accounts === undefined) || !guarded(path)) return Effect.succeed(notRouted(request))
  return identifyRequest(auth, accounts, request).pipe(
    Effect.matchCauseEffect({
      onFailure: respondError,
      onSuccess: () => Effect.succeed(notRouted(request))
    })
  )
}
