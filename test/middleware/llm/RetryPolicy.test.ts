/**
 * The retry policy as a Schedule, on the TestClock: each attempt of a failing call happens at the virtual time
 * the policy says (decorrelated jitter growing from the previous wait up to the cap; the provider's
 * retry-after instead when it sends one, capped), and not a millisecond before.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as RetryPolicy from "../../../src/middleware/llm/RetryPolicy.js"
import { LlmCallConfig } from "../../../src/services/AppConfig.js"
import { ModelError } from "../../../src/services/ModelService.js"

const defaults = Schema.decodeUnknownSync(LlmCallConfig)({})

const error = (fields: Partial<ConstructorParameters<typeof ModelError>[0]> = {}) =>
  new ModelError({ reason: "server", errorType: "InternalServerError", status: 500, message: "failed", ...fields })

/** Draws always at the top of the jitter's range, or always at its bottom. */
const highest = Random.fixed([Number.MAX_SAFE_INTEGER])
const lowest = Random.fixed([0])

/**
 * A call that fails with `errors` in turn and then succeeds, retried by the policy (forked: the test moves the
 * clock). `times`: the virtual times at which its attempts started; `decisions`: the policy's outputs.
 */
const retried = (errors: ReadonlyArray<ModelError>, config: LlmCallConfig = defaults) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    const decisions: Array<RetryPolicy.Decision> = []
    const attempt = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const failure = errors[times.length]
      times.push(now)
      return failure === undefined ? Effect.succeed("answered") : Effect.fail(failure)
    })
    const schedule = Schedule.tapOutput(RetryPolicy.policy(config), (decision) =>
      Effect.sync(() => decisions.push(decision)))
    const fiber = yield* Effect.fork(
      Effect.retryOrElse(attempt, schedule, (last, decision) =>
        Effect.succeed(`gave up on ${last.message} after attempt ${decision.attempt}`))
    )
    return { fiber, times, decisions }
  })

/** Moves the clock to `at` (virtual ms since the start) and says how many attempts have started by then. */
const attemptsBy = (times: ReadonlyArray<number>, at: number) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(at)
    return times.length
  })

