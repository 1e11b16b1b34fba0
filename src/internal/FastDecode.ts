/**
 * Decoding stored thread state without Schema's per-field cost, for freshly parsed JSON.
 *
 * A thread's rows are Schema-decoded when they are loaded. Schema builds a new object for every struct and
 * record it passes and a result for every field: a 2,000-message thread allocated about 35 MB and took about
 * 40 ms to load. The messages are nearly all of it, and nearly all of them are plain: no raw provider tool
 * calls to parse, nothing to default.
 *
 * So a message is first checked here, field by field, against what `Message` / `MessageWrite` accept. When it
 * passes, the parsed value itself is the result: Schema would have returned an equal value (with
 * `onExcessProperty: "preserve"`, as the stores decode). The check is deliberately narrower than the schemas.
 * On anything it is not sure of, such as a `__proto__` key, raw tool calls to parse or a value of the wrong
 * type, the whole value goes through Schema. That gives the same result, or the same error with its path, as
 * before. The other fields of an update or a snapshot are small and always go through Schema.
 *
 * The values returned share the input's objects. Use this only on values nothing else holds (`JSON.parse`
 * output).
 */
import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { AIMessage, Message, MessageWrite } from "../state/Message.js"
import { rawToolCalls } from "../state/Message.js"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"

type Rec = Record<string, unknown>

const PROTO = "__proto__"

/** A JSON object whose own keys Schema would copy as they are (a `__proto__` key it would not). */
const isRecord = (value: unknown): value is Rec =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !Object.hasOwn(value, PROTO)

const optional = (value: unknown, check: (value: unknown) => boolean): boolean => value === undefined || check(value)
const isString = (value: unknown): boolean => typeof value === "string"
const isStringOrNull = (value: unknown): boolean => value === null || typeof value === "string"
const isTokenCount = (value: unknown): boolean => Number.isSafeInteger(value) && (value as number) >= 0

/**
 * `Content`: a string, or blocks that are objects with a string `type`: any such block decodes as itself (as a
 * text or image block, or as another provider block when it is not a valid one).
 */
const isContent = (value: unknown): boolean => {
  if (typeof value === "string") return true
  if (!Array.isArray(value)) return false
  for (let i = 0; i < value.length; i++) {
    const block = value[i]
    if (!isRecord(block) || typeof block.type !== "string") return false
    // an image block's `image_url` is a struct Schema copies key by key
    if (block.type === "image_url" && typeof block.image_url === "object" && block.image_url !== null &&
      Object.hasOwn(block.image_url, PROTO)) return false
  }
  return true
}

const isCommon = (message: Rec): boolean =>
  typeof message.id === "string" &&
  isContent(message.content) &&
  optional(message.name, isString) &&
  optional(message.additional_kwargs, isRecord) &&
  optional(message.response_metadata, isRecord)

const isToolCall = (value: unknown): boolean =>
  isRecord(value) &&
  typeof value.id === "string" &&
  typeof value.name === "string" &&
  isRecord(value.args) &&
  (value.type === undefined || value.type === "tool_call")

const isInvalidToolCall = (value: unknown): boolean =>
  isRecord(value) &&
  isStringOrNull(value.id) &&
  isStringOrNull(value.name) &&
  isStringOrNull(value.args) &&
  isStringOrNull(value.error) &&
  (value.type === undefined || value.type === "invalid_tool_call")

const isArrayOf = (value: unknown, check: (item: unknown) => boolean): boolean => {
  if (!Array.isArray(value)) return false
  for (let i = 0; i < value.length; i++) if (!check(value[i])) return false
  return true
}

const isUsage = (value: unknown): boolean =>
  isRecord(value) &&
  isTokenCount(value.input_tokens) &&
  isTokenCount(value.output_tokens) &&
  isTokenCount(value.total_tokens) &&
  optional(value.input_token_details, isRecord) &&
  optional(value.output_token_details, isRecord)

const isPlainAI = (message: Rec): boolean =>
  isCommon(message) &&
  optional(message.tool_calls, (calls) => isArrayOf(calls, isToolCall)) &&
  optional(message.invalid_tool_calls, (calls) => isArrayOf(calls, isInvalidToolCall)) &&
  optional(message.usage_metadata, isUsage) &&
  // raw provider calls are parsed by the decoding transform: Schema does that
  rawToolCalls(message as unknown as AIMessage) === undefined

