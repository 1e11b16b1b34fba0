/**
 * DeerFlow's test_guardrail_middleware.py, where the model reads the words: a denied call's result is
 * DeerFlow's `_build_denied_message` sentence, word for word (prompts tuned on DeerFlow expect it).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as AllowlistGuardrail from "../../src/layers/AllowlistGuardrail.js"
import * as GuardrailMiddleware from "../../src/middleware/Guardrail.js"
import * as Guardrail from "../../src/services/Guardrail.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const bash = (runs: Array<string>) =>
  Tool.make({
    name: "bash",
    description: "bash",
    parameters: Schema.Struct({ command: Schema.String }),
    handler: () => Effect.sync(() => (runs.push("bash"), "ran"))
  })

const script = [{ toolCalls: [{ name: "bash", args: { command: "rm -rf /" }, id: "c1" }] }, "done"]

const deniedResult = (outcome: H.Outcome) => outcome.state.messages.find((m): m is M.ToolMessage => m.type === "tool")!

describe("Guardrail (DeerFlow's denial sentence)", () => {
  it.effect("a denied call reads: Guardrail denied: tool 'bash' was blocked (code). Reason: ... alternative", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      const outcome = yield* H.run({ script, tools: [bash(runs)], middlewares: () => [GuardrailMiddleware.layer()] })
        .pipe(Effect.provide(AllowlistGuardrail.layer({ denied_tools: ["bash"] })))
      assert.deepStrictEqual(runs, [])
      const result = deniedResult(outcome)
      assert.strictEqual(result.status, "error")
      assert.strictEqual(result.name, "bash")
      assert.strictEqual(
        M.text(result),
        "Guardrail denied: tool 'bash' was blocked (oap.tool_not_allowed). Reason: tool 'bash' is denied. " +
          "Choose an alternative approach."
      )
    }).pipe(H.withStore))

  it("a denial without reasons reads DeerFlow's defaults (oap.denied, blocked by guardrail policy)", () => {
    assert.strictEqual(
      GuardrailMiddleware.deniedText("write_file", { allow: false, reasons: [] } as Guardrail.GuardrailDecision),
      "Guardrail denied: tool 'write_file' was blocked (oap.denied). Reason: blocked by guardrail policy. " +
        "Choose an alternative approach."
    )
  })

  it.effect("a failing provider: fail-closed denies with DeerFlow's reason, never the provider's own error", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      const failing: Guardrail.Service = {
        name: "flaky",
        evaluate: () =>
          Effect.fail(new Guardrail.GuardrailError({ provider: "flaky", message: "token=abc123 refused" }))
      }
      const outcome = yield* H.run({ script, tools: [bash(runs)], middlewares: () => [GuardrailMiddleware.layer()] })
        .pipe(Effect.provide(Layer.succeed(Guardrail.GuardrailProvider, failing)))
      assert.deepStrictEqual(runs, [])
      assert.strictEqual(
        M.text(deniedResult(outcome)),
        "Guardrail denied: tool 'bash' was blocked (oap.evaluator_error). Reason: guardrail provider error " +
          "(fail-closed). Choose an alternative approach."
      )
    }).pipe(H.withStore))
})
