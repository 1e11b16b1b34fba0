/**
 * LLMErrorHandling (SPEC §5.8, lead chain slot 8; subagent slot 7): retries failed model calls and turns
 * the failures that remain into a marked AI message instead of an error.
 *
 * - Each `ModelError` is classified (first match wins): quota → auth → burst_rate → transient (provider
 *   error classes, connection/timeout reasons, empty responses, HTTP 408/409/425/429/5xx) → busy (message
 *   patterns) → generic. quota, auth and generic are not retried.
 * - A retriable error is retried up to `llm_call.retry_max_attempts` attempts in all (2 at most for burst
 *   throttling and stream-chunk timeouts). The wait is the provider's `retry-after-ms` / `retry-after`
 *   (seconds or an HTTP date) when present, at most `llm_call.max_retry_after_ms` (DeerFlow takes it as is,
 *   so `retry-after: 86400` meant a day), else decorrelated jitter (`[base, min(cap, 3×previous)]`,
 *   `base` = `burst_retry_base_delay_ms` for burst throttling). Before each wait an `llm_retry` custom
 *   event tells the user what is happening. Waits use Effect's Clock, so tests run them on the TestClock.
 * - When retries run out, or the error is not retriable, the call does NOT fail: it answers with an AI
 *   message carrying `additional_kwargs = { deerflow_error_fallback: true, error_type, error_reason,
 *   error_detail }` and readable content. It has no tool calls, so the loop ends and the run reports
 *   status `error` (Run.ts reads the marker).
 * - A circuit breaker (closed → open after `circuit_breaker.failure_threshold` consecutive calls that
 *   exhausted their retries on a retriable error, burst throttling excluded) answers every call at once
 *   with a fallback (`error_type: "CircuitBreakerOpen"`, `error_reason: "circuit_open"`) until
 *   `recovery_timeout_sec` has passed; then one probe call goes through: success closes it, failure
 *   re-opens it. By default the breaker lives as long as the middleware, i.e. the agent that built it (its
 *   runs share it, as in DeerFlow's embedded client); pass `breaker` to share one between agents.
 * - `llm_call.max_concurrent_calls > 0` bounds in-flight model calls with one semaphore around each single
 *   attempt (never around the backoff waits). The semaphore is the app's `ModelCallLimiter` when the app
 *   provides one (one for every agent of the app, DeerFlow's process-wide cap); else the agent's own.
 * - Fiber interruption is never retried and never turned into a fallback; defects (bugs) pass through.
 *
 * Retries and one-shot injections (SPEC §14 item 16). The retry loop stands where DeerFlow puts it, so
 * every retry re-runs the whole inner chain (SkillActivation … TerminalResponse) with the ORIGINAL request,
 * the same object each time. The contract for wrappers inside this one: a wrapper must be idempotent per
 * request — it rebuilds its injection from its own pending state on every call of its wrapper, and it
 * clears ("drains") that state only after `next` has succeeded (e.g. `Effect.tap(next(req), drain)`), never
 * before calling it. A failed attempt therefore leaves a loop warning, a recovery prompt or a slash-skill
 * body queued, and the retried request carries it again; the successful attempt drains it exactly once.
 * Nothing here needs to know which inner wrappers inject what.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"
import { AppConfigService, CircuitBreakerConfig, LlmCallConfig } from "../services/AppConfig.js"
import type { ModelError, ModelRequest, ModelResponse } from "../services/ModelService.js"
import type { RunEvents } from "../services/RunEvents.js"
import { emitCustom } from "../services/RunEvents.js"
import type { AIMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"

// ---------------------------------------------------------------------------------------------------------
// Classification

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

/** The number of attempts in all for this error (SPEC: 2 at most for stream-chunk timeouts and bursts). */
export const maxAttempts = (config: LlmCallConfig, error: ModelError, classification: Classification): number => {
  let max = config.retry_max_attempts
  if (error.errorType === "StreamChunkTimeoutError") max = Math.min(max, 2)
  if (classification.reason === "burst_rate") max = Math.min(max, 2)
  return Math.max(1, max)
}

// ---------------------------------------------------------------------------------------------------------
// Waits

const header = (headers: Readonly<Record<string, string>> | undefined, name: string): string | undefined => {
  if (headers === undefined) return undefined
  const direct = headers[name]
  if (direct !== undefined) return direct
  for (const key in headers) if (key.toLowerCase() === name) return headers[key]
  return undefined
}

/**
 * The wait the provider asked for, in ms: `retry-after-ms` (milliseconds), else `retry-after` (seconds, or
 * an HTTP date measured from `now`). `undefined` when absent or unreadable.
 */
