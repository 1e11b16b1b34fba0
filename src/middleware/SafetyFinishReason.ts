/**
 * SafetyFinishReason (SPEC-deerflow §5.32): when the provider ended a response with a safety signal, the
 * tool calls in it are not run (their arguments may be cut off or unsafe), and the user is told why.
 *
 * It looks at a response only when it calls tools, or when it shows no text and calls none. Detectors read
 * `response_metadata` first, then `additional_kwargs`; the first hit wins:
 * - OpenAI-compatible: `finish_reason` in a configurable list (default `content_filter`; case-insensitive);
 * - Anthropic: `stop_reason` in a list (default `refusal`);
 * - Gemini: `finish_reason` in `SAFETY, BLOCKLIST, PROHIBITED_CONTENT, SPII, RECITATION, IMAGE_SAFETY,
 *   IMAGE_PROHIBITED_CONTENT, IMAGE_RECITATION` (upper-case compare).
 * On a hit: the message (same id) loses every tool call but keeps the provider's finish reason, gets an
 * explanation appended and `additional_kwargs.safety_termination`; a `safety_termination` custom event is
 * emitted (names and ids only, never arguments), which the gateway's run journal keeps as DeerFlow's
 * `middleware:safety_termination` audit record; the stop reason becomes `safety_capped`.
 */
import * as Either from "effect/Either"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as PythonRepr from "../internal/PythonRepr.js"
import * as UserModule from "../internal/UserModule.js"
import { EMPTY_DETECTORS_MESSAGE, SafetyFinishReasonConfig } from "../services/AppConfig.js"
import type { ModelResponse } from "../services/ModelService.js"
import { RunContext } from "../services/RunContext.js"
import { emitCustom } from "../services/RunEvents.js"
import type { AIMessage, JsonObject } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as HardStop from "./HardStop.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"

/** A safety signal found on a response. */
export interface SafetyTermination {
  readonly detector: string
  /** The metadata field that carried it (`finish_reason`, `stop_reason`). */
  readonly reason_field: string
  /** Its value as the provider sent it. */
  readonly reason_value: string
  /** Provider details worth keeping (Azure `content_filter_results`, Gemini `safety_ratings`). */
  readonly extras: JsonObject
}

/** A detector: a name and a side-effect-free check of one message. */
export interface Detector {
  readonly name: string
  readonly detect: (message: AIMessage) => SafetyTermination | undefined
}

/** Python's truthiness, as DeerFlow's `if filter_results:` reads it: no empty objects, arrays or zeros. */
const truthy = (value: unknown): boolean =>
  Array.isArray(value)
    ? value.length > 0
    : typeof value === "object" && value !== null
    ? Object.keys(value).length > 0
    : value !== undefined && value !== null && value !== false && value !== "" && value !== 0

const extrasFrom = (message: AIMessage, key: string): JsonObject => {
  const value = message.response_metadata?.[key]
  return truthy(value) ? { [key]: value! } : {}
}

const lower = (s: string) => s.toLowerCase()
const upper = (s: string) => s.toUpperCase()

/** A detector that fires when a metadata field holds one of `values` (compared after `fold`). */
const fieldDetector = (
  name: string,
  field: "finish_reason" | "stop_reason",
  values: ReadonlyArray<string>,
  fold: (value: string) => string,
  extrasKey?: string
): Detector => {
  const wanted = new Set(values.map(fold))
  return {
    name,
    detect: (message) => {
      const value = HardStop.metadataString(message, field)
      if (value === undefined || !wanted.has(fold(value))) return undefined
      const extras = extrasKey === undefined ? {} : extrasFrom(message, extrasKey)
      return { detector: name, reason_field: field, reason_value: value, extras }
    }
  }
}

/** OpenAI-compatible `finish_reason` (OpenAI, Azure, DeepSeek, vLLM...); add gateway values via `finishReasons`. */
export const openAiContentFilter = (finishReasons: ReadonlyArray<string> = ["content_filter"]): Detector =>
  fieldDetector("openai_compatible_content_filter", "finish_reason", finishReasons, lower, "content_filter_results")

/** Anthropic `stop_reason` (default `refusal`). */
export const anthropicRefusal = (stopReasons: ReadonlyArray<string> = ["refusal"]): Detector =>
  fieldDetector("anthropic_refusal", "stop_reason", stopReasons, lower)

