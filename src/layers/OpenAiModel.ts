/**
 * The real model: a ModelService over the `openai` SDK's Chat Completions API, for OpenAI and every
 * OpenAI-compatible server (vLLM, DeepSeek, Ollama, LiteLLM...).
 *
 * Every call streams. Text, reasoning (`reasoning_content` / `reasoning`) and tool-call deltas are assembled
 * into one AI message, while text and reasoning deltas go to the run's event sink as `token` events. What
 * the server sends is untrusted: chunks are decoded with Schema (leniently, as providers differ) and the
 * assembled message is validated; anything malformed is a `ModelError` with reason `invalid_response`.
 *
 * The SDK's own retries are off (`maxRetries: 0`): retrying is the LLM error-handling middleware's job, and
 * every failure comes back as a classified `ModelError` (reason, SDK error class, status, code, retry
 * headers). Interrupting a call aborts its HTTP request.
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import OpenAI from "openai"
import type { ModelConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import type { ModelRequest, ToolDefinition } from "../services/ModelService.js"
import { ModelError, ModelService } from "../services/ModelService.js"
import { RunEvents } from "../services/RunEvents.js"
import type {
  AIMessage,
  Content,
  InvalidToolCall,
  JsonObject,
  Message,
  ToolCall,
  UsageMetadata
} from "../state/Message.js"
import * as M from "../state/Message.js"

// ---------------------------------------------------------------------------------------------------------
// Options

/** How to reach one model. Unset connection fields come from the environment. */
export interface Options {
  /** Default: `OPENAI_BASE_URL`, else `https://api.openai.com/v1`. */
  readonly baseURL?: string | undefined
  /** Default: `OPENAI_API_KEY`. Without any key, a placeholder is sent (local servers ignore it). */
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  /** The provider's model id. Default: `OPENAI_MODEL` (required when neither is set). */
  readonly model?: string | undefined
  /**
   * How long to wait for the response headers, and then for each next stream chunk. Default:
   * `OPENAI_TIMEOUT` (seconds), else 600 s.
   */
  readonly timeoutMs?: number | undefined
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  /** When `false`, images in human messages are replaced by a short text note. Default: images pass. */
  readonly supportsVision?: boolean | undefined
  /**
   * Kept for callers that pick models by capability. Chat Completions has no standard switch for thinking,
   * so it changes nothing on the wire; reasoning the server streams is always kept.
   */
  readonly supportsThinking?: boolean | undefined
  /** When `true`, `settings.reasoningEffort` is sent as `reasoning_effort`. */
  readonly supportsReasoningEffort?: boolean | undefined
}

/** What a request is built with: the model id and its defaults and capabilities. */
export interface ModelProfile {
  readonly model: string
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly supportsVision?: boolean | undefined
  readonly supportsReasoningEffort?: boolean | undefined
}

const DEFAULT_BASE_URL = "https://api.openai.com/v1"
const DEFAULT_TIMEOUT_MS = 600_000
/** Sent when no key is configured: keyless local servers ignore it, and OpenAI answers 401 (reason `auth`). */
const NO_KEY = "sk-no-key-configured"

const present = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim() !== "")))

const LOG_LEVELS = new Set(["off", "error", "warn", "info", "debug"])

// ---------------------------------------------------------------------------------------------------------
// Request building (pure)

const NO_VISION_NOTE = "[An image was attached here, but this model does not accept images.]"

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam
type ChatPart = OpenAI.Chat.Completions.ChatCompletionContentPart

const userContent = (content: Content, vision: boolean): string | Array<ChatPart> => {
  if (typeof content === "string") return content
  const parts: Array<ChatPart> = []
  for (const block of content) {
    const b = block as { readonly type: string; readonly text?: unknown; readonly image_url?: unknown }
    if (b.type === "image_url") {
      const image = b.image_url as { url?: unknown; detail?: unknown } | undefined
      if (typeof image?.url !== "string") continue
      if (!vision) parts.push({ type: "text", text: NO_VISION_NOTE })
      else {
        parts.push({
          type: "image_url",
          image_url: typeof image.detail === "string"
            ? { url: image.url, detail: image.detail as "auto" | "low" | "high" }
            : { url: image.url }
        })
      }
    } else if (typeof b.text === "string") parts.push({ type: "text", text: b.text })
    // Other provider blocks (reasoning, thinking...) have no Chat Completions form: dropped.
  }
  return parts.length === 0 ? "" : parts
}

