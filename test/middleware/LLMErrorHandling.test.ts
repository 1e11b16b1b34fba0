import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as LLMErrorHandling from "../../src/middleware/LLMErrorHandling.js"
import * as Notices from "../../src/middleware/llm/Notices.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as Render from "../../src/programs/cli/Render.js"
import * as Run from "../../src/programs/Run.js"
import { LlmCallConfig } from "../../src/services/AppConfig.js"
import type { ModelRequest, ModelResponse } from "../../src/services/ModelService.js"
import { ModelError, ModelService } from "../../src/services/ModelService.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { inRun, insideRun } from "../support/fixtures.js"

// ---------------------------------------------------------------------------------------------------------
// Helpers

const error = (fields: Partial<ConstructorParameters<typeof ModelError>[0]> = {}) =>
  new ModelError({ reason: "other", errorType: "APIError", message: "failed", ...fields })

const request: ModelRequest = { systemPrompt: undefined, messages: [M.human("hi")], tools: [], settings: {} }

const defaults = Schema.decodeUnknownSync(LlmCallConfig)({})

/** Events emitted on the current sink, readable as they arrive (a queue) and afterwards (a list). */
/** The services of a run whose events go to `sink`. */
const withEvents = (sink: RunEvents["Type"]) => Context.add(inRun().context, RunEvents, sink)

const recorder = Effect.gen(function*() {
  const queue = yield* Queue.unbounded<RunEvent>()
  const events: Array<RunEvent> = []
  const emit = (event: RunEvent) => {
    events.push(event)
    queue.unsafeOffer(event)
  }
  const sink = { emit: (event: RunEvent) => Effect.sync(() => emit(event)) }
  /** Waits for the next custom event with this name. */
  const next = (name: string): Effect.Effect<any> =>
    Effect.flatMap(Queue.take(queue), (event) =>
      event.type === "custom" && event.name === name ? Effect.succeed(event.data) : next(name))
  const custom = (name: string) =>
    events.flatMap((e) => (e.type === "custom" && e.name === name ? [e.data as any] : []))
  return { sink, events, next, custom, emit }
})

/** An inner model that plays a list of outcomes, counting attempts as they start. */
const inner = (outcomes: ReadonlyArray<ModelError | string | Effect.Effect<ModelResponse, ModelError>>) => {
  let attempts = 0
  const seen: Array<ModelRequest> = []
  const next = (req: ModelRequest): Effect.Effect<ModelResponse, ModelError> =>
    Effect.suspend(() => {
      seen.push(req)
      const outcome = outcomes[attempts++]
      if (outcome === undefined) return Effect.die(new Error("no outcome left"))
      if (typeof outcome === "string") return Effect.succeed({ message: M.ai(outcome) })
      return Effect.isEffect(outcome) ? outcome : Effect.fail(outcome)
    })
  return { next, seen, attempts: () => attempts }
}

/** Lets woken fibers run (TestClock wake-ups are scheduled, not immediate). */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

const kwargs = (response: ModelResponse) => response.message.additional_kwargs ?? {}

// ---------------------------------------------------------------------------------------------------------
// Pure helpers

// DeerFlow test_llm_error_handling_middleware.py: the phrases its tests pin in what the user reads
// (test_user_message_for_*, test_async_model_call_marks_transient_retry_exhaustion_as_error_fallback,
// test_burst_rate_retry_event_reports_effective_budget_sync)
describe("LLMErrorHandling notices, as DeerFlow words them", () => {
  const error = (errorType: string) => new ModelError({ reason: "other", errorType, message: "boom" })
  it("transient, stream-timeout, burst-rate and quota fallbacks carry DeerFlow's phrases", () => {
    const transient = Notices.fallbackText("transient", error("APIConnectionError"))
    assert.include(transient, "temporarily unavailable")
    assert.notInclude(transient, "streaming response was interrupted")
    const stalled = Notices.fallbackText("transient", error("StreamChunkTimeoutError"))
    assert.include(stalled, "streaming response was interrupted")
    assert.isTrue(stalled.includes("split") || stalled.includes("shorten"))
    assert.notInclude(stalled, "temporarily unavailable")
    const burst = Notices.fallbackText("burst_rate", error("RateLimitError"))
    assert.include(burst, "burst-rate")
    assert.notInclude(burst, "temporarily unavailable")
    assert.include(Notices.fallbackText("quota", error("RateLimitError")), "out of quota")
  })
  it("the llm_retry message reports attempt/budget as DeerFlow's does (1/2)", () => {
    const event = Notices.retryEvent(1, 2, 2000, "burst_rate")
    assert.deepInclude(event, { type: "llm_retry", attempt: 1, max_attempts: 2 })
    assert.include(event.message, "1/2")
  })
})

