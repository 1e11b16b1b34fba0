import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as TB from "../../src/middleware/TokenBudget.js"
import * as TU from "../../src/middleware/TokenUsage.js"
import { TokenBudgetConfig } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const config = (input: Record<string, unknown>) =>
  Schema.decodeUnknownSync(TokenBudgetConfig)({ enabled: true, ...input })
const usage = (input: number, output: number) => ({
  input_tokens: input,
  output_tokens: output,
  total_tokens: input + output
})

describe("TokenBudget.check", () => {
  it("takes the highest of the configured fractions", () => {
    const c = config({ max_tokens: 10_000, max_output_tokens: 1000 })
    assert.deepStrictEqual(TB.check({ input: 3000, output: 900, total: 3900 }, c), {
      reason: "output",
      used: 900,
      budget: 1000,
      fraction: 0.9
    })
    assert.strictEqual(TB.check({ input: 3000, output: 100, total: 3100 }, c).reason, "total")
    const inputs = config({ max_tokens: 10_000, max_input_tokens: 2000 })
    assert.strictEqual(TB.check({ input: 3000, output: 0, total: 3000 }, inputs).reason, "input")
  })

  it("formats counts with thousands separators", () => {
    assert.strictEqual(TB.formatCount(0), "0")
    assert.strictEqual(TB.formatCount(999), "999")
    assert.strictEqual(TB.formatCount(1_234_567), "1,234,567")
  })

  it("builds texts that start with the protocol markers and carry the numbers", () => {
    const c = { reason: "total" as const, used: 160_000, budget: 200_000, fraction: 0.8 }
    assert.isTrue(TB.warningText(c).startsWith("[TOKEN BUDGET WARNING]"))
    assert.include(TB.warningText(c), "You have used 160,000 of your 200,000 total token budget (80%)")
    assert.isTrue(TB.exceededText(c).startsWith("[TOKEN BUDGET EXCEEDED]"))
    assert.include(TB.exceededText(c), "(160,000)")
  })
})

describe("TokenBudgetConfig", () => {
  // DeerFlow token_budget_config.py (hard_stop_threshold ge=0.0, le=1.0, >= warn_threshold) and
  // test_loop_detection_stop_reason.py, which stops at once with hard_stop_threshold=0.0, warn_threshold=0.0:
  // both thresholds are fractions of the budget, 0 and 1 included, and nothing past 1
  it("takes both thresholds as fractions from 0 to 1", () => {
    assert.strictEqual(config({ warn_threshold: 0, hard_stop_threshold: 0 }).hard_stop_threshold, 0)
    assert.strictEqual(config({ hard_stop_threshold: 1 }).hard_stop_threshold, 1)
    const bads = [{ hard_stop_threshold: 1.5 }, { hard_stop_threshold: -0.1 }, { warn_threshold: 0.9, hard_stop_threshold: 0.5 }]
    for (const bad of bads) {
      assert.throws(() => config(bad), undefined, undefined, JSON.stringify(bad))
    }
  })
})

describe("TokenBudget.pendingSubagentUsage", () => {
  it("reads valid, unattributed subagent usage from the trailing tool results only", () => {
    const sub = (id: string, kwargs: Record<string, unknown>) =>
      M.tool("r", id, { id: `tm-${id}`, additional_kwargs: kwargs })
    const messages = [
      sub("old", { [TU.SUBAGENT_USAGE_KEY]: usage(1, 1) }),
      M.ai("", { tool_calls: [] }),
      sub("a", { [TU.SUBAGENT_USAGE_KEY]: usage(10, 2) }),
      sub("b", { [TU.SUBAGENT_USAGE_KEY]: usage(10, 2), [TU.SUBAGENT_ATTRIBUTED_KEY]: true }),
      sub("c", { [TU.SUBAGENT_USAGE_KEY]: { input_tokens: -3, output_tokens: 1 } }),
      M.tool("plain", "d")
    ]
    assert.deepStrictEqual(TB.pendingSubagentUsage(messages), [{ id: "tm-a", input: 10, output: 2 }])
  })
})

describe("TokenBudget.ledger", () => {
  it("charges each message once and later increases of its usage as they appear", () => {
    const ledger = TB.ledger()
    const a = M.ai("", { id: "a", usage_metadata: usage(100, 10) })
    ledger.charge(a)
    ledger.charge(a)
    assert.deepStrictEqual(ledger.used(), { input: 100, output: 10, total: 110 })
    ledger.charge({ ...a, usage_metadata: usage(600, 60) })
    assert.deepStrictEqual(ledger.used(), { input: 600, output: 60, total: 660 })
    ledger.charge({ ...a, usage_metadata: usage(10, 1) })
    assert.deepStrictEqual(ledger.used(), { input: 600, output: 60, total: 660 })
  })

  it.prop(
    "the total equals the sum of each message's largest usage seen",
    [FC.array(FC.tuple(FC.constantFrom("a", "b", "c"), FC.nat(1000), FC.nat(1000)), { maxLength: 20 })],
    ([charges]) => {
      const ledger = TB.ledger()
      const largest = new Map<string, [number, number]>()
      for (const [id, input, output] of charges) {
        ledger.charge(M.ai("", { id, usage_metadata: usage(input, output) }))
        const [i, o] = largest.get(id) ?? [0, 0]
        largest.set(id, [Math.max(i, input), Math.max(o, output)])
      }
      let total = 0
      for (const [i, o] of largest.values()) total += i + o
      assert.strictEqual(ledger.used().total, total)
    }
  )
})

