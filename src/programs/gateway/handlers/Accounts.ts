/**
 * DeerFlow's local accounts (declared in `api/Accounts.ts`), over the account store (`accounts/AccountStore.ts`)
 * when `gateway.auth.accounts` is on. Refusals the app tells apart carry DeerFlow's `code` and `message` beside
 * the problem's fields (`system_already_initialized`, `email_already_exists`, `invalid_credentials`,
 * `registration_disabled`). Without accounts, the routes answer as DeerFlow's do with none to offer: no setup
 * needed, no registration, no providers; `me` is DeerFlow's auth-disabled user on an open gateway and the token's
 * user on a gateway with tokens; signing in or up is a 404 naming the setting.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { AccountStore } from "../accounts/AccountStore.js"
import type { LoginLimiter } from "../accounts/LoginLimiter.js"
import * as Passwords from "../accounts/Passwords.js"
import * as Sessions from "../accounts/Sessions.js"
import * as AccountsApi from "../api/Accounts.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import type { Authenticator, Identity } from "../Auth.js"
import * as Body from "../Body.js"
import { json } from "./Http.js"

/** The accounts of a gateway that has them. */
export interface Options {
  readonly store: AccountStore
  readonly limiter: LoginLimiter
  readonly allowRegistration: boolean
  readonly sessionDays: number
}

/** DeerFlow's user of a gateway without authentication (`DEER_FLOW_AUTH_DISABLED=1`). */
export const AUTH_DISABLED_USER: typeof AccountsApi.User.Type = {
  id: "default",
  email: "default@test.local",
  system_role: "admin",
  needs_setup: false,
  oauth_provider: null
}

const TITLES: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  422: "Unprocessable Entity",
  429: "Too Many Requests"
}

/** A refusal as a problem that also carries DeerFlow's `{code, message}`. */
const refused = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(
    { type: "about:blank", title: TITLES[status] ?? "Error", status, detail: message, code, message },
    { status, contentType: "application/problem+json", headers }
  )

const accountsOff = () =>
  fail("not_found", "Accounts are not enabled on this gateway: set gateway.auth.accounts: true in config.yaml.")

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

/** The email as kept (trimmed, in lower case), or why it is none. */
const emailOf = (text: string) => {
  const email = text.trim().toLowerCase()
  return email.length <= 254 && EMAIL.test(email)
    ? Effect.succeed(email)
    : Effect.fail(fail("unprocessable", "email: not a valid email address."))
}

const strong = (field: string, password: string) => {
  const weakness = Passwords.weakness(password)
  return weakness === undefined ? Effect.void : Effect.fail(fail("unprocessable", `${field}: ${weakness}`))
}

const userOf = (account: NonNullable<Identity["account"]>): typeof AccountsApi.User.Type => ({
  id: account.id,
  email: account.email,
  system_role: account.system_role,
  needs_setup: account.needs_setup,
  oauth_provider: null
})

const storeFailed = (error: { readonly message: string }) =>
  fail("internal", `The accounts store failed: ${error.message}`)

