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
 * - When the app traces, each call is one `LLMErrorHandling.call` span over its attempts.
 *
 * Retries and one-shot injections (SPEC §14 item 16). The retry loop stands where DeerFlow puts it, so
 * every retry re-runs the whole inner chain (SkillActivation … TerminalResponse) with the ORIGINAL request,
 * the same object each time. The contract for wrappers inside this one: a wrapper must be idempotent per
 * request — it rebuilds its injection from its own pending state on every call of its wrapper, and it
 * clears ("drains") that state only after `next` has succeeded (e.g. `Effect.tap(next(req), drain)`), never
 * before calling it. A failed attempt therefore leaves a loop warning, a recovery prompt or a slash-skill
 * body queued, and the retried request carries it again; the successful attempt drains it exactly once.
 * Nothing here needs to know which inner wrappers inject what.
 *
 * The parts live in `llm/`: Classification, RetryPolicy (the retry policy as a `Schedule`), RetryAfter,
 * CircuitBreaker and Notices (the `llm_retry` event and the fallback messages). This module drives them.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { AppConfigService, CircuitBreakerConfig, LlmCallConfig } from "../services/AppConfig.js"
import type { ModelRequest, ModelResponse } from "../services/ModelService.js"
import { ModelError } from "../services/ModelService.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import type { RunEvents } from "../services/RunEvents.js"
import { emitCustom } from "../services/RunEvents.js"
import * as Tracing from "../services/Tracing.js"
import type { Redactor } from "../state/Redact.js"
import type { CircuitBreaker } from "./llm/CircuitBreaker.js"
import { make as makeBreaker } from "./llm/CircuitBreaker.js"
import { circuitOpenMessage, errorText, failedResponse, fallbackMessage, retryEvent } from "./llm/Notices.js"
import * as RetryPolicy from "./llm/RetryPolicy.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"

export type { Classification, ErrorReason } from "./llm/Classification.js"
export { classify, RETRIABLE_STATUSES, TRANSIENT_ERROR_TYPES } from "./llm/Classification.js"
export type { CircuitBreaker, CircuitState } from "./llm/CircuitBreaker.js"
export { make as makeCircuitBreaker } from "./llm/CircuitBreaker.js"
export {
  circuitOpenMessage,
  FALLBACK_MARKER,
  failedResponse,
  fallbackMessage,
  fallbackText,
  formatWait,
  retryEvent
} from "./llm/Notices.js"
export { retryAfterMs } from "./llm/RetryAfter.js"
export { backoffRange, jitteredDelay, maxAttempts, waitFor } from "./llm/RetryPolicy.js"

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
  /**
   * The process's secrets a failing model's error is masked with (with the run's) before anything cuts it (the
   * run's error, the log: 2,000 characters): a cut would keep a secret's beginning where no later mask finds it.
   * Default: `ProcessSecrets` where the layer is built.
   */
  readonly redact?: Redactor | undefined
}

/**
 * `error` with `hide`'s secrets masked in its message (the same error when none is there). A masked error loses its
 * `cause`, which may repeat them.
 */
