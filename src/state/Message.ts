/**
 * Messages in LangChain's serialised JSON shape (`type: "human" | "ai" | "tool" | "system"`), so that threads
 * stay readable by LangGraph clients and DeerFlow's UI. Pure schemas and helpers: no services, no I/O.
 */
import * as Schema from "effect/Schema"
import { extend } from "./internal/Objects.js"
import * as Json from "./Json.js"

/** A free-form JSON object (`additional_kwargs`, `response_metadata`, tool arguments). */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type JsonObject = typeof JsonObject.Type

/** `{ type: "text", text }` */
export const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
export type TextBlock = typeof TextBlock.Type

/** `{ type: "image_url", image_url: { url, detail? } }` (OpenAI's shape, which LangChain keeps). */
export const ImageUrlBlock = Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: Schema.Struct({ url: Schema.String, detail: Schema.optional(Schema.String) })
})
export type ImageUrlBlock = typeof ImageUrlBlock.Type

/** Any other provider block (reasoning, thinking, ...) is carried through untouched. */
export const OtherBlock = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
  Schema.filter((block) => typeof block.type === "string" || "`type` must be a string", {
    identifier: "OtherBlock",
    arbitrary: () => (fc) => fc.record({ type: fc.constantFrom("reasoning", "thinking"), reasoning: fc.string() })
  })
)

export const ContentBlock = Schema.Union(TextBlock, ImageUrlBlock, OtherBlock)
export type ContentBlock = typeof ContentBlock.Type

/** Message content: a string, or a list of blocks. */
export const Content = Schema.Union(Schema.String, Schema.Array(ContentBlock))
export type Content = typeof Content.Type

/** A parsed tool call. `args` is always a JSON object; calls whose arguments did not parse are `InvalidToolCall`s. */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  args: JsonObject,
  type: Schema.optional(Schema.Literal("tool_call"))
})
export type ToolCall = typeof ToolCall.Type

/** A tool call the model produced but that could not be parsed (LangChain's `invalid_tool_calls`). */
export const InvalidToolCall = Schema.Struct({
  id: Schema.NullOr(Schema.String),
  name: Schema.NullOr(Schema.String),
  args: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  type: Schema.optional(Schema.Literal("invalid_tool_call"))
})
export type InvalidToolCall = typeof InvalidToolCall.Type

const TokenCount = Schema.Number.pipe(Schema.int(), Schema.nonNegative())

/** Token usage of one model call (LangChain's `usage_metadata`). */
export const UsageMetadata = Schema.Struct({
  input_tokens: TokenCount,
  output_tokens: TokenCount,
  total_tokens: TokenCount,
  input_token_details: Schema.optional(JsonObject),
  output_token_details: Schema.optional(JsonObject)
})
export type UsageMetadata = typeof UsageMetadata.Type

/**
 * The tokens a call spent, as DeerFlow's token collector counts them: its total, or input + output when a provider
 * reported a total of 0.
 */
export const spentTokens = (usage: {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly total_tokens: number
}): number => usage.total_tokens > 0 ? usage.total_tokens : usage.input_tokens + usage.output_tokens

const common = {
  id: Schema.String,
  content: Content,
  name: Schema.optional(Schema.String),
  additional_kwargs: Schema.optional(JsonObject),
  response_metadata: Schema.optional(JsonObject)
}

export const HumanMessage = Schema.Struct({ type: Schema.Literal("human"), ...common })
export type HumanMessage = typeof HumanMessage.Type

export const SystemMessage = Schema.Struct({ type: Schema.Literal("system"), ...common })
export type SystemMessage = typeof SystemMessage.Type

const AIMessageFields = Schema.Struct({
  type: Schema.Literal("ai"),
  ...common,
  tool_calls: Schema.optional(Schema.Array(ToolCall)),
  invalid_tool_calls: Schema.optional(Schema.Array(InvalidToolCall)),
  usage_metadata: Schema.optional(UsageMetadata)
})
export type AIMessage = typeof AIMessageFields.Type

// ---------------------------------------------------------------------------------------------------------
// Raw provider tool calls (`additional_kwargs.tool_calls`)

const asRecord = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined

