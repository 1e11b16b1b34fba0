/**
 * Configuration: how to reach one model (`Options`), the options of a `config.yaml` model entry, and
 * resolving them into a ready client — unset connection fields read from the environment (`OPENAI_BASE_URL`,
 * `OPENAI_API_KEY`, `OPENAI_MODEL`, `OPENAI_TIMEOUT`, `OPENAI_LOG`), the SDK's own retries off, and the
 * redactor that keeps the adapter's secrets out of its errors.
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type OpenAI from "openai"
import type { ModelConfig } from "../../services/AppConfig.js"
import * as ModelRequest from "../../services/config/ModelRequest.js"
import * as ModelUse from "../../services/ModelUse.js"
import * as Redact from "../../state/Redact.js"
import type { ModelProfile } from "./RequestMapping.js"
import { isPlainObject } from "./RequestMapping.js"

/**
 * How to reach one model: its connection, and its profile's defaults and capabilities (`ModelProfile`). Unset
 * connection fields come from the environment.
 */
export interface Options extends Partial<Omit<ModelProfile, "model">> {
  /** Default: `OPENAI_BASE_URL`, else `https://api.openai.com/v1`. */
  readonly baseURL?: string | undefined
  /** Default: `OPENAI_API_KEY`. Without any key, a placeholder is sent (local servers ignore it). */
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  /** The provider's model id. Default: `OPENAI_MODEL` (required when neither is set). */
  readonly model?: string | undefined
  /**
   * How long a call may stay silent: waiting for the response headers (first byte), then between two stream
   * chunks. While it waits, an `llm_waiting` event says so every 15 s. Default: `OPENAI_TIMEOUT` (seconds),
   * else 120 s (`request_timeout` of a configured model).
   */
  readonly timeoutMs?: number | undefined
  /** Headers sent with every request (`default_headers`). */
  readonly headers?: Readonly<Record<string, string>> | undefined
}


const DEFAULT_BASE_URL = "https://api.openai.com/v1"
const DEFAULT_TIMEOUT_MS = 120_000
/** How much longer than the watchdog the SDK's own timer waits (it should never be the one that fires). */
const BACKSTOP_MS = 30_000
/** Sent when no key is configured: keyless local servers ignore it, and OpenAI answers 401 (reason `auth`). */
const NO_KEY = "sk-no-key-configured"

const present = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim() !== "")))

const LOG_LEVELS: ReadonlySet<string> = new Set(["off", "error", "warn", "info", "debug"])

/** A model ready to call: its profile, its client, and what its errors must not show. */
export interface Resolved extends ModelProfile {
  readonly client: OpenAI
  /** The SDK's error classes, to classify what a call throws (the SDK is loaded when a model is made). */
  readonly sdk: SdkErrors
  readonly baseURL: string
  readonly timeoutMs: number
  /** No key is configured (a placeholder is sent): a 401 then says so. */
  readonly keyless: boolean
  /** The adapter's own secrets (its key, the credentials of its base URL), removed from every error. */
  readonly redactor: Redact.Redactor
}

/** The `openai` SDK's error classes (ErrorClassification tells its errors apart with them). */
export type SdkErrors = Pick<typeof OpenAI, "APIError" | "APIConnectionError" | "APIConnectionTimeoutError">

/**
 * Resolves options into a client, reading unset connection fields from the environment. The `openai` SDK is
 * loaded here, when the first model is made, not when the module is imported (`import "antler"` stays light).
 */