/**
 * The arguments of an invalid call as a JSON object string: the raw text when it is one, else `"{}"`, so the
 * call can still be sent back (every tool message needs its call).
 */
export const normaliseArguments = (raw: string | null): string => {
  if (raw === null) return "{}"
  const parsed = parseArguments(raw)
  return "args" in parsed ? JSON.stringify(parsed.args) : "{}"
}

const assistantMessage = (original: AIMessage): ChatMessage => {
  // Calls kept only in the raw provider payload are sent as calls (the parse DanglingToolCall counts with), so
  // their results never reach the provider without them.
  const message = M.parseRawToolCalls(original)
  const text = M.contentText(message.content)
  const calls: Array<OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall> = []
  for (const call of message.tool_calls ?? []) {
    calls.push({ id: call.id, type: "function", function: { name: call.name, arguments: JSON.stringify(call.args) } })
  }
  // Same fallbacks as the run's result for an invalid call, so the call and its tool message match.
  message.invalid_tool_calls?.forEach((call, i) => {
    calls.push({
      id: M.invalidCallId(message, call, i),
      type: "function",
      function: { name: call.name || "unknown_tool", arguments: normaliseArguments(call.args) }
    })
  })
  if (calls.length === 0) return { role: "assistant", content: text }
  return { role: "assistant", content: text === "" ? null : text, tool_calls: calls }
}

/** One state message as a Chat Completions message. */
export const toChatMessage = (message: Message, vision = true): ChatMessage => {
  switch (message.type) {
    case "human":
      return { role: "user", content: userContent(message.content, vision) as string }
    case "ai":
      return assistantMessage(message)
    case "tool":
      return { role: "tool", tool_call_id: message.tool_call_id, content: M.contentText(message.content) }
    case "system":
      return { role: "system", content: M.contentText(message.content) }
  }
}

/** The Chat Completions messages of a request: the system prompt first, then the messages in order. */
export const toChatMessages = (request: ModelRequest, vision = true): Array<ChatMessage> => {
  const out: Array<ChatMessage> = []
  if (request.systemPrompt !== undefined && request.systemPrompt !== "") {
    out.push({ role: "system", content: request.systemPrompt })
  }
  for (const message of request.messages) out.push(toChatMessage(message, vision))
  return out
}

/** Tool definitions as Chat Completions function tools. */
export const toChatTools = (tools: ReadonlyArray<ToolDefinition>): Array<OpenAI.Chat.Completions.ChatCompletionTool> =>
  tools.map((tool) => ({
    type: "function",
    function: { name: tool.name, description: tool.description, parameters: tool.parameters }
  }))

/** The streaming request body for a model call. */
export const toChatRequest = (
  request: ModelRequest,
  profile: ModelProfile
): OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming => {
  const settings = request.settings
  const maxTokens = settings.maxTokens ?? profile.maxTokens
  const temperature = settings.temperature ?? profile.temperature
  const effort = profile.supportsReasoningEffort === true ? settings.reasoningEffort : undefined
  return {
    model: profile.model,
    messages: toChatMessages(request, profile.supportsVision !== false),
    stream: true,
    stream_options: { include_usage: true },
    ...(request.tools.length > 0 ? { tools: toChatTools(request.tools) } : {}),
    ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(effort !== undefined ? { reasoning_effort: effort as OpenAI.ReasoningEffort } : {})
  }
}

// ---------------------------------------------------------------------------------------------------------
// Stream chunks (untrusted) and their assembly (pure)

const OptionalString = Schema.optional(Schema.NullOr(Schema.String))
const AnyObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const OptionalNumber = Schema.optional(Schema.NullOr(Schema.Number))
const Details = Schema.optional(Schema.NullOr(AnyObject))

