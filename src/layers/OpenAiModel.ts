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
 *
 * A hostile or broken server cannot take a run down: tool-call arguments are bounded in depth and size
 * before they are parsed (refused ones become invalid tool calls with a readable error), repeated tool-call
 * ids are made unique (`M.uniqueToolCallIds`), usage and other metadata are read best-effort, a 200 that is
 * not an event stream is described (content type, an HTML page's title) or, when it is a whole completion,
 * taken as one, and any bug left in here comes back as a `ModelError` rather than a defect. A watchdog on
 * the Clock ends a call that stays silent for `timeoutMs` (before the first byte or mid-stream) and emits an
 * `llm_waiting` event every 15 s while it waits. Error messages are cut to 2,000 characters, carry no
 * control characters and none of the adapter's own secrets (its API key, its base URL's credentials).
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
import * as ModelUse from "../services/ModelUse.js"
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
import * as Redact from "../state/Redact.js"
import * as Json from "../state/Json.js"

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
   * How long a call may stay silent: waiting for the response headers (first byte), then between two stream
   * chunks. While it waits, an `llm_waiting` event says so every 15 s. Default: `OPENAI_TIMEOUT` (seconds),
   * else 120 s (`request_timeout` of a configured model).
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
  /** Headers sent with every request (`default_headers`). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Fields merged into every request body (`extra_body`). */
  readonly extraBody?: Readonly<Record<string, unknown>> | undefined
  /** Settings applied when the request has thinking on (`when_thinking_enabled`, with `thinking` merged in). */
  readonly whenThinkingEnabled?: Readonly<Record<string, unknown>> | undefined
  /** Settings applied when the request has thinking off (`when_thinking_disabled`). */
  readonly whenThinkingDisabled?: Readonly<Record<string, unknown>> | undefined
}

/** What a request is built with: the model id and its defaults and capabilities. */
export interface ModelProfile {
  readonly model: string
  readonly maxTokens?: number | undefined
  readonly temperature?: number | undefined
  readonly supportsVision?: boolean | undefined
  readonly supportsReasoningEffort?: boolean | undefined
  readonly supportsThinking?: boolean | undefined
  readonly extraBody?: Readonly<Record<string, unknown>> | undefined
  readonly whenThinkingEnabled?: Readonly<Record<string, unknown>> | undefined
  readonly whenThinkingDisabled?: Readonly<Record<string, unknown>> | undefined
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Merges `override` into `base` recursively (objects merge, anything else replaces); inputs are not changed. */
export const deepMerge = (
  base: Readonly<Record<string, unknown>> | undefined,
  override: Readonly<Record<string, unknown>>
): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...base }
  for (const [key, value] of Object.entries(override)) {
    const existing = out[key]
    out[key] = isPlainObject(value) && isPlainObject(existing) ? deepMerge(existing, value) : value
  }
  return out
}

/**
 * The request fields a model's thinking settings add for one call (DeerFlow's `create_chat_model`): with
 * thinking on, `when_thinking_enabled` (only for a model that supports thinking); with it off,
 * `when_thinking_disabled`, else the switch-off DeerFlow derives from the enabled settings (an
 * `extra_body.thinking.type` becomes `disabled` with `reasoning_effort: minimal`; vLLM's
 * `chat_template_kwargs` thinking flags become false). `extra_body` entries are merged into the body, other
 * keys (`reasoning_effort`, `temperature`, a provider's own field) become body fields.
 */
