/**
 * The subagent status contract (SPEC §8.8–8.9, DeerFlow's `status_contract.py`): how a `task` result tells
 * its consumers — the delegation ledger, the token roll-up, a UI — how the subagent ended. The model reads the
 * tool message's text (`Task Succeeded. Result: ...`); programs read the structured facts in its
 * `additional_kwargs`:
 *
 * - `subagent_status`: `completed | failed | cancelled | timed_out | polling_timed_out`;
 * - `subagent_stop_reason` (optional): `token_capped | turn_capped | loop_capped` when a guard cap ended it;
 * - `subagent_error` (not for `completed`): at most 2000 characters, head and tail;
 * - `subagent_result_brief` and `subagent_result_sha256` (`completed` only): the result bounded the same way,
 *   and the sha256 (hex) of the whole result;
 * - `subagent_model_name`: the model the subagent ran on;
 * - `subagent_token_usage`: `{ input_tokens, output_tokens, total_tokens }` summed over its model calls;
 * - `subagent_token_usage_recorded`: `true` when that usage was counted in the run's totals as the task ended.
 *
 * Pure: no I/O, no services.
 */
import { createHash } from "node:crypto"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { charsOf, joinChars } from "./Chars.js"
import type { JsonObject } from "./Message.js"
import { SubagentStopReason } from "./ThreadState.js"

export const STATUS_KEY = "subagent_status"
export const STOP_REASON_KEY = "subagent_stop_reason"
export const ERROR_KEY = "subagent_error"
export const RESULT_BRIEF_KEY = "subagent_result_brief"
export const RESULT_SHA256_KEY = "subagent_result_sha256"
export const MODEL_NAME_KEY = "subagent_model_name"
export const TOKEN_USAGE_KEY = "subagent_token_usage"
/** Marks a task's usage as already counted in its run's token usage (when the task ended). */
export const USAGE_RECORDED_KEY = "subagent_token_usage_recorded"

/** The longest error or result brief carried in the metadata. */
export const MAX_METADATA_CHARS = 2000

/** How a subagent ended. */
export const SubagentStatus = Schema.Literal("completed", "failed", "cancelled", "timed_out", "polling_timed_out")
export type SubagentStatus = typeof SubagentStatus.Type

export { SubagentStopReason }

/** Token usage of a subagent, summed over its model calls. */
export const TokenUsage = Schema.Struct({
  input_tokens: Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  output_tokens: Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  total_tokens: Schema.Number.pipe(Schema.int(), Schema.nonNegative())
})
export type TokenUsage = typeof TokenUsage.Type

/** How a subagent ended, with what it produced. */
export interface Outcome {
  readonly status: SubagentStatus
  readonly stopReason?: SubagentStopReason | undefined
  /** The final answer (`completed`). */
  readonly result?: string | undefined
  /** What went wrong (other statuses). */
  readonly error?: string | undefined
  readonly modelName?: string | undefined
  readonly usage?: TokenUsage | undefined
  /** Its usage was counted in the run's token usage when the task ended. */
  readonly usageRecorded?: boolean | undefined
}

const STOP_LABELS: Record<SubagentStopReason, string> = {
  token_capped: "token budget",
  turn_capped: "turn budget",
  loop_capped: "repeated tool-call loop"
}

/**
 * Text bounded to `max` characters: the first two thirds and the tail, joined by `"\n...\n"`. Characters are
 * code points, as DeerFlow's Python counts them: a cut never splits an emoji into a lone surrogate, which a
 * provider refuses when the brief is shown to the model.
 */
export const bound = (text: string, max: number = MAX_METADATA_CHARS): string => {
  const cleaned = text.trim()
  const chars = charsOf(cleaned)
  if (chars.length <= max) return cleaned
  const cut = (start: number, end?: number) => joinChars(chars, start, end)
  const marker = "\n...\n"
  if (max <= marker.length) return cut(0, max)
  const head = Math.floor((max * 2) / 3)
  const tail = max - head - marker.length
  if (tail <= 0) return cut(0, max)
  return `${cut(0, head)}${marker}${cut(chars.length - tail)}`
}

/** The sha256 of a text, as 64 lowercase hex digits. */
export const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")

/**
 * What went wrong, as `subagent_error` carries it: the error given, else the status's own sentence (`Task
 * failed.`, never the `(capped: ...)` note, which is the text's: the cap is `subagent_stop_reason`). Undefined
 * for `completed`.
 */
export const errorDetail = (outcome: Outcome): string | undefined => {
  const error = outcome.error?.trim() ?? ""
  if (error !== "") return outcome.status === "completed" ? undefined : error
  switch (outcome.status) {
    case "completed":
      return undefined
    case "cancelled":
      return "Task cancelled by user."
    case "timed_out":
      return "Task timed out."
    case "polling_timed_out":
      return "Task polling timed out."
    case "failed":
      return "Task failed."
  }
}

