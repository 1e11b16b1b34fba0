/**
 * DeerFlow's test_deferred_setup, `test_setup_builds_from_mcp_survivors`: with MCP tools deferred the agent gets
 * `tool_search`, and the model reads it described in DeerFlow's words (the `@tool` docstring of its
 * `build_tool_search_tool`, as LangChain hands it on: the indentation of the lines after the first kept).
 */
import { assert, describe, it } from "@effect/vitest"
import * as DeferredToolFilter from "../../src/middleware/DeferredToolFilter.js"

describe("test_deferred_setup", () => {
  // test_setup_builds_from_mcp_survivors
  it("tool_search is described to the model in DeerFlow's words", () => {
    const calc = { name: "mcp_calc", description: "Evaluate arithmetic.", parameters: { type: "object" } }
    const tool = DeferredToolFilter.tool([calc], DeferredToolFilter.catalogHash([calc]))
    assert.strictEqual(tool.name, "tool_search")
    assert.strictEqual(
      tool.description,
      "Fetches full schema definitions for deferred tools so they can be called.\n\n" +
        "        Deferred tools appear by name in <available-deferred-tools> in the system\n" +
        "        prompt. Until fetched, only the name is known. This tool matches a query\n" +
        "        against the deferred tools and returns the matched tools complete schemas;\n" +
        "        once returned, a tool becomes callable.\n\n" +
        "        Query forms:\n" +
        "          - \"select:Read,Edit\" -- fetch these exact tools by name\n" +
        "          - \"notebook jupyter\" -- keyword search, up to max_results best matches\n" +
        "          - \"+slack send\" -- require \"slack\" in the name, rank by remaining terms"
    )
  })
})
