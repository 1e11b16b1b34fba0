/**
 * Chunk accumulation (pure): the stream chunks of one completion, decoded leniently with Schema (servers
 * differ; what only describes the answer is read best-effort), assembled into one validated AI message —
 * text, reasoning (`reasoning_content` / `reasoning`), tool calls by index or id with their arguments bounded
 * as they grow, usage, and the completion's metadata. Each chunk's text and reasoning deltas are handed back
 * for the run's `token` events.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as TextBuilder from "../../internal/TextBuilder.js"
import { ModelError } from "../../services/ModelService.js"
import type { AIMessage, InvalidToolCall, JsonObject, ToolCall, UsageMetadata } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import type { Redactor } from "../../state/Redact.js"
import { MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, parseArguments, valueDepth } from "./ToolArguments.js"
import { isRecord } from "../../state/Json.js"

const OptionalString = Schema.optional(Schema.NullOr(Schema.String))
const AnyObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const OptionalNumber = Schema.optional(Schema.NullOr(Schema.Number))

const ToolCallDelta = Schema.Struct({
  index: OptionalNumber,
  id: OptionalString,
  // Gemini's signature of the thinking behind a call, through an OpenAI-compatible gateway (either spelling)
  thought_signature: Schema.optional(Schema.Unknown),
  thoughtSignature: Schema.optional(Schema.Unknown),
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
      // vLLM's reasoning parsers send a text, some of them a structure (read as text: `reasoningText`)
      reasoning: Schema.optional(Schema.Unknown),
      // MiniMax's, with `reasoning_split: true`: `[{ type: "reasoning.text", text }]`
      reasoning_details: Schema.optional(Schema.Unknown),
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCallDelta)))
    }))),
    finish_reason: Schema.optional(Schema.Unknown)
  })))),
  usage: Schema.optional(Schema.Unknown)
})
export type Chunk = typeof Chunk.Type

const decodeWithSchema = Schema.decodeUnknownEither(Chunk)

const optionalString = (u: unknown) => u === undefined || u === null || typeof u === "string"

/** A choice with no tool calls whose fields are what `Chunk` says (the chunk of a streamed token). */
const plainChoice = (u: unknown): boolean => {
  if (!isRecord(u)) return false
  const delta = u.delta
  return delta === undefined || delta === null || (
    isRecord(delta) && optionalString(delta.content) && optionalString(delta.reasoning_content) &&
    optionalString(delta.reasoning) && (delta.tool_calls === undefined || delta.tool_calls === null)
  )
}

/**
 * Decodes one chunk (unknown input) without throwing. A chunk of text or reasoning (one per streamed token) is
 * checked here, field by field as `Chunk` would, and read as it is (the accumulator reads only `Chunk`'s fields);
 * anything else (tool calls), or a chunk that fails the check, goes through the Schema, which says what is wrong.
 */
export const decodeChunk = (u: unknown): Either.Either<Chunk, ParseResult.ParseError> => {
  if (isRecord(u)) {
    const choices = u.choices
    if (choices === undefined || choices === null || (Array.isArray(choices) && choices.every(plainChoice))) {
      return Either.right(u as Chunk)
    }
  }
  return decodeWithSchema(u)
}
const validateMessage = Schema.decodeUnknownEither(M.AIMessage)

interface PartialCall {
  readonly index: number
  id: string | undefined
  name: string
  /** The arguments so far (compact while they stream in many pieces). */
  args: TextBuilder.TextBuilder
  /** Why the arguments are refused before they are complete (too long, too deep). */
  refused: string | undefined
  /** The call's `thought_signature`, when the server gave one (`THOUGHT_SIGNATURES`). */
  signature?: string | undefined
}

/**
 * Where an answer keeps the `thought_signature` of each of its tool calls (by call id): a Gemini thinking model
 * behind an OpenAI-compatible gateway refuses the next request unless each call comes back with its signature
 * (DeerFlow's `PatchedChatOpenAI`), which `RequestMapping` sends.
 */
export const THOUGHT_SIGNATURES = "thought_signatures"

/** The longest signature kept (a longer one is dropped: the call goes back without it). */
export const MAX_SIGNATURE_CHARS = 65_536

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
  /** Whether the answer reached `MAX_ANSWER_CHARS` and was cut there (what follows is not read). */
  readonly full: () => boolean
}

/**
 * The most of an answer a stream is read for (its text, reasoning, tool calls' arguments, names, ids and signatures, in
 * characters), as a whole answer's body is read up to `MAX_BODY_BYTES`: past it the answer is cut, with finish reason
 * `length`.
 */
export const MAX_ANSWER_CHARS = 4 * 1024 * 1024

/** The most tool calls an answer holds: past them it is cut with finish reason `length`, as past `MAX_ANSWER_CHARS`. */
export const MAX_TOOL_CALLS = 1000

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

/** How deep a structured reasoning value is read (deeper parts are left out). */
const MAX_REASONING_DEPTH = 8

