/**
 * What the user is told about a failing model: the `llm_retry` event before each wait, and the marked AI
 * message (`deerflow_error_fallback`) that answers a call whose error is final or whose circuit is open —
 * readable content, the error's class, reason and detail in `additional_kwargs`, and no tool calls, so the
 * loop ends and the run reports status `error`.
 */
import type { ModelError, ModelResponse } from "../../services/ModelService.js"
import type { AIMessage } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import type { Classification, ErrorReason } from "./Classification.js"

// The texts below are DeerFlow's (`_build_retry_message`, `_build_user_message`, `_build_circuit_breaker_message`)
// word for word: its web app shows them to the user (the retry message as a toast, the others in the thread).
const REASON_TEXT: Record<ErrorReason, string> = {
  busy: "provider is busy",
  burst_rate: "provider is throttling request burst rate",
  transient: "provider request failed temporarily",
  quota: "provider request failed temporarily",
  auth: "provider request failed temporarily",
  generic: "provider request failed temporarily"
}

/** A wait in whole seconds, at least 1, rounded half to even (DeerFlow's `max(1, round(wait_ms / 1000))`). */
export const waitSeconds = (ms: number): number => {
  const x = ms / 1000
  const floor = Math.floor(x)
  const diff = x - floor
  const rounded = diff > 0.5 || (diff === 0.5 && floor % 2 === 1) ? floor + 1 : floor
  return Math.max(1, rounded)
}

/** A wait, readable: `800ms`, `12.5s`, `15min`, `24h`. */
export const formatWait = (ms: number): string => {
  if (ms < 1000) return `${ms}ms`
  if (ms < 120_000) return `${Number((ms / 1000).toFixed(1))}s`
  if (ms < 7_200_000) return `${Number((ms / 60_000).toFixed(1))}min`
  return `${Number((ms / 3_600_000).toFixed(1))}h`
}

/**
 * The `llm_retry` event's data. `askedMs` is the provider's `retry-after` when it was longer than the wait
 * (the wait was capped by `llm_call.max_retry_after_ms`); it is then reported as `retry_after_ms`.
 */
export const retryEvent = (
  attempt: number,
  max: number,
  waitMs: number,
  reason: ErrorReason,
  askedMs?: number
) => ({
  type: "llm_retry" as const,
  attempt,
  max_attempts: max,
  wait_ms: waitMs,
  reason,
  ...(askedMs !== undefined && askedMs > waitMs ? { retry_after_ms: askedMs } : {}),
  message: `LLM request retry ${attempt}/${max}: ${REASON_TEXT[reason]}. ` +
    `Retrying in ${waitSeconds(waitMs)}s` +
    (askedMs !== undefined && askedMs > waitMs
      ? ` (the provider asked to wait ${formatWait(askedMs)}; llm_call.max_retry_after_ms caps it).`
      : ".")
})

/** The `additional_kwargs` key marking a fallback message (for UIs; the run's outcome is `ModelResponse.failure`). */
export const FALLBACK_MARKER = "deerflow_error_fallback"

/** The readable text of a fallback for an error of this class. */
export const fallbackText = (reason: ErrorReason, error: ModelError): string => {
  switch (reason) {
    case "quota":
      return "The configured LLM provider rejected the request because the account is out of quota, billing is " +
        "unavailable, or usage is restricted. Please fix the provider account and try again."
    case "auth":
      return "The configured LLM provider rejected the request because authentication or access is invalid. " +
        "Please check the provider credentials and try again."
    case "burst_rate":
      return "The configured LLM provider is temporarily throttling requests because the request rate increased " +
        "too quickly (burst-rate limit). Please wait a moment and try again."
    case "busy":
    case "transient":
      return error.errorType === "StreamChunkTimeoutError"
        ? "The model's streaming response was interrupted before it could finish. This usually happens when a " +
          "single response or tool call is very large — please ask the assistant to split the work into smaller " +
          "steps, or shorten the requested output, and try again."
        : "The configured LLM provider is temporarily unavailable after multiple retries. Please wait a moment and " +
          "continue the conversation."
    case "generic":
      return `LLM request failed: ${error.message.trim() || error.errorType}`
  }
}

/** The marked AI message that answers a call whose error is final. */
export const fallbackMessage = (error: ModelError, classification: Classification): AIMessage =>
  M.ai(fallbackText(classification.reason, error), {
    additional_kwargs: {
      [FALLBACK_MARKER]: true,
      error_type: error.errorType,
      error_reason: classification.reason,
      error_detail: error.message
    }
  })

/**
 * What a run ended by a fallback records as its error, as DeerFlow's run worker reads the marked message: the
 * provider's detail, else the failure's reason, else the message's text (2,000 characters at most).
 */
export const fallbackErrorText = (message: AIMessage): string => {
  const kwargs = message.additional_kwargs
  for (const key of ["error_detail", "error_reason"] as const) {
    const value = kwargs?.[key]
    if (typeof value === "string" && value.trim() !== "") return errorText(value.trim())
  }
  const text = M.text(message).trim()
  return text === "" ? "LLM provider failed after retries" : errorText(text)
}

/** The most of a provider's error a run records or a log line repeats. */
export const MAX_ERROR_CHARS = 2000

/** `text` cut at `MAX_ERROR_CHARS` (a provider may answer megabytes). */
export const errorText = (text: string): string => text.length > MAX_ERROR_CHARS ? text.slice(0, MAX_ERROR_CHARS) : text

/**
 * The response that ends the run with an error: the marked message (kept in the thread, so the user and the
 * model see what happened, in words meant for the user) and the typed failure the run ends with (what went
 * wrong, as the provider said it: `fallbackErrorText`).
 */
export const failedResponse = (message: AIMessage): ModelResponse => ({
  message,
  failure: { name: String(message.additional_kwargs?.error_type ?? "ModelError"), message: fallbackErrorText(message) }
})

/** The marked AI message that answers a call while the circuit is open. */
export const circuitOpenMessage = (): AIMessage =>
  M.ai(
    "The configured LLM provider is currently unavailable due to continuous failures. Circuit breaker is engaged " +
      "to protect the system. Please wait a moment before trying again.",
    {
      additional_kwargs: {
        [FALLBACK_MARKER]: true,
        error_type: "CircuitBreakerOpen",
        error_reason: "circuit_open",
        error_detail: "LLM circuit breaker is open"
      }
    }
  )
