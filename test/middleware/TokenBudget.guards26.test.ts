/**
 * DeerFlow's token_budget_middleware.py, where the model reads the words: the warning the next request carries
 * (`_BUDGET_WARNING_MSG`) and the notice a hard stop appends (`_BUDGET_EXCEEDED_MSG`) are DeerFlow's, word for
 * word, the counts with thousands separators and the percentage as Python's `{:.0f}` (an exact half to even).
 * Driven through the real `openai` client against a loopback server, in the lead agent's chain.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as TokenBudget from "../../src/middleware/TokenBudget.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import { ModelService } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const lookup = Tool.make({
  name: "lookup",
  description: "Looks something up.",
  parameters: Schema.Struct({ q: Schema.String }),
  handler: ({ q }) => Effect.succeed(`The answer to ${q} is 42.`)
})

const usage = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion
})

const call = (q: string) => ({ name: "lookup", arguments: { q } })

describe("TokenBudget (DeerFlow's words)", () => {
  it.effect("the warning and the hard stop read DeerFlow's sentences, counts with separators", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        { toolCalls: [call("a")], usage: usage(1_700, 310) },
        { content: "Partial", toolCalls: [call("b")], usage: usage(500, 0) }
      ])
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "scripted" })
      const store = MemoryThreadStore.make()
      const config = {
        memory: { enabled: false },
        token_budget: { enabled: true, max_tokens: 2_500, warn_threshold: 0.8, hard_stop_threshold: 1.0 }
      }
      const context = yield* Layer.build(
        LeadAgent.layer({ sandboxTools: false, tools: [lookup], systemPrompt: "You are a test agent." }).pipe(
          Layer.provide(Layer.succeed(ModelService, model)),
          Layer.provide(Layer.merge(Layer.succeed(ThreadStore, store), LocalSandbox.layer())),
          Layer.provide(ConfigFile.layerFromObject(config, { home: tempDir("antler-tb-") }))
        )
      )
      const end = yield* Context.get(context, LeadAgent.LeadAgent).turn({ threadId: "t", prompt: "look it up" })
      assert.strictEqual(end.stop_reason, "token_capped")
      // 2,010 of 2,500 is 80.4%; the second request carries the warning as the last (user) message
      assert.lengthOf(server.requests, 2)
      const warning = server.requests[1]!.messages.at(-1)!
      assert.strictEqual(warning.role, "user")
      assert.strictEqual(
        warning.content,
        "[TOKEN BUDGET WARNING] You have used 2,010 of your 2,500 total token budget (80%). Wrap up your current " +
          "work and produce a final answer. Avoid starting new tool calls unless absolutely necessary."
      )
      const thread = Option.getOrThrow(yield* store.load("t")).state
      const last = thread.messages.filter((m) => m.type === "ai").at(-1)!
      assert.isFalse(M.hasToolCalls(last))
      assert.strictEqual(
        M.text(last),
        "Partial\n\n[TOKEN BUDGET EXCEEDED] The total token usage (2,510) has exceeded the safety limit (2,500). " +
          "Producing final answer with results collected so far."
      )
    }).pipe(Effect.scoped))

  it("a percentage prints as Python's {:.0f}: an exact half to the even number", () => {
    const text = (used: number, budget: number) =>
      TokenBudget.warningText({ reason: "output", used, budget, fraction: used / budget })
    assert.include(text(161, 200), "(80%)") // 80.5
    assert.include(text(163, 200), "(82%)") // 81.5
    assert.include(text(1_234_567, 1_500_000), "You have used 1,234,567 of your 1,500,000 output token budget (82%)")
  })
})
