/**
 * Attack round 29 on an MCP server's failed call and one of the process's own secrets (another server's configured env
 * value, which the gateway hides everywhere it prints, streams or stores): McpClient cuts the error at 500 characters
 * and hid at the cut only the failing server's own secrets and the run's; the masks after it find whole values only. A
 * server saying back a credential it shares with another (an upstream's key) where the cut fell had the key's
 * beginning read by the model, kept in the thread and streamed.
 */
import { assert, describe, it } from "@effect/vitest"
import { fileGateway } from "../../support/fileGateway.js"
import * as McpErrorCut from "../../support/mcpErrorCut.js"
import * as Servers from "../../support/mcpServers.js"
import * as Support from "./support.js"

const KEY = "VAULTKEY-a29-0123456789abcdefghijklmnop"
const SLOW = 120_000

const { seenByModel, script } = McpErrorCut.reportCaller()

const { alice } = fileGateway(async () => {
  // (the vault server does not start: its env value is one of the process's secrets all the same)
  const vault = { type: "stdio", command: process.execPath, args: ["-e", "process.exit(1)"] }
  return Support.startOverMcp("antler-attack29-mcp-", {
    erp: McpErrorCut.reportServer(JSON.stringify(KEY)),
    vault: { ...Servers.server(vault), env: { VAULT_KEY: KEY } }
  }, { script })
}, SLOW)

describe("Attack29: an MCP server's error cut inside one of the process's own secrets", () => {
  it("none of the key is read by the model, streamed or kept", async () => {
    const thread = "a29-mcp-cut"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("get the report"),
      stream_mode: ["values", "messages-tuple"]
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const start = KEY.slice(0, 8)
    assert.lengthOf(seenByModel, 1)
    assert.include(seenByModel[0], "refused: xxx", "the model read the server's error")
    assert.include(seenByModel[0], "x[redacted]", "masked, then cut")
    assert.notInclude(seenByModel[0], start, "the model's request")
    assert.notInclude(stream.text, start, "the stream")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.include(state.text, "refused: xxx")
    assert.notInclude(state.text, start, "the thread")
  }, SLOW)
})
