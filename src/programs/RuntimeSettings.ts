/**
 * A run's settings (SPEC §3.1): LangGraph's `configurable` and `context` merged as one object (`context` winning,
 * internal `__` keys dropped), decoded with Schema into what a run may ask for; a bad value is a typed, readable
 * error naming each key.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as CustomAgents from "./CustomAgents.js"

const Effort = Schema.Literal("minimal", "low", "medium", "high")

/** What a run may ask for (DeerFlow's runtime keys, SPEC §3.1). Unknown keys are ignored. */
export const RunSettings = Schema.Struct({
  model_name: Schema.optional(Schema.NullOr(Schema.String)),
  model: Schema.optional(Schema.NullOr(Schema.String)),
  is_plan_mode: Schema.optional(Schema.Boolean),
  subagent_enabled: Schema.optional(Schema.Boolean),
  max_concurrent_subagents: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  max_total_subagents: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive())),
  is_bootstrap: Schema.optional(Schema.Boolean),
  non_interactive: Schema.optional(Schema.Boolean),
  agent_name: Schema.optional(Schema.NullOr(CustomAgents.AgentName)),
  thinking_enabled: Schema.optional(Schema.Boolean),
  reasoning_effort: Schema.optional(Schema.NullOr(Effort)),
  recursion_limit: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.positive()))
})
export type RunSettings = typeof RunSettings.Type

/**
 * Run settings that do not decode: what was wrong, where. `missingAgent`: the custom agent the settings name
 * does not exist (for this user), which a gateway answers as an unknown assistant. `unauthorized`: the run's role
 * may use no model (or the authorization provider could not say, under `fail_closed`).
 */
export class SettingsError extends Schema.TaggedError<SettingsError>()("SettingsError", {
  message: Schema.String,
  missingAgent: Schema.optional(Schema.String),
  unauthorized: Schema.optional(Schema.Boolean)
}) {}

/**
 * The runtime merge (SPEC §3.1): `configurable` then `context` (context wins); keys starting with `__` are
 * internal and never taken from a caller.
 */
export const mergeRuntime = (configurable: unknown, context: unknown): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const source of [configurable, context]) {
    if (typeof source !== "object" || source === null || Array.isArray(source)) continue
    for (const [key, value] of Object.entries(source)) if (!key.startsWith("__")) out[key] = value
  }
  return out
}

const decodeSettings = Schema.decodeUnknownEither(RunSettings, { errors: "all", onExcessProperty: "ignore" })

/** Decodes merged settings; a bad value is a `SettingsError` naming each key and problem. */
export const settingsOf = (raw: unknown): Either.Either<RunSettings, SettingsError> =>
  Either.mapLeft(decodeSettings(raw ?? {}), (error) =>
    new SettingsError({
      message: ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) => `${issue.path.join(".") || "(settings)"}: ${issue.message}`)
        .join("; ")
    }))