/** The accounts endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi, auth: Authenticator, accounts: Options | undefined) =>
  HttpApiBuilder.group(api, "accounts", (handlers) => Effect.gen(function*() {
    // one hash no password matches, made once: an unknown email costs one verification, as a known one does
    const decoy = yield* Effect.cached(Passwords.decoy())
    const expiresIn = (accounts?.sessionDays ?? 7) * 24 * 3600

    /** The answer with a new session of the account in its cookies. */
    const signedIn = (
      store: AccountStore,
      response: HttpServerResponse.HttpServerResponse,
      accountId: string,
      remember: boolean
    ) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const opened = yield* Effect.mapError(store.openSession(accountId), storeFailed)
        return Sessions.withSession(response, opened, {
          secure: Sessions.isSecure(request.headers),
          maxAgeSeconds: yield* Sessions.lifetime(request.headers, remember, expiresIn),
          remember
        })
      })

    /** Makes an account of `role` from the request's body and signs it in (initialize, register). */
    const create = (store: AccountStore, role: "admin" | "user") =>
      Effect.gen(function*() {
        const body = yield* Body.json(AccountsApi.NewAccount)
        const email = yield* emailOf(body.email)
        yield* strong("password", body.password)
        if (role === "admin" && (yield* Effect.mapError(store.adminCount, storeFailed)) > 0) {
          return refused(409, "system_already_initialized", "System already initialized")
        }
        const made = yield* Effect.mapError(
          Effect.flatMap(Passwords.hash(body.password), (hash) => store.create(email, hash, role)),
          storeFailed
        )
        switch (made._tag) {
          case "admin_exists":
            return refused(409, "system_already_initialized", "System already initialized")
          case "email_taken":
            return refused(400, "email_already_exists", "Email already registered")
          case "made":
            return yield* signedIn(
              store,
              json(AccountsApi.User, userOf(made.account), 201),
              made.account.id,
              body.remember_me ?? true
            )
        }
      })

    return handlers
      .handleRaw("setupStatus", () =>
        accounts === undefined
          ? Effect.succeed(json(AccountsApi.SetupStatus, { needs_setup: false, registration_enabled: false }))
          : Effect.map(Effect.mapError(accounts.store.adminCount, storeFailed), (admins) =>
            json(AccountsApi.SetupStatus, {
              needs_setup: admins === 0,
              registration_enabled: accounts.allowRegistration
            })))
      .handleRaw("authProviders", () => Effect.succeed(json(AccountsApi.Providers, { providers: [] })))
      .handleRaw("initialize", () => accounts === undefined ? accountsOff() : create(accounts.store, "admin"))
      .handleRaw("register", () => {
        if (accounts === undefined) return accountsOff()
        if (!accounts.allowRegistration) {
          return Effect.succeed(
            refused(403, "registration_disabled", "Self-registration is disabled on this deployment")
          )
        }
        return create(accounts.store, "user")
      })
      .handleRaw("login", () =>
        Effect.gen(function*() {
          if (accounts === undefined) return yield* accountsOff()
          const { limiter, store } = accounts
          const request = yield* HttpServerRequest.HttpServerRequest
          const client = Option.getOrElse(request.remoteAddress, () => "unknown")
          const wait = yield* limiter.lockedFor(client)
          if (wait !== undefined) {
            return refused(429, "too_many_attempts", "Too many login attempts. Try again later.", {
              "retry-after": String(wait)
            })
          }
          const form = yield* Body.urlEncodedForm(AccountsApi.LoginForm)
          const found = form.username.length <= 254
            ? yield* Effect.mapError(store.byEmail(form.username.trim().toLowerCase()), storeFailed)
            : Option.none()
          // an unknown email costs what a known one does: the answer's time says nothing of which emails exist
          const hash = Option.isSome(found) ? found.value.password_hash : yield* decoy
          const valid = (yield* Passwords.verify(form.password, hash)) && Option.isSome(found)
          if (!valid || Option.isNone(found)) {
            yield* limiter.failed(client)
            return refused(401, "invalid_credentials", "Incorrect email or password")
          }
          yield* limiter.succeeded(client)
          const remember = form.remember_me === undefined || ["true", "True", "1"].includes(form.remember_me)
          const { account } = found.value
          return yield* signedIn(
            store,
            json(AccountsApi.LoginResponse, { expires_in: expiresIn, needs_setup: account.needs_setup }),
            account.id,
            remember
          )
        }))
      .handleRaw("logout", () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const token = request.cookies[Sessions.ACCESS_COOKIE]
          if (accounts !== undefined && token !== undefined && token !== "" && token.length <= 256) {
            yield* Effect.mapError(accounts.store.closeSession(token), storeFailed)
          }
          return Sessions.withoutSession(
            json(AccountsApi.Message, { message: "Successfully logged out" }),
            Sessions.isSecure(request.headers)
          )
        }))
      .handleRaw("me", () =>
        Effect.map(CurrentIdentity, (identity) => {
          if (identity.account !== undefined) return json(AccountsApi.User, userOf(identity.account))
          if (!auth.required && accounts === undefined) return json(AccountsApi.User, AUTH_DISABLED_USER)
          // a token's user: DeerFlow's shape, its email made up from the user id
          return json(AccountsApi.User, {
            id: identity.user,
            email: `${identity.user}@token.local`,
            system_role: identity.admin ? "admin" : "user",
            needs_setup: false,
            oauth_provider: null
          })
        }))
      .handleRaw("changePassword", () =>
        Effect.gen(function*() {
          const identity = yield* CurrentIdentity
          if (accounts === undefined || identity.account === undefined) {
            return refused(
              400,
              "invalid_credentials",
              accounts === undefined
                ? "Password changes are not available: this gateway has no accounts (gateway.auth.accounts)."
                : "An API token's user has no password to change."
            )
          }
          const { limiter, store } = accounts
          // (a session taken over must not try passwords without end either: the sign-in limit counts these too)
          const client = Option.getOrElse((yield* HttpServerRequest.HttpServerRequest).remoteAddress, () => "unknown")
          const wait = yield* limiter.lockedFor(client)
          if (wait !== undefined) {
            return refused(429, "too_many_attempts", "Too many wrong passwords. Try again later.", {
              "retry-after": String(wait)
            })
          }
          const body = yield* Body.json(AccountsApi.ChangePassword)
          yield* strong("new_password", body.new_password)
          const email = body.new_email == null ? undefined : yield* emailOf(body.new_email)
          const found = yield* Effect.mapError(store.byEmail(identity.account.email), storeFailed)
          const hash = Option.isSome(found) ? found.value.password_hash : yield* decoy
          if (!(yield* Passwords.verify(body.current_password, hash)) || Option.isNone(found)) {
            yield* limiter.failed(client)
            return refused(400, "invalid_credentials", "Current password is incorrect")
          }
          yield* limiter.succeeded(client)
          const accountId = identity.account.id
          const updated = yield* Effect.mapError(
            Effect.flatMap(Passwords.hash(body.new_password), (next) => store.update(accountId, next, email)),
            storeFailed
          )
          if (updated === "email_taken") return refused(400, "email_already_exists", "Email already in use")
          return yield* signedIn(
            store,
            json(AccountsApi.Message, { message: "Password changed successfully" }),
            accountId,
            body.remember_me ?? Sessions.rememberedBefore((yield* HttpServerRequest.HttpServerRequest).cookies)
          )
        }))
  }))
