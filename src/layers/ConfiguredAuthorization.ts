/**
 * The authorization provider of `config.yaml` (`authorization.provider`): DeerFlow's built-in RBAC provider
 * (`deerflow.authz.rbac:RbacAuthorizationProvider`, `RbacAuthorization`), or an operator's own, a JavaScript module
 * named `module:Export` as a guardrail provider is (a path relative to `config.yaml`, an absolute path, or a package
 * found from its folder; see `UserModule`), DeerFlow's custom provider loaded by class path:
 *
 *   authorization:
 *     enabled: true
 *     provider:
 *       use: ./my-authz.mjs:MyAuthz
 *       config: { admins: [alice] }   # given to the provider when it is created
 *
 * The export is a class (`new MyAuthz(config)`), a function (`MyAuthz(config)`, its result awaited) or an object;
 * what it gives has DeerFlow's `authorize(request)` (or `aauthorize`), answering an `AuthzRequest`
 * (`{ principal: { user_id, role, is_internal, attributes }, resource, action, target, context }`) with
 * `{ allow, reasons?: [{ code, message? }], policy_id?, metadata? }` or a promise of it, and may have
 * `filter_resources(principal, resource_type, candidates)` answering the names (a list of strings) the principal may
 * see; without it each candidate is asked with `authorize` (action `list`). Each call gets its own copy of its
 * arguments. A provider that throws, rejects, answers anything else or takes longer than 30 s fails the question
 * with an `AuthorizationError`, which `authorization.fail_closed` turns into a denial. A module that cannot be
 * loaded, an export that gives no provider or fails when created is an `AuthorizationConfigError` when the agent
 * (or the gateway) is built.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as UserModule from "../internal/UserModule.js"
import * as Authz from "../services/Authorization.js"
import type { AuthorizationConfig } from "../services/config/Authorization.js"
import { RBAC_USE } from "../services/config/Authorization.js"
import * as ConfiguredGuardrail from "./ConfiguredGuardrail.js"
import * as RbacAuthorization from "./RbacAuthorization.js"

const LABEL = "authorization.provider.use"

/** How long a provider may take to answer one question, or to be created. */
export const TIMEOUT = Duration.seconds(30)

const { errorText } = UserModule

type Method = (...args: ReadonlyArray<unknown>) => unknown

/**
 * The port over a provider object: `authorize` (required) and `filter_resources` (optional). Each call gets a copy
 * of its arguments and at most `timeout` to answer; a throw, a rejection, a late or malformed answer is an
 * `AuthorizationError` naming the provider.
 */
export const adapt = (
  name: string,
  instance: object,
  authorize: Method,
  filter: Method | undefined,
  timeout: Duration.DurationInput = TIMEOUT
): Authz.Provider => {
  const fail = (message: string) => new Authz.AuthorizationError({ message: `provider '${name}': ${message}` })
  const call = (method: Method, what: string, args: ReadonlyArray<unknown>) =>
    Effect.tryPromise({
      try: () => Promise.resolve(method.apply(instance, structuredClone(args) as Array<unknown>)),
      catch: (cause) => fail(`${what} threw: ${errorText(cause)}`)
    }).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () => fail(`${what} did not answer within ${Duration.format(timeout)}`)
      })
    )
  const ask = (request: Authz.AuthzRequest) =>
    Effect.flatMap(call(authorize, "authorize", [request]), (answer) =>
      Either.match(ConfiguredGuardrail.decodeDecision(answer), {
        onLeft: (why) => Effect.fail(fail(`authorize: ${why}`)),
        onRight: Effect.succeed
      }))
  return {
    name,
    authorize: ask,
    filterResources: (principal, resourceType, candidates) =>
      filter === undefined
        ? Effect.map(
          Effect.forEach(candidates, (target) =>
            Effect.map(ask({ principal, resource: resourceType, action: "list", target }), (d) => d.allow)),
          (allowed) => candidates.filter((_, i) => allowed[i])
        )
        : Effect.flatMap(call(filter, "filter_resources", [principal, resourceType, [...candidates]]), (answer) =>
          Array.isArray(answer) && answer.every((n) => typeof n === "string")
            ? Effect.succeed(answer as ReadonlyArray<string>)
            : Effect.fail(fail("filter_resources must answer a list of names (strings)")))
  }
}

/** The provider of a `module:Export` entry: imported from `baseDir`, created with `config` (a copy), checked. */
export const load = (
  use: string,
  config: Readonly<Record<string, unknown>>,
  baseDir: string,
  timeout: Duration.DurationInput = TIMEOUT
): Effect.Effect<Authz.Provider, Authz.AuthorizationConfigError> =>
  Effect.gen(function*() {
    const configError = (reason: Authz.AuthorizationConfigError["reason"], message: string) =>
      new Authz.AuthorizationConfigError({ reason, use, message })
    const parsed = UserModule.split(use)
    if (parsed === undefined) {
      return yield* configError(
        "module_not_found",
        `${LABEL}: "${use}" is not a provider: the built-in one is ${RBAC_USE}; your own is a JavaScript module and ` +
          `its export, e.g. "./my-authz.mjs:MyAuthz"`
      )
    }
    const exported = yield* Effect.mapError(
      UserModule.load(LABEL, use, parsed, baseDir),
      (error) => configError(error.reason, error.message)
    )
    const created = yield* UserModule.instantiate(
      exported,
      config,
      timeout,
      `${LABEL}: "${use}"`,
      (message) => configError("init_failed", message)
    )
    const method = (key: string) => UserModule.methodOf<Method>(created, key)
    const authorize = method("authorize") ?? method("aauthorize")
    if (authorize === undefined) {
      return yield* configError(
        "not_provider",
        `${LABEL}: "${use}" is not an authorization provider: it gave ${UserModule.gave(created, "authorize")}; ` +
          "export a class or function taking the provider's config and giving " +
          "{ authorize(request), filter_resources?(principal, type, names) }"
      )
    }
    const name = UserModule.nameOf(created as object, parsed.exportName)
    return adapt(name, created as object, authorize, method("filter_resources") ?? method("filterResources"), timeout)
  })

/**
 * The authorization of a configuration: none when `authorization.enabled` is false; the built-in RBAC provider, or
 * the provider module `use` names, loaded from `baseDir` (the folder of `config.yaml`).
 */
export const fromConfig = (
  section: AuthorizationConfig,
  baseDir: string
): Effect.Effect<Authz.Authorization | undefined, Authz.AuthorizationConfigError> => {
  if (!section.enabled || section.provider == null) return Effect.succeed(undefined)
  if (section.provider.use === RBAC_USE) return Effect.succeed(RbacAuthorization.fromConfig(section))
  return Effect.map(load(section.provider.use, section.provider.config, baseDir), (provider) => ({
    provider,
    failClosed: section.fail_closed,
    defaultRole: section.default_role
  }))
}