/** Whether `value` decodes with `Message` as an equal value (false: not sure, ask Schema). */
export const isPlainMessage = (value: unknown): value is Message => {
  if (!isRecord(value)) return false
  switch (value.type) {
    case "human":
    case "system":
      return isCommon(value)
    case "ai":
      return isPlainAI(value)
    case "tool":
      return isCommon(value) &&
        typeof value.tool_call_id === "string" &&
        (value.status === undefined || value.status === "success" || value.status === "error")
    default:
      return false
  }
}

/** Whether `value` decodes with `MessageWrite` as an equal value (false: not sure, ask Schema). */
export const isPlainMessageWrite = (value: unknown): value is MessageWrite =>
  isRecord(value) && value.type === "remove" ? typeof value.id === "string" : isPlainMessage(value)

/** `value` without its `messages` key. */
const others = (value: Rec): Rec => {
  const rest: Rec = {}
  for (const key in value) if (key !== "messages" && Object.hasOwn(value, key)) rest[key] = value[key]
  return rest
}

type Decode<A> = (value: unknown) => Either.Either<A, ParseResult.ParseError>

const options = { onExcessProperty: "preserve" } as const

/**
 * A decoder for a struct whose `messages` are checked here and whose other fields go through Schema: the
 * parsed messages are kept, the rest decoded, and the whole value decoded by Schema when a message is not
 * plain or the rest does not decode (so a failure is Schema's, with its path from the root).
 */
const withPlainMessages = <A extends { readonly messages?: ReadonlyArray<unknown> | undefined }>(
  whole: Decode<A>,
  rest: Decode<Omit<A, "messages">>,
  check: (value: unknown) => boolean
): Decode<A> =>
(value) => {
  if (!isRecord(value) || !isArrayOf(value.messages, check)) return whole(value)
  // (only messages: Schema fills in the other fields, optional or defaulted, or says which one is missing)
  return mergeRest(value.messages as ReadonlyArray<unknown>, rest(others(value)), whole, value)
}

const mergeRest = <A>(
  messages: ReadonlyArray<unknown>,
  decoded: Either.Either<unknown, ParseResult.ParseError>,
  whole: Decode<A>,
  value: unknown
): Either.Either<A, ParseResult.ParseError> =>
  Either.isRight(decoded) ? Either.right({ messages, ...(decoded.right as object) } as A) : whole(value)

const decodeUpdateSlow = Schema.decodeUnknownEither(TS.StateUpdate, options)

const decodeUpdate = withPlainMessages<StateUpdate>(
  decodeUpdateSlow,
  Schema.decodeUnknownEither(TS.StateUpdate.pipe(Schema.omit("messages")), options),
  isPlainMessageWrite
)

const decodeUpdatesSlow = Schema.decodeUnknownEither(Schema.Array(TS.StateUpdate), options)

/**
 * `Schema.decodeUnknownEither(Schema.Array(StateUpdate), { onExcessProperty: "preserve" })`, for parsed JSON:
 * the same result, or the same error.
 */
export const decodeStateUpdates = (
  value: unknown
): Either.Either<ReadonlyArray<StateUpdate>, ParseResult.ParseError> => {
  if (!Array.isArray(value)) return decodeUpdatesSlow(value)
  const out: Array<StateUpdate> = new Array(value.length)
  for (let i = 0; i < value.length; i++) {
    const item: unknown = value[i]
    const decoded = isRecord(item) && item.messages !== undefined ? decodeUpdate(item) : decodeUpdateSlow(item)
    if (Either.isLeft(decoded)) return decodeUpdatesSlow(value)
    out[i] = decoded.right
  }
  return Either.right(out)
}

/**
 * `Schema.decodeUnknownEither(ThreadState, { onExcessProperty: "preserve" })`, for parsed JSON: the same result,
 * or the same error.
 */
export const decodeThreadState: Decode<ThreadState> = withPlainMessages<ThreadState>(
  Schema.decodeUnknownEither(TS.ThreadState, options),
  Schema.decodeUnknownEither(TS.ThreadState.pipe(Schema.omit("messages")), options),
  isPlainMessage
)