describe("LLMErrorHandling.classify", () => {
  const cases: ReadonlyArray<readonly [string, ModelError, LLMErrorHandling.ErrorReason, boolean]> = [
    ["insufficient_quota on a 429", error({ status: 429, code: "insufficient_quota", message: "429" }), "quota", false],
    ["billing in the message", error({ message: "Your billing details are missing" }), "quota", false],
    ["Chinese quota", error({ message: "账户余额不足" }), "quota", false],
    ["adapter reason quota (402)", error({ reason: "quota", status: 402, message: "Payment req." }), "quota", false],
    ["invalid api key", error({ status: 401, message: "Invalid API key provided" }), "auth", false],
    ["Chinese auth", error({ message: "请求未授权" }), "auth", false],
    ["adapter reason auth (401)", error({ reason: "auth", status: 401, message: "Incorrect key" }), "auth", false],
    ["burst code", error({ status: 429, code: "limit_burst_rate", message: "Too many" }), "burst_rate", true],
    ["burst message", error({ status: 429, message: "Request rate increased too quickly" }), "burst_rate", true],
    ["Chinese burst", error({ message: "请求增长过快，请降低频率" }), "burst_rate", true],
    ["connection class", error({ errorType: "APIConnectionError", reason: "connection" }), "transient", true],
    ["timeout class", error({ errorType: "APITimeoutError", message: "timed out" }), "transient", true],
    ["stream chunk timeout", error({ errorType: "StreamChunkTimeoutError", message: "stalled" }), "transient", true],
    ["empty generations", error({ errorType: "IndexError", message: "list index out of range" }), "transient", true],
    ["empty response", error({ reason: "empty_response", errorType: "EmptyResponseError" }), "transient", true],
    ["429 status", error({ errorType: "RateLimitError", status: 429, message: "429 status code" }), "transient", true],
    ["503 status", error({ status: 503, message: "503 Service Unavailable" }), "transient", true],
    ["409 status", error({ status: 409, message: "conflict" }), "transient", true],
    ["busy message", error({ message: "The server is overloaded" }), "busy", true],
    ["Chinese busy", error({ message: "服务繁忙，请稍后重试" }), "busy", true],
    ["400 bad request", error({ status: 400, reason: "bad_request", message: "context too long" }), "generic", false],
    ["unknown", error({ message: "something odd" }), "generic", false]
  ]
  for (const [name, e, reason, retriable] of cases) {
    it(`${name} → ${reason}`, () => {
      assert.deepStrictEqual(LLMErrorHandling.classify(e), { reason, retriable })
    })
  }

  it("caps attempts at 2 for burst throttling and stream-chunk timeouts", () => {
    const max = (e: ModelError, configured = 5) =>
      LLMErrorHandling.maxAttempts({ ...defaults, retry_max_attempts: configured }, e, LLMErrorHandling.classify(e))
    assert.strictEqual(max(error({ status: 503 })), 5)
    assert.strictEqual(max(error({ code: "limit_burst_rate" })), 2)
    assert.strictEqual(max(error({ errorType: "StreamChunkTimeoutError" })), 2)
    assert.strictEqual(max(error({ errorType: "StreamChunkTimeoutError" }), 1), 1)
  })
})

describe("LLMErrorHandling waits", () => {
  it("reads retry-after-ms, retry-after seconds and HTTP dates", () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0)
    assert.strictEqual(LLMErrorHandling.retryAfterMs({ "retry-after-ms": "1500", "retry-after": "9" }, now), 1500)
    assert.strictEqual(LLMErrorHandling.retryAfterMs({ "retry-after": "2" }, now), 2000)
    assert.strictEqual(LLMErrorHandling.retryAfterMs({ "Retry-After": "0.25" }, now), 250)
    assert.strictEqual(LLMErrorHandling.retryAfterMs({ "retry-after": "Thu, 01 Jan 2026 12:00:07 GMT" }, now), 7000)
    assert.strictEqual(LLMErrorHandling.retryAfterMs({ "retry-after": "Thu, 01 Jan 2026 11:00:00 GMT" }, now), 0)
    assert.isUndefined(LLMErrorHandling.retryAfterMs({ "retry-after": "soon" }, now))
    assert.isUndefined(LLMErrorHandling.retryAfterMs({}, now))
    assert.isUndefined(LLMErrorHandling.retryAfterMs(undefined, now))
  })

  it("decorrelated jitter: [base, min(cap, 3 × previous)], burst uses its own base, a cap below the base wins", () => {
    assert.deepStrictEqual(LLMErrorHandling.backoffRange(defaults, false, undefined), { low: 1000, high: 3000 })
    assert.deepStrictEqual(LLMErrorHandling.backoffRange(defaults, false, 2500), { low: 1000, high: 7500 })
    assert.deepStrictEqual(LLMErrorHandling.backoffRange(defaults, false, 6000), { low: 1000, high: 8000 })
    assert.deepStrictEqual(LLMErrorHandling.backoffRange(defaults, true, undefined), { low: 5000, high: 8000 })
    assert.deepStrictEqual(LLMErrorHandling.backoffRange({ ...defaults, retry_cap_delay_ms: 500 }, false, undefined), {
      low: 500,
      high: 500
    })
  })

  it.effect("every jittered wait lies in its range (300 sampled cases)", () =>
    Effect.forEach(
      FastCheck.sample(
        FastCheck.tuple(
          FastCheck.boolean(),
          FastCheck.option(FastCheck.integer({ min: 0, max: 20_000 }), { nil: undefined })
        ),
        300
      ),
      ([burst, previous]) =>
        Effect.gen(function*() {
          const { high, low } = LLMErrorHandling.backoffRange(defaults, burst, previous)
          const wait = yield* LLMErrorHandling.jitteredDelay(defaults, burst, previous)
          assert.isTrue(Number.isInteger(wait) && wait >= low && wait <= high, `${wait} not in [${low}, ${high}]`)
        }),
      { discard: true }
    ))
})