export const maskedError = (error: ModelError, hide: Redactor): ModelError => {
  const message = hide.text(error.message)
  if (message === error.message) return error
  return new ModelError({
    reason: error.reason,
    message,
    errorType: error.errorType,
    ...(error.status !== undefined ? { status: error.status } : {}),
    ...(error.code !== undefined ? { code: error.code } : {}),
    ...(error.headers !== undefined ? { headers: error.headers } : {})
  })
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

/** The inner model call a wrapper is given (`R`: what it needs). */
type Next<R> = (request: ModelRequest) => Effect.Effect<ModelResponse, ModelError, R>

/** The retry wrapper, as a plain function (usable without a layer). */
export const wrap = (options: Options = {}) => {
  const config: LlmCallConfig = llmCallOf(options.llmCall)
  const breaker = options.breaker ?? makeBreaker(options.circuitBreaker)
  const permits = config.max_concurrent_calls
  const limiter = options.limiter === null
    ? undefined
    : options.limiter ?? (permits > 0 ? Effect.unsafeMakeSemaphore(permits) : undefined)
  // what a failing call's error is masked with (the process's secrets and the run's), made on the first failure
  const hideOf = ProcessSecrets.ofRun(options.redact)
  // Before each wait the user is told what is happening (an `llm_retry` event), and the log says why.
  const announce = (decision: RetryPolicy.Decision): Effect.Effect<void, never, RunEvents> => {
    if (decision._tag === "GiveUp") return Effect.void
    const { attempt, classification: { reason }, maxAttempts: max, waitMs } = decision
    return emitCustom("llm_retry", retryEvent(attempt, max, waitMs, reason, decision.askedMs)).pipe(
      Effect.zipRight(Effect.flatMap(hideOf, (hide) =>
        Effect.logWarning(`model call failed, retrying in ${waitMs}ms`).pipe(
          Effect.annotateLogs({
            attempt,
            max_attempts: max,
            reason,
            error: errorText(hide.text(decision.error.message))
          })
        ))),
      Effect.zipRight(Effect.annotateCurrentSpan("antler.llm.attempts", attempt + 1))
    )
  }
  const scheduleOf = (llmCall: LlmCallConfig) => Schedule.tapOutput(RetryPolicy.policy(llmCall), announce)
  const standard = scheduleOf(config)
  // A configured model's own attempts (its `max_retries + 1`) replace `retry_max_attempts` for its calls.
  const byModel = new Map<string, typeof standard>()
  for (const [name, attempts] of Object.entries(options.attemptsByModel ?? {})) {
    byModel.set(name, scheduleOf({ ...config, retry_max_attempts: attempts }))
  }
  // The error is final: count it against the breaker (burst throttling excluded) and answer with a fallback (the
  // error masked first: the run's error is its message cut).
  const giveUp = (given: ModelError, decision: RetryPolicy.Decision): Effect.Effect<ModelResponse> =>
    Effect.flatMap(Effect.zip(Clock.currentTimeMillis, hideOf), ([now, hide]) => {
      const error = maskedError(given, hide)
      const { attempt, classification } = decision
      if (classification.retriable && classification.reason !== "burst_rate") breaker.onFailure(now)
      else breaker.release()
      const logged = Effect.logError(`model call failed after ${attempt} attempt(s)`).pipe(
        Effect.annotateLogs({
          reason: classification.reason,
          error_type: error.errorType,
          error: errorText(error.message)
        }),
        Effect.zipRight(Effect.annotateCurrentSpan({
          "antler.llm.attempts": attempt,
          "antler.llm.error_reason": classification.reason
        }))
      )
      return Effect.as(logged, failedResponse(fallbackMessage(error, classification)))
    })
  const succeeded = (response: ModelResponse) => {
    breaker.onSuccess()
    return Effect.succeed(response)
  }
  // One attempt: `next` is called again for every attempt, so the inner wrappers really run again (see the
  // header).
  const attempt = <R>(request: ModelRequest, next: Next<R>) =>
    limiter === undefined ? next(request) : limiter.withPermits(1)(Effect.suspend(() => next(request)))
  // The schedule is driven from the first failure on, so a call that succeeds at once (most do) pays nothing
  // for it (`Effect.retry` would make its driver and provide its iteration metadata on every call); what the
  // retries need is made here, after that failure.
  const retry = <R>(request: ModelRequest, next: Next<R>, first: ModelError) => {
    const name = request.settings.modelName
    const schedule = (name !== undefined ? byModel.get(name) : undefined) ?? standard
    const again = Effect.flatMap(Effect.suspend(() => attempt(request, next)), succeeded)
    return Effect.flatMap(Schedule.driver(schedule), (driver) => {
      const after = (error: ModelError): Effect.Effect<ModelResponse, never, R | RunEvents> =>
        Effect.matchEffect(driver.next(error), {
          onFailure: () => Effect.flatMap(Effect.orDie(driver.last), (decision) => giveUp(error, decision)),
          onSuccess: () => Effect.catchAll(again, after)
        })
      return after(first)
    })
  }
  // The first attempt, made when it runs (inside the tracer's check): success and failure in one handler.
  const call = <R>(request: ModelRequest, next: Next<R>) =>
    Effect.matchEffect(attempt(request, next), {
      onFailure: (first) => retry(request, next, first),
      onSuccess: succeeded
    })
  const guarded = <R>(request: ModelRequest, next: Next<R>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (!breaker.tryAcquire(now)) {
        return Effect.as(
          Effect.annotateCurrentSpan("antler.llm.error_reason", "circuit_open"),
          failedResponse(circuitOpenMessage())
        )
      }
      // Interruption or a defect leaves no verdict: free the probe so the next call can try.
      return call(request, next).pipe(Effect.onError(() => Effect.sync(breaker.release)))
    })
  return <R>(request: ModelRequest, next: Next<R>): Effect.Effect<ModelResponse, ModelError, R | RunEvents> =>
    // Hot path: a closed circuit needs neither the clock nor a probe guard.
    Tracing.spanWhenTraced(
      () => (breaker.state() === "closed" ? call(request, next) : guarded(request, next)),
      "LLMErrorHandling.call"
    )
}

/** The middleware with explicit options; the app's `ModelCallLimiter` is used when provided. */
export const layer = (options: Options = {}): Middleware.Middleware =>
  Layer.unwrapEffect(Effect.map(
    Effect.zip(Effect.serviceOption(ModelCallLimiter), ProcessSecrets.current),
    ([shared, redact]) =>
      Middleware.make({
        model: wrap({
          ...options,
          limiter: options.limiter !== undefined ? options.limiter : Option.getOrUndefined(shared),
          redact: options.redact ?? redact
        })
      })
  ))

/**
 * The middleware configured from `config.yaml` (`llm_call`, `circuit_breaker`), with the same `breaker` /
 * `limiter` overrides. Requires `AppConfigService`.
 */
export const layerFromConfig = (options: Pick<Options, "breaker" | "limiter"> = {}) =>
  Layer.unwrapEffect(Effect.map(AppConfigService, ({ config }) =>
    layer({ ...options, llmCall: config.llm_call, circuitBreaker: config.circuit_breaker })))

/** Its chain entry: the retry loop and circuit breaker; everything inside it is re-run per attempt. */
export const entry = (options: Options = {}) => Chain.entry("LLMErrorHandling", () => layer(options))