const ToolCallDelta = Schema.Struct({
  index: OptionalNumber,
  id: OptionalString,
  function: Schema.optional(Schema.NullOr(Schema.Struct({
    name: OptionalString,
    // Some servers send arguments as an object rather than a JSON string.
    arguments: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, AnyObject)))
  })))
})

/** One streamed chunk, as far as we read it. Unknown fields are ignored. */
export const Chunk = Schema.Struct({
  id: OptionalString,
  model: OptionalString,
  system_fingerprint: OptionalString,
  choices: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    index: OptionalNumber,
    delta: Schema.optional(Schema.NullOr(Schema.Struct({
      content: OptionalString,
      reasoning_content: OptionalString,
      reasoning: OptionalString,
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCallDelta)))
    }))),
    finish_reason: OptionalString
  })))),
  usage: Schema.optional(Schema.NullOr(Schema.Struct({
    prompt_tokens: OptionalNumber,
    completion_tokens: OptionalNumber,
    total_tokens: OptionalNumber,
    prompt_tokens_details: Details,
    completion_tokens_details: Details
  })))
})
export type Chunk = typeof Chunk.Type

const decodeChunk = Schema.decodeUnknownEither(Chunk)
const validateMessage = Schema.decodeUnknownEither(M.AIMessage)

/** Parses tool-call arguments: a JSON object (empty text counts as `{}`), or why not. */
export const parseArguments = (raw: string): { readonly args: JsonObject } | { readonly error: string } => {
  if (raw.trim() === "") return { args: {} }
  let value: unknown
  try {
    value = JSON.parse(raw)
  } catch (error) {
    return { error: `The arguments are not valid JSON (${(error as Error).message}).` }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`
    return { error: `The arguments must be a JSON object, not ${kind}.` }
  }
  return { args: value as JsonObject }
}

interface PartialCall {
  readonly index: number
  id: string | undefined
  name: string
  args: string
}

/** What one chunk carried for the user to see. */
export interface ChunkText {
  readonly text: string
  readonly reasoning: string
}

/** Assembles the chunks of one streamed completion into an AI message. */
export interface Accumulator {
  /** Adds a decoded chunk; returns its text and reasoning deltas. */
  readonly add: (chunk: Chunk) => ChunkText
  /** The assembled, validated message, or why there is none. */
  readonly finish: () => Either.Either<AIMessage, ModelError>
}

const INPUT_DETAILS = [["cached_tokens", "cache_read"], ["audio_tokens", "audio"]] as const
const OUTPUT_DETAILS = [["reasoning_tokens", "reasoning"], ["audio_tokens", "audio"]] as const

const numberOrZero = (value: number | null | undefined): number => (typeof value === "number" ? value : 0)

const details = (
  source: { readonly [key: string]: unknown } | null | undefined,
  keys: ReadonlyArray<readonly [string, string]>
): JsonObject | undefined => {
  if (source == null) return undefined
  let out: Record<string, unknown> | undefined
  for (const [from, to] of keys) {
    const value = source[from]
    if (typeof value === "number") (out ??= {})[to] = value
  }
  return out
}

/** A fresh accumulator for the message `messageId`; `model` is reported when the server names none. */
export const accumulator = (messageId: string, model: string): Accumulator => {
  let completionId: string | undefined
  let modelName: string | undefined
  let fingerprint: string | undefined
  let sawChoice = false
  let text = ""
  let reasoning = ""
  let finishReason: string | undefined
  let usage: UsageMetadata | undefined
  const calls: Array<PartialCall> = []
  const byIndex = new Map<number, PartialCall>()

  const callFor = (index: number | null | undefined, id: string | null | undefined): PartialCall => {
    if (typeof index === "number") {
      let call = byIndex.get(index)
      if (call === undefined) {
        call = { index, id: undefined, name: "", args: "" }
        byIndex.set(index, call)
        calls.push(call)
      }
      return call
    }
    // No index (some servers): a new id starts a new call, otherwise the delta continues the last one.
    const last = calls[calls.length - 1]
    if (last !== undefined && (id == null || id === "" || id === last.id)) return last
    const call: PartialCall = { index: -1 - calls.length, id: undefined, name: "", args: "" }
    calls.push(call)
    return call
  }

  const add = (chunk: Chunk): ChunkText => {
    if (chunk.id != null && completionId === undefined) completionId = chunk.id
    if (chunk.model != null && chunk.model !== "") modelName = chunk.model
    if (chunk.system_fingerprint != null) fingerprint = chunk.system_fingerprint
    if (chunk.usage != null) {
      const input = numberOrZero(chunk.usage.prompt_tokens)
      const output = numberOrZero(chunk.usage.completion_tokens)
      const inputDetails = details(chunk.usage.prompt_tokens_details, INPUT_DETAILS)
      const outputDetails = details(chunk.usage.completion_tokens_details, OUTPUT_DETAILS)
      usage = {
        input_tokens: input,
        output_tokens: output,
        total_tokens: typeof chunk.usage.total_tokens === "number" ? chunk.usage.total_tokens : input + output,
        ...(inputDetails !== undefined ? { input_token_details: inputDetails } : {}),
        ...(outputDetails !== undefined ? { output_token_details: outputDetails } : {})
      }
    }
    let textDelta = ""
    let reasoningDelta = ""
    for (const choice of chunk.choices ?? []) {
      // Only the first choice is read (we never ask for several).
      if (choice.index != null && choice.index !== 0) continue
      sawChoice = true
      if (choice.finish_reason != null) finishReason = choice.finish_reason
      const delta = choice.delta
      if (delta == null) continue
      if (delta.content != null && delta.content !== "") textDelta += delta.content
      const thought = delta.reasoning_content ?? delta.reasoning
      if (thought != null && thought !== "") reasoningDelta += thought
      for (const part of delta.tool_calls ?? []) {
        const call = callFor(part.index, part.id)
        if (part.id != null && part.id !== "" && call.id === undefined) call.id = part.id
        const fn = part.function
        if (fn == null) continue
        if (fn.name != null && fn.name !== "" && call.name === "") call.name = fn.name
        if (typeof fn.arguments === "string") call.args += fn.arguments
        else if (fn.arguments != null) call.args += JSON.stringify(fn.arguments)
      }
    }
    text += textDelta
    reasoning += reasoningDelta
    return { text: textDelta, reasoning: reasoningDelta }
  }

  const finish = (): Either.Either<AIMessage, ModelError> => {
    if (!sawChoice) {
      return Either.left(new ModelError({
        reason: "empty_response",
        errorType: "EmptyResponseError",
        message: `The model server's answer for model ${model} held no choices.`
      }))
    }
    // An empty answer cut off by the provider (length, content_filter) is returned: its finish reason matters.
    const cut = finishReason !== undefined && finishReason !== "stop"
    if (text === "" && reasoning === "" && calls.length === 0 && !cut) {
      return Either.left(new ModelError({
        reason: "empty_response",
        errorType: "EmptyResponseError",
        message: `Model ${model} generated nothing (no text and no tool calls).`
      }))
    }
    const toolCalls: Array<ToolCall> = []
    const invalid: Array<InvalidToolCall> = []
    const indexed = calls.length > 1 && calls.every((call) => call.index >= 0)
    const sorted = indexed ? [...calls].sort((a, b) => a.index - b.index) : calls
    for (const call of sorted) {
      const id = call.id ?? `call_${crypto.randomUUID()}`
      if (call.name === "") {
        const error = "The tool call has no function name."
        invalid.push({ id, name: null, args: call.args, error, type: "invalid_tool_call" })
        continue
      }
      const parsed = parseArguments(call.args)
      if ("args" in parsed) toolCalls.push({ id, name: call.name, args: parsed.args, type: "tool_call" })
      else invalid.push({ id, name: call.name, args: call.args, error: parsed.error, type: "invalid_tool_call" })
    }
    const metadata: Record<string, unknown> = { model_name: modelName ?? model }
    if (finishReason !== undefined) metadata.finish_reason = finishReason
    if (completionId !== undefined) metadata.id = completionId
    if (fingerprint !== undefined) metadata.system_fingerprint = fingerprint
    const message: AIMessage = {
      type: "ai",
      id: messageId,
      content: text,
      additional_kwargs: reasoning === "" ? {} : { reasoning_content: reasoning },
      response_metadata: metadata,
      tool_calls: toolCalls,
      invalid_tool_calls: invalid,
      ...(usage !== undefined ? { usage_metadata: usage } : {})
    }
    const valid = validateMessage(message)
    if (Either.isLeft(valid)) {
      return Either.left(new ModelError({
        reason: "invalid_response",
        errorType: "InvalidResponseError",
        message: `The answer of model ${model} is not a valid message: ${
          ParseResult.TreeFormatter.formatErrorSync(valid.left)
        }`
      }))
    }
    return Either.right(message)
  }

  return { add, finish }
}

