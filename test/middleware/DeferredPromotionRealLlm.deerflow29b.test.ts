/**
 * DeerFlow's test_deferred_tool_promotion_real_llm (issue #2884), with the scripted model in the real LLM's place:
 * `tool_search` promotes a deferred tool in the same batch as another tool call (DeerFlow's fake subagent trigger,
 * which listed the tools again and wiped the promotion); the next model call is offered the promoted tool, and the
 * model's call of it runs.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"
import type { ToolDefinition } from "../../src/services/ModelService.js"
import type * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const def = (name: string, description: string): ToolDefinition => ({
  name,
  description,
  parameters: { type: "object", properties: { expression: { type: "string" } } }
})

const tool = (definition: ToolDefinition, answer: string) =>
  ({
    name: definition.name,
    description: definition.description,
    parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    definition,
    handler: () => Effect.succeed(answer)
  }) satisfies Tool.Tool

const trigger = def("fake_subagent_trigger", "Re-enters the tool listing, as a subagent does.")
const calculator = def("fake_calculator", "Evaluate a tiny arithmetic expression like '2 + 2'.")

describe("test_deferred_tool_promotion_real_llm", () => {
  it.effect("the promoted tool reaches the next model call and its call runs, beside a call in the same batch", () =>
    Effect.gen(function*() {
      const outcome = yield* H.run({
        input: "What is 2 + 2? Use the calculator tool.",
        tools: [tool(trigger, "subagent done"), tool(calculator, "4")],
        middlewares: () => [DeferredToolFilter.layer({ deferred: [calculator] })],
        script: [
          {
            toolCalls: [
              { name: "tool_search", args: { query: "select:fake_calculator" } },
              { name: "fake_subagent_trigger", args: {} }
            ]
          },
          { toolCalls: [{ name: "fake_calculator", args: { expression: "2 + 2" } }] },
          "2 + 2 = 4"
        ]
      })
      const bound = outcome.requests.map((r) => r.tools.map((t) => t.name))
      assert.notInclude(bound[0], "fake_calculator")
      assert.include(bound[0], "fake_subagent_trigger")
      assert.include(bound[1], "fake_calculator")
      const results = outcome.state.messages.filter((m) => m.type === "tool").map((m) => [m.name, M.contentText(m.content)])
      assert.deepInclude(results, ["fake_calculator", "4"])
      assert.deepInclude(results, ["fake_subagent_trigger", "subagent done"])
    }).pipe(H.withStore))
})
