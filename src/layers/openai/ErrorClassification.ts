/**
 * Error classification: whatever a call can throw (the SDK's error classes, a stream event that is not JSON,
 * a socket dropped mid-body, a bug) as a `ModelError` with a reason the retry policy reads, the SDK's class
 * name, the HTTP status and code, and the retry headers (`retry-after`, `retry-after-ms`).
 */
import type { SdkErrors } from "./Config.js"
import { ModelError } from "../../services/ModelService.js"
import * as Redact from "../../state/Redact.js"

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

/**
 * The reason of a failure from its HTTP status, else (an `error` event inside the stream) from its code and text.
 */
export const statusReason = (
  status: number | undefined,
  code: string | undefined,
  text: string
): ModelError["reason"] => {
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

/** Added to an `auth` failure of a model with no key: the provider's own words rarely say that none was sent. */
export const NO_KEY_HINT =
  "No API key was sent: none is configured for this model (api_key in its config.yaml entry, --api-key, or " +
  "OPENAI_API_KEY)."

/**
 * Classifies anything a call can throw as a `ModelError`: SDK errors keep their class name, status, code
 * and retry headers; a non-JSON stream event is `invalid_response`; a socket dropped mid-stream is
 * `connection`. `OpenAI` is the SDK's error classes (`Resolved.sdk`: the SDK is loaded with the first model);
 * `keyless`: no key is configured, which an `auth` failure then names.
 */
export const toModelError = (
  error: unknown,
  model: string,
  baseURL: string,
  OpenAI: SdkErrors,
  keyless = false
): ModelError => {
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
      message: `${prefix} (${where}): ${error.message}${reason === "auth" && keyless ? ` ${NO_KEY_HINT}` : ""}`,
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
