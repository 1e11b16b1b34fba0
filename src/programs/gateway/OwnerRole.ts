/**
 * The role a run the gateway starts on its own for a user (a scheduled task's, a cron's, an MCP task's
 * notification) is asked as, with
 * `authorization.enabled`: the user's role now, as their own requests have it (DeerFlow's scheduler runs as the
 * task's owner, with their `system_role`). Without it such a run had no role and ran as `default_role`, so a user
 * of a narrower role reached, through a task or a cron, the tools and models their role may not use.
 *
 * The role is a token's `role` (`admin` for an admin token without one, else `user`), else an account's
 * `system_role`; on an open gateway (no tokens, no accounts) none, as its requests have none. A user who holds
 * tokens of several roles, or no token or account of the gateway any more, has no role a run can be given: the
 * launch fails, saying why, rather than guess one. So does a user whose role may not start runs (`runs:create`, a
 * route permission their own requests to run the agent, make or trigger a task are asked): a task or cron made
 * before the operator narrowed the role ran the agent as them at its next time.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as UserModule from "../../internal/UserModule.js"
import * as ConfiguredAuthorization from "../../layers/ConfiguredAuthorization.js"
import type { AppConfig, AppConfigService } from "../../services/AppConfig.js"
import * as Authz from "../../services/Authorization.js"
import * as AccountStore from "./accounts/AccountStore.js"

/** The role of a user (none: `default_role`), or why a run cannot be given one. */
export type Lookup = (userId: string) => Effect.Effect<Either.Either<string | undefined, string>>

/** The roles of the user's tokens (pure), each once, in the configuration's order. */
export const tokenRoles = (tokens: AppConfig["gateway"]["auth"]["tokens"], userId: string): ReadonlyArray<string> => [
  ...new Set(tokens.filter((t) => t.user === userId).map((t) => t.role ?? (t.admin ? "admin" : "user")))
]

/** `role`, when `authz` lets it start runs (`runs:create`, as a request to run the agent is asked), else why not. */
const mayStartRuns = (
  authz: Authz.Authorization | undefined,
  userId: string,
  role: string | undefined
): Effect.Effect<Either.Either<string | undefined, string>> => {
  if (authz === undefined) return Effect.succeed(Either.right(role))
  const principal = Authz.principalOf({ userId, role }, authz.defaultRole)
  return Effect.map(Authz.allows(authz, principal, "route", "create", "runs:create"), (allowed) =>
    allowed
      ? Either.right(role)
      : Either.left(`user ${userId}'s role ${principal.role} may not start runs (Permission denied: runs:create)`))
}

/** The role of a user as the configuration and accounts say (no permission asked). */
const roleOf = (config: AppConfig, account: (id: string) => Effect.Effect<Option.Option<string>>): Lookup => {
  const { tokens, accounts } = config.gateway.auth
  if (!config.authorization.enabled) return () => Effect.succeed(Either.right(undefined))
  return (userId) =>
    Effect.gen(function*() {
      const roles = tokenRoles(tokens, userId)
      if (roles.length === 1) return Either.right(roles[0])
      if (roles.length > 1) {
        return Either.left(
          `user ${userId} holds tokens of several roles (${roles.join(", ")}), and a scheduled run cannot tell ` +
            "which to run as: give the user's tokens one role"
        )
      }
      if (accounts) {
        const found = yield* account(userId)
        if (Option.isSome(found)) return Either.right(found.value)
      }
      if (tokens.length === 0 && !accounts) return Either.right(undefined)
      return Either.left(`user ${userId} has no token or account of this gateway now, so no role to run as`)
    })
}

/**
 * The lookup of a configuration: none of it without `authorization.enabled` (every run as it was), `account` the
 * `system_role` of an account id (when the gateway has accounts); with `authz`, a role that may not start runs is
 * refused.
 */
export const make = (
  config: AppConfig,
  account: (id: string) => Effect.Effect<Option.Option<string>>,
  authz?: Authz.Authorization
): Lookup => {
  const lookup = roleOf(config, account)
  return (userId) =>
    Effect.flatMap(
      lookup(userId),
      Either.match({
        onLeft: (why) => Effect.succeed(Either.left(why)),
        onRight: (role) => mayStartRuns(authz, userId, role)
      })
    )
}

/**
 * The lookup of an app: its tokens, and its accounts' `system_role` read when a run starts (such a run is rare, and
 * the account may have changed since), asked of its authorization provider (loaded once here; the gateway's start
 * loaded it already, so one that cannot be loaded stopped the start before this).
 */
export const ofApp = (app: AppConfigService["Type"]): Effect.Effect<Lookup> =>
  Effect.map(
    Effect.orDie(ConfiguredAuthorization.fromConfig(app.config.authorization, UserModule.baseDirOf(app.source))),
    (authz) =>
      make(app.config, (id) =>
        Effect.scoped(AccountStore.open(app.home, app.config.gateway.auth.session_days).pipe(
          Effect.flatMap((accounts) => accounts.byId(id)),
          Effect.map(Option.map((account): string => account.system_role))
        )).pipe(Effect.orElseSucceed(() => Option.none<string>())), authz)
  )
