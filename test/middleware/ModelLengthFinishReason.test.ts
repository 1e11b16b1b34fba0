import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
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

  it("applies only to visible text without any tool-call intent", () => {
    assert.isTrue(ML.isLengthCapped(answer({ finish_reason: "length" })))
    assert.isFalse(ML.isLengthCapped(M.ai("  ", { response_metadata: { finish_reason: "length" } })))
    const length = { finish_reason: "length" }
    assert.isFalse(ML.isLengthCapped(answer(length, { tool_calls: [{ id: "c", name: "bash", args: {} }] })))
    assert.isFalse(ML.isLengthCapped(answer(length, { additional_kwargs: { function_call: { name: "f" } } })))
  })
})

describe("ModelLengthFinishReason.layer", () => {
  it.effect("does not override a stop reason another guard set", () =>
    Effect.gen(function*() {
      // Stands in for a guard inside it (Safety runs first in after_model) that already set a reason.
      const earlierGuard = () =>
        Middleware.make(Effect.map(RunContext, (context): Middleware.Wrappers => ({
          model: (request, next) => Effect.tap(next(request), () => context.setStopReason("token_capped"))
        })))
      const out = yield* Harness.run({
        script: [{ content: "cut off mid", finishReason: "length" }],
        middlewares: () => [ML.layer(), earlierGuard()]
      })
      assert.strictEqual(out.end.stop_reason, "token_capped")
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