describe("LLMErrorHandling circuit breaker", () => {
  it("opens after the threshold, answers at once while open, lets one probe through, closes on success", () => {
    const breaker = LLMErrorHandling.makeCircuitBreaker({ failure_threshold: 2, recovery_timeout_sec: 10 })
    assert.isTrue(breaker.tryAcquire(0))
    breaker.onFailure(0)
    assert.strictEqual(breaker.state(), "closed")
    assert.isTrue(breaker.tryAcquire(1))
    breaker.onFailure(1)
    assert.strictEqual(breaker.state(), "open")
    assert.isFalse(breaker.tryAcquire(10_000))
    // After the recovery timeout: one probe, the rest still refused while it is out.
    assert.isTrue(breaker.tryAcquire(11_001))
    assert.strictEqual(breaker.state(), "half_open")
    assert.isFalse(breaker.tryAcquire(11_002))
    // A failed probe re-opens at once.
    breaker.onFailure(11_003)
    assert.strictEqual(breaker.state(), "open")
    assert.isFalse(breaker.tryAcquire(20_000))
    assert.isTrue(breaker.tryAcquire(21_004))
    breaker.onSuccess()
    assert.strictEqual(breaker.state(), "closed")
    assert.isTrue(breaker.tryAcquire(21_005))
  })

  it("a released probe (no verdict) lets the next call probe", () => {
    const breaker = LLMErrorHandling.makeCircuitBreaker({ failure_threshold: 1, recovery_timeout_sec: 1 })
    breaker.onFailure(0)
    assert.isTrue(breaker.tryAcquire(1000))
    assert.isFalse(breaker.tryAcquire(1000))
    breaker.release()
    assert.isTrue(breaker.tryAcquire(1000))
  })
})

// ---------------------------------------------------------------------------------------------------------
// The wrapper over a stub model (TestClock)

