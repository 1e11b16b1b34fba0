/**
 * DeerFlow's test_deferred_promotion_integration, `test_tool_search_promotes_into_next_turn`: in a run, the deferred
 * MCP tools are hidden from the first model call; `tool_search` promotes the one it selected into the next call (the
 * one not searched stays hidden), and the promotion is the thread's state, scoped by the catalog's hash.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"
import type { ToolDefinition } from "../../src/services/ModelService.js"
import type * as Tool from "../../src/services/Tool.js"
import * as H from "../support/harness.js"

const def = (name: string, description: string): ToolDefinition => ({
  name,
  description,
  parameters: { type: "object", properties: { x: { type: "string" } } }
})

const tool = (definition: ToolDefinition) =>
  ({
    name: definition.name,
    description: definition.description,
    parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    definition,
    handler: () => Effect.succeed(`${definition.name} ran`)
  }) satisfies Tool.Tool

const active = def("active_tool", "An always-active tool.")
const deferred = [def("mcp_calc", "Evaluate arithmetic."), def("mcp_other", "Another deferred MCP tool.")]

describe("test_deferred_promotion_integration", () => {
  it.effect("test_tool_search_promotes_into_next_turn", () =>
    Effect.gen(function*() {
      const outcome = yield* H.run({
        input: "use the deferred calculator",
        tools: [active, ...deferred].map(tool),
        middlewares: () => [DeferredToolFilter.layer({ deferred })],
        script: [{ toolCalls: [{ name: "tool_search", args: { query: "select:mcp_calc" } }] }, "done"]
      })
      const bound = outcome.requests.map((r) => r.tools.map((t) => t.name))
      assert.isAtLeast(bound.length, 2)
      assert.notInclude(bound[0], "mcp_calc")
      assert.notInclude(bound[0], "mcp_other")
      assert.include(bound[0], "active_tool")
      assert.include(bound[1], "mcp_calc")
      assert.notInclude(bound[1], "mcp_other")
      assert.deepStrictEqual(outcome.state.promoted, {
        catalog_hash: DeferredToolFilter.catalogHash(deferred),
        names: ["mcp_calc"]
      })
    }).pipe(H.withStore))
})