/**
 * A `reasoning` field as text, as DeerFlow's `VllmChatModel` reads it: a text as it is, a list's parts joined, an
 * object's `text`, `content` or `reasoning`, anything else as JSON; nothing for null. Bounded in depth.
 */
export const reasoningText = (value: unknown, depth = 0): string | undefined => {
  if (value === undefined || value === null) return undefined
  if (typeof value === "string") return value
  if (depth >= MAX_REASONING_DEPTH) return ""
  if (Array.isArray(value)) return value.map((item) => reasoningText(item, depth + 1) ?? "").join("")
  if (isRecord(value)) {
    for (const key of ["text", "content", "reasoning"]) {
      const field = value[key]
      if (typeof field === "string") return field
      if (field !== undefined && field !== null) {
        const text = reasoningText(field, depth + 1)
        if (text !== undefined && text !== "") return text
      }
    }
  }
  return valueDepth(value, MAX_REASONING_DEPTH) > MAX_REASONING_DEPTH ? "" : JSON.stringify(value) ?? ""
}

/**
 * MiniMax's `reasoning_details` as text (DeerFlow's `PatchedChatMiniMax`): the `text` of each item, blank ones
 * left out, joined by a blank line; nothing when there is none.
 */
export const reasoningDetailsText = (value: unknown): string | undefined => {
  if (!Array.isArray(value)) return undefined
  const parts = value.flatMap((item) =>
    isRecord(item) && typeof item.text === "string" && item.text.trim() !== "" ? [item.text] : []
  )
  return parts.length === 0 ? undefined : parts.join("\n\n")
}

/**
 * The first issues of a parse error, one line each with their path (a full tree can run to dozens of lines). Each
 * message (which may quote what the server sent) is cut at 200 characters and given to `hide` (a redactor's `last`: a
 * cut inside a secret hides its beginning, which the text after it would keep from any later mask of the whole value).
 */
export const issuesText = (
  error: ParseResult.ParseError,
  max = 3,
  hide: (cutText: string) => string = (text) => text
): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const lines = issues.slice(0, max).map((issue) =>
    `${issue.path.length === 0 ? "" : `at ${issue.path.join(".")}: `}${hide(issue.message.slice(0, 200))}`
  )
  if (issues.length > max) lines.push(`(${issues.length - max} more)`)
  return lines.join("; ")
}

/**
 * A fresh accumulator for the message `messageId`; `model` is reported when the server names none. `hide` (the
 * adapter's, the process's and the run's secrets) masks a call's arguments before they are cut (refused as too long)
 * or quoted by the parser's error (`JSON.parse` quotes a few characters where it stopped: a key's beginning).
 */
