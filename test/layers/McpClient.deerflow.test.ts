/**
 * MCP servers configured as DeerFlow's tests configure them, against real servers started by the test. Mirrors
 * `test_mcp_client_config.py` (`transport` as the MCP spec's spelling of `type`, `type` winning when both are
 * given; a server without its command or url left out while the valid ones keep their tools; disabled servers
 * contribute nothing) and `test_mcp_sync_wrapper.py` (a broken server does not drop a healthy server's tools).
 * `test_mcp_session_timeouts.py` (a hung server times out and is skipped, the others still answer) is in
 * McpClient.test.ts; an unknown transport is a configuration error on purpose (docs/deerflow.md).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as McpClient from "../../src/layers/McpClient.js"
import * as McpTools from "../../src/layers/McpTools.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { inRun } from "../support/fixtures.js"
import * as Servers from "../support/mcpServers.js"

const SLOW = 60_000

const invoke = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "call_1", name: tool.name, args }).pipe(
    Effect.provide(inRun().context),
    Effect.map((result) => M.contentText(result.message.content))
  )

describe("MCP servers as DeerFlow configures them", () => {
  it.scopedLive("type wins over transport; servers that cannot start are left out, the valid ones keep tools", () =>
    Effect.gen(function*() {
      const http = yield* Servers.httpServer
      const sse = yield* Servers.sseServer
      const mcp = yield* McpClient.make({
        servers: {
          // DeerFlow's test: type http with transport sse is http (an SSE client would not reach this server)
          warehouse: Servers.server({ type: "http", transport: "sse", url: http.url }),
          // DeerFlow's issue 3238: transport alone is not taken for stdio
          loud: Servers.server({ transport: "sse", url: sse.url }),
          broken: Servers.server({ type: "stdio" }),
          nowhere: Servers.server({ transport: "http" }),
          off: Servers.server({ enabled: false, type: "stdio", command: "echo" })
        }
      })
      const catalog = yield* mcp.catalog
      assert.deepStrictEqual(catalog.tools.map((t) => t.name).sort(), [
        "loud_shout", "warehouse_add", "warehouse_lookup"
      ])
      assert.deepStrictEqual(catalog.problems.map((p) => p.message).sort(), [
        "MCP server 'broken' uses stdio but has no command",
        "MCP server 'nowhere' uses http but has no url"
      ])
      const tools = McpTools.tools(mcp, catalog.tools)
      assert.strictEqual(yield* invoke(tools.find((t) => t.name === "warehouse_add")!, { a: 40, b: 2 }), "40 + 2 = 42")
      assert.strictEqual(yield* invoke(tools.find((t) => t.name === "loud_shout")!, { text: "antlers" }), "ANTLERS")
      assert.strictEqual((yield* mcp.status).find((s) => s.name === "off")!.state, "disabled")
    }), SLOW)
})
