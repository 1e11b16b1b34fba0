/**
 * The built-in guardrail provider: a tool allowlist and denylist (DeerFlow's
 * `deerflow.guardrails.builtin:AllowlistProvider`), from `guardrails.provider` of `config.yaml` (an operator's own
 * provider module is `ConfiguredGuardrail`'s).
 *
 *   guardrails:
 *     enabled: true
 *     provider:
 *       use: allowlist            # or deerflow.guardrails.builtin:AllowlistProvider
 *       config: { allowed_tools: [read_file, ls], denied_tools: [bash] }
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { GuardrailsConfig } from "../services/AppConfig.js"
import * as Guardrail from "../services/Guardrail.js"

/** The provider's options (`guardrails.provider.config`). */
export const AllowlistOptions = Schema.Struct({
  /** When set, only these tools may run (`[]` denies every tool). */
  allowed_tools: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  /** These tools never run. */
  denied_tools: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  /** Injected by DeerFlow into providers that accept it; meaningless here, accepted so DeerFlow configs load. */
  framework: Schema.optional(Schema.String)
})
export type AllowlistOptions = typeof AllowlistOptions.Type

/** The `use` values that name this provider. */
export const NAMES: ReadonlyArray<string> = [
  "allowlist",
  "AllowlistProvider",
  "deerflow.guardrails.builtin:AllowlistProvider",
  "deerflow.guardrails.builtin.AllowlistProvider",
  "deerflow.guardrails:AllowlistProvider"
]

/** Whether a `use` value names the built-in allowlist provider. */
export const isAllowlist = (use: string): boolean => NAMES.includes(use.trim())

/**
 * Decides one tool name against the lists (pure). The allowlist is checked first, as in DeerFlow; either list
 * denies with `oap.tool_not_allowed` and DeerFlow's reason.
 */
export const decide = (options: AllowlistOptions, toolName: string): Guardrail.GuardrailDecision => {
  const allowed = options.allowed_tools
  if (allowed !== undefined && allowed !== null && !allowed.includes(toolName)) {
    return Guardrail.deny(Guardrail.TOOL_NOT_ALLOWED, `tool '${toolName}' not in allowlist`)
  }
  const denied = options.denied_tools
  if (denied !== undefined && denied !== null && denied.includes(toolName)) {
    return Guardrail.deny(Guardrail.TOOL_NOT_ALLOWED, `tool '${toolName}' is denied`)
  }
  return Guardrail.allow
}

/** The allowlist provider. */
export const make = (options: AllowlistOptions = {}): Guardrail.Service => ({
  name: "allowlist",
  evaluate: (request) => Effect.succeed(decide(options, request.tool_name))
})

/** A layer providing the allowlist provider with these options. */
export const layer = (options: AllowlistOptions = {}): Layer.Layer<Guardrail.GuardrailProvider> =>
  Layer.succeed(Guardrail.GuardrailProvider, make(options))

/**
 * The built-in provider named by `guardrails.provider`: any other `use` is a readable config error here (see
 * `ConfiguredGuardrail.fromConfig` for providers of the operator's own), and so is a `config` that does not fit
 * (an unknown key, a list that is not a list of names). `undefined` when no provider is configured.
 */
export const fromConfig = (
  config: GuardrailsConfig
): Either.Either<Guardrail.Service | undefined, Guardrail.GuardrailConfigError> => {
  const provider = config.provider
  if (provider === undefined || provider === null) return Either.right(undefined)
  if (!isAllowlist(provider.use)) {
    return Either.left(
      new Guardrail.GuardrailConfigError({
        reason: "unknown_provider",
        use: provider.use,
        message: `guardrails.provider.use: unknown provider '${provider.use}'. ` +
          `The built-in provider is 'allowlist' (also spelled ${NAMES.slice(1).map((n) => `'${n}'`).join(", ")}).`
      })
    )
  }
  const decoded = Schema.decodeUnknownEither(AllowlistOptions, { errors: "all", onExcessProperty: "error" })(
    provider.config ?? {}
  )
  if (Either.isLeft(decoded)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
      .map((issue) => `guardrails.provider.config${issue.path.map((p) => `.${String(p)}`).join("")}: ${issue.message}`)
      .join("; ")
    return Either.left(
      new Guardrail.GuardrailConfigError({ reason: "invalid_config", use: provider.use, message: issues })
    )
  }
  return Either.right(make(decoded.right))
}
