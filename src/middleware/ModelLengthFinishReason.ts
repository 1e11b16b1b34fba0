/**
 * ModelLengthFinishReason (SPEC-deerflow §5.31): a final answer the provider cut off at its output limit ends
 * the run with stop reason `model_length_capped`, so callers can tell a truncated answer from a complete one.
 *
 * It applies to a response with visible text and no tool-call intent whose metadata (`response_metadata`, then
 * `additional_kwargs`; case-insensitive) says: `finish_reason == "length"` (OpenAI-compatible),
 * `stop_reason == "max_tokens"` (Anthropic) or `finish_reason == "MAX_TOKENS"` (Gemini). The stop reason is set
 * only when no other guard set one, and the message is never modified.
 */
import * as Effect from "effect/Effect"
import { RunContext } from "../services/RunContext.js"
import type { AIMessage } from "../state/Message.js"
import * as HardStop from "./HardStop.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"

/** A length stop found on a response. */
export interface LengthTermination {
  readonly detector: "openai_compatible_length" | "anthropic_max_tokens" | "gemini_max_tokens"
  readonly reason_field: "finish_reason" | "stop_reason"
  readonly reason_value: string
}

/**
 * The length signal in the message's metadata, if any. Checked in DeerFlow's detector order (OpenAI, Anthropic,
 * Gemini), so a message carrying two signals is logged under the detector DeerFlow names.
 */
export const detectLength = (message: AIMessage): LengthTermination | undefined => {
  const finish = HardStop.metadataString(message, "finish_reason")
  if (finish !== undefined && finish.toLowerCase() === "length") {
    return { detector: "openai_compatible_length", reason_field: "finish_reason", reason_value: finish }
  }
  const stop = HardStop.metadataString(message, "stop_reason")
  if (stop !== undefined && stop.toLowerCase() === "max_tokens") {
    return { detector: "anthropic_max_tokens", reason_field: "stop_reason", reason_value: stop }
  }
  if (finish !== undefined && finish.toUpperCase() === "MAX_TOKENS") {
    return { detector: "gemini_max_tokens", reason_field: "finish_reason", reason_value: finish }
  }
  return undefined
}

/** The length signal of a visible answer that asks for no tool; none for any other response. */
export const lengthCap = (message: AIMessage): LengthTermination | undefined =>
  HardStop.hasVisibleText(message) && !HardStop.hasToolCallIntent(message) ? detectLength(message) : undefined

/** Whether the response is a visible answer cut off by the output limit (and asks for no tool). */
export const isLengthCapped = (message: AIMessage): boolean => lengthCap(message) !== undefined

/** The message of the info line logged for each capped answer (DeerFlow's, so log searches find both). */
export const LOG_MESSAGE = "Provider model length cap detected"

/**
 * The ModelLengthFinishReason middleware (SPEC §4.1 slot 34: inside TerminalResponse, outside Safety, so its
 * after_model runs right after Safety's). Requires `RunContext`. Internal calls are ignored.
 *
 * Each capped answer is logged at info with DeerFlow's fields (thread, run, message, detector, the field and
 * value that said so, and whether this set the stop reason): the answer itself is never marked, so the log is
 * where an operator sees which provider signal capped it.
 */
export const layer = (): Middleware.Middleware =>
  Middleware.make(Effect.map(RunContext, (context): Middleware.Wrappers => {
    const capped = (message: AIMessage, termination: LengthTermination) =>
      Effect.flatMap(context.stopReason, (before) => {
        const stamped = before === undefined
        const logged = Effect.logInfo(LOG_MESSAGE).pipe(Effect.annotateLogs({
          thread_id: context.threadId,
          run_id: context.runId,
          message_id: message.id,
          ...termination,
          stamped_stop_reason: stamped
        }))
        return stamped ? Effect.zipRight(context.setStopReason("model_length_capped", true), logged) : logged
      })
    return {
      modelHooks: {
        after: (response, request) => {
          const termination = request.internal === undefined ? lengthCap(response.message) : undefined
          return termination === undefined ? response : Effect.as(capped(response.message, termination), response)
        }
      }
    }
  }))

/** Its chain entry: notes a response cut by the length limit (stop reason only). */
export const entry = () => Chain.entry("ModelLengthFinishReason", () => layer())