// ---------------------------------------------------------------------------------------------------------
// Errors

const RETRY_HEADERS = ["retry-after", "retry-after-ms"] as const

const causeText = (error: unknown): string => {
  const parts: Array<string> = []
  let current: any = (error as any)?.cause
  for (let depth = 0; current != null && depth < 4; depth++) {
    const message = String(current.message ?? current)
    const text = current.code !== undefined ? `${current.code}: ${message}` : message
    if (text.trim() !== "") parts.push(text.trim())
    current = current.cause
  }
  return parts.length === 0 ? "" : ` (${parts.join("; ")})`
}

const statusReason = (status: number | undefined, code: string | undefined, text: string): ModelError["reason"] => {
  const lower = `${code ?? ""} ${text}`.toLowerCase()
  if (code === "insufficient_quota" || status === 402) return "quota"
  if (status === 401 || status === 403) return "auth"
  if (status === 429) return "rate_limit"
  if (status === 408) return "timeout"
  if (status !== undefined && status >= 500) return "server"
  if (status !== undefined && status >= 400) return "bad_request"
  // No status: an `error` event inside the stream. Read its code; otherwise the provider failed mid-answer.
  if (lower.includes("insufficient_quota")) return "quota"
  if (lower.includes("rate_limit") || lower.includes("rate limit")) return "rate_limit"
  if (lower.includes("invalid_api_key") || lower.includes("authentication")) return "auth"
  if (lower.includes("context_length") || lower.includes("invalid_request")) return "bad_request"
  return "server"
}

