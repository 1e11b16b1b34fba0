/**
 * DeerFlow's request trace ids (`logging.enhance.enabled`; its `trace_context` and `TraceMiddleware`): each request
 * is bound to the id its `X-Trace-Id` header gives, when that is usable, else to a new one; the id is answered in the
 * response's `X-Trace-Id` (errors and event streams too, replacing one a route set), annotates every log line of
 * the request (`trace_id`), and follows the run the request starts (its log lines and its trace's root span). The
 * request's id lives in its fiber's context (`RequestTrace`), never in the process.
 */
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Crypto from "node:crypto"

/** The header a trace id comes in and is answered in. */
export const HEADER = "x-trace-id"

/** The longest trace id taken from a header (DeerFlow's `_MAX_TRACE_ID_LENGTH`). */
export const MAX_LENGTH = 512

/** The key of the log annotation, as DeerFlow's log records name it. */
export const LOG_KEY = "trace_id"

/** The key a run's metadata may give its trace id under (DeerFlow's `DEERFLOW_TRACE_METADATA_KEY`). */
export const METADATA_KEY = "deerflow_trace_id"

/** The trace's root span attribute holding the id (DeerFlow's Langfuse metadata `deerflow_trace_id`). */
export const SPAN_ATTRIBUTE = "antler.trace_id"

/** A new trace id: 32 hexadecimal digits (DeerFlow's `uuid4().hex`). */
export const generate = (): string => Crypto.randomUUID().replaceAll("-", "")

/**
 * A usable trace id, or undefined: a string, trimmed, of 1 to `MAX_LENGTH` printable ASCII characters (0x20-0x7E).
 * Control characters (a CR or LF would forge a log line), DEL and anything beyond ASCII are refused whole rather
 * than cleaned, as DeerFlow's `normalize_trace_id` does: such an id is replaced by a new one.
 */
export const normalize = (value: unknown): string | undefined => {
  if (typeof value !== "string") return undefined
  const id = value.trim()
  if (id === "" || id.length > MAX_LENGTH) return undefined
  for (let i = 0; i < id.length; i++) {
    const code = id.charCodeAt(i)
    if (code < 0x20 || code > 0x7e) return undefined
  }
  return id
}

/** The trace id a request is bound to, and whether its own header gave it. */
export class RequestTrace extends Context.Tag("antler/gateway/RequestTrace")<RequestTrace, {
  readonly id: string
  readonly fromHeader: boolean
}>() {}

/**
 * Binds every request to its trace id (see the module header). Off, it changes nothing: no header is read or
 * answered, and runs carry no trace id. The flag is the configuration's at the start (`logging` is read once).
 */
export const middleware = (enabled: boolean) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  !enabled ? app : Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const given = normalize(request.headers[HEADER])
    const id = given ?? generate()
    // (a pre-response handler: it also sees the answers made from a failure, after every route and middleware)
    yield* HttpApp.appendPreResponseHandler((_, response) =>
      Effect.succeed(HttpServerResponse.setHeader(response, HEADER, id))
    )
    return yield* app.pipe(
      Effect.annotateLogs(LOG_KEY, id),
      Effect.provideService(RequestTrace, { id, fromHeader: given !== undefined })
    )
  })

/**
 * The trace id of a run the current request starts (DeerFlow's `resolve_deerflow_trace_id`): the request's, when its
 * header gave it; else a usable `deerflow_trace_id` of the run's metadata; else the request's own. None when trace
 * ids are off (no `RequestTrace`).
 */
export const forRun = (metadata: Readonly<Record<string, unknown>> | undefined): Effect.Effect<string | undefined> =>
  Effect.map(Effect.serviceOption(RequestTrace), (trace) => {
    if (Option.isNone(trace)) return undefined
    if (trace.value.fromHeader) return trace.value.id
    return normalize(metadata?.[METADATA_KEY]) ?? trace.value.id
  })
