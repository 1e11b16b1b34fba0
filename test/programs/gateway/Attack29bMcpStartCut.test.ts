/**
 * Attack round 29b on an MCP server's failed start and failed listing and one of the process's own secrets (another
 * server's configured env value, which the gateway hides everywhere it prints, streams or stores): McpClient cuts the
 * listing's error at 500 characters and a failed start's stderr tail at 300, and hid before the cut only the failing
 * server's own secrets (a server is shared by runs: no run's context is there); the masks after it find whole values
 * only. A server saying back a credential it shares with another where the cut fell had the key's beginning in the
 * run's warnings (streamed) and in the status route.
 */
import { assert, describe, it } from "@effect/vitest"
import { fileGateway } from "../../support/fileGateway.js"
import * as McpErrorCut from "../../support/mcpErrorCut.js"
import * as Servers from "../../support/mcpServers.js"
import * as Requests from "../../support/requests.js"
import * as Support from "./support.js"

const KEY = "VAULTKEY-a29b-0123456789abcdefghijklmnop"
const SLOW = 120_000

const CAROL = "carol-token-0123456789abcdef"

const { alice, gateway } = fileGateway(async () => {
  const node = (args: ReadonlyArray<string>) => Servers.server({ type: "stdio", command: process.execPath, args })
  return Support.startOverMcp("antler-attack29b-mcp-", {
    lister: node(["--input-type=module", "-e", McpErrorCut.failingListing(JSON.stringify(KEY))]),
    noisy: node(["-e", McpErrorCut.failingStart(JSON.stringify(KEY))]),
    // (the vault server does not start: its env value is one of the process's secrets all the same)
    vault: { ...node(["-e", "process.exit(1)"]), env: { VAULT_KEY: KEY } }
  }, {
    script: () => "Done.",
    config: {
      gateway: {
        ...Support.twoUsers,
        auth: { tokens: [...Support.twoUsers.auth.tokens, { token: CAROL, user: "carol", admin: true }] }
      }
    }
  })
}, SLOW)
const carol = Requests.as(gateway, CAROL)

describe("Attack29b: an MCP server's failed start or listing cut inside one of the process's own secrets", () => {
  it("none of the key is streamed, kept or shown by the status route", async () => {
    const thread = "a29b-mcp-start"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("hello"),
      stream_mode: ["values", "messages-tuple", "custom"]
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const start = KEY.slice(0, 8)
    assert.include(stream.text, "did not list its tools: MCP error -32603: refused: xxx", "the listing's error is told")
    assert.include(stream.text, "(its stderr: yyy", "the start's stderr is told")
    assert.notInclude(stream.text, start, "the stream")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.notInclude(state.text, start, "the thread")
    const status = await carol("GET", "/api/mcp/status")
    assert.strictEqual(status.status, 200, status.text)
    assert.include(status.text, "refused: xxx")
    assert.include(status.text, "yyy")
    assert.notInclude(status.text, start, "the status route")
  }, SLOW)
})