describe("LLMErrorHandling wrapper", () => {
  it.effect("a non-retriable error answers at once with the marked fallback, without retrying", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const model = inner([
        error({ status: 401, reason: "auth", errorType: "AuthenticationError", message: "Invalid API key" })
      ])
      const response = yield* Effect.provide(LLMErrorHandling.wrap()(request, model.next), withEvents(rec.sink))
      assert.strictEqual(model.attempts(), 1)
      assert.deepStrictEqual(rec.custom("llm_retry"), [])
      assert.deepStrictEqual(kwargs(response), {
        deerflow_error_fallback: true,
        error_type: "AuthenticationError",
        error_reason: "auth",
        error_detail: "Invalid API key"
      })
      assert.match(M.text(response.message), /credentials/)
      assert.isFalse(M.hasToolCalls(response.message))
    }))

  it.effect("a model's max_retries sets its attempts (max_retries + 1); other models keep retry_max_attempts", () =>
    Effect.gen(function*() {
      const attempts = LLMErrorHandling.attemptsByModel([{ name: "strict", max_retries: 0 }, { name: "patient", max_retries: 4 }, { name: "plain" }])
      assert.deepStrictEqual(attempts, { strict: 1, patient: 5 })
      const busy = () => error({ status: 503, reason: "server", message: "overloaded" })
      const wrap = LLMErrorHandling.wrap({ attemptsByModel: attempts, llmCall: { retry_base_delay_ms: 0, retry_cap_delay_ms: 0 } })
      const strict = inner([busy(), "never reached"])
      yield* wrap({ ...request, settings: { modelName: "strict" } }, strict.next)
      assert.strictEqual(strict.attempts(), 1, "max_retries: 0 means no retry")
      const patient = inner([busy(), busy(), busy(), busy(), "fifth time lucky"])
      const fiber = yield* Effect.fork(wrap({ ...request, settings: { modelName: "patient" } }, patient.next))
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(M.text((yield* Fiber.join(fiber)).message), "fifth time lucky")
      const plain = inner([busy(), busy(), busy(), "unused"])
      const other = yield* Effect.fork(wrap({ ...request, settings: { modelName: "plain" } }, plain.next))
      yield* TestClock.adjust("1 minute")
      yield* Fiber.join(other)
      assert.strictEqual(plain.attempts(), 3, "llm_call.retry_max_attempts (3)")
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("a failed call ends the run with the provider's detail; the thread keeps the words for the user", () =>
    Effect.gen(function*() {
      const rejected = error({
        status: 401,
        reason: "auth",
        errorType: "AuthenticationError",
        message: "Incorrect API key provided: sk-***"
      })
      const response = yield* LLMErrorHandling.wrap()(request, inner([rejected]).next)
      assert.match(M.text(response.message), /authentication or access is invalid/)
      assert.deepStrictEqual(response.failure, {
        name: "AuthenticationError",
        message: "Incorrect API key provided: sk-***"
      })
      // as DeerFlow's worker reads a marked message: the detail, else the reason, else the text, else a default
      const marked = (kwargs: Record<string, string>, text = "") =>
        Notices.fallbackErrorText(M.ai(text, { additional_kwargs: { [Notices.FALLBACK_MARKER]: true, ...kwargs } }))
      assert.strictEqual(marked({ error_detail: "  boom  ", error_reason: "auth" }, "words"), "boom")
      assert.strictEqual(marked({ error_detail: " ", error_reason: "auth" }, "words"), "auth")
      assert.strictEqual(marked({}, `  ${"w".repeat(2500)}`), "w".repeat(2000))
      assert.strictEqual(marked({}), "LLM provider failed after retries")
      // a provider's megabytes of detail: the run records 2,000 characters of them
      assert.strictEqual(marked({ error_detail: "d".repeat(3_000_000) }), "d".repeat(2000))
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("a provider's megabytes of error reach the log lines and the run's error cut at 2,000 characters", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const logger = Logger.make(({ annotations, message }) => {
        lines.push(`${String(message)} ${JSON.stringify(Object.fromEntries(HashMap.toEntries(annotations)))}`)
      })
      const huge = error({ reason: "server", status: 500, errorType: "InternalServerError", message: "e".repeat(3e6) })
      const wrap = LLMErrorHandling.wrap({ llmCall: { retry_max_attempts: 2, retry_base_delay_ms: 0, retry_cap_delay_ms: 0 } })
      const response = yield* wrap(request, inner([huge, huge]).next).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
        Effect.fork,
        Effect.tap(() => TestClock.adjust("1 minute")),
        Effect.flatMap(Fiber.join)
      )
      assert.strictEqual(response.failure?.message, "e".repeat(2000), "the run's error: 2,000 characters of it")
      assert.lengthOf(lines, 2, "a retry's warning and the final error")
      for (const line of lines) assert.isBelow(line.length, 2500)
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("generic errors show their detail; stream-chunk timeouts suggest smaller steps", () =>
    Effect.gen(function*() {
      const notFound = inner([error({ message: "model not found: gpt-9" })])
      const generic = yield* LLMErrorHandling.wrap()(request, notFound.next)
      assert.strictEqual(M.text(generic.message), "LLM request failed: model not found: gpt-9")
      const stalled = error({ errorType: "StreamChunkTimeoutError", reason: "timeout", message: "stalled" })
      const fiber = yield* Effect.fork(LLMErrorHandling.wrap()(request, inner([stalled, stalled, "unused"]).next))
      yield* TestClock.adjust("10 seconds")
      const response = yield* Fiber.join(fiber)
      assert.match(M.text(response.message), /smaller steps/)
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("burst throttling: at most 2 attempts, waits from the burst base, never trips the breaker", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const breaker = LLMErrorHandling.makeCircuitBreaker({ failure_threshold: 1 })
      const burst = error({ status: 429, code: "limit_burst_rate", errorType: "RateLimitError", message: "burst" })
      const model = inner([burst, burst, "unused"])
      const fiber = yield* Effect.fork(
        Effect.provide(LLMErrorHandling.wrap({ breaker })(request, model.next), withEvents(rec.sink))
      )
      const retry = yield* rec.next("llm_retry")
      assert.deepInclude(retry, { attempt: 1, max_attempts: 2, reason: "burst_rate" })
      assert.isTrue(retry.wait_ms >= 5000 && retry.wait_ms <= 8000)
      yield* TestClock.adjust(retry.wait_ms)
      const response = yield* Fiber.join(fiber)
      assert.strictEqual(model.attempts(), 2)
      assert.strictEqual(kwargs(response).error_reason, "burst_rate")
      assert.strictEqual(breaker.state(), "closed")
    }))

  it.effect("fiber interruption is never retried and frees the half-open probe", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const breaker = LLMErrorHandling.makeCircuitBreaker({ failure_threshold: 1, recovery_timeout_sec: 1 })
      breaker.onFailure(0)
      yield* TestClock.adjust("2 seconds")
      const started = yield* Deferred.make<void>()
      const model = inner([Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)])
      const fiber = yield* Effect.fork(
        Effect.provide(LLMErrorHandling.wrap({ breaker })(request, model.next), withEvents(rec.sink))
      )
      yield* Deferred.await(started)
      assert.strictEqual(breaker.state(), "half_open")
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause))
      assert.strictEqual(model.attempts(), 1)
      assert.deepStrictEqual(rec.events, [])
      // The probe was released: the next call goes out (and its success closes the circuit).
      const response = yield* LLMErrorHandling.wrap({ breaker })(request, inner(["back"]).next)
      assert.strictEqual(M.text(response.message), "back")
      assert.strictEqual(breaker.state(), "closed")
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("a defect (a bug inside the chain) passes through; it is not retried or hidden", () =>
    Effect.gen(function*() {
      const model = inner([Effect.die(new TypeError("bug"))])
      const exit = yield* Effect.exit(LLMErrorHandling.wrap()(request, model.next))
      assert.isTrue(Exit.isFailure(exit) && Option.isSome(Cause.dieOption(exit.cause)))
      assert.strictEqual(model.attempts(), 1)
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("a retry re-runs the inner chain with the original request; one-shot injections survive (§14/16)", () =>
    Effect.gen(function*() {
      // An inner wrapper following the contract: it injects a pending warning on every call and drains it
      // only once the call below it succeeded.
      let pending: Array<string> = ["[LOOP WARNING] you repeated the same call 3 times"]
      const model = inner([error({ status: 503, message: "503" }), "fine"])
      const injecting = (req: ModelRequest) => {
        const injected = pending.length === 0
          ? req
          : { ...req, messages: [...req.messages, ...pending.map((w) => M.human(w))] }
        return Effect.tap(model.next(injected), () =>
          Effect.sync(() => {
            pending = []
          }))
      }
      const received: Array<ModelRequest> = []
      const fiber = yield* Effect.fork(
        // The wrapper function itself is called again for each attempt (not just its effect re-run).
        LLMErrorHandling.wrap()(request, (req) => (received.push(req), injecting(req)))
      )
      yield* TestClock.adjust("3 seconds")
      const response = yield* Fiber.join(fiber)
      assert.strictEqual(M.text(response.message), "fine")
      assert.strictEqual(received.length, 2)
      assert.strictEqual(received[0], request)
      assert.strictEqual(received[1], request)
      // The model saw the warning on the failed attempt and again on the retry; then it was drained.
      assert.deepStrictEqual(model.seen.map((r) => M.text(r.messages.at(-1)!)), [
        "[LOOP WARNING] you repeated the same call 3 times",
        "[LOOP WARNING] you repeated the same call 3 times"
      ])
      assert.deepStrictEqual(pending, [])
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("the concurrency limiter bounds attempts in flight but is not held during backoff waits", () =>
    Effect.gen(function*() {
      const limiter = yield* Effect.makeSemaphore(1)
      let inFlight = 0
      let maxInFlight = 0
      const gate = yield* Deferred.make<void>()
      const tracked = (outcome: Effect.Effect<ModelResponse, ModelError>) =>
        Effect.acquireUseRelease(
          Effect.sync(() => {
            inFlight++
            maxInFlight = Math.max(maxInFlight, inFlight)
          }),
          () => outcome,
          () => Effect.sync(() => void inFlight--)
        )
      // Call A fails once (then waits ~1-3 s before retrying); call B blocks on the gate while it runs.
      const a = inner([
        tracked(Effect.fail(error({ status: 500, message: "500" }))),
        tracked(Effect.succeed({ message: M.ai("A") }))
      ])
      const b = inner([tracked(Effect.zipRight(Deferred.await(gate), Effect.succeed({ message: M.ai("B") })))])
      const wrap = LLMErrorHandling.wrap({ limiter })
      const fa = yield* Effect.fork(wrap(request, a.next))
      yield* settle
      assert.strictEqual(a.attempts(), 1)
      // A is in its backoff wait: B gets the permit meanwhile.
      const fb = yield* Effect.fork(wrap(request, b.next))
      yield* settle
      assert.strictEqual(b.attempts(), 1)
      // A's retry is due, but B holds the only permit: A waits for it.
      yield* TestClock.adjust("8 seconds")
      yield* settle
      assert.strictEqual(a.attempts(), 1)
      yield* Deferred.succeed(gate, undefined)
      assert.strictEqual(M.text((yield* Fiber.join(fb)).message), "B")
      assert.strictEqual(M.text((yield* Fiber.join(fa)).message), "A")
      assert.strictEqual(maxInFlight, 1)
    }).pipe(Effect.provideService(RunEvents, RunEvents.discard)))

  it.effect("the app's ModelCallLimiter bounds the calls of every agent that uses it", () =>
    Effect.gen(function*() {
      let inFlight = 0
      let maxInFlight = 0
      const gate = yield* Deferred.make<void>()
      const slow: ModelService["Type"] = {
        generate: () =>
          Effect.acquireUseRelease(
            Effect.sync(() => (inFlight++, maxInFlight = Math.max(maxInFlight, inFlight))),
            () => Effect.as(Deferred.await(gate), { message: M.ai("ok") }),
            () => Effect.sync(() => inFlight--)
          )
      }
      // two agents (two middleware instances built separately), one app-level limiter with one permit
      const shared = yield* Layer.build(LLMErrorHandling.ModelCallLimiter.layer(1))
      const agent = () => MW.stack([LLMErrorHandling.layer()], MW.base(slow, Toolkit.make([])))
      const a = yield* Layer.build(agent()).pipe(Effect.provide(shared))
      const b = yield* Layer.build(agent()).pipe(Effect.provide(shared))
      const call = (ports: Context.Context<MW.Ports>) => insideRun(ports, Context.get(ports, ModelService).generate(request))
      const fa = yield* Effect.fork(call(a))
      const fb = yield* Effect.fork(call(b))
      yield* settle
      assert.strictEqual(inFlight, 1, "the second agent's call waits for the first's permit")
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(fa)
      yield* Fiber.join(fb)
      assert.strictEqual(maxInFlight, 1)
    }).pipe(Effect.scoped))
})

// ---------------------------------------------------------------------------------------------------------
// Against a loopback Chat Completions server, with the real openai client

const serve = (script: ScriptedChatServer.Script, timeoutMs = 10_000) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(script)
    const model = yield* OpenAiModel.make({
      baseURL: server.url,
      apiKey: "test-key",
      model: "test-model",
      timeoutMs
    })
    let attempts = 0
    const counted: ModelService["Type"] = {
      generate: (req) => Effect.suspend(() => (attempts++, model.generate(req)))
    }
    return { server, model: counted, attempts: () => attempts }
  })

/** Waits (in real time, whatever the test clock says) until `check` holds: the server has seen a request... */
const until = (check: () => boolean): Effect.Effect<void> =>
  Effect.suspend(() =>
    check() ? Effect.void : Effect.zipRight(Effect.promise(() => new Promise((r) => setTimeout(r, 5))), until(check))
  )

/** Runs one turn through `Run.execute` with the middleware over the real model; events go to the recorder. */
const runTurn = (
  model: ModelService["Type"],
  emit: (event: RunEvent) => void,
  options: LLMErrorHandling.Options = {},
  threadId = "thread-1"
) =>
  Run.execute(
    { threadId, input: [M.human("hello")] },
    MW.stack([LLMErrorHandling.layer(options)], MW.base(model, Toolkit.make([]))),
    emit
  )

describe("LLMErrorHandling against the real openai client", () => {
  it.effect("a 429 with Retry-After: 2 is retried at exactly 2 s, not before", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { attempts, model, server } = yield* serve([
        { status: 429, headers: { "retry-after": "2" } },
        "hello after the wait"
      ])
      const fiber = yield* Effect.fork(
        Effect.provide(LLMErrorHandling.wrap()(request, model.generate), withEvents(rec.sink))
      )
      const retry = yield* rec.next("llm_retry")
      assert.deepInclude(retry, { type: "llm_retry", attempt: 1, max_attempts: 3, wait_ms: 2000, reason: "transient" })
      assert.isString(retry.message)
      assert.strictEqual(attempts(), 1)
      yield* TestClock.adjust(1999)
      yield* settle
      assert.strictEqual(attempts(), 1)
      assert.strictEqual(server.requests.length, 1)
      yield* TestClock.adjust(1)
      yield* settle
      assert.strictEqual(attempts(), 2)
      const response = yield* Fiber.join(fiber)
      assert.strictEqual(M.text(response.message), "hello after the wait")
      assert.strictEqual(server.requests.length, 2)
      assert.strictEqual(rec.custom("llm_retry").length, 1)
    }).pipe(Effect.scoped))

  it.effect("retry-after: 86400 is capped by llm_call.max_retry_after_ms (60 s by default); the event says so", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { attempts, model, server } = yield* serve([
        { status: 503, headers: { "retry-after": "86400" } },
        "back after a minute",
        { status: 429, headers: { "retry-after-ms": "9000" } },
        "back after 5 seconds"
      ])
      const config = { max_retry_after_ms: 5000 }
      const fiber = yield* Effect.fork(Effect.provide(
        Effect.all([
          LLMErrorHandling.wrap()(request, model.generate),
          LLMErrorHandling.wrap({ llmCall: config })(request, model.generate)
        ]),
        withEvents(rec.sink)
      ))
      const retry = yield* rec.next("llm_retry")
      assert.deepInclude(retry, { attempt: 1, wait_ms: 60_000, retry_after_ms: 86_400_000, reason: "transient" })
      assert.strictEqual(
        retry.message,
        "LLM request retry 1/3: provider request failed temporarily. Retrying in 60s " +
          "(the provider asked to wait 24h; llm_call.max_retry_after_ms caps it)."
      )
      yield* TestClock.adjust(59_999)
      yield* settle
      assert.strictEqual(attempts(), 1)
      yield* TestClock.adjust(1)
      // The second call is capped by its own configuration: 9 s asked, 5 s taken.
      const capped = yield* rec.next("llm_retry")
      assert.deepInclude(capped, { wait_ms: 5000, retry_after_ms: 9000 })
      assert.strictEqual(attempts(), 3)
      yield* TestClock.adjust(5000)
      const [first, second] = yield* Fiber.join(fiber)
      assert.strictEqual(M.text(first.message), "back after a minute")
      assert.strictEqual(M.text(second.message), "back after 5 seconds")
      assert.strictEqual(server.requests.length, 4)
    }).pipe(Effect.scoped))

  it.effect("a hung server: the run says it is waiting, the first-byte timeout ends each attempt, the run ends", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { model, server } = yield* serve([{ hang: true }, { content: "Half an", stall: true }], 30_000)
      const fiber = yield* Effect.fork(runTurn(model, rec.emit, { llmCall: { retry_max_attempts: 2 } }))
      yield* until(() => server.requests.length === 1)
      yield* TestClock.adjust("15 seconds")
      const waiting = yield* rec.next("llm_waiting")
      assert.deepInclude(waiting, { model: "test-model", waited_ms: 15_000, timeout_ms: 30_000 })
      assert.strictEqual(
        waiting.message,
        "Waiting for model test-model: no answer yet, nothing received for 15s (gives up after 30s)."
      )
      yield* TestClock.adjust("15 seconds")
      const retry = yield* rec.next("llm_retry")
      assert.deepInclude(retry, { attempt: 1, max_attempts: 2, reason: "transient" })
      yield* until(() => server.aborted.includes(0))
      // The second attempt streams a little, then nothing: an idle stream, ended the same way.
      yield* TestClock.adjust(retry.wait_ms)
      yield* until(() => server.requests.length === 2)
      yield* until(() => rec.events.some((e) => e.type === "token" && e.text === "Half "))
      yield* TestClock.adjust("15 seconds")
      assert.include((yield* rec.next("llm_waiting")).message, "its answer paused")
      yield* TestClock.adjust("15 seconds")
      const end = yield* Fiber.join(fiber)
      assert.deepInclude(end, { type: "run_end", status: "error", stop_reason: "error" })
      assert.strictEqual(end.error?.name, "StreamChunkTimeoutError")
      // the run's error is the provider's detail (DeerFlow's run error); the thread's message says what to do
      const saved = Option.getOrThrow(yield* (yield* ThreadStore).load("thread-1"))
      const last = saved.state.messages.at(-1)!
      const detail = String(last.additional_kwargs?.error_detail)
      assert.include(detail, "The model server stopped sending its answer: nothing came for 30s (model test-model")
      assert.strictEqual(end.error!.message, detail)
      assert.match(M.text(last), /smaller steps/)
      yield* until(() => server.aborted.includes(1))
      // What a person sees: the waiting lines, the retry, and the end.
      const render = Render.human({ color: false })
      const shown = rec.events.map(render).join("")
      assert.include(
        shown,
        "… Waiting for model test-model: no answer yet, nothing received for 15s (gives up after 30s).\n"
      )
      assert.include(shown, "↻ LLM request retry 1/2:")
    }).pipe(Effect.scoped, Effect.provide(MemoryThreadStore.layer())))

  it.effect("a 500 is retried after a jittered backoff within its bounds, then succeeds", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { attempts, model, server } = yield* serve([{ status: 500 }, "recovered"])
      const fiber = yield* Effect.fork(
        Effect.provide(LLMErrorHandling.wrap()(request, model.generate), withEvents(rec.sink))
      )
      const retry = yield* rec.next("llm_retry")
      assert.deepInclude(retry, { attempt: 1, max_attempts: 3, reason: "transient" })
      const wait: number = retry.wait_ms
      assert.isTrue(Number.isInteger(wait) && wait >= 1000 && wait <= 3000, `${wait}`)
      yield* TestClock.adjust(retry.wait_ms - 1)
      yield* settle
      assert.strictEqual(attempts(), 1)
      yield* TestClock.adjust(1)
      const response = yield* Fiber.join(fiber)
      assert.strictEqual(M.text(response.message), "recovered")
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped))

  it.effect("exhausted retries end the run with the marked fallback and run_end status error", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { model, server } = yield* serve([{ status: 500 }, { status: 502 }, { status: 503 }])
      const fiber = yield* Effect.fork(runTurn(model, rec.emit))
      for (let i = 0; i < 2; i++) {
        const retry = yield* rec.next("llm_retry")
        yield* TestClock.adjust(retry.wait_ms)
      }
      const end = yield* Fiber.join(fiber)
      assert.strictEqual(end.status, "error")
      assert.strictEqual(end.stop_reason, "error")
      assert.strictEqual(end.error?.name, "InternalServerError")
      assert.strictEqual(server.requests.length, 3)
      assert.deepStrictEqual(rec.custom("llm_retry").map((r) => [r.attempt, r.max_attempts]), [[1, 3], [2, 3]])
      // The jitter grows from the previous wait: the second wait is drawn from [1000, min(8000, 3 × first)].
      const [first, second] = rec.custom("llm_retry").map((r) => r.wait_ms as number)
      assert.isTrue(second! >= 1000 && second! <= Math.min(8000, 3 * first!))
      const saved = yield* (yield* ThreadStore).load("thread-1")
      const last = Option.getOrThrow(saved).state.messages.at(-1)!
      assert.strictEqual(last.type, "ai")
      assert.deepStrictEqual(last.additional_kwargs, {
        deerflow_error_fallback: true,
        error_type: "InternalServerError",
        error_reason: "transient",
        error_detail: last.additional_kwargs?.error_detail
      })
      assert.include(String(last.additional_kwargs?.error_detail), "503")
      assert.match(M.text(last), /temporarily unavailable/)
      // The user saw the fallback as the run's last message.
      assert.isTrue(rec.events.some((e) => e.type === "message" && e.message.id === last.id))
    }).pipe(Effect.scoped, Effect.provide(MemoryThreadStore.layer())))

  it.effect("a quota 429 is not retried", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { model, server } = yield* serve([{
        status: 429,
        body: ScriptedChatServer.errorBody("You exceeded your quota", "insufficient_quota", "insufficient_quota")
      }])
      const end = yield* runTurn(model, rec.emit)
      assert.strictEqual(end.status, "error")
      assert.strictEqual(server.requests.length, 1)
      assert.deepStrictEqual(rec.custom("llm_retry"), [])
      const saved = Option.getOrThrow(yield* (yield* ThreadStore).load("thread-1"))
      assert.strictEqual(saved.state.messages.at(-1)!.additional_kwargs?.error_reason, "quota")
    }).pipe(Effect.scoped, Effect.provide(MemoryThreadStore.layer())))

  it.effect("an open circuit answers at once without calling the server; after the timeout one probe closes it", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { model, server } = yield* serve([{ status: 500 }, "recovered"])
      const breaker = LLMErrorHandling.makeCircuitBreaker({ failure_threshold: 1, recovery_timeout_sec: 60 })
      const options = { breaker, llmCall: { retry_max_attempts: 1 } }

      const first = yield* runTurn(model, rec.emit, options, "t1")
      assert.strictEqual(first.error?.name, "InternalServerError")
      assert.strictEqual(breaker.state(), "open")
      assert.strictEqual(server.requests.length, 1)

      const second = yield* runTurn(model, rec.emit, options, "t2")
      assert.strictEqual(second.status, "error")
      assert.strictEqual(second.error?.name, "CircuitBreakerOpen")
      assert.strictEqual(server.requests.length, 1)
      const saved = Option.getOrThrow(yield* (yield* ThreadStore).load("t2"))
      assert.strictEqual(saved.state.messages.at(-1)!.additional_kwargs?.error_reason, "circuit_open")

      yield* TestClock.adjust("60 seconds")
      const third = yield* runTurn(model, rec.emit, options, "t3")
      assert.strictEqual(third.status, "success")
      assert.strictEqual(server.requests.length, 2)
      assert.strictEqual(breaker.state(), "closed")
    }).pipe(Effect.scoped, Effect.provide(MemoryThreadStore.layer())))

  it.effect("by default the breaker lives for one run: the next run calls the server again", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { model, server } = yield* serve([{ status: 500 }, "fresh run"])
      const options = { circuitBreaker: { failure_threshold: 1 }, llmCall: { retry_max_attempts: 1 } }
      assert.strictEqual((yield* runTurn(model, rec.emit, options, "t1")).status, "error")
      assert.strictEqual((yield* runTurn(model, rec.emit, options, "t2")).status, "success")
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped, Effect.provide(MemoryThreadStore.layer())))
})