export const thinkingFields = (
  profile: ModelProfile,
  thinkingEnabled: boolean | undefined
): Record<string, unknown> => {
  const enabled = profile.whenThinkingEnabled
  if (thinkingEnabled === true) {
    return enabled !== undefined && profile.supportsThinking === true ? { ...enabled } : {}
  }
  if (thinkingEnabled === undefined) return {}
  if (profile.whenThinkingDisabled !== undefined) return { ...profile.whenThinkingDisabled }
  if (enabled === undefined) return {}
  const extra = isPlainObject(enabled.extra_body) ? enabled.extra_body : {}
  const thinking = isPlainObject(extra.thinking) ? extra.thinking : undefined
  if (thinking?.type !== undefined) {
    return { extra_body: { thinking: { type: "disabled" } }, reasoning_effort: "minimal" }
  }
  const template = isPlainObject(extra.chat_template_kwargs) ? extra.chat_template_kwargs : {}
  const off: Record<string, boolean> = {}
  if ("thinking" in template) off.thinking = false
  if ("enable_thinking" in template) off.enable_thinking = false
  return Object.keys(off).length > 0 ? { extra_body: { chat_template_kwargs: off } } : {}
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
  const { extra_body: thinkingBody, ...thinking } = thinkingFields(profile, settings.thinkingEnabled)
  const extraBody = isPlainObject(thinkingBody) ? deepMerge(profile.extraBody, thinkingBody) : profile.extraBody
  const maxTokens = settings.maxTokens ?? profile.maxTokens
  const temperature = settings.temperature ?? profile.temperature
  const effort = profile.supportsReasoningEffort === true ? settings.reasoningEffort : undefined
  // Provider fields first, so what the run asks for (and the protocol's own fields) always win.
  return {
    ...extraBody,
    ...thinking,
    model: profile.model,
    messages: toChatMessages(request, profile.supportsVision !== false),
    stream: true,
    stream_options: { include_usage: true },
    ...(request.tools.length > 0 ? { tools: toChatTools(request.tools) } : {}),
    ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
    ...(temperature !== undefined ? { temperature } : {}),
    ...(effort !== undefined ? { reasoning_effort: effort as OpenAI.ReasoningEffort } : {})
  } as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming
}

// ---------------------------------------------------------------------------------------------------------
// Stream chunks (untrusted) and their assembly (pure)

const OptionalString = Schema.optional(Schema.NullOr(Schema.String))
const AnyObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const OptionalNumber = Schema.optional(Schema.NullOr(Schema.Number))

const ToolCallDelta = Schema.Struct({
  index: OptionalNumber,
  id: OptionalString,
  function: Schema.optional(Schema.NullOr(Schema.Struct({
    name: OptionalString,
    // Some servers send arguments as an object rather than a JSON string.
    arguments: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, AnyObject)))
  })))
})

/**
 * One streamed chunk, as far as we read it. Unknown fields are ignored. What only describes the answer (ids,
 * model name, fingerprint, finish reason, usage) is read best-effort: a malformed value there is dropped
 * rather than costing the answer.
 */
export const Chunk = Schema.Struct({
  id: Schema.optional(Schema.Unknown),
  model: Schema.optional(Schema.Unknown),
  system_fingerprint: Schema.optional(Schema.Unknown),
  choices: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    index: Schema.optional(Schema.Unknown),
    delta: Schema.optional(Schema.NullOr(Schema.Struct({
      content: OptionalString,
      reasoning_content: OptionalString,
      reasoning: OptionalString,
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCallDelta)))
    }))),
    finish_reason: Schema.optional(Schema.Unknown)
  })))),
  usage: Schema.optional(Schema.Unknown)
})
export type Chunk = typeof Chunk.Type

const decodeChunk = Schema.decodeUnknownEither(Chunk)
const validateMessage = Schema.decodeUnknownEither(M.AIMessage)

/** The deepest nesting of objects and arrays accepted in tool-call arguments. */
export const MAX_ARGUMENT_DEPTH = 64

/** The longest tool-call arguments accepted, in characters of JSON. */
export const MAX_ARGUMENT_CHARS = 1_000_000

/**
 * How deep the JSON text nests (outside strings), scanning no further than one level past `limit`: a linear
 * scan without recursion, so a hostile text cannot exhaust the stack before it is rejected.
 */
export const jsonDepth = (raw: string, limit = MAX_ARGUMENT_DEPTH): number => {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 123 || c === 91) {
      if (++depth > max) max = depth
      if (max > limit) return max
    } else if (c === 125 || c === 93) depth--
  }
  return max
}

/**
 * Parses tool-call arguments: a JSON object (empty text counts as `{}`), or why not. Arguments longer than
 * `MAX_ARGUMENT_CHARS` or nested deeper than `MAX_ARGUMENT_DEPTH` are refused before they are parsed.
 */
