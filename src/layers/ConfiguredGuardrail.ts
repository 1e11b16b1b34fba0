/**
 * The guardrail provider of `config.yaml` (`guardrails.provider`): the built-in allowlist (`AllowlistGuardrail`)
 * by its names, or an operator's own provider, a JavaScript module named `module:Export` as
 * `extensions.middlewares` are (a path relative to `config.yaml`, an absolute path, or a package found from its
 * folder; see `UserModule`):
 *
 *   guardrails:
 *     enabled: true
 *     provider:
 *       use: ./my-provider.mjs:MyProvider
 *       config: { blocked: [rm -rf] }   # given to the provider when it is created
 *
 * The export is a class (`new MyProvider(config)`), a function (`MyProvider(config)`, its result awaited) or an
 * object; what it gives has `evaluate(request, { signal })` (or DeerFlow's `aevaluate`), answering a
 * `GuardrailRequest` with `{ allow, reasons?: [{ code, message? }], policy_id?, metadata? }` or a promise of it,
 * and may have a `name` (shown in audit records; default: the export's name). The request is the provider's own
 * copy. A provider that throws, rejects, answers anything else, or takes longer than `guardrails.timeout_seconds`
 * (the signal is then aborted) fails the call with a `GuardrailError`, which `guardrails.fail_closed` turns into a
 * denial (or, when false, lets the call run). A module that cannot be loaded, an export that gives no provider or
 * fails when created is a `GuardrailConfigError` when the agent is built.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as UserModule from "../internal/UserModule.js"
import { AppConfigService, type GuardrailsConfig } from "../services/AppConfig.js"
import * as Guardrail from "../services/Guardrail.js"
import * as AllowlistGuardrail from "./AllowlistGuardrail.js"

const LABEL = "guardrails.provider.use"

/** What a provider may answer: DeerFlow's `GuardrailDecision`, its defaults filled in. */
const Answer = Schema.Struct({
  allow: Schema.Boolean,
  reasons: Schema.optionalWith(
    Schema.Array(Schema.Struct({
      code: Schema.String,
      message: Schema.optionalWith(Schema.String, { default: () => "", nullable: true })
    })),
    { default: () => [], nullable: true }
  ),
  policy_id: Schema.optional(Schema.NullOr(Schema.String)),
  metadata: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })))
})

const { errorText } = UserModule

/** A provider's answer as a decision, or what is wrong with it (pure). */
export const decodeDecision = (answer: unknown): Either.Either<Guardrail.GuardrailDecision, string> =>
  Schema.decodeUnknownEither(Answer, { errors: "all" })(answer).pipe(
    Either.map((a): Guardrail.GuardrailDecision => ({
      allow: a.allow,
      reasons: a.reasons,
      ...(a.policy_id !== undefined && a.policy_id !== null ? { policy_id: a.policy_id } : {}),
      ...(a.metadata !== undefined && a.metadata !== null ? { metadata: a.metadata } : {})
    })),
    Either.mapLeft((error) =>
      "its answer is not a decision ({ allow: boolean, reasons?: [{ code, message }] }): " +
      ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) => `${issue.path.length === 0 ? "" : `${issue.path.join(".")}: `}${issue.message}`)
        .join("; ")
    )
  )

type Evaluate = (request: Guardrail.GuardrailRequest, options: { readonly signal: AbortSignal }) => unknown

/**
 * The port over a provider object and its `evaluate`: each call gets its own copy of the request, an abort
 * signal, and at most `timeout` to answer; a throw, a rejection, a late or malformed answer is a `GuardrailError`.
 */
export const adapt = (
  name: string,
  instance: object,
  evaluate: Evaluate,
  timeout: Duration.DurationInput
): Guardrail.Service => {
  const fail = (message: string, cause?: unknown) =>
    new Guardrail.GuardrailError({ provider: name, message, ...(cause !== undefined ? { cause } : {}) })
  return {
    name,
    evaluate: (request) =>
      Effect.tryPromise({
        try: (signal) => Promise.resolve(evaluate.call(instance, structuredClone(request), { signal })),
        catch: (cause) => fail(`provider '${name}' threw: ${errorText(cause)}`, cause)
      }).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => fail(`provider '${name}' did not answer within ${Duration.format(timeout)}`)
        }),
        Effect.flatMap((answer) =>
          Either.match(decodeDecision(answer), {
            onLeft: (why) => Effect.fail(fail(`provider '${name}': ${why}`)),
            onRight: Effect.succeed
          })
        )
      )
  }
}