export const retryAfterMs = (
  headers: Readonly<Record<string, string>> | undefined,
  now: number
): number | undefined => {
  const ms = header(headers, "retry-after-ms")?.trim()
  if (ms !== undefined && ms !== "") {
    const value = Number(ms)
    if (Number.isFinite(value)) return Math.max(0, Math.ceil(value))
  }
  const after = header(headers, "retry-after")?.trim()
  if (after === undefined || after === "") return undefined
  const seconds = Number(after)
  if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds * 1000))
  const date = Date.parse(after)
  if (Number.isNaN(date)) return undefined
  return Math.max(0, date - now)
}

/** The range a jittered wait is drawn from (inclusive), for a first wait (`previous` undefined) or a later one. */
export const backoffRange = (
  config: LlmCallConfig,
  burst: boolean,
  previous: number | undefined
): { readonly low: number; readonly high: number } => {
  const base = burst ? config.burst_retry_base_delay_ms : config.retry_base_delay_ms
  const cap = config.retry_cap_delay_ms
  const seed = previous ?? base
  const high = Math.min(cap, Math.max(base, seed * 3))
  // A cap below the base wins: never wait longer than the cap.
  return high < base ? { low: cap, high: cap } : { low: base, high }
}

/** A decorrelated-jitter wait (uniform integer in `backoffRange`). */
export const jitteredDelay = (
  config: LlmCallConfig,
  burst: boolean,
  previous: number | undefined
): Effect.Effect<number> => {
  const { high, low } = backoffRange(config, burst, previous)
  return high <= low ? Effect.succeed(low) : Random.nextIntBetween(low, high + 1)
}

const REASON_TEXT: Record<ErrorReason, string> = {
  busy: "the provider is busy",
  burst_rate: "the provider is throttling a burst of requests",
  transient: "the request failed temporarily",
  quota: "the request failed temporarily",
  auth: "the request failed temporarily",
  generic: "the request failed temporarily"
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
  message: `Model call attempt ${attempt} of ${max} failed (${REASON_TEXT[reason]}); ` +
    `trying again in ${formatWait(waitMs)}` +
    (askedMs !== undefined && askedMs > waitMs
      ? ` (the provider asked to wait ${formatWait(askedMs)}; llm_call.max_retry_after_ms caps it).`
      : ".")
})

/** The wait before a retry: the provider's, at most `max_retry_after_ms`, else `fallback`'s jitter. */
export const waitFor = (
  config: LlmCallConfig,
  asked: number | undefined,
  fallback: Effect.Effect<number>
): Effect.Effect<number> =>
  asked !== undefined ? Effect.succeed(Math.min(asked, config.max_retry_after_ms)) : fallback

// ---------------------------------------------------------------------------------------------------------
// Fallback messages

/** The `additional_kwargs` key marking a fallback message (for UIs; the run's outcome is `ModelResponse.failure`). */
export const FALLBACK_MARKER = "deerflow_error_fallback"

