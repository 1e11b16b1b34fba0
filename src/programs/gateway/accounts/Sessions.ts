/**
 * Browser sessions of the gateway's accounts, as DeerFlow's app uses them: the session token in the HttpOnly
 * `access_token` cookie (SameSite=Lax), and a CSRF token in the `csrf_token` cookie, readable by the page, which
 * sends it back in `X-CSRF-Token` with every state-changing request (POST, PUT, PATCH, DELETE). The header must
 * name the CSRF token of the session the cookie opens (not merely repeat the cookie): a page of another site can
 * neither read the cookie nor, by planting one, choose it. Cookies are `Secure` when the request came over HTTPS
 * (a proxy's `X-Forwarded-Proto: https` or `Forwarded: proto=https`). This is besides the gateway's Host and Origin
 * checks (`Guard.ts`), which every request passes first.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Identity } from "../Auth.js"
import { isLoopback } from "../Auth.js"
import { parseHost } from "../Guard.js"
import { fail, GatewayError } from "../api/Problem.js"
import type { AccountStore, OpenedSession } from "./AccountStore.js"
import { csrfMatches } from "./AccountStore.js"

export const ACCESS_COOKIE = "access_token"
export const CSRF_COOKIE = "csrf_token"
export const CSRF_HEADER = "x-csrf-token"
/** Whether the session was signed in to be remembered (`1`) or not (`0`), so a password change keeps that choice. */
export const PERSISTENCE_COOKIE = "deerflow_session_persistent"

/** The sign-in's remember-me choice as the request's `PERSISTENCE_COOKIE` tells it (DeerFlow's: else remembered). */
export const rememberedBefore = (cookies: Readonly<Record<string, string>>): boolean =>
  cookies[PERSISTENCE_COOKIE] !== "0"

const STATE_CHANGING: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])

/**
 * Whether the request came over HTTPS, as a proxy in front says: in `X-Forwarded-Proto`, or in the `proto` of the
 * first element of RFC 7239's `Forwarded` (the client's side of the nearest proxy), as DeerFlow reads them.
 */
export const isSecure = (headers: Readonly<Record<string, string | undefined>>): boolean => {
  if ((headers["x-forwarded-proto"] ?? "").split(",")[0]!.trim().toLowerCase() === "https") return true
  const first = (headers["forwarded"] ?? "").split(",")[0]!
  return first.split(";").some((pair) => {
    const at = pair.indexOf("=")
    if (at < 0 || pair.slice(0, at).trim().toLowerCase() !== "proto") return false
    return pair.slice(at + 1).trim().replace(/^"(.*)"$/, "$1").toLowerCase() === "https"
  })
}

/** An operator's consent to sessions kept over plain HTTP on a public host (DeerFlow's variable: `1`, `true`...). */
export const ALLOW_INSECURE_PERSISTENT_ENV = "DEER_FLOW_AUTH_ALLOW_INSECURE_PERSISTENT_COOKIE"

/**
 * Whether the request's own `Host` (never a forwarded one, which the client writes) is a loopback browser origin:
 * `localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`.
 */
export const isLocalOrigin = (headers: Readonly<Record<string, string | undefined>>): boolean => {
  const host = parseHost(headers["host"] ?? "")
  return host !== undefined && (host.name.endsWith(".localhost") || isLoopback(host.name))
}

/**
 * How long a new session's cookies last, as DeerFlow's `resolve_session_cookie_policy`: `seconds` when remembered
 * over HTTPS or from a loopback origin (or a public one over plain HTTP with `ALLOW_INSECURE_PERSISTENT_ENV`),
 * otherwise until the browser closes (undefined): a cookie readable on the way is not kept for a week.
 */
export const lifetime = (
  headers: Readonly<Record<string, string | undefined>>,
  remember: boolean,
  seconds: number
): Effect.Effect<number | undefined> => {
  if (!remember) return Effect.succeed(undefined)
  if (isSecure(headers) || isLocalOrigin(headers)) return Effect.succeed(seconds)
  return Config.boolean(ALLOW_INSECURE_PERSISTENT_ENV).pipe(
    Config.withDefault(false),
    Effect.orElseSucceed(() => false),
    Effect.map((allowed) => (allowed ? seconds : undefined))
  )
}