export const parseArguments = (raw: string): { readonly args: JsonObject } | { readonly error: string } => {
  if (raw.trim() === "") return { args: {} }
  if (raw.length > MAX_ARGUMENT_CHARS) {
    return {
      error: `The arguments are ${raw.length} characters long; at most ${MAX_ARGUMENT_CHARS} are accepted.`
    }
  }
  if (jsonDepth(raw) > MAX_ARGUMENT_DEPTH) {
    return { error: `The arguments nest more than ${MAX_ARGUMENT_DEPTH} levels deep; flatten them.` }
  }
  let value: unknown
  try {
    value = Json.parse(raw)
  } catch (error) {
    return { error: `The arguments are not valid JSON (${(error as Error).message}).` }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`
    return { error: `The arguments must be a JSON object, not ${kind}.` }
  }
  return { args: value as JsonObject }
}

/** How deep a value nests (objects and arrays), counted without recursion and no further than `limit + 1`. */
const valueDepth = (value: unknown, limit: number): number => {
  let max = 0
  const stack: Array<readonly [unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (typeof node !== "object" || node === null) continue
    if (depth > max) max = depth
    if (max > limit) return max
    for (const child of Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
    }
  }
  return max
}

interface PartialCall {
  readonly index: number
  id: string | undefined
  name: string
  args: string
  /** Why the arguments are refused before they are complete (too long, too deep). */
  refused: string | undefined
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
  /** Whether no chunk so far carried a choice. */
  readonly empty: () => boolean
}

const INPUT_DETAILS = [["cached_tokens", "cache_read"], ["audio_tokens", "audio"]] as const
const OUTPUT_DETAILS = [["reasoning_tokens", "reasoning"], ["audio_tokens", "audio"]] as const

/** A token count as the message schema takes it (a non-negative safe integer), or nothing. */
const tokenCount = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 && value <= Number.MAX_SAFE_INTEGER
    ? Math.floor(value)
    : undefined

const details = (source: unknown, keys: ReadonlyArray<readonly [string, string]>): JsonObject | undefined => {
  if (typeof source !== "object" || source === null) return undefined
  let out: Record<string, unknown> | undefined
  for (const [from, to] of keys) {
    const value = tokenCount((source as Record<string, unknown>)[from])
    if (value !== undefined) (out ??= {})[to] = value
  }
  return out
}

/**
 * The usage a server reported, best-effort: counts that are not non-negative numbers are left out, and
 * nothing usable means no usage (never a failed answer).
 */
export const usageOf = (raw: unknown): UsageMetadata | undefined => {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined
  const fields = raw as Record<string, unknown>
  const input = tokenCount(fields.prompt_tokens)
  const output = tokenCount(fields.completion_tokens)
  if (input === undefined && output === undefined) return undefined
  const inputDetails = details(fields.prompt_tokens_details, INPUT_DETAILS)
  const outputDetails = details(fields.completion_tokens_details, OUTPUT_DETAILS)
  const sum = (input ?? 0) + (output ?? 0)
  return {
    input_tokens: input ?? 0,
    output_tokens: output ?? 0,
    total_tokens: tokenCount(fields.total_tokens) ?? (Number.isSafeInteger(sum) ? sum : Number.MAX_SAFE_INTEGER),
    ...(inputDetails !== undefined ? { input_token_details: inputDetails } : {}),
    ...(outputDetails !== undefined ? { output_token_details: outputDetails } : {})
  }
}

const stringOf = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** The first issues of a parse error, one line each with their path (a full tree can run to dozens of lines). */
export const issuesText = (error: ParseResult.ParseError, max = 3): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const lines = issues.slice(0, max).map((issue) =>
    `${issue.path.length === 0 ? "" : `at ${issue.path.join(".")}: `}${issue.message.slice(0, 200)}`
  )
  if (issues.length > max) lines.push(`(${issues.length - max} more)`)
  return lines.join("; ")
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
        call = { index, id: undefined, name: "", args: "", refused: undefined }
        byIndex.set(index, call)
        calls.push(call)
      }
      return call
    }
    // No index (some servers): a new id starts a new call, otherwise the delta continues the last one.
    const last = calls[calls.length - 1]
    if (last !== undefined && (id == null || id === "" || id === last.id)) return last
    const call: PartialCall = { index: -1 - calls.length, id: undefined, name: "", args: "", refused: undefined }
    calls.push(call)
    return call
  }

  const add = (chunk: Chunk): ChunkText => {
    const chunkId = stringOf(chunk.id)
    if (chunkId !== undefined && completionId === undefined) completionId = chunkId
    const chunkModel = stringOf(chunk.model)
    if (chunkModel !== undefined && chunkModel !== "") modelName = chunkModel
    const chunkFingerprint = stringOf(chunk.system_fingerprint)
    if (chunkFingerprint !== undefined) fingerprint = chunkFingerprint
    if (chunk.usage != null) usage = usageOf(chunk.usage) ?? usage
    let textDelta = ""
    let reasoningDelta = ""
    for (const choice of chunk.choices ?? []) {
      // Only the first choice is read (we never ask for several).
      if (choice.index != null && choice.index !== 0) continue
      sawChoice = true
      const reason = stringOf(choice.finish_reason)
      if (reason !== undefined) finishReason = reason
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
        if (call.refused !== undefined || fn.arguments == null) continue
        let piece: string
        if (typeof fn.arguments === "string") piece = fn.arguments
        else if (valueDepth(fn.arguments, MAX_ARGUMENT_DEPTH) > MAX_ARGUMENT_DEPTH) {
          call.refused = `The arguments nest more than ${MAX_ARGUMENT_DEPTH} levels deep; flatten them.`
          continue
        } else piece = JSON.stringify(fn.arguments)
        if (call.args.length + piece.length > MAX_ARGUMENT_CHARS) {
          call.refused = `The arguments are longer than ${MAX_ARGUMENT_CHARS} characters.`
          call.args = call.args.slice(0, 2000)
          continue
        }
        call.args += piece
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
      if (call.refused !== undefined) {
        invalid.push({ id, name: call.name, args: call.args, error: call.refused, type: "invalid_tool_call" })
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
    const message: AIMessage = M.uniqueToolCallIds({
      type: "ai",
      id: messageId,
      content: text,
      additional_kwargs: reasoning === "" ? {} : { reasoning_content: reasoning },
      response_metadata: metadata,
      tool_calls: toolCalls,
      invalid_tool_calls: invalid,
      ...(usage !== undefined ? { usage_metadata: usage } : {})
    })
    const valid = validateMessage(message)
    if (Either.isLeft(valid)) {
      return Either.left(new ModelError({
        reason: "invalid_response",
        errorType: "InvalidResponseError",
        message: `The answer of model ${model} is not a valid message: ${issuesText(valid.left)}`
      }))
    }
    return Either.right(message)
  }

  return { add, finish, empty: () => !sawChoice }
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
  const where = `model ${model} at ${Redact.url(baseURL)}`
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
  /** The adapter's own secrets (its key, the credentials of its base URL), removed from every error. */
  readonly redactor: Redact.Redactor
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
      // A backstop only: the call's own watchdog ends a silent request after `timeoutMs` (see `generateWith`).
      timeout: timeoutMs + BACKSTOP_MS,
      maxRetries: 0,
      ...(options.headers !== undefined ? { defaultHeaders: { ...options.headers } } : {}),
      // The SDK logs unparsable stream events itself; they come back as ModelErrors, so stay quiet unless asked.
      logLevel: (logLevel ?? "off") as OpenAI["logLevel"]
    })
    return {
      client,
      baseURL,
      timeoutMs,
      redactor: Redact.make([key, ...Redact.urlSecrets(baseURL)]),
      model,
      maxTokens: options.maxTokens,
      temperature: options.temperature,
      supportsVision: options.supportsVision,
      supportsReasoningEffort: options.supportsReasoningEffort,
      supportsThinking: options.supportsThinking,
      extraBody: options.extraBody,
      whenThinkingEnabled: options.whenThinkingEnabled,
      whenThinkingDisabled: options.whenThinkingDisabled
    }
  })

/** The per-call HTTP state: the request's abort controller, when something last arrived, why it was ended. */
interface Call {
  readonly controller: AbortController
  /** Clock time of the request, the headers or the last chunk. */
  lastActivity: number
  headers: boolean
  timedOut: boolean
}

/** The longest error message kept (a server may answer with a whole HTML page). */
const MAX_ERROR_CHARS = 2000

/** The largest non-stream body read to say what it was (or to take a non-streamed answer from it). */
const MAX_BODY_BYTES = 4 * 1024 * 1024

/** The `llm_waiting` event: a model call has been silent for `waitedMs` (it gives up at `timeoutMs`). */
export const waitingEvent = (model: string, waitedMs: number, timeoutMs: number, started: boolean) => ({
  type: "llm_waiting" as const,
  model,
  waited_ms: waitedMs,
  timeout_ms: timeoutMs,
  message: `Waiting for model ${model}: ${started ? "its answer paused" : "no answer yet"}, ` +
    `nothing received for ${seconds(waitedMs)} (gives up after ${seconds(timeoutMs)}).`
})

const seconds = (ms: number): string => `${Number((ms / 1000).toFixed(1))}s`

/** How often a silent call says it is still waiting: every 15 s (twice per timeout when that is shorter). */
export const noticeEvery = (timeoutMs: number): number => Math.max(1, Math.min(15_000, Math.floor(timeoutMs / 2)))

/** Reads at most `limit` bytes of a body (the rest is cancelled) as text. */
const readBody = async (
  response: Response,
  limit: number
): Promise<{ readonly text: string; readonly cut: boolean }> => {
  const body = response.body
  if (body === null) return { text: "", cut: false }
  const reader = body.getReader()
  const parts: Array<Uint8Array> = []
  let size = 0
  let cut = false
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    parts.push(value)
    size += value.length
    if (size > limit) {
      cut = true
      await reader.cancel().catch(() => undefined)
      break
    }
  }
  return { text: new TextDecoder().decode(Buffer.concat(parts)).slice(0, limit), cut }
}

const ASSISTANT_FIELDS = ["content", "reasoning_content", "reasoning", "tool_calls"] as const

/**
 * What a non-stream body with status 2xx is: a whole (non-streamed) completion, turned into one chunk; an
 * error the server put in a 200; or anything else, described (content type, size, an HTML page's title).
 */
export const nonStreamBody = (
  contentType: string,
  text: string,
  cut: boolean,
  where: string
): Either.Either<Chunk, ModelError> => {
  let json: unknown
  try {
    json = Json.parse(text)
  } catch {
    json = undefined
  }
  if (typeof json === "object" && json !== null && !Array.isArray(json)) {
    const body = json as Record<string, unknown>
    const choice = Array.isArray(body.choices) ? body.choices[0] as Record<string, unknown> | undefined : undefined
    const message = choice?.message as Record<string, unknown> | null | undefined
    if (typeof message === "object" && message !== null) {
      const delta: Record<string, unknown> = {}
      for (const field of ASSISTANT_FIELDS) if (message[field] != null) delta[field] = message[field]
      if (Array.isArray(delta.tool_calls)) {
        delta.tool_calls = delta.tool_calls.map((call, index) => ({ index, ...(call as object) }))
      }
      const chunk = { ...body, choices: [{ index: 0, delta, finish_reason: choice?.finish_reason }] }
      return Either.mapLeft(decodeChunk(chunk), (error) =>
        new ModelError({
          reason: "invalid_response",
          errorType: "InvalidResponseError",
          message: `The model server sent a malformed non-streamed answer (${where}): ${issuesText(error)}`
        }))
    }
    const error = body.error as Record<string, unknown> | string | undefined
    if (error !== undefined && error !== null) {
      const detail = typeof error === "string" ? error : String(error.message ?? JSON.stringify(error))
      const code = typeof error === "object" && error.code != null ? String(error.code) : undefined
      return Either.left(
        new ModelError({
          reason: statusReason(undefined, code ?? String((error as { type?: unknown }).type ?? ""), detail),
          errorType: "APIError",
          message: `The model server answered with status 200 but with an error (${where}): ${detail}`,
          ...(code !== undefined ? { code } : {})
        })
      )
    }
    const keys = Object.keys(body).slice(0, 8).join(", ")
    return Either.left(
      new ModelError({
        reason: "invalid_response",
        errorType: "InvalidResponseError",
        message: `The model server answered with a JSON body that is not a chat completion (${where}): ` +
          `keys ${keys === "" ? "(none)" : keys}.`
      })
    )
  }
  const size = `${cut ? "more than " : ""}${text.length} characters`
  const title = /<title[^>]*>([^<]{0,200})/i.exec(text)?.[1]?.trim()
  const html = /html/i.test(contentType) || /^\s*<(!doctype|html|head|body)/i.test(text)
  const what = html
    ? `an HTML page${title ? ` titled "${title}"` : ""} (${size})`
    : `a ${contentType || "body without content type"} (${size}) beginning ${JSON.stringify(text.slice(0, 120))}`
  return Either.left(
    new ModelError({
      reason: "invalid_response",
      errorType: "InvalidResponseError",
      message: `The model server answered with status 200 but sent ${what} instead of an event stream (${where}). ` +
        `Check that the base URL points at an OpenAI-compatible API (it usually ends in /v1).`
    })
  )
}

const generateWith = (resolved: Resolved): ModelService["Type"]["generate"] => {
  const { baseURL, client, model, redactor, timeoutMs } = resolved
  const where = `model ${model} at ${Redact.url(baseURL)}`
  const every = noticeEvery(timeoutMs)
  const timeoutError = (call: Call) =>
    call.headers
      ? new ModelError({
        reason: "timeout",
        errorType: "StreamChunkTimeoutError",
        message: `The model server stopped sending its answer: nothing came for ${seconds(timeoutMs)} (${where}).`
      })
      : new ModelError({
        reason: "timeout",
        errorType: "APITimeoutError",
        message: `The model server did not start answering within ${seconds(timeoutMs)} (${where}).`
      })
  const malformed = (error: ParseResult.ParseError) =>
    new ModelError({
      reason: "invalid_response",
      errorType: "InvalidResponseError",
      message: `The model server sent a malformed stream chunk (${where}): ${issuesText(error)}`
    })
  // Nothing the server sent reaches a log, an event or the store with this adapter's secrets or raw controls.
  const safe = (text: string) => Redact.controls(redactor.text(text.slice(0, MAX_ERROR_CHARS)))
  const clean = (error: ModelError): ModelError => {
    const cause = error.cause as { name?: unknown; message?: unknown } | undefined
    return new ModelError({
      ...error,
      message: safe(error.message),
      cause: cause === undefined
        ? undefined
        : Object.assign(new Error(safe(String(cause.message ?? cause))), { name: String(cause.name ?? "Error") })
    })
  }
  const failWith = (call: Call) => (error: unknown) =>
    call.timedOut ? timeoutError(call) : toModelError(error, model, baseURL)

  return (request) =>
    Effect.gen(function*() {
      const sink = yield* RunEvents
      const clock = yield* Effect.clock
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
      const call: Call = {
        controller: new AbortController(),
        lastActivity: clock.unsafeCurrentTimeMillis(),
        headers: false,
        timedOut: false
      }
      const touch = () => {
        call.lastActivity = clock.unsafeCurrentTimeMillis()
      }

      // The watchdog: says that the call is waiting while nothing arrives, and ends it after `timeoutMs` of
      // silence (before the headers: a first-byte timeout; after: an idle stream). It runs on the Clock.
      const watchdog = Effect.gen(function*() {
        let since = call.lastActivity
        let notices = 0
        for (;;) {
          if (call.lastActivity !== since) {
            since = call.lastActivity
            notices = 0
          }
          const now = clock.unsafeCurrentTimeMillis()
          const waited = now - since
          if (waited >= timeoutMs) {
            call.timedOut = true
            call.controller.abort()
            return
          }
          if (waited >= every * (notices + 1)) {
            notices = Math.floor(waited / every)
            const data = waitingEvent(model, waited, timeoutMs, call.headers)
            yield* sink.emit({ type: "custom", name: "llm_waiting", data })
            continue
          }
          yield* Effect.sleep(Math.max(1, Math.min(since + timeoutMs, since + every * (notices + 1)) - now))
        }
      })

      const add = (chunk: unknown): Effect.Effect<void, ModelError> => {
        const decoded = decodeChunk(chunk)
        if (Either.isLeft(decoded)) return Effect.fail(malformed(decoded.left))
        const delta = acc.add(decoded.right)
        if (silent || (delta.text === "" && delta.reasoning === "")) return Effect.void
        return token(delta)
      }

      const consume = Effect.gen(function*() {
        const { data: stream, response } = yield* Effect.tryPromise({
          try: () => client.chat.completions.create(body, { signal: call.controller.signal }).withResponse(),
          catch: failWith(call)
        })
        call.headers = true
        touch()
        const contentType = response.headers.get("content-type") ?? ""
        if (!/event-stream/i.test(contentType) && /json|html/i.test(contentType)) {
          const { cut, text } = yield* Effect.tryPromise({
            try: () => readBody(response, MAX_BODY_BYTES),
            catch: failWith(call)
          })
          const chunk = nonStreamBody(contentType, text, cut, where)
          if (Either.isLeft(chunk)) return yield* Effect.fail(chunk.left)
          return yield* add(chunk.right)
        }
        const iterator = stream[Symbol.asyncIterator]()
        const next = Effect.tryPromise({ try: () => iterator.next(), catch: failWith(call) })
        for (;;) {
          const result = yield* next
          if (call.timedOut) return yield* Effect.fail(timeoutError(call))
          if (result.done === true) break
          touch()
          yield* add(result.value)
        }
        if (acc.empty()) {
          return yield* Effect.fail(
            new ModelError({
              reason: "empty_response",
              errorType: "EmptyResponseError",
              message: `The model server answered with status 200 and content type ` +
                `${contentType === "" ? "(none)" : contentType}, but its stream held no answer (${where}).`
            })
          )
        }
      })

      const done = Effect.gen(function*() {
        yield* Effect.forkScoped(watchdog)
        yield* consume
        return yield* Either.match(acc.finish(), {
          onLeft: Effect.fail,
          onRight: (message) => Effect.succeed({ message })
        })
      }).pipe(
        Effect.scoped,
        // Ends the HTTP request when the call is interrupted or fails; after a complete answer it is a no-op.
        Effect.ensuring(Effect.sync(() => call.controller.abort())),
        // A bug here must not take the run down: it is a failed model call like any other.
        Effect.catchAllDefect((defect) => Effect.fail(toModelError(defect, model, baseURL))),
        Effect.mapError(clean)
      )
      const response = yield* done
      // what a trace viewer shows per call (OpenTelemetry's GenAI attribute names)
      const usage = response.message.usage_metadata
      if (usage !== undefined) {
        yield* Effect.annotateCurrentSpan({
          "gen_ai.usage.input_tokens": usage.input_tokens,
          "gen_ai.usage.output_tokens": usage.output_tokens
        })
      }
      return response
    }).pipe(Effect.withSpan("OpenAiModel.generate", {
      attributes: { model, "gen_ai.request.model": model, internal: request.internal ?? false }
    }))
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
  baseURL: config.base_url ?? config.api_base ?? ModelUse.defaultBaseUrl(config.use),
  apiKey: config.api_key,
  model: config.model,
  timeoutMs: (config.request_timeout ?? config.timeout) !== undefined
    ? (config.request_timeout ?? config.timeout)! * 1000
    : undefined,
  maxTokens: config.max_tokens,
  temperature: config.temperature,
  supportsVision: config.supports_vision,
  supportsThinking: config.supports_thinking,
  supportsReasoningEffort: config.supports_reasoning_effort,
  headers: config.default_headers,
  extraBody: config.extra_body ?? undefined,
  whenThinkingEnabled: whenThinkingEnabled(config),
  whenThinkingDisabled: config.when_thinking_disabled ?? undefined
})

/** `when_thinking_enabled` with DeerFlow's `thinking` shortcut merged into its `thinking` field. */
const whenThinkingEnabled = (config: ModelConfig): Readonly<Record<string, unknown>> | undefined => {
  const base = config.when_thinking_enabled ?? undefined
  if (config.thinking == null) return base
  const merged = { ...(isPlainObject(base?.thinking) ? base.thinking : {}), ...config.thinking }
  return { ...base, thinking: merged }
}

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