export const accumulator = (messageId: string, model: string, hide?: () => Redactor): Accumulator => {
  let completionId: string | undefined
  let modelName: string | undefined
  let fingerprint: string | undefined
  let sawChoice = false
  // the answer so far (compact: read whole when it is finished)
  const text = TextBuilder.make()
  const reasoning = TextBuilder.make()
  let finishReason: string | undefined
  let usage: UsageMetadata | undefined
  const calls: Array<PartialCall> = []
  const byIndex = new Map<number, PartialCall>()
  let size = 0
  let full = false

  /** Whether `chars` more fit in the answer (counted when they do; past the bound the answer is full). */
  const fits = (chars: number): boolean => {
    if (size + chars <= MAX_ANSWER_CHARS) {
      size += chars
      return true
    }
    full = true
    return false
  }

  /** The part of `piece` the answer still has room for (all of it, until `MAX_ANSWER_CHARS`). */
  const room = (piece: string): string => {
    if (fits(piece.length)) return piece
    const kept = piece.slice(0, MAX_ANSWER_CHARS - size)
    size = MAX_ANSWER_CHARS
    return kept
  }

  /** Whether the answer holds another call (past `MAX_TOOL_CALLS` it is full). */
  const fresh = (): boolean => {
    if (calls.length < MAX_TOOL_CALLS) return true
    full = true
    return false
  }

  /** The call a delta continues, or a new one; none when a new one would pass `MAX_TOOL_CALLS` (then full). */
  const callFor = (index: number | null | undefined, id: string | null | undefined): PartialCall | undefined => {
    if (typeof index === "number") {
      let call = byIndex.get(index)
      if (call === undefined) {
        if (!fresh()) return undefined
        call = { index, id: undefined, name: "", args: TextBuilder.make(), refused: undefined }
        byIndex.set(index, call)
        calls.push(call)
      }
      return call
    }
    // No index (some servers): a new id starts a new call, otherwise the delta continues the last one.
    const last = calls[calls.length - 1]
    if (last !== undefined && (id == null || id === "" || id === last.id)) return last
    if (!fresh()) return undefined
    const call: PartialCall = {
      index: -1 - calls.length,
      id: undefined,
      name: "",
      args: TextBuilder.make(),
      refused: undefined
    }
    calls.push(call)
    return call
  }

  const add = (chunk: Chunk): ChunkText => {
    if (full) return { text: "", reasoning: "" }
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
      if (delta.content != null && delta.content !== "") textDelta += room(delta.content)
      const thought = delta.reasoning_content ?? reasoningText(delta.reasoning) ??
        reasoningDetailsText(delta.reasoning_details)
      if (thought != null && thought !== "") reasoningDelta += room(thought)
      for (const part of delta.tool_calls ?? []) {
        if (full) break
        const call = callFor(part.index, part.id)
        if (call === undefined) break
        // (its id, name and signature count toward the answer's bound, as its arguments do)
        if (part.id != null && part.id !== "" && call.id === undefined && fits(part.id.length)) call.id = part.id
        const signature = part.thought_signature ?? part.thoughtSignature
        if (
          typeof signature === "string" && signature !== "" && signature.length <= MAX_SIGNATURE_CHARS &&
          fits(signature.length - (call.signature?.length ?? 0))
        ) {
          call.signature = signature
        }
        const fn = part.function
        if (fn == null) continue
        if (fn.name != null && fn.name !== "" && call.name === "" && fits(fn.name.length)) call.name = fn.name
        if (call.refused !== undefined || fn.arguments == null) continue
        let piece: string
        if (typeof fn.arguments === "string") piece = fn.arguments
        else if (valueDepth(fn.arguments, MAX_ARGUMENT_DEPTH) > MAX_ARGUMENT_DEPTH) {
          call.refused = `The arguments nest more than ${MAX_ARGUMENT_DEPTH} levels deep; flatten them.`
          continue
        } else piece = JSON.stringify(fn.arguments)
        if (call.args.length() + piece.length > MAX_ARGUMENT_CHARS) {
          call.refused = `The arguments are longer than ${MAX_ARGUMENT_CHARS} characters.`
          const all = call.args.text()
          const kept = (hide === undefined ? all : hide().text(all)).slice(0, 2000)
          call.args = TextBuilder.make()
          call.args.append(kept)
          continue
        }
        call.args.append(room(piece))
      }
    }
    if (full) finishReason = "length"
    text.append(textDelta)
    reasoning.append(reasoningDelta)
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
    if (text.length() === 0 && reasoning.length() === 0 && calls.length === 0 && !cut) {
      return Either.left(new ModelError({
        reason: "empty_response",
        errorType: "EmptyResponseError",
        message: `Model ${model} generated nothing (no text and no tool calls).`
      }))
    }
    const toolCalls: Array<ToolCall> = []
    const signatures: Array<string | undefined> = []
    const invalid: Array<InvalidToolCall> = []
    // (the parser's error of the arguments masked: what it quotes of them is cut where it stopped)
    const parseError = (args: string, error: string): string => {
      if (hide === undefined || !hide().test(args)) return error
      const masked = parseArguments(hide().text(args))
      return "error" in masked ? masked.error : "The arguments are not valid JSON."
    }
    const indexed = calls.length > 1 && calls.every((call) => call.index >= 0)
    const sorted = indexed ? [...calls].sort((a, b) => a.index - b.index) : calls
    for (const call of sorted) {
      const id = call.id ?? `call_${crypto.randomUUID()}`
      const args = call.args.text()
      if (call.name === "") {
        const error = "The tool call has no function name."
        invalid.push({ id, name: null, args, error, type: "invalid_tool_call" })
        continue
      }
      if (call.refused !== undefined) {
        invalid.push({ id, name: call.name, args, error: call.refused, type: "invalid_tool_call" })
        continue
      }
      const parsed = parseArguments(args)
      if ("args" in parsed) {
        toolCalls.push({ id, name: call.name, args: parsed.args, type: "tool_call" })
        signatures.push(call.signature)
      } else {
        invalid.push({ id, name: call.name, args, error: parseError(args, parsed.error), type: "invalid_tool_call" })
      }
    }
    const metadata: Record<string, unknown> = { model_name: modelName ?? model }
    if (finishReason !== undefined) metadata.finish_reason = finishReason
    if (completionId !== undefined) metadata.id = completionId
    if (fingerprint !== undefined) metadata.system_fingerprint = fingerprint
    const unique: AIMessage = M.uniqueToolCallIds({
      type: "ai",
      id: messageId,
      content: text.text(),
      additional_kwargs: reasoning.length() === 0 ? {} : { reasoning_content: reasoning.text() },
      response_metadata: metadata,
      tool_calls: toolCalls,
      invalid_tool_calls: invalid,
      ...(usage !== undefined ? { usage_metadata: usage } : {})
    })
    // (by the calls' ids as the answer keeps them: made unique above, in the same order)
    const signed = (unique.tool_calls ?? []).flatMap((c, i) =>
      signatures[i] === undefined ? [] : [[c.id, signatures[i]] as const]
    )
    const message: AIMessage = signed.length === 0 ? unique : {
      ...unique,
      additional_kwargs: { ...unique.additional_kwargs, [THOUGHT_SIGNATURES]: Object.fromEntries(signed) }
    }
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

  return { add, finish, empty: () => !sawChoice, full: () => full }
}
