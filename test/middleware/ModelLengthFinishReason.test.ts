import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Middleware from "../../src/middleware/Middleware.js"
import * as ML from "../../src/middleware/ModelLengthFinishReason.js"
import { RunContext } from "../../src/services/RunContext.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const answer = (metadata: Record<string, unknown>, extra: Partial<M.AIMessage> = {}) =>
  M.ai("The first part of the answer", { response_metadata: metadata, ...extra })

describe("ModelLengthFinishReason.detectLength", () => {
  it("recognises OpenAI, Anthropic and Gemini length stops, case-insensitively", () => {
    assert.strictEqual(ML.detectLength(answer({ finish_reason: "length" }))?.detector, "openai_compatible_length")
    assert.strictEqual(ML.detectLength(answer({ finish_reason: "LENGTH" }))?.detector, "openai_compatible_length")
    assert.strictEqual(ML.detectLength(answer({ stop_reason: "max_tokens" }))?.detector, "anthropic_max_tokens")
    assert.strictEqual(ML.detectLength(answer({ finish_reason: "MAX_TOKENS" }))?.detector, "gemini_max_tokens")
    const kwargs = M.ai("x", { additional_kwargs: { finish_reason: "length" } })
    assert.strictEqual(ML.detectLength(kwargs)?.reason_value, "length")
    for (const other of [{ finish_reason: "stop" }, { stop_reason: "end_turn" }, { finish_reason: "content_filter" }]) {
      assert.isUndefined(ML.detectLength(answer(other)))
    }
  })

  // DeerFlow runs its detectors in this order and reports the first hit.
  it("a message with two signals is named as DeerFlow's detectors name it: OpenAI, then Anthropic, then Gemini", () => {
    const both = answer({ finish_reason: "MAX_TOKENS", stop_reason: "max_tokens" })
    assert.strictEqual(ML.detectLength(both)?.detector, "anthropic_max_tokens")
    const lower = answer({ finish_reason: "max_tokens" })
    assert.strictEqual(ML.detectLength(lower)?.detector, "gemini_max_tokens")
  })

  it("applies only to visible text without any tool-call intent", () => {
    assert.isTrue(ML.isLengthCapped(answer({ finish_reason: "length" })))
    assert.isFalse(ML.isLengthCapped(M.ai("  ", { response_metadata: { finish_reason: "length" } })))
    const length = { finish_reason: "length" }
    assert.isFalse(ML.isLengthCapped(answer(length, { tool_calls: [{ id: "c", name: "bash", args: {} }] })))
    assert.isFalse(ML.isLengthCapped(answer(length, { additional_kwargs: { function_call: { name: "f" } } })))
  })
})

// Records of DeerFlow's info line, with their annotations.
const capturing = () => {
  const records: Array<Record<string, unknown>> = []
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ annotations, logLevel, message }) => {
      const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
      if (text !== ML.LOG_MESSAGE) return
      records.push({ level: logLevel.label, ...Object.fromEntries(HashMap.toEntries(annotations)) })
    })
  )
  return { records, logger }
}

describe("ModelLengthFinishReason.layer", () => {
  // DeerFlow's test_length_cap_detection_logs_observability_fields / test_existing_stop_reason_is_not_overwritten.
  it.effect("a capped answer is logged at info with DeerFlow's fields, the message kept as it came", () =>
    Effect.gen(function*() {
      const { logger, records } = capturing()
      const out = yield* Harness.run({
        threadId: "thread-1",
        script: [{ content: "partial", finishReason: "length" }],
        middlewares: () => [ML.layer()]
      }).pipe(Effect.provide(logger))
      assert.strictEqual(out.end.stop_reason, "model_length_capped")
      const last = out.state.messages.at(-1)!
      assert.strictEqual(M.text(last), "partial")
      const start = out.events.find((e) => e.type === "run_start")
      const runId = start?.type === "run_start" ? start.run_id : undefined
      assert.lengthOf(records, 1)
      assert.deepStrictEqual(records[0], {
        level: "INFO",
        thread_id: "thread-1",
        run_id: runId,
        message_id: last.id,
        detector: "openai_compatible_length",
        reason_field: "finish_reason",
        reason_value: "length",
        stamped_stop_reason: true
      })
    }).pipe(Harness.withStore))

  it.effect("does not override a stop reason another guard set", () =>
    Effect.gen(function*() {
      // Stands in for a guard inside it (Safety runs first in after_model) that already set a reason.
      const earlierGuard = () =>
        Middleware.make(Effect.map(RunContext, (context): Middleware.Wrappers => ({
          model: (request, next) => Effect.tap(next(request), () => context.setStopReason("token_capped"))
        })))
      const { logger, records } = capturing()
      const out = yield* Harness.run({
        script: [{ content: "cut off mid", finishReason: "length" }],
        middlewares: () => [ML.layer(), earlierGuard()]
      }).pipe(Effect.provide(logger))
      assert.strictEqual(out.end.stop_reason, "token_capped")
      assert.deepStrictEqual(records.map((r) => r.stamped_stop_reason), [false])
    }).pipe(Harness.withStore))

  it.effect("a normal finish completes", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({ script: ["All done."], middlewares: () => [ML.layer()] })
      assert.strictEqual(out.end.stop_reason, "completed")
    }).pipe(Harness.withStore))

  it.effect("an internal call cut off at its limit does not cap the run", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: (request) =>
          request.internal !== undefined ? { content: "summary cut", finishReason: "length" } : "Answer.",
        middlewares: () => [Harness.internalCaller(), ML.layer()]
      })
      assert.strictEqual(out.end.stop_reason, "completed")
    }).pipe(Harness.withStore))
})
