/**
 * The guard sections of `config.yaml`: model-call retries and the circuit breaker, guardrails, loop detection, tool
 * progress, the token budget and the safety finish reason (docs/configuration.md, "Guards").
 */
import * as Schema from "effect/Schema"
import { Fraction, NonNegativeInt, PositiveInt, withDefault } from "./Fields.js"

/**
 * What a guard loads by name (`guardrails.provider`, a `safety_finish_reason.detectors` entry): `use`, a built-in
 * name, DeerFlow's class path or a JavaScript module (`./file.mjs:Export`), with its `config`.
 */
export const ModuleEntry = Schema.Struct({
  use: Schema.String,
  config: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })))
})

export const LlmCallConfig = Schema.Struct({
  retry_max_attempts: withDefault(PositiveInt, () => 3),
  retry_base_delay_ms: withDefault(NonNegativeInt, () => 1000),
  retry_cap_delay_ms: withDefault(NonNegativeInt, () => 8000),
  burst_retry_base_delay_ms: withDefault(NonNegativeInt, () => 5000),
  max_concurrent_calls: withDefault(NonNegativeInt, () => 0),
  /**
   * The longest wait taken from a provider's `retry-after` / `retry-after-ms` (not in DeerFlow, which waits
   * whatever it is told: `retry-after: 86400` would be a day). Longer requests wait this long.
   */
  max_retry_after_ms: withDefault(NonNegativeInt, () => 60_000)
})
export type LlmCallConfig = typeof LlmCallConfig.Type

export const CircuitBreakerConfig = Schema.Struct({
  failure_threshold: withDefault(PositiveInt, () => 5),
  recovery_timeout_sec: withDefault(Schema.Number.pipe(Schema.nonNegative()), () => 60)
})
export type CircuitBreakerConfig = typeof CircuitBreakerConfig.Type

export const GuardrailsConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  fail_closed: withDefault(Schema.Boolean, () => true),
  passport: Schema.optional(Schema.NullOr(Schema.String)),
  /**
   * How long a provider may take to answer one call (or to be created), in seconds; past it the call is a provider
   * failure, handled by `fail_closed`. Antler's bound: DeerFlow waits for its provider without one.
   */
  timeout_seconds: withDefault(Schema.Number.pipe(Schema.positive()), () => 30),
  provider: Schema.optional(
    Schema.NullOr(
      ModuleEntry
    )
  )
})
export type GuardrailsConfig = typeof GuardrailsConfig.Type

export const LoopDetectionConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  warn_threshold: withDefault(PositiveInt, () => 3),
  hard_limit: withDefault(PositiveInt, () => 5),
  window_size: withDefault(PositiveInt, () => 20),
  max_tracked_threads: withDefault(PositiveInt, () => 100),
  tool_freq_warn: withDefault(PositiveInt, () => 30),
  tool_freq_hard_limit: withDefault(PositiveInt, () => 50),
  tool_freq_overrides: withDefault(
    Schema.Record({
      key: Schema.String,
      value: Schema.Struct({ warn: PositiveInt, hard_limit: PositiveInt }).pipe(
        Schema.filter((o) => o.hard_limit >= o.warn || "hard_limit must be >= warn")
      )
    }),
    () => ({})
  )
}).pipe(
  Schema.filter((c) => c.hard_limit >= c.warn_threshold || "hard_limit must be >= warn_threshold"),
  Schema.filter((c) => c.tool_freq_hard_limit >= c.tool_freq_warn || "tool_freq_hard_limit must be >= tool_freq_warn")
)
export type LoopDetectionConfig = typeof LoopDetectionConfig.Type

/** Tool progress (SPEC §5.12): the per-(thread, tool) stagnation guard. Off by default. */
export const ToolProgressConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  /** Consecutive problem results of one tool before it is WARNED. */
  stagnation_threshold: withDefault(PositiveInt, () => 3),
  /** Further problems after WARNED before a tool the model cannot fix by retrying is BLOCKED. */
  warn_escalation_count: withDefault(PositiveInt, () => 2),
  /** Whether hints reach the model. */
  inject_assessment: withDefault(Schema.Boolean, () => true),
  jaccard_similarity_threshold: withDefault(Fraction, () => 0.8),
  /** Fewer distinct words than this skip the near-duplicate check; 0 (or less, as DeerFlow takes it) compares all. */
  min_word_count_for_similarity: withDefault(Schema.Int, () => 10),
  exempt_tools: withDefault(
    Schema.Array(Schema.String),
    () => ["ask_clarification", "write_todos", "present_files", "task"]
  ),
  max_tracked_threads: withDefault(PositiveInt, () => 100)
})
export type ToolProgressConfig = typeof ToolProgressConfig.Type

export const TokenBudgetConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  max_tokens: withDefault(Schema.Number.pipe(Schema.int(), Schema.greaterThanOrEqualTo(1000)), () => 200000),
  max_input_tokens: Schema.optional(Schema.NullOr(PositiveInt)),
  max_output_tokens: Schema.optional(Schema.NullOr(PositiveInt)),
  warn_threshold: withDefault(Fraction, () => 0.8),
  hard_stop_threshold: withDefault(Fraction, () => 1.0)
}).pipe(
  Schema.filter((c) => c.hard_stop_threshold >= c.warn_threshold || "hard_stop_threshold must be >= warn_threshold")
)
export type TokenBudgetConfig = typeof TokenBudgetConfig.Type

/** Why an explicit empty `safety_finish_reason.detectors` list is refused (it would silently disable the guard). */
export const EMPTY_DETECTORS_MESSAGE = "an empty list of detectors would leave the safety guard checking nothing; " +
  "leave `detectors` out to use the built-in ones, or set `enabled: false` to turn the guard off"

export const SafetyFinishReasonConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  detectors: Schema.optional(
    Schema.NullOr(
      Schema.Array(
        ModuleEntry
      ).pipe(Schema.filter((detectors) => detectors.length > 0 || EMPTY_DETECTORS_MESSAGE))
    )
  )
})
export type SafetyFinishReasonConfig = typeof SafetyFinishReasonConfig.Type
