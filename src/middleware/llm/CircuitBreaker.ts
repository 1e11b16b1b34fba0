/**
 * The circuit breaker over model calls (plain synchronous state, times from the caller's Clock): closed →
 * open after `failure_threshold` consecutive calls that exhausted their retries on a retriable error; while
 * open every call is refused until `recovery_timeout_sec` has passed; then one half-open probe goes through —
 * success closes it, failure re-opens it, no verdict (interruption, a non-retriable error) frees the probe.
 */
import type { CircuitBreakerConfig } from "../../services/AppConfig.js"

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
export const make = (config: Partial<CircuitBreakerConfig> = {}): CircuitBreaker => {
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