/**
 * Classifies anything a call can throw as a `ModelError`: SDK errors keep their class name, status, code
 * and retry headers; a non-JSON stream event is `invalid_response`; a socket dropped mid-stream is
 * `connection`.
 */
export const toModelError = (error: unknown, model: string, baseURL: string): ModelError => {
  if (error instanceof ModelError) return error
  const where = `model ${model} at ${baseURL}`
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new ModelError({
      reason: "timeout",
      errorType: "APIConnectionTimeoutError",
      message: `The model server did not answer in time (${where}).`,
      cause: error
    })
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return new ModelError({
      reason: "connection",
      errorType: error.constructor.name,
      message: `Could not connect to the model server (${where}): ${error.message}${causeText(error)}`,
      cause: error
    })
  }
  if (error instanceof OpenAI.APIError) {
    const status = typeof error.status === "number" ? error.status : undefined
    const code = error.code == null ? undefined : String(error.code)
    let headers: Record<string, string> | undefined
    if (error.headers !== undefined) {
      for (const name of RETRY_HEADERS) {
        const value = error.headers.get(name)
        if (value !== null) (headers ??= {})[name] = value
      }
    }
    const reason = statusReason(status, code ?? (error.type ?? undefined), error.message)
    const prefix = status === undefined ? "The model server reported an error mid-stream" : "The model call failed"
    return new ModelError({
      reason,
      errorType: error.constructor.name,
      message: `${prefix} (${where}): ${error.message}`,
      ...(status !== undefined ? { status } : {}),
      ...(code !== undefined ? { code } : {}),
      ...(headers !== undefined ? { headers } : {}),
      cause: error
    })
  }
  if (error instanceof SyntaxError) {
    return new ModelError({
      reason: "invalid_response",
      errorType: "InvalidResponseError",
      message: `The model server sent a stream event that is not JSON (${where}): ${error.message}`,
      cause: error
    })
  }
  // Undici reports a socket closed mid-body as `TypeError: terminated` (cause `UND_ERR_SOCKET`, ECONNRESET...).
  const text = `${(error as any)?.message ?? error}${causeText(error)}`
  if (/terminated|socket|ECONNRESET|EPIPE|other side closed|fetch failed/i.test(text)) {
    return new ModelError({
      reason: "connection",
      errorType: "APIConnectionError",
      message: `The connection to the model server broke off (${where}): ${text}`,
      cause: error
    })
  }
  return new ModelError({
    reason: "other",
    errorType: error instanceof Error ? error.constructor.name : "Error",
    message: `The model call failed (${where}): ${text}`,
    cause: error
  })
}

