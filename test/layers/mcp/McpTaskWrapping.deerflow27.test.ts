/**
 * DeerFlow's test_mcp_task_tool_wrapping, `test_submit_wrapper_preserves_server_description_and_appends_background_contract`:
 * a task toolset's submit tool is described by the server's own text with the background contract after it; a tool
 * the server gives no description (langchain-mcp-adapters makes it "") is described by the contract alone, and a
 * plain tool without one by nothing, not by a text Antler makes up.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Decode from "../../../src/layers/mcp/Decode.js"
import * as McpTaskTools from "../../../src/programs/McpTaskTools.js"
import { McpServerConfig } from "../../../src/services/Extensions.js"

const config = Schema.decodeUnknownSync(McpServerConfig)({
  command: "report-mcp",
  tool_name_prefix: false,
  task_toolsets: [{
    name: "report-generation",
    submit_tool: "submit_report",
    status_tool: "get_report_status",
    cancel_tool: "cancel_report"
  }]
})
const input = { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] }
const CONTRACT = "Submitted as durable background task 'report-generation'; returns a DeerFlow task ID immediately and " +
  "status polling is handled automatically."

describe("test_mcp_task_tool_wrapping", () => {
  // test_submit_wrapper_preserves_server_description_and_appends_background_contract
  it("the submit tool: the server's description, then the contract; without one, the contract alone", () => {
    const { problems, tools } = Decode.toolsOf("reports", config, [
      { name: "submit_report", description: "Generate a quarterly financial report for the requested topic.", inputSchema: input },
      { name: "get_report_status", inputSchema: input },
      { name: "cancel_report", description: null, inputSchema: input }
    ])
    assert.deepStrictEqual(problems, [])
    const toolset = config.task_toolsets[0]!
    const described = McpTaskTools.submitTool(Option.none(), tools[0]!, toolset)
    assert.strictEqual(
      described.description,
      `Generate a quarterly financial report for the requested topic.\n\n${CONTRACT}`
    )
    assert.strictEqual(McpTaskTools.submitTool(Option.none(), tools[1]!, toolset).description, CONTRACT)
    assert.deepStrictEqual(tools.slice(1).map((tool) => tool.description), ["", ""])
  })
})
