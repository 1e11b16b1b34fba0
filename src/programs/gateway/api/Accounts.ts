/**
 * DeerFlow's local accounts, declared (`/api/v1/auth/...`, its paths and shapes): whether the first admin is
 * still to be made, making it, registering, signing in (a form, as DeerFlow's app sends it) and out, who is
 * signed in, and changing the password. No OAuth providers. Implemented in `handlers/Accounts.ts`; the accounts
 * and sessions in `accounts/`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { BodyRefusals } from "./Threads.js"

/** An account (DeerFlow's `UserResponse`). */
export const User = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  system_role: Schema.Literal("admin", "user"),
  needs_setup: Schema.Boolean,
  oauth_provider: Schema.NullOr(Schema.String)
}).annotations({ identifier: "User" })

/** Whether the first admin is still to be made, and whether visitors may register. */
export const SetupStatus = Schema.Struct({
  needs_setup: Schema.Boolean,
  registration_enabled: Schema.Boolean
}).annotations({ identifier: "SetupStatus" })

/** The sign-in providers besides email and password: none. */
export const Providers = Schema.Struct({
  providers: Schema.Array(Schema.Struct({ id: Schema.String, display_name: Schema.String, type: Schema.String }))
}).annotations({ identifier: "AuthProviders" })

/** The answer to a sign-in: how long the session lasts (the token itself is only in the cookie). */
export const LoginResponse = Schema.Struct({
  expires_in: Schema.Int,
  needs_setup: Schema.Boolean
}).annotations({ identifier: "LoginResponse" })

/** A message. */
export const Message = Schema.Struct({ message: Schema.String }).annotations({ identifier: "AuthMessage" })

/** `POST /api/v1/auth/register` and `/initialize` */
export const NewAccount = Schema.Struct({
  email: Schema.String,
  password: Schema.String,
  remember_me: Schema.optional(Schema.NullOr(Schema.Boolean))
}).annotations({ identifier: "NewAccount" })

/** `POST /api/v1/auth/login/local` (a form, OAuth2's password grant as FastAPI reads it) */
export const LoginForm = Schema.Struct({
  username: Schema.String,
  password: Schema.String,
  remember_me: Schema.optional(Schema.Literal("true", "false", "True", "False", "1", "0"))
}).annotations({ identifier: "LoginForm" })

/** `POST /api/v1/auth/change-password` */
export const ChangePassword = Schema.Struct({
  current_password: Schema.String,
  new_password: Schema.String,
  new_email: Schema.optional(Schema.NullOr(Schema.String)),
  remember_me: Schema.optional(Schema.NullOr(Schema.Boolean))
}).annotations({ identifier: "ChangePassword" })

const AccountsOff = refusal(404, "Accounts are not enabled on this gateway (gateway.auth.accounts)")

/** The accounts group (served under `/api`). */
export const group = HttpApiGroup.make("accounts")
  .add(
    HttpApiEndpoint.get("setupStatus", "/v1/auth/setup-status")
      .addSuccess(SetupStatus)
      .annotate(OpenApi.Summary, "Whether the first admin account is still to be made")
  )
  .add(
    HttpApiEndpoint.get("authProviders", "/v1/auth/providers")
      .addSuccess(Providers)
      .annotate(OpenApi.Summary, "Single sign-on providers (none: this gateway has no OAuth)")
  )
  .add(
    HttpApiEndpoint.post("initialize", "/v1/auth/initialize")
      .setPayload(NewAccount)
      .addSuccess(User, { status: 201 })
      .addError(BodyRefusals)
      .addError(refusal(400, "The email is taken, or the password too weak"))
      .addError(refusal(409, "The first admin exists already (code system_already_initialized)"))
      .addError(AccountsOff)
      .annotate(OpenApi.Summary, "Makes the first admin account, and signs it in")
  )
  .add(
    HttpApiEndpoint.post("register", "/v1/auth/register")
      .setPayload(NewAccount)
      .addSuccess(User, { status: 201 })
      .addError(BodyRefusals)
      .addError(refusal(400, "The email is taken, or the password too weak"))
      .addError(refusal(403, "Registration is closed (gateway.auth.allow_registration: false)"))
      .addError(AccountsOff)
      .annotate(OpenApi.Summary, "Makes an account (not an admin), and signs it in")
  )
  .add(
    HttpApiEndpoint.post("login", "/v1/auth/login/local")
      .setPayload(LoginForm.pipe(HttpApiSchema.withEncoding({ kind: "UrlParams" })))
      .addSuccess(LoginResponse)
      .addError(refusal(401, "Wrong email or password (code invalid_credentials)"))
      .addError(refusal(413, "A form larger than the gateway reads"))
      .addError(refusal(415, "A body that is not an application/x-www-form-urlencoded form"))
      .addError(refusal(422, "A form without username or password"))
      .addError(refusal(429, "Too many failed sign-ins from this address: wait"))
      .addError(AccountsOff)
      .annotate(
        OpenApi.Summary,
        "Signs in: the session in the HttpOnly access_token cookie, its CSRF token in csrf_token"
      )
  )
  .add(
    HttpApiEndpoint.post("logout", "/v1/auth/logout")
      .addSuccess(Message)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Signs out: ends the session and clears its cookies")
  )
  .add(
    HttpApiEndpoint.get("me", "/v1/auth/me")
      .addSuccess(User)
      .middleware(Authentication)
      .annotate(
        OpenApi.Summary,
        "Who is signed in (an open gateway answers DeerFlow's auth-disabled user, a token its user)"
      )
  )
  .add(
    HttpApiEndpoint.post("changePassword", "/v1/auth/change-password")
      .setPayload(ChangePassword)
      .addSuccess(Message)
      .addError(BodyRefusals)
      .addError(refusal(400, "The current password is wrong, the new one too weak, or the new email taken"))
      .addError(refusal(403, "No CSRF token, or not the session's"))
      .middleware(Authentication)
      .annotate(OpenApi.Summary, "Changes the password (and email): ends every other session of the account")
  )