// ---------------------------------------------------------------------------------------------------------
// The service

interface Resolved extends ModelProfile {
  readonly client: OpenAI
  readonly baseURL: string
  readonly timeoutMs: number
}

const resolve = (options: Options): Effect.Effect<Resolved, ConfigError.ConfigError> =>
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
    const client = new OpenAI({
      apiKey: key === "" ? NO_KEY : key,
      baseURL,
      timeout: timeoutMs,
      maxRetries: 0,
      // The SDK logs unparsable stream events itself; they come back as ModelErrors, so stay quiet unless asked.
      logLevel: (logLevel ?? "off") as OpenAI["logLevel"]
    })
    return {
      client,
      baseURL,
      timeoutMs,
      model,
      maxTokens: options.maxTokens,
      temperature: options.temperature,
      supportsVision: options.supportsVision,
      supportsReasoningEffort: options.supportsReasoningEffort
    }
  })

/** The per-call HTTP resources: the request's abort controller and the stream's idle timer. */
interface Call {
  readonly controller: AbortController
  timer: ReturnType<typeof setTimeout> | undefined
  idle: boolean
}

const generateWith = (resolved: Resolved): ModelService["Type"]["generate"] => {
  const { baseURL, client, model, timeoutMs } = resolved
  const where = `model ${model} at ${baseURL}`
  const idleError = () =>
    new ModelError({
      reason: "timeout",
      errorType: "StreamChunkTimeoutError",
      message: `The model server stopped sending its answer: nothing came for ${timeoutMs / 1000}s (${where}).`
    })
  const malformed = (error: ParseResult.ParseError) =>
    new ModelError({
      reason: "invalid_response",
      errorType: "InvalidResponseError",
      message: `The model server sent a malformed stream chunk (${where}): ${
        ParseResult.TreeFormatter.formatErrorSync(error)
      }`
    })
  const open = Effect.sync((): Call => ({ controller: new AbortController(), timer: undefined, idle: false }))
  // Ends the HTTP request when the call is interrupted or fails; after a complete answer it is a no-op.
  const close = (call: Call) =>
    Effect.sync(() => {
      clearTimeout(call.timer)
      call.controller.abort()
    })

  return (request) =>
    Effect.flatMap(RunEvents, (sink) => {
      const messageId = `run-${crypto.randomUUID()}`
      const acc = accumulator(messageId, model)
      const silent = request.internal !== undefined
      const body = toChatRequest(request, resolved)
      const token = (delta: ChunkText): Effect.Effect<void> =>
        delta.reasoning === ""
          ? sink.emit({ type: "token", message_id: messageId, text: delta.text })
          : delta.text === ""
          ? sink.emit({ type: "token", message_id: messageId, reasoning: delta.reasoning })
          : Effect.zipRight(
            sink.emit({ type: "token", message_id: messageId, reasoning: delta.reasoning }),
            sink.emit({ type: "token", message_id: messageId, text: delta.text })
          )

      const use = (call: Call) =>
        Effect.tryPromise({
          try: () => client.chat.completions.create(body, { signal: call.controller.signal }),
          catch: (error) => toModelError(error, model, baseURL)
        }).pipe(
          Effect.flatMap((stream) => {
            const iterator = stream[Symbol.asyncIterator]()
            // The SDK's timeout covers the wait for headers. Between chunks, one timer re-armed per chunk aborts
            // a stalled stream (an Effect timeout per chunk would cost far more than the chunk itself).
            call.timer = setTimeout(() => {
              call.idle = true
              call.controller.abort()
            }, timeoutMs)
            const next = Effect.tryPromise({
              try: () => iterator.next(),
              catch: (error) => (call.idle ? idleError() : toModelError(error, model, baseURL))
            })
            const step = (): Effect.Effect<void, ModelError> =>
              Effect.flatMap(next, (result) => {
                if (call.idle) return Effect.fail(idleError())
                if (result.done === true) return Effect.void
                call.timer?.refresh()
                const decoded = decodeChunk(result.value)
                if (Either.isLeft(decoded)) return Effect.fail(malformed(decoded.left))
                const delta = acc.add(decoded.right)
                if (silent || (delta.text === "" && delta.reasoning === "")) return Effect.suspend(step)
                return Effect.zipRight(token(delta), Effect.suspend(step))
              })
            return step()
          }),
          Effect.flatMap(() =>
            Either.match(acc.finish(), { onLeft: Effect.fail, onRight: (message) => Effect.succeed({ message }) })
          )
        )
      return Effect.acquireUseRelease(open, use, close)
    }).pipe(Effect.withSpan("OpenAiModel.generate", { attributes: { model, internal: request.internal ?? false } }))
}

