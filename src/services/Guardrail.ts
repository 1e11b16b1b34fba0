/**
 * The guardrail port: a policy provider that decides, before a tool runs, whether the call is allowed.
 * The Guardrail middleware builds a `GuardrailRequest` from the tool call and the run, asks the provider,
 * and turns a denial into an error ToolMessage the model can read (SPEC §5.9).
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** What the provider is asked: the call and who makes it (DeerFlow's `GuardrailRequest`). */
export const GuardrailRequest = Schema.Struct({
  tool_name: Schema.String,
  tool_input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** The configured passport (`guardrails.passport`), if any. */
  agent_id: Schema.NullOr(Schema.String),
  thread_id: Schema.String,
  run_id: Schema.String,
  tool_call_id: Schema.String,
  is_subagent: Schema.Boolean,
  /** ISO-8601 time of the request. */
  timestamp: Schema.String,
  user_id: Schema.NullOr(Schema.String),
  user_role: Schema.NullOr(Schema.String),
  oauth_provider: Schema.NullOr(Schema.String),
  oauth_id: Schema.NullOr(Schema.String),
  channel_user_id: Schema.NullOr(Schema.String),
  is_internal: Schema.Boolean,
  authz_attributes: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type GuardrailRequest = typeof GuardrailRequest.Type

/** One reason of a decision: a machine code (`oap.tool_not_allowed`) and a readable message. */
export const GuardrailReason = Schema.Struct({ code: Schema.String, message: Schema.String })
export type GuardrailReason = typeof GuardrailReason.Type

/** The provider's answer. A denial should carry at least one reason. */
export const GuardrailDecision = Schema.Struct({
  allow: Schema.Boolean,
  reasons: Schema.Array(GuardrailReason),
  policy_id: Schema.optional(Schema.String),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type GuardrailDecision = typeof GuardrailDecision.Type

/** The reason code of a denial caused by a provider failure under `fail_closed`. */
export const EVALUATOR_ERROR = "oap.evaluator_error"
/** The reason code of a denial that carried no reason. */
export const DENIED = "oap.denied"
/** The reason code of a tool missing from an allowlist, or on a denylist (one code for both, as DeerFlow's). */
export const TOOL_NOT_ALLOWED = "oap.tool_not_allowed"

/** The provider could not decide (its backend failed, timed out, answered nonsense). */
export class GuardrailError extends Schema.TaggedError<GuardrailError>()("GuardrailError", {
  provider: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * `guardrails.provider` names no known provider, its `config` does not fit the provider, or its module
 * (`module:Export`) cannot be loaded, does not export a provider, or failed when created.
 */
export class GuardrailConfigError extends Schema.TaggedError<GuardrailConfigError>()("GuardrailConfigError", {
  reason: Schema.Literal(
    "unknown_provider",
    "invalid_config",
    "module_not_found",
    "import_failed",
    "export_missing",
    "not_provider",
    "init_failed"
  ),
  /** The `use` value from the config. */
  use: Schema.String,
  message: Schema.String
}) {}

/** A policy provider. */
export interface Service {
  /** A short name, shown in audit records. */
  readonly name: string
  readonly evaluate: (request: GuardrailRequest) => Effect.Effect<GuardrailDecision, GuardrailError>
}

/** The configured guardrail provider (app-level: built once per process). */
export class GuardrailProvider extends Context.Tag("antler/GuardrailProvider")<GuardrailProvider, Service>() {}

/** An allowing decision. */
export const allow: GuardrailDecision = { allow: true, reasons: [] }

/** A denying decision with one reason. */
export const deny = (code: string, message: string, policyId?: string): GuardrailDecision => ({
  allow: false,
  reasons: [{ code, message }],
  ...(policyId !== undefined ? { policy_id: policyId } : {})
})