/**
 * The raw provider calls of an AI message, when they are the only calls it has: LangChain's rule, under which
 * `additional_kwargs.tool_calls` counts only while `tool_calls` and `invalid_tool_calls` are both empty.
 */
export const rawToolCalls = (message: AIMessage): ReadonlyArray<unknown> | undefined => {
  if ((message.tool_calls?.length ?? 0) > 0 || (message.invalid_tool_calls?.length ?? 0) > 0) return undefined
  const raw = message.additional_kwargs?.tool_calls
  return Array.isArray(raw) && raw.length > 0 ? raw : undefined
}

const hasText = (value: unknown): value is string => typeof value === "string" && value.trim() !== ""

/**
 * One raw call: OpenAI's `{ id, type, function: { name, arguments } }`, or a flat `{ id, name, args | arguments }`.
 * A usable flat `name` wins over the function's (DeerFlow's reading: an empty `function.name` does not blank a
 * call that names its tool).
 */
export const readRawToolCall = (entry: Record<string, unknown>): {
  readonly id: unknown
  readonly name: unknown
  readonly args: unknown
} => {
  const fn = asRecord(entry.function)
  return fn !== undefined
    ? { id: entry.id, name: hasText(entry.name) ? entry.name : fn.name, args: fn.arguments }
    : { id: entry.id, name: entry.name, args: entry.args ?? entry.arguments }
}

const parseArgs = (args: unknown): { readonly args: JsonObject } | { readonly error: string } => {
  if (args === undefined || args === null) return { args: {} }
  const record = asRecord(args)
  if (record !== undefined) return { args: record }
  if (typeof args !== "string") return { error: "the arguments are not a JSON object" }
  try {
    const parsed = asRecord(Json.parse(args))
    return parsed !== undefined ? { args: parsed } : { error: "the arguments are not a JSON object" }
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) }
  }
}

/**
 * The message with its raw provider calls parsed into `tool_calls` (arguments that are a JSON object) and
 * `invalid_tool_calls` (the others), as LangChain does when it builds an AIMessage, and the raw copy dropped so
 * that every reader sees the same calls. Every object entry becomes a call (one without an id or a name keeps
 * it blank, for DanglingToolCall to repair); the same message when there is nothing to parse.
 */
export const parseRawToolCalls = (message: AIMessage): AIMessage => {
  const raw = rawToolCalls(message)
  if (raw === undefined) return message
  const tool_calls: Array<ToolCall> = []
  const invalid_tool_calls: Array<InvalidToolCall> = []
  for (const item of raw) {
    const entry = asRecord(item)
    if (entry === undefined) continue
    const { id, name, args } = readRawToolCall(entry)
    const parsed = parseArgs(args)
    if ("args" in parsed) {
      tool_calls.push({
        id: typeof id === "string" ? id : "",
        name: typeof name === "string" ? name : "",
        args: parsed.args,
        type: "tool_call"
      })
    } else {
      invalid_tool_calls.push({
        id: typeof id === "string" ? id : null,
        name: typeof name === "string" ? name : null,
        args: typeof args === "string" ? args : null,
        error: parsed.error,
        type: "invalid_tool_call"
      })
    }
  }
  const { tool_calls: _raw, ...kwargs } = message.additional_kwargs ?? {}
  return { ...message, tool_calls, invalid_tool_calls, additional_kwargs: kwargs }
}

/**
 * An AI message. Decoding (a stored or imported thread, a request body) parses calls kept only in the raw
 * provider payload into `tool_calls` / `invalid_tool_calls` (see `parseRawToolCalls`).
 */
export const AIMessage = Schema.transform(AIMessageFields, Schema.typeSchema(AIMessageFields), {
  strict: true,
  decode: parseRawToolCalls,
  encode: (message) => message
})

export const ToolMessage = Schema.Struct({
  type: Schema.Literal("tool"),
  ...common,
  tool_call_id: Schema.String,
  status: Schema.optional(Schema.Literal("success", "error")),
  artifact: Schema.optional(Schema.Unknown)
})
export type ToolMessage = typeof ToolMessage.Type

