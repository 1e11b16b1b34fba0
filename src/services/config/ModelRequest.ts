/**
 * The request fields a `models[]` entry may set for every call, as DeerFlow's OpenAI-compatible clients
 * (langchain's `ChatOpenAI` and its subclasses) send them: the sampling fields, `reasoning_effort`, `model_kwargs`
 * and `stream_usage`. Each is typed and bounded here, so a wrong value is a configuration error naming the model
 * and the key rather than a provider's refusal at the first call. Fields that make no sense for an agent that
 * reads one streamed answer (`n`, `logprobs`, `top_logprobs`) are not read: they stay among the ignored keys.
 */
import * as Schema from "effect/Schema"
import { JsonRecord } from "./Fields.js"

/** The most `stop` sequences (OpenAI takes 4; self-hosted servers take more). */
export const MAX_STOP = 16
/** The most `logit_bias` entries. */
export const MAX_LOGIT_BIAS = 1024

const Penalty = Schema.Number.pipe(Schema.between(-2, 2))
const Seed = Schema.Number.pipe(Schema.int(), Schema.filter((n) => Number.isSafeInteger(n) || "a safe integer"))

/** The sampling fields sent as they are written (top-level request fields of the same name). */
export const SAMPLING_KEYS = [
  "top_p",
  "frequency_penalty",
  "presence_penalty",
  "seed",
  "stop",
  "logit_bias",
  "service_tier",
  "verbosity",
  "store"
] as const

/** The fields of a `models[]` entry, to spread into its struct. */
export const fields = {
  top_p: Schema.optional(Schema.Number.pipe(Schema.between(0, 1))),
  frequency_penalty: Schema.optional(Penalty),
  presence_penalty: Schema.optional(Penalty),
  seed: Schema.optional(Seed),
  stop: Schema.optional(
    Schema.Union(Schema.String, Schema.Array(Schema.String).pipe(Schema.maxItems(MAX_STOP)))
  ),
  logit_bias: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Number.pipe(Schema.between(-100, 100)) }).pipe(
      Schema.filter((bias) => Object.keys(bias).length <= MAX_LOGIT_BIAS || `at most ${MAX_LOGIT_BIAS} entries`)
    )
  ),
  service_tier: Schema.optional(Schema.NonEmptyTrimmedString),
  verbosity: Schema.optional(Schema.Literal("low", "medium", "high")),
  store: Schema.optional(Schema.Boolean),
  /** The model's own `reasoning_effort` (sent only with `supports_reasoning_effort`; a run's own wins). */
  reasoning_effort: Schema.optional(Schema.NonEmptyTrimmedString),
  /** Fields added to every request body (langchain's `model_kwargs`; `extra_body` wins on a clash). */
  model_kwargs: Schema.optional(Schema.NullOr(JsonRecord)),
  /** `false`: the stream is not asked for its token usage (`stream_options`), for servers that refuse it. */
  stream_usage: Schema.optional(Schema.Boolean)
}

/** What the fields of `fields` decode to. */
export type Fields = Schema.Struct.Type<typeof fields>

/** The sampling fields a model entry sets, as request fields (unset ones left out). */
export const samplingOf = (config: Partial<Fields>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const key of SAMPLING_KEYS) if (config[key] !== undefined) out[key] = config[key]
  return out
}

/**
 * Problems found under `models[i]` with the entry's name added (`... (model "main")`) when it has one and the
 * message does not say it yet: a long `models` list is read by name, not by position.
 */
export const withModelNames = <I extends { readonly path: string; readonly message: string }>(
  issues: ReadonlyArray<I>,
  raw: unknown
): Array<I> => {
  const models = typeof raw === "object" && raw !== null ? (raw as { readonly models?: unknown }).models : undefined
  return issues.map((issue) => {
    const index = /^models\[(\d+)\]\./.exec(issue.path)?.[1]
    const entry = index === undefined || !Array.isArray(models) ? undefined : models[Number(index)]
    const name = typeof entry === "object" && entry !== null ? (entry as { readonly name?: unknown }).name : undefined
    if (typeof name !== "string" || name.trim() === "" || name.length > 64) return issue
    const named = JSON.stringify(name)
    return issue.message.includes(named) ? issue : { ...issue, message: `${issue.message} (model ${named})` }
  })
}
