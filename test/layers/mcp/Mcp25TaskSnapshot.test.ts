/**
 * `TaskSnapshot`, DeerFlow's `_task_server_configs` / `validate_mcp_task_config_snapshot`: what of a task-enabled
 * server's entry counts as a change while the gateway runs (its launch, env, toolsets, timeouts, switching it off,
 * removing or adding one) and what does not (its description, routing, tools, prefix; a server without
 * `task_toolsets`; a field written back as null or as its default), and DeerFlow's message naming the servers.
 */
import { assert, describe, it } from "@effect/vitest"
import * as TaskSnapshot from "../../../src/layers/mcp/TaskSnapshot.js"
import * as McpServers from "../../support/mcpServers.js"

const TOOLSETS = [{ name: "Report", submit_tool: "start", status_tool: "status", cancel_tool: "cancel" }]
const task = (extra: Record<string, unknown> = {}) =>
  McpServers.server({ type: "stdio", command: "node", args: ["server.js"], task_toolsets: TOOLSETS, ...extra })
const plain = (extra: Record<string, unknown> = {}) =>
  McpServers.server({ type: "stdio", command: "node", args: ["plain.js"], ...extra })

const startup = TaskSnapshot.of({ reports: task({ env: { KEY: "v" } }), other: plain() })
const refusal = (servers: Parameters<typeof TaskSnapshot.of>[0]) => TaskSnapshot.refusal(startup, servers)

describe("TaskSnapshot", () => {
  it("an edit of what only presents the tools, or of another server, is no change", () => {
    const presented = task({
      env: { KEY: "v" },
      description: "Reports",
      tool_name_prefix: false,
      routing: { mode: "prefer", keywords: ["report"] },
      session_init_timeout: 60,
      tool_call_timeout: null
    })
    assert.isUndefined(refusal({ reports: presented, other: plain({ args: ["changed.js"] }) }))
    assert.isUndefined(refusal({ reports: task({ env: { KEY: "v" } }) }))
  })

  it("an edit of its launch, env, toolsets or timeouts, switching it off, or removing one, is refused", () => {
    const edits = [
      task({ env: { KEY: "w" } }),
      task({ env: { KEY: "v" }, args: ["other.js"] }),
      task({ env: { KEY: "v" }, session_init_timeout: 30 }),
      task({ env: { KEY: "v" }, task_toolsets: [{ ...TOOLSETS[0], name: "Other" }] }),
      task({ env: { KEY: "v" }, enabled: false }),
      plain({ env: { KEY: "v" } })
    ]
    for (const reports of edits) {
      assert.strictEqual(
        refusal({ reports, other: plain() }),
        "MCP task-enabled server configuration changed after Gateway startup (reports); restart Antler before " +
          "using durable task tools"
      )
    }
    assert.deepStrictEqual(TaskSnapshot.changed(startup, TaskSnapshot.of({})), ["reports"])
    assert.deepStrictEqual(
      TaskSnapshot.changed(startup, TaskSnapshot.of({ reports: task({ env: { KEY: "v" } }), b: task(), a: task() })),
      ["a", "b"]
    )
  })
})
