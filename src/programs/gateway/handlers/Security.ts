/**
 * The gateway's endpoint middleware (declared in `api/Security.ts`): `Authentication` reads who the request is
 * with the gateway's `Authenticator` (which reads `Authorization: Bearer` first, then `X-Api-Key`, and compares
 * tokens in constant time: both schemes answer alike), `NoBody` reads a body an endpoint does not take as every
 * body is read, and refuses it as any other is refused.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { Authenticator, Identity } from "../Auth.js"
import * as Body from "../Body.js"
import { fail } from "../api/Problem.js"
import type { GatewayError } from "../api/Problem.js"
import { Authentication, NoBody } from "../api/Security.js"

/** Who the request is, or 401. */
const identify = (auth: Authenticator) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Either.match(auth.identify(request.headers), {
      onLeft: (message) => Effect.fail(fail("unauthorized", message)),
      onRight: (found): Effect.Effect<Identity, GatewayError> => Effect.succeed(found)
    }))

/** The middleware of a gateway with these tokens. */
export const layer = (auth: Authenticator) => {
  const identity = identify(auth)
  return Layer.merge(
    Layer.succeed(Authentication, Authentication.of({ bearer: () => identity, apiKey: () => identity })),
    Layer.succeed(NoBody, NoBody.of(Effect.asVoid(Body.json(Schema.Unknown))))
  )
}
