/**
 * Attack round 26 on the freeze of task-enabled MCP servers (`TaskSnapshot`): a `PUT` of the MCP settings that tries to
 * slip a change of such a server's runtime settings through another spelling is refused; one that says the same (a
 * field written as its default, keys in another order, null for unset) is not.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import * as TaskSnapshot from "../../src/layers/mcp/TaskSnapshot.js"
import { McpServerConfig } from "../../src/services/Extensions.js"

const decode = (servers: Record<string, unknown>) =>
  Object.fromEntries(
    Object.entries(servers).map(([name, raw]) => [name, Schema.decodeUnknownSync(McpServerConfig)(raw)])
  )

const ENTRY = {
  type: "stdio",
  command: "node",
  args: ["server.js"],
  env: { ERP_TOKEN: "${secret:ERP_TOKEN}" },
  task_toolsets: [{ name: "Report", submit_tool: "start", status_tool: "status", cancel_tool: "cancel" }]
}
const startup = TaskSnapshot.of(decode({ erp: ENTRY }))
const refused = (servers: Record<string, unknown>) => TaskSnapshot.refusal(startup, decode(servers))

describe("Attack26: a task-enabled server's settings under another spelling", () => {
  it("are refused: transport for type, an unknown key, a key in another case, a rename, a second copy", () => {
    const { type: _, ...rest } = ENTRY
    assert.include(refused({ erp: { ...rest, transport: "stdio" } }), "(erp)")
    assert.include(refused({ erp: { ...ENTRY, Command: "sh" } }), "(erp)")
    assert.include(refused({ erp: { ...ENTRY, Enabled: false, env: {} } }), "(erp)")
    assert.include(refused({ ERP: ENTRY }), "(ERP, erp)")
    assert.include(refused({ erp: ENTRY, erp2: ENTRY }), "(erp2)")
    assert.include(refused({ erp: { ...ENTRY, task_toolsets: [] } }), "(erp)")
  })

  it("say the same and are taken: a default written out, keys reordered, null for unset, a description", () => {
    const reordered = Object.fromEntries(Object.entries(ENTRY).reverse())
    const same = { ...reordered, enabled: true, session_init_timeout: 60, tool_call_timeout: null }
    assert.isUndefined(refused({ erp: same }))
    assert.isUndefined(refused({ erp: { ...ENTRY, description: "ERP reports", tool_name_prefix: false } }))
  })
})
