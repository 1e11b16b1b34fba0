/**
 * A request's own span (`http.server <method>`, kind server), when the app traces: a child of the client's span its
 * valid W3C `traceparent` names (`TraceContext`), as the run it starts is, else a root. It holds the method, the
 * path and the answer's status, never the request's headers or query (a hostile `traceparent`, a token in a
 * query). It replaces @effect/platform's own request span, which takes a `traceparent` or `b3` header leniently
 * (uppercase, any flags) and records every header but the credentials it knows of.
 */
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as TraceContext from "../../services/TraceContext.js"
import * as Tracing from "../../services/Tracing.js"

/** Wraps `app` (the whole gateway, its refusals included) in each request's span. */
export const middleware = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.flatMap(Tracing.traced, (traced) =>
    !traced ? app : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const remote = TraceContext.fromHeaders(request.headers)
      const path = request.url.split("?")[0] ?? "/"
      return Effect.useSpan(`http.server ${request.method}`, {
        kind: "server",
        captureStackTrace: false,
        ...(remote === undefined ? { root: true } : { parent: TraceContext.parentSpan(remote) }),
        attributes: { "http.request.method": request.method, "url.path": path }
      }, (span) =>
        Effect.exit(Effect.withParentSpan(app, span)).pipe(
          Effect.tap((exit) =>
            Effect.sync(() => span.attribute("http.response.status_code", HttpServerError.exitResponse(exit).status))
          ),
          Effect.flatten
        ))
    }))

/** `serve` (the server's layer) without @effect/platform's own request spans: `middleware` makes them. */
export const withoutPlatformSpans = <A, E, R>(serve: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  HttpMiddleware.withTracerDisabledWhen(serve, () => true)
