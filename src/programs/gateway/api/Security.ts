/**
 * The middleware of the gateway's endpoints, declared: `Authentication` (who the request is, from its API token:
 * `Authorization: Bearer` or `X-Api-Key`, see `Auth.ts`; 401 without a valid one when the gateway has tokens)
 * and `NoBody` (an endpoint that takes no body still refuses one that is not JSON, as every other body is
 * refused: see `Body.ts`). Their implementations are in `handlers/Security.ts`.
 *
 * An endpoint runs its middleware from the last added to the first, then decodes its path: an endpoint
 * declared `.middleware(NoBody).middleware(Authentication)` answers 401 before it looks at the body, and the
 * body before the ids in its path (as the gateway always has).
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import type { Identity } from "../Auth.js"
import { refusal } from "./Problem.js"

/** Who the request is (provided by `Authentication`). */
export class CurrentIdentity extends Context.Tag("antler/gateway/CurrentIdentity")<CurrentIdentity, Identity>() {}

/**
 * Requires an API token when the gateway has tokens, or a session when it has accounts (a 403 for a session's
 * state-changing request without its CSRF token), and provides the request's `CurrentIdentity`.
 */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("antler/gateway/Authentication", {
  failure: refusal(401, "No API token, or not a valid one (when the gateway is configured with tokens)"),
  provides: CurrentIdentity,
  security: {
    bearer: HttpApiSecurity.bearer,
    apiKey: HttpApiSecurity.apiKey({ key: "X-Api-Key", in: "header" }),
    session: HttpApiSecurity.apiKey({ key: "access_token", in: "cookie" }).pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "A signed-in account's session (gateway.auth.accounts); state-changing requests also send the session's " +
          "CSRF token (the csrf_token cookie) in X-CSRF-Token"
      )
    )
  }
}) {}

/** Refuses a body that is not JSON (or too large, or malformed) on an endpoint that takes none. */
export class NoBody extends HttpApiMiddleware.Tag<NoBody>()("antler/gateway/NoBody", {
  failure: Schema.Union(
    refusal(400, "A body that is not valid JSON"),
    refusal(413, "A body larger than the gateway reads"),
    refusal(415, "A body that is not JSON sent with Content-Type: application/json")
  )
}) {}
