/**
 * Refusals: what the gateway answers when it does not do what a request asks. A refusal is a `GatewayError`
 * whose `reason` decides the status; on the wire it is an RFC 9457 problem (`{type, title, status, detail}`,
 * `application/problem+json`). `Problem` declares that body for the API's description and `GatewayProblem` is
 * the codec between the two. `respondError` answers every failure of a route so: a gateway error with its
 * status; a path parameter HttpApi could not decode (an id no thread or run can have) 404, any other request
 * part it could not decode 422, both with the decoder's message; anything else a logged 500. HttpApi's own
 * error bodies never leave the gateway.
 */
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/** A request the gateway refuses or cannot serve; `reason` decides the HTTP status. */
export class GatewayError extends Schema.TaggedError<GatewayError>()("GatewayError", {
  reason: Schema.Literal(
    "bad_request",
    "unauthorized",
    "forbidden",
    "not_found",
    "conflict",
    "too_large",
    "unsupported_media_type",
    "unprocessable",
    "internal"
  ),
  message: Schema.String,
  /** DeerFlow's `code`, of a refusal its app tells apart (`not_authenticated`...): sent with `detail` as `message`. */
  code: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {}

const STATUSES: Readonly<Record<GatewayError["reason"], number>> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  too_large: 413,
  unsupported_media_type: 415,
  unprocessable: 422,
  internal: 500
}

/** The HTTP status of a gateway error. */
export const statusOf = (reason: GatewayError["reason"]): number => STATUSES[reason]

/** The standard reason phrase of each status the gateway answers (RFC 9110), a problem's `title`. */
const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  412: "Precondition Failed",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  416: "Range Not Satisfiable",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout"
}

/** The body of a refusal. */
export const Problem = Schema.Struct({
  type: Schema.String,
  title: Schema.String,
  status: Schema.Int,
  detail: Schema.String.annotations({ description: "What was wrong, and where" }),
  code: Schema.optional(Schema.String.annotations({ description: "DeerFlow's code of an auth refusal" })),
  message: Schema.optional(Schema.String.annotations({ description: "With a code: the detail again (DeerFlow's)" }))
}).annotations({ identifier: "Problem", description: "A refusal (RFC 9457 problem details)" }).pipe(
  HttpApiSchema.withEncoding({ kind: "Json", contentType: "application/problem+json" })
)

const problemBody = (status: number, detail: string, code?: string): typeof Problem.Type => ({
  type: "about:blank",
  title: TITLES[status] ?? "Error",
  status,
  detail,
  ...(code === undefined ? {} : { code, message: detail })
})

const reasonOf = (status: number): GatewayError["reason"] =>
  (Object.keys(STATUSES) as Array<GatewayError["reason"]>).find((reason) => STATUSES[reason] === status) ??
    "internal"

/** A gateway error as the problem it is sent as. */
export const GatewayProblem = Schema.transform(Problem, Schema.instanceOf(GatewayError), {
  strict: true,
  decode: (body) =>
    new GatewayError({
      reason: reasonOf(body.status),
      message: body.detail,
      ...(body.code === undefined ? {} : { code: body.code })
    }),
  encode: (error) => problemBody(statusOf(error.reason), error.message, error.code)
})

/** The refusals of one status an endpoint declares (for its description; every refusal is sent as a problem). */
export const refusal = (status: number, description: string) =>
  GatewayProblem.annotations(HttpApiSchema.annotations({ status, description }))

/**
 * The refusal of a request that would take its user past a per-user quota (`gateway.quotas`), as the endpoints that
 * make threads or files declare it.
 */
export const QuotaRefusal = refusal(
  403,
  "Past a per-user quota (gateway.quotas): the message names it, its limit and the use"
)

/** A gateway error. */
export const fail = (reason: GatewayError["reason"], message: string) => new GatewayError({ reason, message })

/** The 404 of something the user does not have: `${what} not found.` */
export const notFound = (what: string) => fail("not_found", `${what} not found.`)

/**
 * The 500 of a failure only the server's log tells of (its text may name the host's paths): `log` is logged, with
 * `cause` when there is one, and the request is answered `${what} (see the server's log).`
 */
export const serverFault = (what: string, log: string, cause?: unknown): Effect.Effect<never, GatewayError> =>
  Effect.zipRight(
    cause === undefined ? Effect.logError(log) : Effect.logError(log, cause),
    Effect.fail(fail("internal", `${what} (see the server's log).`))
  )

/** A JSON problem response (RFC 9457). */
export const problem = (status: number, detail: string, headers: Record<string, string> = {}, code?: string) =>
  HttpServerResponse.unsafeJson(problemBody(status, detail, code), {
    status,
    contentType: "application/problem+json",
    headers
  })

/**
 * A problem whose `detail` is an object, for the refusals DeerFlow answers so (a write SkillScan blocked:
 * `{message, skill_name, findings}`).
 */
export const problemWithDetail = (status: number, detail: Readonly<Record<string, unknown>>) =>
  HttpServerResponse.unsafeJson({ ...problemBody(status, ""), detail }, {
    status,
    contentType: "application/problem+json"
  })

/**
 * Decoding issues as `where: what`, the first five, `;`-separated (`(body)` for the value itself); the place and the
 * message each cut at `MAX_ISSUE_CHARS`.
 */
export const describeIssues = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>): string =>
  issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? cut(issue.path.join(".")) : "(body)"}: ${cut(issue.message)}`)
    .join("; ")

/**
 * The most characters of one issue's place or message a problem repeats: a message that quotes the value it refused
 * (a union's "Expected null, actual {...}"), or a place that is a key the request made up (a 1 MB field name of a
 * state update, of a store search's filter), would otherwise echo megabytes of the request back.
 */
export const MAX_ISSUE_CHARS = 1000

const cut = (message: string): string =>
  message.length <= MAX_ISSUE_CHARS ? message : `${message.slice(0, MAX_ISSUE_CHARS)}…`

/** Renders a decoding failure as `where: what` lines. */
export const describeParseError = (error: ParseResult.ParseError): string =>
  describeIssues(ParseResult.ArrayFormatter.formatErrorSync(error))

/**
 * The problem of a request part HttpApi could not decode: a path parameter's (the route's own parameters name
 * it) is a 404 with the parameter's message (`Thread "x" not found.`: no thread has an id that is not one); any
 * other part's a 422 naming the fields.
 */
const decodeProblem = (error: HttpApiDecodeError, params: Readonly<Record<string, string | undefined>>) => {
  const first = error.issues[0]
  const name = first?.path[0]
  return first !== undefined && typeof name === "string" && Object.hasOwn(params, name)
    ? problem(404, first.message)
    : problem(422, describeIssues(error.issues))
}

/** The response of a failed route: see the top of this module. */
export const respondError = (cause: Cause.Cause<unknown>) => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && failure.value instanceof GatewayError) {
    const error = failure.value
    return Effect.succeed(
      problem(
        statusOf(error.reason),
        error.message,
        error.reason === "unauthorized" ? { "www-authenticate": "Bearer" } : {},
        error.code
      )
    )
  }
  if (Option.isSome(failure) && failure.value instanceof HttpApiDecodeError) {
    const error = failure.value
    return Effect.map(
      Effect.serviceOption(HttpRouter.RouteContext),
      (route) => decodeProblem(error, Option.isSome(route) ? route.value.params : {})
    )
  }
  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
  return Effect.as(
    Effect.logError("gateway request failed", cause),
    problem(500, "The server failed to handle this request; see its log.")
  )
}