describe("TokenBudget.layer", () => {
  const bash = Tool.make({
    name: "bash",
    description: "Run",
    parameters: Schema.Struct({ command: Schema.String }),
    handler: ({ command }) => Effect.succeed(`ran ${command}`)
  })

  it.effect("earlier runs of the thread do not count", () =>
    Effect.gen(function*() {
      yield* Harness.run({ script: [{ content: "long answer", usage: usage(50_000, 5000) }] })
      const out = yield* Harness.run({
        script: [
          { toolCalls: [{ name: "bash", args: { command: "ls" } }], usage: usage(300, 10) },
          { content: "done", usage: usage(300, 10) }
        ],
        tools: [bash],
        middlewares: () => [TB.layer(config({ max_tokens: 1000, warn_threshold: 0.8 }))]
      })
      assert.strictEqual(out.end.stop_reason, "completed")
      assert.isTrue(out.requests.every((r) => r.messages.every((m) => m.name !== "budget_warning")))
    }).pipe(Harness.withStore))

  const subagentTask = (sub: ReturnType<typeof usage>) =>
    Tool.make({
      name: "task",
      description: "Delegate",
      parameters: Schema.Struct({ prompt: Schema.String }),
      handler: (_args, c) =>
        Effect.succeed({
          message: M.tool("sub done", c.id, { name: "task", additional_kwargs: { [TU.SUBAGENT_USAGE_KEY]: sub } })
        })
    })

  it.effect("subagent usage is charged as soon as its result comes back", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [
          { toolCalls: [{ name: "task", args: { prompt: "dig" } }], usage: usage(90, 10) },
          { toolCalls: [{ name: "bash", args: { command: "ls" } }], usage: usage(90, 10) },
          "never reached"
        ],
        tools: [subagentTask(usage(900, 50)), bash],
        middlewares: () => [TB.layer(config({ max_tokens: 1000, warn_threshold: 0.9 }))]
      })
      // 100 own + 950 subagent + 100 own: over the budget at the second response.
      assert.strictEqual(out.requests.length, 2)
      assert.strictEqual(out.end.stop_reason, "token_capped")
      assert.include(M.text(out.state.messages.at(-1)!), "(1,150)")
    }).pipe(Harness.withStore))

  it.effect("with TokenUsage folding it into the dispatch message (SPEC order), subagent usage is charged once", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [
          { toolCalls: [{ name: "task", args: { prompt: "dig" } }], usage: usage(90, 10) },
          { toolCalls: [{ name: "bash", args: { command: "ls" } }], usage: usage(90, 10) },
          { toolCalls: [{ name: "bash", args: { command: "pwd" } }], usage: usage(90, 10) },
          { content: "done", usage: usage(90, 10) }
        ],
        tools: [subagentTask(usage(380, 20)), bash],
        middlewares: () => [TU.layer(), TB.layer(config({ max_tokens: 1000, warn_threshold: 0.95 }))]
      })
      // 400 own + 400 subagent = 800; counting the folded dispatch message again would make it 1,200.
      assert.strictEqual(out.end.stop_reason, "completed")
      const dispatch = out.state.messages.find((m) => m.type === "ai" && m.tool_calls?.[0]?.name === "task")
      assert.strictEqual(dispatch?.type, "ai")
      if (dispatch?.type !== "ai") return
      assert.strictEqual(dispatch.usage_metadata?.total_tokens, 500)
    }).pipe(Harness.withStore))

  it.effect("a response over the budget without tool calls still ends token_capped with the notice", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [{ content: "A very long answer.", usage: usage(1500, 100) }],
        middlewares: () => [TB.layer(config({ max_tokens: 1000 }))]
      })
      assert.strictEqual(out.end.stop_reason, "token_capped")
      const text = M.text(out.state.messages.at(-1)!)
      assert.isTrue(text.startsWith("A very long answer.\n\n[TOKEN BUDGET EXCEEDED]"))
    }).pipe(Harness.withStore))

  it.effect("disabled (the lead default): wraps nothing", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [{ content: "big", usage: usage(500_000, 1) }],
        middlewares: () => [TB.layer()]
      })
      assert.strictEqual(out.end.stop_reason, "completed")
    }).pipe(Harness.withStore))
})
