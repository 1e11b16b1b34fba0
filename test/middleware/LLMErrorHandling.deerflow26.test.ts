/**
 * DeerFlow's test_llm_error_handling_middleware.py, where the user reads the words: the fallback message that
 * answers a failed model call (`_build_user_message`), the circuit breaker's (`_build_circuit_breaker_message`)
 * and the `llm_retry` event's message (`_build_retry_message`, which DeerFlow's web app shows as a toast) are
 * DeerFlow's, word for word. Driven through the real `openai` client against a loopback server.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as LLMErrorHandling from "../../src/middleware/LLMErrorHandling.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"
import { inRun } from "../support/fixtures.js"

const request: ModelRequest = { systemPrompt: undefined, messages: [M.human("hi")], tools: [], settings: {} }

/** One model call through the middleware over the real client; the text it answers with and the events. */
const call = (script: ScriptedChatServer.Script, options: Parameters<typeof LLMErrorHandling.wrap>[0] = {}) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(script)
    const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "m", timeoutMs: 10_000 })
    const events: Array<RunEvent> = []
    const sink = { emit: (event: RunEvent) => Effect.sync(() => void events.push(event)) }
    const fiber = yield* Effect.fork(
      LLMErrorHandling.wrap(options)(request, model.generate).pipe(
        Effect.provideService(RunEvents, sink),
        Effect.provide(inRun().context)
      )
    )
    // Real sockets: let the clock move a minute at a time until the call settles.
    let done = yield* Fiber.poll(fiber)
    for (let i = 0; i < 200 && done._tag === "None"; i++) {
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
      yield* TestClock.adjust("1 minute")
      done = yield* Fiber.poll(fiber)
    }
    const response = yield* Fiber.join(fiber)
    const retries = events.flatMap((e) => e.type === "custom" && e.name === "llm_retry" ? [e.data as any] : [])
    return { text: M.text(response.message), kwargs: response.message.additional_kwargs ?? {}, retries }
  }).pipe(Effect.scoped)

const body = ScriptedChatServer.errorBody

describe("LLMErrorHandling (DeerFlow's words)", () => {
  it.effect("quota and auth failures read DeerFlow's fallback sentences", () =>
    Effect.gen(function*() {
      const quota = yield* call([{ status: 429, body: body("You exceeded your quota", "x", "insufficient_quota") }])
      assert.strictEqual(
        quota.text,
        "The configured LLM provider rejected the request because the account is out of quota, billing is " +
          "unavailable, or usage is restricted. Please fix the provider account and try again."
      )
      assert.strictEqual(quota.kwargs.error_reason, "quota")
      const auth = yield* call([{ status: 401, body: body("Incorrect API key provided", "invalid_request_error") }])
      assert.strictEqual(
        auth.text,
        "The configured LLM provider rejected the request because authentication or access is invalid. Please " +
          "check the provider credentials and try again."
      )
    }))

  it.effect("a non-retriable error reads 'LLM request failed: <detail>'", () =>
    Effect.gen(function*() {
      const failed = yield* call([{ status: 404, body: body("model not found: gpt-9", "invalid_request_error") }])
      assert.match(failed.text, /^LLM request failed: /)
      assert.include(failed.text, "model not found: gpt-9")
    }))

  it.effect("retries: each llm_retry says 'LLM request retry n/N: provider ... Retrying in Ns.'; exhaustion reads" +
    " DeerFlow's transient sentence", () =>
    Effect.gen(function*() {
      const busy = { status: 503, headers: { "retry-after": "2" }, body: body("overloaded", "server_error") }
      const out = yield* call([busy, busy], { llmCall: { retry_max_attempts: 2 } })
      assert.deepStrictEqual(out.retries.map((r) => r.message), [
        "LLM request retry 1/2: provider request failed temporarily. Retrying in 2s."
      ])
      assert.strictEqual(
        out.text,
        "The configured LLM provider is temporarily unavailable after multiple retries. Please wait a moment and " +
          "continue the conversation."
      )
      // A wait under a second reads 1s (DeerFlow: max(1, round(wait_ms / 1000))).
      const flaky = { status: 500, headers: { "retry-after-ms": "300" }, body: body("boom", "server_error") }
      const again = yield* call([flaky, "ok"])
      assert.strictEqual(again.retries[0].message, "LLM request retry 1/3: provider request failed temporarily. " +
        "Retrying in 1s.")
      assert.strictEqual(again.text, "ok")
    }))

  it.effect("an open circuit answers with DeerFlow's circuit-breaker sentence", () =>
    Effect.gen(function*() {
      const breaker = LLMErrorHandling.makeCircuitBreaker({ failure_threshold: 1, recovery_timeout_sec: 86_400 })
      const down = { status: 500, body: body("down", "server_error") }
      const options = { breaker, llmCall: { retry_max_attempts: 1 } }
      yield* call([down], options)
      const open = yield* call(["never sent"], options)
      assert.strictEqual(
        open.text,
        "The configured LLM provider is currently unavailable due to continuous failures. Circuit breaker is " +
          "engaged to protect the system. Please wait a moment before trying again."
      )
    }))
})