/** The text the model reads for an outcome (DeerFlow's `format_subagent_result_message`). */
export const resultText = (outcome: Outcome): string => {
  const error = outcome.error?.trim() ?? ""
  const capped = outcome.stopReason !== undefined ? STOP_LABELS[outcome.stopReason] : undefined
  switch (outcome.status) {
    case "completed":
      return capped !== undefined
        ? `Task Succeeded (capped: ${capped}). Result: ${outcome.result ?? ""}`
        : `Task Succeeded. Result: ${outcome.result ?? ""}`
    case "cancelled":
      return error === "" || error === "Task cancelled by user."
        ? "Task cancelled by user."
        : `Task cancelled by user. Error: ${error}`
    case "timed_out":
      return error === "" || error === "Task timed out." ? "Task timed out." : `Task timed out. Error: ${error}`
    case "polling_timed_out":
      return error === "" ? "Task polling timed out." : error
    case "failed": {
      const detail = error === "" ? "Task failed." : error
      if (capped !== undefined) {
        return detail === "Task failed."
          ? `Task failed (capped: ${capped}).`
          : `Task failed (capped: ${capped}). Error: ${detail}`
      }
      return detail === "Task failed." ? detail : `Task failed. Error: ${detail}`
    }
  }
}

/** The `additional_kwargs` of the `task` tool message for an outcome (DeerFlow's `make_subagent_additional_kwargs`). */
export const metadata = (outcome: Outcome): JsonObject => {
  const out: Record<string, unknown> = { [STATUS_KEY]: outcome.status }
  const result = outcome.result
  if (outcome.status === "completed" && result !== undefined && result.trim() !== "") {
    out[RESULT_BRIEF_KEY] = bound(result)
    out[RESULT_SHA256_KEY] = sha256(result)
  }
  const error = errorDetail(outcome)
  if (error !== undefined) out[ERROR_KEY] = bound(error)
  if (outcome.stopReason !== undefined) out[STOP_REASON_KEY] = outcome.stopReason
  if (outcome.modelName !== undefined && outcome.modelName.trim() !== "") out[MODEL_NAME_KEY] = outcome.modelName.trim()
  if (outcome.usage !== undefined) out[TOKEN_USAGE_KEY] = { ...outcome.usage }
  if (outcome.usage !== undefined && outcome.usageRecorded === true) out[USAGE_RECORDED_KEY] = true
  return out
}

/** The structured facts of a `task` result, as the ledger reads them. */
export interface Structured {
  readonly status: SubagentStatus
  readonly stopReason?: SubagentStopReason | undefined
  readonly resultBrief?: string | undefined
  readonly resultSha256?: string | undefined
  readonly error?: string | undefined
}

const isStatus = Schema.is(SubagentStatus)
const isStopReason = Schema.is(SubagentStopReason)
const decodeUsage = Schema.decodeUnknownOption(TokenUsage)

/**
 * Reads the structured facts of a `task` tool message (untrusted: a stored thread may hold anything). A
 * legacy `max_turns_reached` status reads as `turn_capped`, completed when it kept a result, else failed.
 * Undefined when the message carries no valid status.
 */
export const read = (kwargs: JsonObject | undefined): Structured | undefined => {
  if (kwargs === undefined) return undefined
  const raw = kwargs[STATUS_KEY]
  const brief = typeof kwargs[RESULT_BRIEF_KEY] === "string" ? (kwargs[RESULT_BRIEF_KEY] as string) : undefined
  let status: SubagentStatus
  let legacyStop: SubagentStopReason | undefined
  if (raw === "max_turns_reached") {
    legacyStop = "turn_capped"
    status = brief !== undefined && brief.trim() !== "" ? "completed" : "failed"
  } else if (isStatus(raw)) status = raw
  else return undefined
  const stop = kwargs[STOP_REASON_KEY]
  const hash = kwargs[RESULT_SHA256_KEY]
  const error = kwargs[ERROR_KEY]
  return {
    status,
    stopReason: isStopReason(stop) ? stop : legacyStop,
    ...(status === "completed" && brief !== undefined && brief.trim() !== ""
      ? {
        resultBrief: bound(brief),
        ...(typeof hash === "string" && /^[0-9a-f]{64}$/.test(hash) ? { resultSha256: hash } : {})
      }
      : {}),
    ...(status !== "completed" && typeof error === "string" && error.trim() !== "" ? { error: bound(error) } : {})
  }
}

/** The token usage a `task` result reports, when it is well formed. */
export const usageOf = (kwargs: JsonObject | undefined): TokenUsage | undefined =>
  kwargs === undefined ? undefined : Option.getOrUndefined(decodeUsage(kwargs[TOKEN_USAGE_KEY]))
