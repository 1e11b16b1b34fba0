/**
 * The retry policy of model calls as an Effect `Schedule` (SPEC §5.8). Its input is each failure; its output
 * says what was decided: retry after a wait, or give up. A retriable error is retried up to
 * `llm_call.retry_max_attempts` attempts in all (2 at most for burst throttling and stream-chunk timeouts).
 * The wait is the provider's `retry-after-ms` / `retry-after` when present — whether shorter or longer than
 * the backoff — at most `llm_call.max_retry_after_ms`, else decorrelated jitter: a uniform integer in
 * `[base, min(cap, 3 × previous wait)]`, `base` being `burst_retry_base_delay_ms` for burst throttling. The
 * waits run on Effect's Clock (the TestClock in tests) and draw from its Random.
 */
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as ScheduleInterval from "effect/ScheduleInterval"
import type { LlmCallConfig } from "../../services/AppConfig.js"
import type { ModelError } from "../../services/ModelService.js"
import type { Classification } from "./Classification.js"
import { classify } from "./Classification.js"
import { retryAfterMs } from "./RetryAfter.js"

/** The number of attempts in all for this error (SPEC: 2 at most for stream-chunk timeouts and bursts). */
export const maxAttempts = (config: LlmCallConfig, error: ModelError, classification: Classification): number => {
  let max = config.retry_max_attempts
  if (error.errorType === "StreamChunkTimeoutError") max = Math.min(max, 2)
  if (classification.reason === "burst_rate") max = Math.min(max, 2)
  return Math.max(1, max)
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

/** The wait before a retry: the provider's, at most `max_retry_after_ms`, else `fallback`'s jitter. */
export const waitFor = (
  config: LlmCallConfig,
  asked: number | undefined,
  fallback: Effect.Effect<number>
): Effect.Effect<number> =>
  asked !== undefined ? Effect.succeed(Math.min(asked, config.max_retry_after_ms)) : fallback

/** The policy's decision after attempt `attempt` failed: try again after `waitMs`. */
export interface Retry {
  readonly _tag: "Retry"
  readonly attempt: number
  readonly maxAttempts: number
  readonly classification: Classification
  readonly waitMs: number
  /** The provider's `retry-after`, when it sent one (it may be longer than the wait: capped). */
  readonly askedMs: number | undefined
  readonly error: ModelError
}

/** The policy's decision after attempt `attempt` failed: the error is final (not retriable, or out of attempts). */
export interface GiveUp {
  readonly _tag: "GiveUp"
  readonly attempt: number
  readonly classification: Classification
}

/** What the policy decided after a failed attempt. */
export type Decision = Retry | GiveUp

interface State {
  /** The attempt that just failed (1 for the first). */
  readonly attempt: number
  /** The previous wait, the seed of the next jittered one (a provider's wait counts). */
  readonly previous: number | undefined
}

/**
 * The retry policy for `config` (whose `retry_max_attempts` is the calls' attempts in all), as a Schedule
 * over the failures of one call. A new run of the schedule starts from the first attempt.
 */
export const policy = (config: LlmCallConfig): Schedule.Schedule<Decision, ModelError> =>
  Schedule.makeWithState<State, ModelError, Decision>({ attempt: 1, previous: undefined }, (now, error, state) => {
    const classification = classify(error)
    const max = maxAttempts(config, error, classification)
    if (!classification.retriable || state.attempt >= max) {
      const giveUp: GiveUp = { _tag: "GiveUp", attempt: state.attempt, classification }
      return Effect.succeed([state, giveUp, ScheduleDecision.done] as const)
    }
    const asked = retryAfterMs(error.headers, now)
    const jitter = jitteredDelay(config, classification.reason === "burst_rate", state.previous)
    return Effect.map(waitFor(config, asked, jitter), (waitMs) => {
      const retry: Retry = {
        _tag: "Retry",
        attempt: state.attempt,
        maxAttempts: max,
        classification,
        waitMs,
        askedMs: asked,
        error
      }
      const next: State = { attempt: state.attempt + 1, previous: waitMs }
      return [next, retry, ScheduleDecision.continueWith(ScheduleInterval.after(now + waitMs))] as const
    })
  })