/** Gemini's safety-related finish reasons. `MAX_TOKENS` is a length stop, not safety (see ModelLengthFinishReason). */
export const GEMINI_SAFETY_REASONS: ReadonlyArray<string> = [
  "SAFETY",
  "BLOCKLIST",
  "PROHIBITED_CONTENT",
  "SPII",
  "RECITATION",
  "IMAGE_SAFETY",
  "IMAGE_PROHIBITED_CONTENT",
  "IMAGE_RECITATION"
]

/** Gemini / Vertex `finish_reason` (upper-case compare). */
export const geminiSafety = (finishReasons: ReadonlyArray<string> = GEMINI_SAFETY_REASONS): Detector =>
  fieldDetector("gemini_safety", "finish_reason", finishReasons, upper, "safety_ratings")

/** The built-in detectors, in the order they are tried. */
export const defaultDetectors = (): ReadonlyArray<Detector> => [
  openAiContentFilter(),
  anthropicRefusal(),
  geminiSafety()
]

// ---------------------------------------------------------------------------------------------------------
// Configured detectors

/**
 * `safety_finish_reason.detectors` names a detector that does not exist, gives it bad settings, or names a detector
 * module that cannot be loaded, gives no detector or fails when created.
 */
export class SafetyDetectorConfigError extends Schema.TaggedError<SafetyDetectorConfigError>()(
  "SafetyDetectorConfigError",
  {
    reason: Schema.Literal(
      "unknown_detector",
      "invalid_config",
      "no_detectors",
      "module_not_found",
      "import_failed",
      "export_missing",
      "not_detector",
      "init_failed"
    ),
    /** Where in the config: `safety_finish_reason.detectors[i]`. */
    path: Schema.String,
    use: Schema.String,
    detail: Schema.String
  }
) {
  override get message() {
    return this.reason === "no_detectors"
      ? `${this.path}: ${this.detail}`
      : `${this.path} (use: ${JSON.stringify(this.use)}): ${this.detail}`
  }
}

const noDetectors = (path: string) =>
  new SafetyDetectorConfigError({ reason: "no_detectors", path, use: "", detail: EMPTY_DETECTORS_MESSAGE })

const Reasons = Schema.NonEmptyArray(Schema.NonEmptyTrimmedString)
const FinishReasonsSettings = Schema.Struct({ finish_reasons: Schema.optional(Reasons) })
const StopReasonsSettings = Schema.Struct({ stop_reasons: Schema.optional(Reasons) })

type Builtin = (settings: unknown) => Either.Either<Detector, ParseResult.ParseError>

const decodeSettings = <A, I>(schema: Schema.Schema<A, I>) =>
  Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })

const builtins: ReadonlyArray<readonly [ReadonlyArray<string>, Builtin]> = [
  [
    ["openai_compatible_content_filter", "OpenAICompatibleContentFilterDetector"],
    (raw) => Either.map(decodeSettings(FinishReasonsSettings)(raw), (s) => openAiContentFilter(s.finish_reasons))
  ],
  [
    ["anthropic_refusal", "AnthropicRefusalDetector"],
    (raw) => Either.map(decodeSettings(StopReasonsSettings)(raw), (s) => anthropicRefusal(s.stop_reasons))
  ],
  [
    ["gemini_safety", "GeminiSafetyDetector"],
    (raw) => Either.map(decodeSettings(FinishReasonsSettings)(raw), (s) => geminiSafety(s.finish_reasons))
  ]
]

const builtinNames = builtins.map(([names]) => names[0]).join(", ")

/**
 * The built-in detector of one `safety_finish_reason.detectors` entry (at `path`): by its name (`gemini_safety`)
 * or DeerFlow's class name, with or without a module path
 * (`deerflow.agents.middlewares.safety_termination_detectors:GeminiSafetyDetector`). Settings go in `config`.
 */