/** Any message that can live in thread state. */
export const Message = Schema.Union(HumanMessage, AIMessage, ToolMessage, SystemMessage)
export type Message = typeof Message.Type

/** The id of the remove-all marker: a write containing it keeps only what follows the last marker. */
export const REMOVE_ALL_MESSAGES = "__remove_all__"

/** A deletion in a messages write (`RemoveMessage` in LangChain). */
export const RemoveMessage = Schema.Struct({ type: Schema.Literal("remove"), id: Schema.String })
export type RemoveMessage = typeof RemoveMessage.Type

/** One item of a messages write: a message to add or replace by id, or a removal. */
export const MessageWrite = Schema.Union(HumanMessage, AIMessage, ToolMessage, SystemMessage, RemoveMessage)
export type MessageWrite = typeof MessageWrite.Type

// ---------------------------------------------------------------------------------------------------------
// Constructors. Ids are required in state; callers that do not care get a random one.

/** A random message id. */
export const newId = (): string => crypto.randomUUID()

type Extra<M> = Partial<Omit<M, "type" | "content">>

/** A human message. */
export const human = (content: Content, extra: Extra<HumanMessage> = {}): HumanMessage => ({
  type: "human",
  id: extra.id ?? newId(),
  content,
  ...extra
})

/** A system message. */
export const system = (content: Content, extra: Extra<SystemMessage> = {}): SystemMessage => ({
  type: "system",
  id: extra.id ?? newId(),
  content,
  ...extra
})

/** An AI message. */
export const ai = (content: Content, extra: Extra<AIMessage> = {}): AIMessage => ({
  type: "ai",
  id: extra.id ?? newId(),
  content,
  ...extra
})

/** A tool result for the call `toolCallId`. */
export const tool = (
  content: Content,
  toolCallId: string,
  extra: Partial<Omit<ToolMessage, "type" | "content" | "tool_call_id">> = {}
): ToolMessage => ({ type: "tool", id: extra.id ?? newId(), content, tool_call_id: toolCallId, ...extra })

/** A deletion of the message with this id (or of every message, with `REMOVE_ALL_MESSAGES`). */
export const remove = (id: string): RemoveMessage => ({ type: "remove", id })

// ---------------------------------------------------------------------------------------------------------
// Readers

/** The plain text of a message content: the string, or its text blocks joined with newlines. */
export const contentText = (content: Content): string => {
  if (typeof content === "string") return content
  let out = ""
  for (const block of content) {
    if (block.type === "text" && typeof block.text === "string") out = out === "" ? block.text : `${out}\n${block.text}`
  }
  return out
}

/** The text of a message. */
export const text = (message: Message): string => contentText(message.content)

/** The structured tool calls of an AI message (empty for other messages). */
export const toolCalls = (message: Message): ReadonlyArray<ToolCall> =>
  message.type === "ai" ? message.tool_calls ?? [] : []

/** The invalid tool calls of an AI message (empty for other messages). */
export const invalidToolCalls = (message: Message): ReadonlyArray<InvalidToolCall> =>
  message.type === "ai" ? message.invalid_tool_calls ?? [] : []

/** The id an invalid tool call is answered under: its own id, else one derived from its message and position. */
export const invalidCallId = (message: AIMessage, call: InvalidToolCall, index: number): string =>
  call.id ?? `${message.id}_invalid_${index}`

/**
 * The message with every tool call under its own id: a model may repeat an id within one response (or send
 * an empty one), and a repeated id would run twice, be answered twice and come back on the next request.
 * Repeats (among `tool_calls` and `invalid_tool_calls`, in that order) get `<id>_2`, `<id>_3`... (skipping
 * ids already taken); an empty id gets one derived from the message. The first call keeps its id, so results
 * already written under it stay paired. `earlier`: ids the thread used before this message (a model may send
 * `call_0` every turn), taken too. Returns the same message when the ids were unique.
 */
