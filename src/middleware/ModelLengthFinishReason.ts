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

/** The length signal in the message's metadata, if any. */
export const detectLength = (message: AIMessage): LengthTermination | undefined => {
  const finish = HardStop.metadataString(message, "finish_reason")
  if (finish !== undefined) {
    if (finish.toLowerCase() === "length") {
      return { detector: "openai_compatible_length", reason_field: "finish_reason", reason_value: finish }
    }
    if (finish.toUpperCase() === "MAX_TOKENS") {
      return { detector: "gemini_max_tokens", reason_field: "finish_reason", reason_value: finish }
    }
  }
  const stop = HardStop.metadataString(message, "stop_reason")
  if (stop !== undefined && stop.toLowerCase() === "max_tokens") {
    return { detector: "anthropic_max_tokens", reason_field: "stop_reason", reason_value: stop }
  }
  return undefined
}

/** Whether the response is a visible answer cut off by the output limit (and asks for no tool). */
export const isLengthCapped = (message: AIMessage): boolean =>
  HardStop.hasVisibleText(message) && !HardStop.hasToolCallIntent(message) && detectLength(message) !== undefined

/**
 * The ModelLengthFinishReason middleware (SPEC §4.1 slot 34: inside TerminalResponse, outside Safety, so its
 * after_model runs right after Safety's). Requires `RunContext`. Internal calls are ignored.
 */
export const layer = (): Middleware.Middleware =>
  Middleware.make(Effect.map(RunContext, (context): Middleware.Wrappers => {
    return {
      modelHooks: {
        after: (response, request) =>
          request.internal === undefined && isLengthCapped(response.message)
            ? Effect.as(context.setStopReason("model_length_capped", true), response)
            : response
      }
    }
  }))

/** Its chain entry: notes a response cut by the length limit (stop reason only). */
export const entry = () => Chain.entry("ModelLengthFinishReason", () => layer())
