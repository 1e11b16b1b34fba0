/**
 * The gateway's API documentation: the OpenAPI document of `GatewayApi` at `/openapi.json`, derived from its
 * declarations (`api/`), and Swagger UI at `/docs`, browsing it. The page is the one `@effect/platform`'s
 * `HttpApiSwagger` renders, with Swagger UI's script and styles inline (no CDN: the gateway may have no network),
 * loaded at the first request to `/docs` (the CLI's other commands never load its 2 MB); it runs only its own
 * inline script, talks only to this server and cannot be framed.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { GatewayApi } from "./api/GatewayApi.js"

const HEADERS = {
  "cache-control": "no-cache",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer"
}

const PAGE_HEADERS = {
  ...HEADERS,
  // Swagger UI's script and styles are inline; "try it out" sends requests to this server only
  "content-security-policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; " +
    "form-action 'none'"
}

/** Swagger UI's page for the API, as `HttpApiSwagger` renders it at `/docs` of a router of its own. */
const swaggerPage = Effect.scoped(Effect.gen(function*() {
  const Swagger = yield* Effect.promise(() => import("@effect/platform/HttpApiSwagger"))
  // (HttpApiSwagger reads the declarations only; the handlers are the served APIs')
  const api = GatewayApi as unknown as HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.AnyWithProps>
  const documented = Layer.succeed(HttpApi.Api, { api, context: Context.empty() })
  const context = yield* Layer.build(
    Swagger.layer({ path: "/docs" }).pipe(Layer.provideMerge(HttpApiBuilder.Router.Live), Layer.provide(documented))
  )
  const app = yield* Effect.provide(HttpApiBuilder.Router.router, context)
  const request = HttpServerRequest.fromWeb(new Request("http://gateway/docs"))
  return yield* Effect.orDie(Effect.provideService(app, HttpServerRequest.HttpServerRequest, request))
}))

/** The routes of the documentation. */
export const router = Effect.gen(function*() {
  const page = yield* Effect.cached(
    Effect.map(swaggerPage, (response) => HttpServerResponse.setHeaders(response, PAGE_HEADERS))
  )
  const document = yield* Effect.cached(Effect.sync(() =>
    HttpServerResponse.unsafeJson(OpenApi.fromApi(GatewayApi), { headers: HEADERS })
  ))
  return HttpRouter.empty.pipe(
    HttpRouter.get("/openapi.json", document),
    HttpRouter.get("/docs", page)
  )
})