/**
 * The response with a session's cookies: kept `maxAgeSeconds` (remember me), or until the browser closes
 * (undefined).
 */
export const withSession = (
  response: HttpServerResponse.HttpServerResponse,
  opened: OpenedSession,
  options: { readonly secure: boolean; readonly maxAgeSeconds: number | undefined; readonly remember: boolean }
) => {
  const maxAge = options.maxAgeSeconds === undefined ? {} : { maxAge: `${options.maxAgeSeconds} seconds` as const }
  return response.pipe(
    HttpServerResponse.unsafeSetCookie(PERSISTENCE_COOKIE, options.remember ? "1" : "0", {
      path: "/",
      httpOnly: true,
      sameSite: "lax",
      secure: options.secure,
      ...maxAge
    }),
    HttpServerResponse.unsafeSetCookie(ACCESS_COOKIE, opened.token, {
      path: "/",
      httpOnly: true,
      sameSite: "lax",
      secure: options.secure,
      ...maxAge
    }),
    HttpServerResponse.unsafeSetCookie(CSRF_COOKIE, opened.csrf, {
      path: "/",
      httpOnly: false,
      sameSite: "strict",
      secure: options.secure,
      ...maxAge
    })
  )
}

/** The response with the session's cookies removed. */
export const withoutSession = (response: HttpServerResponse.HttpServerResponse, secure: boolean) =>
  response.pipe(
    HttpServerResponse.expireCookie(ACCESS_COOKIE, { path: "/", httpOnly: true, sameSite: "lax", secure }),
    HttpServerResponse.expireCookie(CSRF_COOKIE, { path: "/", sameSite: "strict", secure }),
    HttpServerResponse.expireCookie(PERSISTENCE_COOKIE, { path: "/", httpOnly: true, sameSite: "lax", secure })
  )

/** What a request carries, as the session check reads it. */
export interface SessionRequest {
  readonly method: string
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly cookies: Readonly<Record<string, string>>
}

/** The 401 of a session cookie that opens no session (made up, signed out): DeerFlow's `token_invalid`. */
const sessionEnded = new GatewayError({
  reason: "unauthorized",
  code: "token_invalid",
  message: "The session has ended (signed out, expired or the password changed): sign in again."
})

/** The 401 of a session cookie whose session has expired: DeerFlow's `token_expired`. */
const sessionExpired = new GatewayError({
  reason: "unauthorized",
  code: "token_expired",
  message: "The session has expired: sign in again."
})

/**
 * Who a request's session cookie stands for: 401 without a session that lasts (DeerFlow's `code`, `not_authenticated`
 * without a cookie, `token_invalid` with one that opens none, `token_expired` with one that ended, beside the
 * problem), 403 when it changes something without the session's CSRF token. As DeerFlow's CSRF middleware runs
 * before its auth middleware, a cookie's change without the CSRF header is refused before its session is looked up.
 */
export const identify = (store: AccountStore, request: SessionRequest) =>
  Effect.gen(function*() {
    const token = request.cookies[ACCESS_COOKIE]
    if (token === undefined || token === "") {
      return yield* new GatewayError({
        reason: "unauthorized",
        code: "not_authenticated",
        message: "Not signed in: sign in (POST /api/v1/auth/login/local) or send an API token (Authorization: Bearer)."
      })
    }
    const changing = STATE_CHANGING.has(request.method.toUpperCase())
    const header = request.headers[CSRF_HEADER]
    if (changing && (header === undefined || header === "")) {
      return yield* fail("forbidden", "CSRF token missing. Include X-CSRF-Token header.")
    }
    if (token.length > 256) return yield* sessionEnded
    const found = yield* Effect.mapError(
      store.session(token),
      (error) => fail("internal", `Cannot read the sessions: ${error.message}`)
    )
    if (Option.isNone(found)) return yield* sessionEnded
    if (found.value._tag === "expired") return yield* sessionExpired
    if (changing && !csrfMatches(header ?? "", found.value.csrfHash)) {
      return yield* fail("forbidden", "CSRF token mismatch.")
    }
    const { account } = found.value
    return {
      user: account.id,
      admin: account.system_role === "admin",
      role: account.system_role,
      account
    } satisfies Identity
  })