/**
 * A ModelService for one model. The OpenAI client is created here, once; unset connection options are read
 * from the environment (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`, `OPENAI_TIMEOUT` in seconds).
 * `settings.modelName` of a request is ignored (there is one model).
 */
export const make = (options: Options = {}): Effect.Effect<ModelService["Type"], ConfigError.ConfigError> =>
  Effect.map(resolve(options), (resolved) => ModelService.of({ generate: generateWith(resolved) }))

/** The options of a configured model (`models[]` entry of `config.yaml`). */
export const optionsFromConfig = (config: ModelConfig): Options => ({
  baseURL: config.base_url ?? config.api_base,
  apiKey: config.api_key,
  model: config.model,
  timeoutMs: config.timeout !== undefined ? config.timeout * 1000 : undefined,
  maxTokens: config.max_tokens,
  temperature: config.temperature,
  supportsVision: config.supports_vision,
  supportsThinking: config.supports_thinking,
  supportsReasoningEffort: config.supports_reasoning_effort
})

/**
 * A ModelService over the configured models, one client each, routing every request by
 * `settings.modelName` (default: the first model). An unknown name fails with a `bad_request` ModelError
 * listing the configured names. With no model configured, one model is taken from the environment.
 */
export const fromConfig = (
  models: ReadonlyArray<ModelConfig>
): Effect.Effect<ModelService["Type"], ConfigError.ConfigError> =>
  Effect.gen(function*() {
    if (models.length === 0) return yield* make()
    const byName = new Map<string, ModelService["Type"]["generate"]>()
    for (const config of models) {
      if (byName.has(config.name)) continue
      byName.set(config.name, generateWith(yield* resolve(optionsFromConfig(config))))
    }
    const names = [...byName.keys()]
    const first = byName.get(names[0]!)!
    return ModelService.of({
      generate: (request) => {
        const name = request.settings.modelName
        if (name === undefined) return first(request)
        const generate = byName.get(name)
        if (generate !== undefined) return generate(request)
        return Effect.fail(new ModelError({
          reason: "bad_request",
          errorType: "UnknownModelError",
          message: `No model named "${name}" is configured. Configured models: ${names.join(", ")}.`
        }))
      }
    })
  })

/** A layer providing a ModelService for one model (see `make`). */
export const layer = (options: Options = {}): Layer.Layer<ModelService, ConfigError.ConfigError> =>
  Layer.effect(ModelService, make(options))

/** A layer providing a ModelService over these configured models (see `fromConfig`). */
export const layerFromConfig = (
  models: ReadonlyArray<ModelConfig>
): Layer.Layer<ModelService, ConfigError.ConfigError> => Layer.effect(ModelService, fromConfig(models))

/** A layer providing a ModelService over the models of the loaded `config.yaml`. */
export const layerFromAppConfig = (): Layer.Layer<ModelService, ConfigError.ConfigError, AppConfigService> =>
  Layer.effect(ModelService, Effect.flatMap(AppConfigService, (app) => fromConfig(app.config.models)))