export const resolveDetector = (
  entry: { readonly use: string; readonly config?: Readonly<Record<string, unknown>> | null | undefined },
  path: string
): Either.Either<Detector, SafetyDetectorConfigError> => {
  const short = entry.use.split(/[:.]/).pop() ?? entry.use
  if (UserModule.isScriptEntry(entry.use)) {
    return Either.left(new SafetyDetectorConfigError({
      reason: "unknown_detector",
      path,
      use: entry.use,
      detail: "a detector module is loaded when the agent is built (SafetyDetectorModules.fromConfig), not here"
    }))
  }
  const found = builtins.find(([names]) => names.includes(short))
  if (found === undefined) {
    return Either.left(new SafetyDetectorConfigError({
      reason: "unknown_detector",
      path,
      use: entry.use,
      detail: `no such detector; the built-in detectors are ${builtinNames}, and your own is a JavaScript module ` +
        `and its export ("./my-detector.mjs:MyDetector")`
    }))
  }
  return Either.mapLeft(found[1](entry.config ?? {}), (error) =>
    new SafetyDetectorConfigError({
      reason: "invalid_config",
      path: `${path}.config`,
      use: entry.use,
      detail: ParseResult.TreeFormatter.formatErrorSync(error)
    }))
}

/**
 * The detectors a config asks for: the built-ins when `detectors` is absent, else each entry resolved by
 * `resolveDetector` (detector modules of the operator's own are `SafetyDetectorModules`').
 */
export const resolveDetectors = (
  config: SafetyFinishReasonConfig
): Either.Either<ReadonlyArray<Detector>, SafetyDetectorConfigError> => {
  if (config.detectors == null) return Either.right(defaultDetectors())
  if (config.detectors.length === 0) return Either.left(noDetectors("safety_finish_reason.detectors"))
  const out: Array<Detector> = []
  for (let i = 0; i < config.detectors.length; i++) {
    const detector = resolveDetector(config.detectors[i]!, `safety_finish_reason.detectors[${i}]`)
    if (Either.isLeft(detector)) return Either.left(detector.left)
    out.push(detector.right)
  }
  return Either.right(out)
}

// ---------------------------------------------------------------------------------------------------------
// Pure decision

/** Whether a response is looked at: it calls tools, or it shows no text and calls none. */
export const shouldInspect = (message: AIMessage): boolean =>
  (message.tool_calls?.length ?? 0) > 0 || (message.invalid_tool_calls?.length ?? 0) > 0 ||
  !HardStop.hasVisibleText(message)

/** The first detector hit. A detector that throws counts as no hit (a bug there must not break the run). */
export const detect = (message: AIMessage, detectors: ReadonlyArray<Detector>): SafetyTermination | undefined => {
  for (const detector of detectors) {
    try {
      const hit = detector.detect(message)
      if (hit !== undefined) return hit
    } catch {
      // fall through to the next detector
    }
  }
  return undefined
}

/** The names of every tool call in the message (structured first, then invalid ones); a nameless call is `unknown`. */
export const toolCallNames = (message: AIMessage): ReadonlyArray<string> => [
  ...(message.tool_calls ?? []).map((call) => call.name || "unknown"),
  ...(message.invalid_tool_calls ?? []).map((call) => call.name || "unknown")
]

/**
 * The explanation appended to the message: DeerFlow's `_USER_FACING_MESSAGE` (tool calls suppressed) or
 * `_USER_FACING_EMPTY_MESSAGE` (no calls, no text), word for word, the reason's value as Python's `repr`.
 */
export const explanation = (hit: SafetyTermination, suppressed: ReadonlyArray<string>): string => {
  const signal = `${hit.reason_field}=${PythonRepr.stringRepr(hit.reason_value)}, ` +
    `detector=${PythonRepr.stringRepr(hit.detector)}`
  if (suppressed.length > 0) {
    return `The model provider stopped this response with a safety-related signal (${signal}). Any tool calls ` +
      "produced in this turn were suppressed because their arguments may be truncated and unsafe to execute. " +
      "Please rephrase the request or ask for a narrower output."
  }
  return `The model provider stopped this response with a safety-related signal (${signal}) and returned no ` +
    "content. Please rephrase your request or start a new conversation."
}

/** The ids of the tool calls suppressed (the non-empty ones), for the audit record. */
export const suppressedIds = (message: AIMessage): ReadonlyArray<string> =>
  [...(message.tool_calls ?? []), ...(message.invalid_tool_calls ?? [])].flatMap((call) =>
    typeof call.id === "string" && call.id !== "" ? [call.id] : []
  )