export const resolve = (options: Options): Effect.Effect<Resolved, ConfigError.ConfigError> =>
  Effect.gen(function*() {
    const baseURL = options.baseURL ?? Option.getOrElse(yield* present("OPENAI_BASE_URL"), () => DEFAULT_BASE_URL)
    const apiKey = options.apiKey !== undefined
      ? options.apiKey
      : Option.getOrUndefined(yield* Config.option(Config.redacted("OPENAI_API_KEY")))
    const model = options.model ?? (yield* Config.string("OPENAI_MODEL"))
    const timeoutSeconds = options.timeoutMs === undefined
      ? yield* Config.option(Config.number("OPENAI_TIMEOUT"))
      : Option.none()
    const timeoutMs = options.timeoutMs ?? Option.match(timeoutSeconds, {
      onNone: () => DEFAULT_TIMEOUT_MS,
      onSome: (seconds) => seconds * 1000
    })
    const logLevel = Option.getOrUndefined(
      Option.filter(yield* present("OPENAI_LOG"), (level) => LOG_LEVELS.has(level))
    )
    const key = apiKey === undefined ? "" : Redacted.isRedacted(apiKey) ? Redacted.value(apiKey) : apiKey
    const { default: OpenAI } = yield* Effect.promise(() => import("openai"))
    const client = new OpenAI({
      apiKey: key === "" ? NO_KEY : key,
      baseURL,
      // A backstop only: the call's own watchdog ends a silent request after `timeoutMs` (see Streaming.ts).
      timeout: timeoutMs + BACKSTOP_MS,
      maxRetries: 0,
      ...(options.headers !== undefined ? { defaultHeaders: { ...options.headers } } : {}),
      // The SDK logs unparsable stream events itself; they come back as ModelErrors, so stay quiet unless asked.
      logLevel: (logLevel ?? "off") as OpenAI["logLevel"]
    })
    return {
      client,
      sdk: OpenAI,
      baseURL,
      timeoutMs,
      keyless: key === "",
      redactor: Redact.make([key, ...Redact.urlSecrets(baseURL)]),
      model,
      maxTokens: options.maxTokens,
      temperature: options.temperature,
      supportsVision: options.supportsVision,
      supportsReasoningEffort: options.supportsReasoningEffort,
      supportsThinking: options.supportsThinking,
      extraBody: options.extraBody,
      whenThinkingEnabled: options.whenThinkingEnabled,
      whenThinkingDisabled: options.whenThinkingDisabled,
      replayReasoning: options.replayReasoning,
      replayReasoningAs: options.replayReasoningAs,
      reasoningSplit: options.reasoningSplit,
      enableThinkingKwarg: options.enableThinkingKwarg,
      mindIe: options.mindIe,
      requestFields: options.requestFields,
      modelKwargs: options.modelKwargs,
      reasoningEffort: options.reasoningEffort,
      streamUsage: options.streamUsage
    }
  })



/** The options of a configured model (`models[]` entry of `config.yaml`). */
export const optionsFromConfig = (config: ModelConfig): Options => ({
  baseURL: config.base_url ?? config.api_base ?? ModelUse.defaultBaseUrl(config.use),
  apiKey: config.api_key,
  model: config.model,
  timeoutMs: timeoutSecondsOf(config) !== undefined ? timeoutSecondsOf(config)! * 1000 : undefined,
  maxTokens: config.max_tokens,
  temperature: config.temperature,
  supportsVision: config.supports_vision,
  supportsThinking: config.supports_thinking,
  supportsReasoningEffort: config.supports_reasoning_effort,
  headers: config.default_headers,
  extraBody: config.extra_body ?? undefined,
  whenThinkingEnabled: whenThinkingEnabled(config),
  whenThinkingDisabled: config.when_thinking_disabled ?? undefined,
  replayReasoning: ModelUse.replaysReasoning(config.use),
  replayReasoningAs: ModelUse.reasoningReplayField(config.use),
  reasoningSplit: ModelUse.splitsReasoning(config.use),
  enableThinkingKwarg: ModelUse.enableThinkingKwarg(config.use),
  mindIe: ModelUse.speaksMindIe(config.use),
  requestFields: ModelRequest.samplingOf(config),
  modelKwargs: config.model_kwargs ?? undefined,
  reasoningEffort: config.reasoning_effort,
  streamUsage: config.stream_usage
})

/** The entry's timeout in seconds: `request_timeout`, else `timeout`, else its class's own default. */
const timeoutSecondsOf = (config: ModelConfig): number | undefined =>
  config.request_timeout ?? config.timeout ?? ModelUse.defaultTimeoutSeconds(config.use)

/** `when_thinking_enabled` with DeerFlow's `thinking` shortcut merged into its `thinking` field. */
const whenThinkingEnabled = (config: ModelConfig): Readonly<Record<string, unknown>> | undefined => {
  const base = config.when_thinking_enabled ?? undefined
  if (config.thinking == null) return base
  const merged = { ...(isPlainObject(base?.thinking) ? base.thinking : {}), ...config.thinking }
  return { ...base, thinking: merged }
}