describe("RetryPolicy on the TestClock", () => {
  it.effect("the waits grow from the previous one (× 3) up to the cap: attempts at 0, 3 s, 11 s, 19 s", () =>
    Effect.gen(function*() {
      const { fiber, times } = yield* retried([error(), error(), error()], { ...defaults, retry_max_attempts: 4 })
      assert.strictEqual(yield* attemptsBy(times, 2_999), 1)
      assert.strictEqual(yield* attemptsBy(times, 3_000), 2)
      assert.strictEqual(yield* attemptsBy(times, 10_999), 2)
      assert.strictEqual(yield* attemptsBy(times, 11_000), 3)
      assert.strictEqual(yield* attemptsBy(times, 18_999), 3)
      assert.strictEqual(yield* attemptsBy(times, 19_000), 4)
      assert.strictEqual(yield* Fiber.join(fiber), "answered")
      assert.deepStrictEqual(times, [0, 3_000, 11_000, 19_000])
    }).pipe(Effect.withRandom(highest)))

  it.effect("at the bottom of the range every wait is the base delay; out of attempts, the policy gives up", () =>
    Effect.gen(function*() {
      const { fiber, times } = yield* retried([error(), error(), error(), error()])
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(yield* Fiber.join(fiber), "gave up on failed after attempt 3")
      assert.deepStrictEqual(times, [0, 1_000, 2_000], "retry_max_attempts: 3 attempts in all")
    }).pipe(Effect.withRandom(lowest)))

  it.effect("retry-after replaces the backoff, longer or shorter, and seeds the next jittered wait", () =>
    Effect.gen(function*() {
      const { fiber, times } = yield* retried(
        [
          error({ status: 429, headers: { "retry-after": "5" } }),
          error({ status: 429, headers: { "retry-after-ms": "200" } }),
          error()
        ],
        { ...defaults, retry_max_attempts: 4 }
      )
      // 5 s asked: longer than the 3 s the jitter could draw at most
      assert.strictEqual(yield* attemptsBy(times, 4_999), 1)
      assert.strictEqual(yield* attemptsBy(times, 5_000), 2)
      // 200 ms asked: shorter than the 1 s base, taken as it is
      assert.strictEqual(yield* attemptsBy(times, 5_199), 2)
      assert.strictEqual(yield* attemptsBy(times, 5_200), 3)
      // no header: jitter again, seeded by the last wait (200 ms × 3 is below the base: the base, 1 s)
      assert.strictEqual(yield* attemptsBy(times, 6_199), 3)
      assert.strictEqual(yield* attemptsBy(times, 6_200), 4)
      assert.strictEqual(yield* Fiber.join(fiber), "answered")
    }).pipe(Effect.withRandom(highest)))

  it.effect("a retry-after beyond llm_call.max_retry_after_ms waits the cap; an HTTP date counts from the Clock", () =>
    Effect.gen(function*() {
      const { fiber, times } = yield* retried(
        [
          error({ status: 503, headers: { "retry-after": "86400" } }),
          error({ status: 503, headers: { "retry-after": "Thu, 01 Jan 1970 00:01:04 GMT" } })
        ],
        { ...defaults, max_retry_after_ms: 60_000 }
      )
      assert.strictEqual(yield* attemptsBy(times, 59_999), 1)
      assert.strictEqual(yield* attemptsBy(times, 60_000), 2)
      // asked for 00:01:04, i.e. 4 s after the second attempt failed at 60 s
      assert.strictEqual(yield* attemptsBy(times, 63_999), 2)
      assert.strictEqual(yield* attemptsBy(times, 64_000), 3)
      assert.strictEqual(yield* Fiber.join(fiber), "answered")
    }))

  it.effect("burst throttling: 2 attempts at most, the wait drawn from the burst base (5 s)", () =>
    Effect.gen(function*() {
      const burst = error({ status: 429, code: "limit_burst_rate", errorType: "RateLimitError", message: "burst" })
      const { fiber, times } = yield* retried([burst, burst, burst], { ...defaults, retry_max_attempts: 5 })
      assert.strictEqual(yield* attemptsBy(times, 4_999), 1)
      assert.strictEqual(yield* attemptsBy(times, 5_000), 2)
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(yield* Fiber.join(fiber), "gave up on burst after attempt 2")
      assert.deepStrictEqual(times, [0, 5_000])
    }).pipe(Effect.withRandom(lowest)))

  it.effect("a non-retriable error is final at once: no wait, no second attempt", () =>
    Effect.gen(function*() {
      const auth = error({ status: 401, reason: "auth", errorType: "AuthenticationError", message: "Invalid API key" })
      const { fiber, times } = yield* retried([auth, error()])
      assert.strictEqual(yield* Fiber.join(fiber), "gave up on Invalid API key after attempt 1")
      assert.deepStrictEqual(times, [0])
    }))

  it.effect("each decision carries what the llm_retry event reports", () =>
    Effect.gen(function*() {
      const failures = [error({ status: 429, headers: { "retry-after": "90" } }), error()]
      const { decisions, fiber } = yield* retried(failures)
      yield* TestClock.adjust("2 minutes")
      assert.strictEqual(yield* Fiber.join(fiber), "answered")
      const retry = { _tag: "Retry", maxAttempts: 3, classification: { retriable: true, reason: "transient" } } as const
      assert.deepStrictEqual(decisions, [
        // 90 s asked, 60 s taken (max_retry_after_ms)
        { ...retry, attempt: 1, waitMs: 60_000, askedMs: 90_000, error: failures[0]! },
        // jitter seeded by the 60 s wait: [1 s, min(8 s, 180 s)]
        { ...retry, attempt: 2, waitMs: 8_000, askedMs: undefined, error: failures[1]! }
      ])
    }).pipe(Effect.withRandom(highest)))
})