/** A Python module path (`my_company.guards`), which only DeerFlow can load. */
const isPythonPath = (module: string) => /^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$/.test(module)

/**
 * The provider of a `module:Export` entry: imported from `baseDir`, created with `config` (a copy), checked. Its
 * creation is bounded by `timeout` as its answers are.
 */
export const load = (
  use: string,
  config: Readonly<Record<string, unknown>>,
  baseDir: string,
  timeout: Duration.DurationInput
): Effect.Effect<Guardrail.Service, Guardrail.GuardrailConfigError> =>
  Effect.gen(function*() {
    const configError = (reason: Guardrail.GuardrailConfigError["reason"], message: string) =>
      new Guardrail.GuardrailConfigError({ reason, use, message })
    const parsed = UserModule.split(use)
    if (parsed === undefined) {
      return yield* configError(
        "unknown_provider",
        `${LABEL}: unknown provider '${use}'. The built-in provider is 'allowlist' (also spelled ` +
          `${AllowlistGuardrail.NAMES.slice(1).map((n) => `'${n}'`).join(", ")}); your own is a JavaScript module ` +
          `and its export, e.g. "./my-provider.mjs:MyProvider"`
      )
    }
    const exported = yield* UserModule.load(LABEL, use, parsed, baseDir).pipe(
      Effect.mapError((error) =>
        configError(
          error.reason,
          error.reason === "module_not_found" && isPythonPath(parsed.module)
            ? `${error.message} (a Python class path from a DeerFlow config cannot be loaded: write the provider ` +
              `as a JavaScript module, see docs/configuration.md#guardrails)`
            : error.message
        )
      )
    )
    const created = yield* UserModule.instantiate(
      exported,
      config,
      timeout,
      `${LABEL}: "${use}"`,
      (message) => configError("init_failed", message)
    )
    const method = UserModule.methodOf<Evaluate>(created, "evaluate") ??
      UserModule.methodOf<Evaluate>(created, "aevaluate")
    if (method === undefined) {
      return yield* configError(
        "not_provider",
        `${LABEL}: "${use}" is not a guardrail provider: it gave ${UserModule.gave(created, "evaluate")}; ` +
          `export a class or function taking the provider's config and giving { evaluate(request) }`
      )
    }
    return adapt(UserModule.nameOf(created as object, parsed.exportName), created as object, method, timeout)
  })

/**
 * The provider named by a `guardrails` section: the built-in allowlist (its `config` checked), or a provider module
 * loaded from `baseDir` (the folder of `config.yaml`). `undefined` when no provider is configured.
 */
export const fromConfig = (
  config: GuardrailsConfig,
  baseDir: string
): Effect.Effect<Guardrail.Service | undefined, Guardrail.GuardrailConfigError> => {
  const provider = config.provider
  if (provider === undefined || provider === null) return Effect.succeed(undefined)
  if (AllowlistGuardrail.isAllowlist(provider.use)) return AllowlistGuardrail.fromConfig(config)
  return load(provider.use, provider.config ?? {}, baseDir, Duration.seconds(config.timeout_seconds))
}

/**
 * The provider from the loaded `config.yaml` (`guardrails.provider`). Fails with a config error when the
 * section names a provider that cannot be used, or when no provider is configured.
 */
export const layerFromConfig: () => Layer.Layer<
  Guardrail.GuardrailProvider,
  Guardrail.GuardrailConfigError,
  AppConfigService
> = () =>
  Layer.effect(
    Guardrail.GuardrailProvider,
    Effect.flatMap(AppConfigService, ({ config, source }) =>
      Effect.flatMap(fromConfig(config.guardrails, UserModule.baseDirOf(source)), (provider) =>
        provider !== undefined ? Effect.succeed(provider) : Effect.fail(
          new Guardrail.GuardrailConfigError({
            reason: "unknown_provider",
            use: "",
            message: "guardrails.provider: no provider is configured (set guardrails.provider.use, e.g. 'allowlist')"
          })
        )))
  )
