/**
 * Attack round 28 on a long tool result holding one of the process's own secrets (an MCP server's configured env
 * value, which the gateway hides everywhere it prints, streams or stores): ToolOutputBudget saves a result over its
 * threshold and shows the model a preview (its head cut at `preview_head_chars`), or cuts it to head and tail
 * (`fallback_head_chars`), and only a run's request secrets were masked before it. A server saying its key back where
 * a cut fell had the key's beginning read by the model, streamed and kept (the masks after the cut find whole values
 * only), and the saved file kept the key whole.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { fileGateway } from "../../support/fileGateway.js"
import { filesHolding } from "../../support/filesHolding.js"
import * as Servers from "../../support/mcpServers.js"
import * as Support from "./support.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const SDK = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")
const KEY = "ERPKEY-a28-0123456789abcdefghijklmnop"
const SLOW = 120_000

/**
 * A stdio MCP server whose `report` (saved, previewed) says its `$ERP_KEY` back 490 characters in (the preview's
 * head is 500) and whose `dump` (cut, never saved) says it back 990 characters in (the cut's head is 1,000).
 */
const SERVER = `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  const server = new Server({ name: "erp", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: "report", description: "Fetches the report", inputSchema: { type: "object" } },
      { name: "dump", description: "Dumps the ledger", inputSchema: { type: "object" } }
    ]
  }))
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const head = request.params.name === "report" ? 490 : 990
    const text = "x".repeat(head) + process.env.ERP_KEY + " used\\n" + "y".repeat(14000)
    return { content: [{ type: "text", text }] }
  })
  await server.connect(new StdioServerTransport())
`

/** What the model was sent as the tools' results (the report's, then the dump's). */
const seenByModel: Array<ReadonlyArray<string>> = []
const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  if (last?.role === "tool") {
    seenByModel.push(body.messages.filter((m) => m.role === "tool").map((m) => JSON.stringify(m.content)))
    return "Read both."
  }
  return { toolCalls: [{ name: "erp_report", arguments: {} }, { name: "erp_dump", arguments: {} }] }
}

const { alice, gateway } = fileGateway(async () => {
  const erp = { type: "stdio", command: process.execPath, args: ["--input-type=module", "-e", SERVER] }
  return Support.startOverMcp("antler-attack28-budget-", {
    erp: { ...Servers.server(erp), env: { ERP_KEY: KEY } }
  }, {
    script,
    config: {
      tool_output: {
        tool_overrides: { erp_dump: 0 },
        preview_head_chars: 500,
        preview_tail_chars: 200,
        fallback_max_chars: 3000,
        fallback_head_chars: 1000,
        fallback_tail_chars: 500
      }
    }
  })
}, SLOW)

describe("Attack28: a long tool result cut inside one of the process's own secrets", () => {
  it("none of the key is read by the model, streamed, kept or saved", async () => {
    const thread = "a28-budget-cut"
    assert.strictEqual((await alice("POST", "/threads", { thread_id: thread })).status, 200)
    const stream = await alice("POST", `/threads/${thread}/runs/stream`, {
      assistant_id: "lead_agent",
      input: Support.userInput("get the report and the ledger"),
      stream_mode: ["values", "messages-tuple"]
    })
    assert.strictEqual(stream.status, 200, stream.text)
    const start = KEY.slice(0, 8)
    assert.lengthOf(seenByModel, 1)
    const [preview, cut] = seenByModel[0]!
    assert.include(preview, "Full erp_report output saved to", "the model read the preview")
    assert.include(preview, "xxxx[redacted]", "the preview's head: the key masked, not cut")
    assert.include(cut, "chars omitted from erp_dump output", "the model read the cut result")
    assert.include(cut, "xxxx[redacted]", "the cut's head: the key masked, not cut")
    assert.notInclude(seenByModel[0]!.join(), start, "the model's request")
    assert.notInclude(stream.text, start, "the stream")
    const state = await alice("GET", `/threads/${thread}/state`)
    assert.include(state.text, "Full erp_report output saved to")
    assert.notInclude(state.text, start, "the thread")
    assert.deepStrictEqual(filesHolding(gateway().home, start), [], "the saved output, the database")
  }, SLOW)
})