/** The readable text of a fallback for an error of this class. */
export const fallbackText = (reason: ErrorReason, error: ModelError): string => {
  switch (reason) {
    case "quota":
      return "The model provider turned the request down: the account is out of quota or credit, or its billing " +
        "is not set up. Sort out the provider account, then try again."
    case "auth":
      return "The model provider turned the request down because the credentials are invalid or lack access. " +
        "Check the API key and its permissions, then try again."
    case "burst_rate":
      return "The model provider is throttling because requests ramped up too fast, and the retries did not get " +
        "through. Give it a moment (or lower the concurrency), then continue."
    case "busy":
    case "transient":
      return error.errorType === "StreamChunkTimeoutError"
        ? "The model's response kept stalling mid-stream, so the request timed out twice. Split the work into " +
          "smaller steps and ask again."
        : "The model provider is still unavailable after several attempts. Wait a moment, then continue the " +
          "conversation."
    case "generic":
      return `The model request failed: ${error.message.trim() || error.errorType}`
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
 * The response that ends the run with an error: the marked message (kept in the thread, so the user and the
 * model see what happened) and the typed failure the run ends with.
 */
export const failedResponse = (message: AIMessage): ModelResponse => ({
  message,
  failure: { name: String(message.additional_kwargs?.error_type ?? "ModelError"), message: M.text(message) }
})

/** The marked AI message that answers a call while the circuit is open. */
export const circuitOpenMessage = (): AIMessage =>
  M.ai(
    "The model provider has failed repeatedly, so model calls are paused for a while to let it recover. " +
      "Wait a minute, then try again.",
    {
      additional_kwargs: {
        [FALLBACK_MARKER]: true,
        error_type: "CircuitBreakerOpen",
        error_reason: "circuit_open",
        error_detail: "circuit breaker open after repeated provider failures"
      }
    }
  )

// ---------------------------------------------------------------------------------------------------------
// Circuit breaker

/** The state of a breaker. */
export type CircuitState = "closed" | "open" | "half_open"

/**
 * A circuit breaker over model calls. Times are epoch milliseconds from the caller's Clock, so the
 * breaker itself is plain synchronous state (JavaScript runs one fiber step at a time).
 */
export interface CircuitBreaker {
  readonly state: () => CircuitState
  /** Whether a call may go out at `now`: the circuit is closed, or this is the one half-open probe. */
  readonly tryAcquire: (now: number) => boolean
  /** A call succeeded: close the circuit. */
  readonly onSuccess: () => void
  /** A call failed on a retriable error after its retries: count it (a failed probe re-opens at once). */
  readonly onFailure: (now: number) => void
  /** A call ended without a verdict (non-retriable error, burst throttling, interruption): free the probe. */
  readonly release: () => void
}

/** A new, closed breaker. */
export const makeCircuitBreaker = (config: Partial<CircuitBreakerConfig> = {}): CircuitBreaker => {
  const threshold = config.failure_threshold ?? 5
  const recoveryMs = (config.recovery_timeout_sec ?? 60) * 1000
  let state: CircuitState = "closed"
  let failures = 0
  let openUntil = 0
  let probing = false
  return {
    state: () => state,
    tryAcquire: (now) => {
      if (state === "open") {
        if (now < openUntil) return false
        state = "half_open"
        probing = false
      }
      if (state === "half_open") {
        if (probing) return false
        probing = true
      }
      return true
    },
    onSuccess: () => {
      state = "closed"
      failures = 0
      openUntil = 0
      probing = false
    },
    onFailure: (now) => {
      if (state === "half_open") {
        state = "open"
        openUntil = now + recoveryMs
        probing = false
        return
      }
      failures++
      if (failures >= threshold) {
        state = "open"
        openUntil = now + recoveryMs
        probing = false
      }
    },
    release: () => {
      probing = false
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The app's concurrency limiter

/**
 * A bound on in-flight model calls shared by every agent of an app (DeerFlow's process-wide
 * `max_concurrent_calls`). Provide it once per app with `ModelCallLimiter.layer(permits)`.
 */
export class ModelCallLimiter extends Context.Tag("antler/ModelCallLimiter")<ModelCallLimiter, Effect.Semaphore>() {
  /** A limiter with this many permits. */
  static readonly layer = (permits: number): Layer.Layer<ModelCallLimiter> =>
    Layer.effect(ModelCallLimiter, Effect.makeSemaphore(Math.max(1, permits)))
}

// ---------------------------------------------------------------------------------------------------------
// The middleware

/** Options of the middleware. Missing config takes DeerFlow's defaults. */
export interface Options {
  readonly llmCall?: Partial<LlmCallConfig> | undefined
  readonly circuitBreaker?: Partial<CircuitBreakerConfig> | undefined
  /** A breaker shared with other agents; by default each middleware (each agent) has its own. */
  readonly breaker?: CircuitBreaker | undefined
  /**
   * The concurrency limiter (`null`: none). Default: the app's `ModelCallLimiter` if provided, else one of the
   * middleware's own when `max_concurrent_calls > 0`.
   */
  readonly limiter?: Effect.Semaphore | null | undefined
  /**
   * Attempts in all for calls to a configured model, by name (its `max_retries + 1`); other calls take
   * `retry_max_attempts`.
   */
  readonly attemptsByModel?: Readonly<Record<string, number>> | undefined
}

/** The attempts of each configured model that sets `max_retries` (`max_retries + 1`, so 0 means no retry). */
export const attemptsByModel = (
  models: ReadonlyArray<{ readonly name: string; readonly max_retries?: number | undefined }>
): Readonly<Record<string, number>> => {
  const out: Record<string, number> = {}
  for (const model of models) {
    if (model.max_retries !== undefined && !Object.hasOwn(out, model.name)) out[model.name] = model.max_retries + 1
  }
  return out
}

const decodeLlmCall = Schema.decodeUnknownSync(LlmCallConfig)
const llmCallDefaults = decodeLlmCall({})
// Settings are typed (config.yaml was decoded when loaded): merged over the defaults, not decoded again per run.
const llmCallOf = (given: Partial<LlmCallConfig> | undefined): LlmCallConfig =>
  given === undefined ? llmCallDefaults : { ...llmCallDefaults, ...given }

/** The retry wrapper, as a plain function (usable without a layer). */
export const wrap = (options: Options = {}) => {
  const config: LlmCallConfig = llmCallOf(options.llmCall)
  const breaker = options.breaker ?? makeCircuitBreaker(options.circuitBreaker)
  const limiter = options.limiter === null
    ? undefined
    : options.limiter ?? (config.max_concurrent_calls > 0 ? Effect.unsafeMakeSemaphore(config.max_concurrent_calls) : undefined)
  return <R>(
    request: ModelRequest,
    next: (request: ModelRequest) => Effect.Effect<ModelResponse, ModelError, R>
  ): Effect.Effect<ModelResponse, ModelError, R | RunEvents> => {
    // `next` is called again for every attempt, so the inner wrappers really run again (see the header).
    const inner = Effect.suspend(() => next(request))
    const attemptOnce = Effect.map(
      limiter === undefined ? inner : limiter.withPermits(1)(inner),
      (response) => {
        breaker.onSuccess()
        return response
      }
    )
    const onFailure = (
      error: ModelError,
      attempt: number,
      previousWait: number | undefined
    ): Effect.Effect<ModelResponse, never, R | RunEvents> => {
      const classification = classify(error)
      const name = request.settings.modelName
      const byModel = options.attemptsByModel
      const own = name !== undefined && byModel !== undefined && Object.hasOwn(byModel, name) ? byModel[name] : undefined
      const effective = own === undefined ? config : { ...config, retry_max_attempts: own }
      const max = maxAttempts(effective, error, classification)
      if (classification.retriable && attempt < max) {
        return Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const asked = retryAfterMs(error.headers, now)
          const jitter = jitteredDelay(config, classification.reason === "burst_rate", previousWait)
          return Effect.flatMap(waitFor(config, asked, jitter), (wait) =>
            emitCustom("llm_retry", retryEvent(attempt, max, wait, classification.reason, asked)).pipe(
              Effect.zipRight(Effect.logWarning(`model call failed, retrying in ${wait}ms`).pipe(
                Effect.annotateLogs({
                  attempt,
                  max_attempts: max,
                  reason: classification.reason,
                  error: error.message
                })
              )),
              Effect.zipRight(Effect.sleep(Duration.millis(wait))),
              Effect.zipRight(loop(attempt + 1, wait))
            ))
        })
      }
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (classification.retriable && classification.reason !== "burst_rate") breaker.onFailure(now)
        else breaker.release()
        return Effect.as(
          Effect.logError(`model call failed after ${attempt} attempt(s)`).pipe(
            Effect.annotateLogs({
              reason: classification.reason,
              error_type: error.errorType,
              error: error.message
            })
          ),
          failedResponse(fallbackMessage(error, classification))
        )
      })
    }
    const loop = (attempt: number, previousWait: number | undefined): Effect.Effect<ModelResponse, never, R | RunEvents> =>
      Effect.catchAll(attemptOnce, (error) => onFailure(error, attempt, previousWait))
    const guarded = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (!breaker.tryAcquire(now)) return Effect.succeed(failedResponse(circuitOpenMessage()))
      // Interruption or a defect leaves no verdict: free the probe so the next call can try.
      return loop(1, undefined).pipe(Effect.onError(() => Effect.sync(breaker.release)))
    })
    // Hot path: a closed circuit needs neither the clock nor a probe guard.
    return Effect.suspend(() => (breaker.state() === "closed" ? loop(1, undefined) : guarded))
  }
}

/** The middleware with explicit options; the app's `ModelCallLimiter` is used when provided. */
export const layer = (options: Options = {}): Middleware.Middleware =>
  Layer.unwrapEffect(Effect.map(Effect.serviceOption(ModelCallLimiter), (shared) =>
    Middleware.make({
      model: wrap({ ...options, limiter: options.limiter !== undefined ? options.limiter : Option.getOrUndefined(shared) })
    })))

/**
 * The middleware configured from `config.yaml` (`llm_call`, `circuit_breaker`), with the same `breaker` /
 * `limiter` overrides. Requires `AppConfigService`.
 */
export const layerFromConfig = (options: Pick<Options, "breaker" | "limiter"> = {}) =>
  Layer.unwrapEffect(Effect.map(AppConfigService, ({ config }) =>
    layer({ ...options, llmCall: config.llm_call, circuitBreaker: config.circuit_breaker })))

/** Its chain entry: the retry loop and circuit breaker; everything inside it is re-run per attempt. */
export const entry = (options: Options = {}) => Chain.entry("LLMErrorHandling", () => layer(options))
