/**
 * The calls of an AI message as the provider will see them (`effectiveCalls`: structured, invalid, and those kept
 * only in the raw provider payload), their names and arguments normalised as they are sent, and what the model reads
 * for a call left without a result (`syntheticResultText`, DeerFlow's texts). `DanglingToolCall` pairs them.
 */
import type { AIMessage, JsonObject, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Json from "../state/Json.js"
import { headChars } from "../state/Chars.js"

/** The name given to calls whose name is missing or blank. */
export const UNKNOWN_TOOL = "unknown_tool"
const MAX_ERROR_DETAIL = 500

// Small predicates (no allocation)

const isSpace = (code: number) =>
  code === 32 || (code >= 9 && code <= 13) || code === 0x85 || code === 0xa0 || code === 0x1680 ||
  (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 || code === 0x202f ||
  code === 0x205f || code === 0x3000 || code === 0xfeff

/** Whether a value is a string with at least one non-whitespace character. */
export const isPresent = (value: unknown): value is string => {
  if (typeof value !== "string" || value.length === 0) return false
  const first = value.charCodeAt(0)
  if (first > 32 && first < 0x7f) return true
  for (let i = 0; i < value.length; i++) if (!isSpace(value.charCodeAt(i))) return true
  return false
}

/** A name that needs no normalisation: present, with no surrounding whitespace. */
export const isCleanName = (value: unknown): value is string => {
  if (typeof value !== "string" || value.length === 0) return false
  const first = value.charCodeAt(0)
  const last = value.charCodeAt(value.length - 1)
  return (first > 32 && first < 0x7f || !isSpace(first)) && (last > 32 && last < 0x7f || !isSpace(last))
}

/** A tool name as sent to the provider: trimmed, or `unknown_tool` when blank. */
export const normalizeToolName = (name: unknown): string => isPresent(name) ? name.trim() : UNKNOWN_TOOL

/** A value as a plain object, or undefined for anything else (an array, null, a primitive). */
export const asRecord = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined

const parseObject = (value: unknown): JsonObject | undefined => {
  if (typeof value !== "string") return undefined
  try {
    return asRecord(Json.parse(value)) as JsonObject | undefined
  } catch {
    return undefined
  }
}

/** Tool-call arguments as a JSON-object string safe to replay: objects are serialised, anything else is `{}`. */
export const normalizeToolArguments = (args: unknown): string => {
  if (asRecord(args) !== undefined) {
    try {
      return JSON.stringify(args) ?? "{}"
    } catch {
      return "{}"
    }
  }
  return typeof args === "string" && parseObject(args) !== undefined ? args : "{}"
}

// The calls of an AI message, as the provider will see them

/** Where a call comes from. */
export type CallSource = "call" | "invalid" | "raw"

/** One call of an AI message, normalised for pairing. */
export interface EffectiveCall {
  readonly id: string | undefined
  /** The normalised name (`unknown_tool` when blank). */
  readonly name: string
  readonly source: CallSource
  /** The call had no usable name. */
  readonly blankName: boolean
  /** The parser's error, for invalid calls. */
  readonly error?: string | null | undefined
}

/** A raw provider payload call's name, as `Message.readRawToolCall` reads it. */
export const rawName = (entry: Record<string, unknown>): unknown => M.readRawToolCall(entry).name

/**
 * The calls of an AI message in the order their results must follow: structured calls, then invalid ones.
 * Calls kept only in the raw provider payload (`additional_kwargs.tool_calls`) count as parsed by
 * `Message.parseRawToolCalls`, the same parse the model serializer applies, so both see the same calls.
 */
export const effectiveCalls = (message: AIMessage): ReadonlyArray<EffectiveCall> => {
  const parsed = M.parseRawToolCalls(message)
  const out: Array<EffectiveCall> = []
  for (const call of parsed.tool_calls ?? []) {
    out.push({ id: call.id, name: normalizeToolName(call.name), source: "call", blankName: !isPresent(call.name) })
  }
  for (const call of parsed.invalid_tool_calls ?? []) {
    out.push({
      id: call.id ?? undefined,
      name: normalizeToolName(call.name),
      source: "invalid",
      blankName: !isPresent(call.name),
      error: call.error
    })
  }
  return out
}

// Synthetic results

/**
 * What the model reads for a call that has no result: DeerFlow's texts (its tests and clients match on them),
 * with the parser's error (at most `MAX_ERROR_DETAIL` characters) for a call whose arguments were invalid.
 */
export const syntheticResultText = (call: EffectiveCall): string => {
  if (call.blankName) {
    return "[Tool call could not be executed because its name was missing or empty. Use one of the available " +
      "tool names when retrying.]"
  }
  if (call.source === "invalid") {
    const detail = typeof call.error === "string" && call.error !== "" ? headChars(call.error, MAX_ERROR_DETAIL) : ""
    if (call.name === "write_file") {
      // Large Markdown payloads often break the JSON: the model is steered away from sending the same one again.
      return "[write_file failed before execution: the tool-call arguments were not valid JSON, so no file was " +
        "written. This often happens when the model tries to write a very large Markdown file in a single tool " +
        "call, especially when `content` contains unescaped quotes, inline JSON, backslashes, or code fences. Do " +
        "not retry the same large `write_file` payload for this artifact; provide the report/content directly as " +
        "normal assistant text in your next response. If a file write is still needed later, split the file into " +
        "smaller sections instead of one large payload." + (detail === "" ? "]" : ` Parser error: ${detail}]`)
    }
    return detail === ""
      ? "[Tool call could not be executed because its arguments were invalid.]"
      : `[Tool call could not be executed because its arguments were invalid: ${detail}]`
  }
  return "[Tool call was interrupted and did not return a result.]"
}

/** The error result given a call `id` that has no result (`syntheticResultText`). */
export const syntheticResult = (call: EffectiveCall, id: string): ToolMessage => ({
  type: "tool",
  id: `${id}:synthetic-result`,
  content: syntheticResultText(call),
  tool_call_id: id,
  name: call.name,
  status: "error"
})
