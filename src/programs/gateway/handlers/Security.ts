/**
 * The gateway's endpoint middleware (declared in `api/Security.ts`): `Authentication` reads who the request is
 * with the gateway's `Authenticator` (which reads `Authorization: Bearer` first, then `X-Api-Key`, and compares
 * tokens in constant time: both schemes answer alike) or, on a gateway with accounts, its session; `NoBody`
 * reads a body an endpoint does not take as every body is read, and refuses it as any other is refused.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Authz from "../../../services/Authorization.js"
import type { AccountStore } from "../accounts/AccountStore.js"
import * as Sessions from "../accounts/Sessions.js"
import type { Authenticator, Identity } from "../Auth.js"
import { tokenOf } from "../Auth.js"
import * as Body from "../Body.js"
import { fail } from "../api/Problem.js"
import type { GatewayError } from "../api/Problem.js"
import { Authentication, NoBody } from "../api/Security.js"
import * as RoutePermissions from "../RoutePermissions.js"

/**
 * Who `request` is, or 401. On a gateway with accounts, a request with an API token (when there are tokens) is its
 * token's user, any other must be a signed-in account's (`accounts/Sessions.ts`).
 */
export const identifyRequest = (
  auth: Authenticator,
  accounts: AccountStore | undefined,
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<Identity, GatewayError> => {
  if (accounts !== undefined && !(auth.required && tokenOf(request.headers) !== undefined)) {
    return Sessions.identify(accounts, request)
  }
  return Either.match(auth.identify(request.headers), {
    onLeft: (message) => Effect.fail(fail("unauthorized", message)),
    onRight: (found): Effect.Effect<Identity, GatewayError> => Effect.succeed(found)
  })
}

/** Who the request being served is, or 401 (`identifyRequest`). */
const identify = (auth: Authenticator, accounts: AccountStore | undefined) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => identifyRequest(auth, accounts, request))

/**
 * The middleware of a gateway with these tokens (and accounts, when it has them); with `authorization`, a request
 * whose role lacks its route's permission is refused (403, `RoutePermissions`).
 */
export const layer = (auth: Authenticator, accounts?: AccountStore, authz?: Authz.Authorization) => {
  const identity = authz === undefined ? identify(auth, accounts) : Effect.flatMap(
    identify(auth, accounts),
    (who) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.as(RoutePermissions.check(authz, who, request.method, request.url), who))
  )
  return Layer.merge(
    Layer.succeed(
      Authentication,
      Authentication.of({ bearer: () => identity, apiKey: () => identity, session: () => identity })
    ),
    Layer.succeed(NoBody, NoBody.of(Effect.asVoid(Body.json(Schema.Unknown))))
  )
}
