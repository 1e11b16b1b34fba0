/**
 * Error classification (pure, SPEC §5.8): why a model call failed, as the retry policy sees it — quota →
 * auth → burst_rate → transient → busy → generic, first match wins, from the error's reason, provider class,
 * HTTP status, code and message (English and Chinese patterns, as in DeerFlow). quota, auth and generic are
 * not retried.
 */
import type { ModelError } from "../../services/ModelService.js"

/** Why a model call failed, as the retry policy sees it. */
export type ErrorReason = "quota" | "auth" | "burst_rate" | "transient" | "busy" | "generic"

/** The retry policy's view of an error. */
export interface Classification {
  readonly retriable: boolean
  readonly reason: ErrorReason
}

const QUOTA = [
  "insufficient_quota",
  "quota",
  "billing",
  "credit",
  "payment",
  "余额不足",
  "超出限额",
  "额度不足",
  "欠费",
  "配额"
]
const AUTH = [
  "authentication",
  "unauthorized",
  "invalid api key",
  "invalid_api_key",
  "permission",
  "forbidden",
  "access denied",
  "无权",
  "未授权",
  "鉴权失败",
  "认证失败"
]
const BURST = [
  "limit_burst_rate",
  "rate increased too quickly",
  "burst rate",
  "请求增长过快",
  "突发限流",
  "突增"
]
const BUSY = [
  "server busy",
  "temporarily unavailable",
  "try again later",
  "please retry",
  "please try again",
  "overloaded",
  "high demand",
  "rate limit",
  "负载较高",
  "服务繁忙",
  "稍后重试",
  "请稍后重试"
]
/** Provider error classes that mean "the request did not get through this time". */
export const TRANSIENT_ERROR_TYPES: ReadonlySet<string> = new Set([
  "APITimeoutError",
  "APIConnectionError",
  "APIConnectionTimeoutError",
  "InternalServerError",
  "ReadError",
  "RemoteProtocolError",
  "StreamChunkTimeoutError"
])
/** Messages of a dropped connection (older DeerFlow kept these with the transient classes). */
const DROPPED = [
  "peer closed connection",
  "incomplete chunked read",
  "server disconnected",
  "connection reset",
  "connection aborted",
  "broken pipe",
  "socket hang up",
  "econnreset"
]
/** HTTP statuses worth retrying. */
export const RETRIABLE_STATUSES: ReadonlySet<number> = new Set([408, 409, 425, 429, 500, 502, 503, 504])

const containsAny = (text: string, patterns: ReadonlyArray<string>) => patterns.some((p) => text.includes(p))

/** Classifies a model error (pure; first match wins, as in DeerFlow). */
export const classify = (error: ModelError): Classification => {
  const message = (error.message ?? "").toLowerCase()
  const code = (error.code ?? "").toLowerCase()
  if (error.reason === "quota" || containsAny(message, QUOTA) || containsAny(code, QUOTA)) {
    return { retriable: false, reason: "quota" }
  }
  if (error.reason === "auth" || containsAny(message, AUTH)) return { retriable: false, reason: "auth" }
  if (containsAny(message, BURST) || containsAny(code, BURST)) return { retriable: true, reason: "burst_rate" }
  if (
    TRANSIENT_ERROR_TYPES.has(error.errorType) ||
    error.reason === "connection" ||
    error.reason === "timeout" ||
    containsAny(message, DROPPED)
  ) return { retriable: true, reason: "transient" }
  if (error.errorType === "IndexError" || error.reason === "empty_response") {
    return { retriable: true, reason: "transient" }
  }
  if (error.status !== undefined && RETRIABLE_STATUSES.has(error.status)) {
    return { retriable: true, reason: "transient" }
  }
  if (containsAny(message, BUSY)) return { retriable: true, reason: "busy" }
  return { retriable: false, reason: "generic" }
}