export const uniqueToolCallIds = (message: AIMessage, earlier: ReadonlySet<string> = new Set()): AIMessage => {
  const calls = message.tool_calls ?? []
  const invalid = message.invalid_tool_calls ?? []
  if (
    calls.length + invalid.length < 2 && calls.every((c) => c.id !== "" && !earlier.has(c.id)) &&
    invalid.every((c) => c.id !== "" && (c.id === null || !earlier.has(c.id)))
  ) {
    return message
  }
  const taken = new Set<string>(earlier)
  const all: Array<string> = []
  for (const call of calls) all.push(call.id)
  invalid.forEach((call, i) => all.push(invalidCallId(message, call, i)))
  const ids = new Set(all)
  let changed = false
  const fresh = (id: string, position: number): string => {
    const base = id === "" ? `${message.id}_call_${position}` : id
    if (id !== "" && !taken.has(id)) {
      taken.add(id)
      return id
    }
    changed = true
    let candidate = base
    for (let n = 2; taken.has(candidate) || (candidate !== id && ids.has(candidate)); n++) {
      candidate = `${base}_${n}`
    }
    taken.add(candidate)
    return candidate
  }
  const newCalls = calls.map((call, i) => {
    const id = fresh(call.id, i)
    return id === call.id ? call : { ...call, id }
  })
  const newInvalid = invalid.map((call, i) => {
    const current = invalidCallId(message, call, i)
    const id = fresh(current, calls.length + i)
    return id === call.id ? call : { ...call, id }
  })
  if (!changed) return message
  return {
    ...message,
    ...(message.tool_calls !== undefined ? { tool_calls: newCalls } : {}),
    ...(message.invalid_tool_calls !== undefined ? { invalid_tool_calls: newInvalid } : {})
  }
}

/** Whether an AI message asks for any tool (structured or invalid). */
export const hasToolCalls = (message: Message): boolean =>
  message.type === "ai" && ((message.tool_calls?.length ?? 0) > 0 || (message.invalid_tool_calls?.length ?? 0) > 0)

/** A key of `additional_kwargs`, if present. */
export const kwarg = (message: Message, key: string): unknown => message.additional_kwargs?.[key]

/**
 * The message with these keys set in its `additional_kwargs` (the others kept), built with `Objects.extend`: the
 * result shares its hidden class with every message of the same shape (see `Objects`).
 */
export const withKwargs = <A extends Message>(message: A, fields: Readonly<Record<string, unknown>>): A =>
  extend(message, { additional_kwargs: extend(message.additional_kwargs ?? {}, fields) }) as unknown as A

/** Whether the message is hidden from the UI and from memory (`additional_kwargs.hide_from_ui`). */
export const isHidden = (message: Message): boolean => message.additional_kwargs?.hide_from_ui === true

const filled = (value: unknown): boolean => typeof value === "string" && value.trim() !== ""

/**
 * Whether `additional_kwargs.human_input_response` is a well-formed answer to a clarification question, as
 * DeerFlow's `read_human_input_response` reads it: version 1, its kind, a non-blank source, request id and value,
 * and for an option a non-blank option id.
 */
export const isHumanInputResponse = (response: unknown): boolean => {
  if (typeof response !== "object" || response === null || Array.isArray(response)) return false
  const r = response as Record<string, unknown>
  if (r.version !== 1 || r.kind !== "human_input_response") return false
  if (!filled(r.source) || !filled(r.request_id) || !filled(r.value)) return false
  return r.response_kind === "text" || (r.response_kind === "option" && filled(r.option_id))
}

/**
 * A message the user wrote, as DeerFlow's `is_real_user_message` tells it: human, not hidden, not a summary. A
 * hidden answer to a clarification question is not one (it drives no user-intent feature: routing, slash skills).
 */
export const isRealUserMessage = (message: Message): boolean =>
  message.type === "human" && !isHidden(message) && message.name !== "summary"

/**
 * Appends text to a content value: `"\n\n" + text` for strings, a new text block for lists (`"\n\n" + text` after
 * visible text, as DeerFlow's, so it is a paragraph of its own where blocks are joined with one line break).
 * Blank content gets the text alone.
 */
export const appendText = (content: Content, addition: string): Content => {
  if (typeof content === "string") return content.trim() === "" ? addition : `${content}\n\n${addition}`
  return [...content, { type: "text", text: contentText(content).trim() === "" ? addition : `\n\n${addition}` }]
}
