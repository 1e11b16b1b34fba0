/**
 * Attack round 25 on the per-run MCP listing (`Mcp.catalogWith`) between users: a server naming `${secret:NAME}` that
 * lists its tools only with it is started and listed for each run given it, with that run's values, and never kept.
 * The listing was made while the agent factory held its lock, the one every run of every user takes to get its agent
 * (a kept one too): one user's runs, each listing a server that takes its time to start with their credential (a
 * stdio server checking it, an `npx` start), held up every other user's runs for as long, one listing after the
 * other. A real stdio MCP server, through the gateway.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const SDK = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")
const SLOW = 120_000
/** How long the server takes to start given a credential (it checks it first). */
const CHECK_MS = 6_000

/** A stdio server that lists nothing without `$ERP_TOKEN`, and given one takes `CHECK_MS` before it answers. */
const GATED = `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  const token = process.env.ERP_TOKEN
  if (!token) process.exit(1)
  await new Promise((resolve) => setTimeout(resolve, ${CHECK_MS}))
  const server = new Server({ name: "erp", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "report", description: "The user's ERP report", inputSchema: { type: "object" } }]
  }))
  server.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: "text", text: "ok" }] }))
  await server.connect(new StdioServerTransport())
`

let gateway: TestGateway
const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

const script = (body: ChatRequestBody): Turn => `You said: ${Support.lastUserText(body)}`

beforeAll(async () => {
  gateway = await Support.startOverMcp("antler-attack25-lock-", {
    erp: {
      type: "stdio",
      command: process.execPath,
      args: ["--input-type=module", "-e", GATED],
      env: { ERP_TOKEN: "${secret:ERP_TOKEN}" }
    }
  }, { script })
  // (a first run: the shared listing, which fails without the secret, is made and remembered)
  const first = await bob("POST", "/runs/wait", { assistant_id: "lead_agent", input: Support.userInput("warm") })
  assert.strictEqual(first.status, 200, first.text)
}, SLOW)
afterAll(() => gateway?.stop())

describe("Attack25: one user's per-run MCP listing and another user's runs", () => {
  it("a listing under way for alice's run does not hold up bob's run", async () => {
    const hers = alice("POST", "/runs/wait", {
      assistant_id: "lead_agent",
      input: Support.userInput("report please"),
      context: { secrets: { ERP_TOKEN: "alice-erp-credential-0001" } }
    })
    // (her run is listing the server now)
    await new Promise((resolve) => setTimeout(resolve, 500))
    const started = Date.now()
    const his = await bob("POST", "/runs/wait", { assistant_id: "lead_agent", input: Support.userInput("hello") })
    const took = Date.now() - started
    assert.strictEqual(his.status, 200, his.text)
    assert.include(his.text, "You said: ")
    assert.isBelow(took, CHECK_MS / 2, `bob's run took ${took} ms`)
    const answer = await hers
    assert.strictEqual(answer.status, 200, answer.text)
  }, SLOW)
})