/** What is recorded in `additional_kwargs.safety_termination` (and, without `extras`, in the event). */
export interface TerminationRecord {
  readonly detector: string
  readonly reason_field: string
  readonly reason_value: string
  readonly suppressed_tool_call_count: number
  readonly suppressed_tool_call_names: ReadonlyArray<string>
  readonly extras: JsonObject
}

/** The rewritten message and its record. */
export const terminate = (
  message: AIMessage,
  hit: SafetyTermination
): { readonly message: AIMessage; readonly record: TerminationRecord } => {
  const names = toolCallNames(message)
  const record: TerminationRecord = {
    detector: hit.detector,
    reason_field: hit.reason_field,
    reason_value: hit.reason_value,
    suppressed_tool_call_count: names.length,
    suppressed_tool_call_names: names,
    extras: hit.extras
  }
  const stopped = HardStop.hardStop(message, explanation(hit, names), { keepFinishReason: true })
  return {
    message: M.withKwargs(stopped, { safety_termination: record }),
    record
  }
}

// ---------------------------------------------------------------------------------------------------------
// Layer

/** The name of the custom event. */
export const EVENT_NAME = "safety_termination"

/** Options of `layer`. */
export interface Options {
  readonly config?: SafetyFinishReasonConfig | undefined
  /** Detectors to use instead of the configured ones (programmatic extension). */
  readonly detectors?: ReadonlyArray<Detector> | undefined
}

/**
 * The SafetyFinishReason middleware (SPEC §4.1 slot 35: the innermost model wrapper of the guards, so its
 * after_model runs first and strips tool calls before loop or budget accounting). Requires `RunContext`; fails
 * to build with `SafetyDetectorConfigError` when configured detectors do not resolve, or when the detector list
 * (configured or given) is empty: `enabled: false` is how to turn the guard off. Given detectors are copied.
 * Disabled config: wraps nothing.
 */
export const layer = (options: Options = {}): Middleware.Middleware<never, SafetyDetectorConfigError> => {
  const config = options.config ?? Schema.decodeSync(SafetyFinishReasonConfig)({})
  if (!config.enabled) return Middleware.make({})
  // A copy: the guard must not change when the caller later changes its array.
  const programmatic = options.detectors === undefined ? undefined : [...options.detectors]
  const detectors = programmatic === undefined
    ? resolveDetectors(config)
    : programmatic.length === 0
    ? noDetectors("detectors")
    : Effect.succeed(programmatic)
  return Layer.unwrapEffect(Effect.map(detectors, perRun))
}

const perRun = (detectors: ReadonlyArray<Detector>) =>
  Middleware.make(Effect.gen(function*() {
    const context = yield* RunContext
    const afterModel = (response: ModelResponse): Middleware.Now<ModelResponse> => {
      const message = response.message
      if (!shouldInspect(message)) return response
      const hit = detect(message, detectors)
      if (hit === undefined) return response
      const { message: rewritten, record } = terminate(message, hit)
      return context.setStopReason("safety_capped").pipe(
        Effect.zipRight(emitCustom(EVENT_NAME, {
          type: EVENT_NAME,
          detector: record.detector,
          reason_field: record.reason_field,
          reason_value: record.reason_value,
          suppressed_tool_call_count: record.suppressed_tool_call_count,
          suppressed_tool_call_names: record.suppressed_tool_call_names,
          // ids (never arguments) and provider extras: for the run journal's audit record
          suppressed_tool_call_ids: suppressedIds(message),
          extras: record.extras,
          thread_id: context.threadId,
          run_id: context.runId,
          message_id: message.id
        })),
        Effect.zipRight(Effect.logWarning(`Safety termination (${record.reason_field}=${record.reason_value}); ` +
          `${record.suppressed_tool_call_count} tool call(s) suppressed`)),
        Effect.as(HardStop.replaceMessage(response, rewritten))
      )
    }
    return {
      modelHooks: { after: (response, request) => request.internal !== undefined ? response : afterModel(response) }
    } satisfies Middleware.Wrappers
  }))

/** Its chain entry: the innermost model guard; its after_model runs first. */
export const entry = (options: Options = {}) =>
  Chain.entry("SafetyFinishReason", () => layer(options), [
    { inside: "LoopDetection", reason: "tool calls it suppresses must never be counted as repeats" },
    { inside: "TokenBudget", reason: "its after_model runs first, before the budget accounts the message" }
  ])
