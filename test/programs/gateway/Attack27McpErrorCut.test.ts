/**
 * Attack round 27 on an MCP server's failed call: its error text is cut at 500 characters (McpClient) before the run's
 * mask of its request secrets sees the tool's result, and the mask finds whole values only. A server given the run's
 * secret (`${secret:ERP_TOKEN}`) that fails the call saying it back where the cut falls had the secret's beginning
 * read by the model, kept in the thread and streamed.
 */
import { assert, describe, it } from "@effect/vitest"
import { fileGateway } from "../../support/fileGateway.js"
import * as McpErrorCut from "../../support/mcpErrorCut.js"
import * as Support from "./support.js"

const SECRET = "ERPTOKEN-a27-0123456789abcdefghijklmnop"
const SLOW = 120_000

const { seenByModel, script } = McpErrorCut.reportCaller()

const { alice } = fileGateway(() =>
  Support.startOverMcp("antler-attack27-mcp-", {
    erp: { ...McpErrorCut.reportServer(`process.env.ERP_TOKEN ?? ""`), env: { ERP_TOKEN: "${secret:ERP_TOKEN}" } }
  }, { script }), SLOW)

describe("Attack27: an MCP server's error cut inside the run's request secret", () => {
  it("none of the secret is read by the model, streamed or kept", async () => {
    const thread = "a27-mcp-cut"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("get the report"),
      context: { secrets: { ERP_TOKEN: SECRET } },
      stream_mode: ["values", "messages-tuple"]
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const start = SECRET.slice(0, 8)
    assert.lengthOf(seenByModel, 1)
    assert.include(seenByModel[0], "refused: xxx", "the model read the server's error")
    assert.notInclude(seenByModel[0], start, "the model's request")
    assert.notInclude(stream.text, start, "the stream")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.include(state.text, "refused: xxx")
    assert.notInclude(state.text, start, "the thread")
  }, SLOW)
})
