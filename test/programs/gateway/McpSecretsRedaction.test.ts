/**
 * The secrets of MCP servers added while the gateway runs (PUT /api/mcp/config, a hand edit of the file): a
 * server's env value it echoes in a tool result (server-everything's `get-env` prints its environment) is hidden
 * from what the run streams, answers and stores, as the secrets of the servers configured at the start are.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as McpServers from "../../support/mcpServers.js"
import { allowNodeServers } from "../../support/mcpTaskServer.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const CAROL = "carol-token-0123456789abcdef"
const AT_START = "sk-mcp-start-secret-0123456789"
const ADDED = "sk-mcp-added-secret-9876543210"
const BY_HAND = "sk-mcp-hand-edit-secret-5555555555"
const SLOW = 120_000

let gateway: TestGateway
let extensions = ""
allowNodeServers()
const call = Requests.api(() => gateway)
const server = (secret: string) => ({
  enabled: true,
  type: "stdio",
  command: "node",
  args: [McpServers.EVERYTHING, "stdio"],
  env: { SERVICE_API_KEY: secret }
})

beforeAll(async () => {
  const dir = Support.tempDir("antler-mcp-secrets-")
  extensions = Path.join(dir, "extensions_config.json")
  Fs.writeFileSync(
    extensions,
    JSON.stringify({ mcpServers: { first: server(AT_START) }, skills: {} })
  )
  gateway = await Support.start({
    script: (body) => {
      const last = body.messages.at(-1)
      if (last?.role === "tool") return "Done."
      const text = Support.lastUserText(body)
      const which = text.includes("added") ? "added" : text.includes("by hand") ? "hand" : "first"
      return { toolCalls: [{ name: `${which}_get-env`, arguments: {} }] }
    },
    source: Path.join(dir, "config.yaml"),
    config: { gateway: { heartbeat_seconds: 1, auth: { tokens: [{ token: CAROL, user: "carol", admin: true }] } } }
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop()
})

const run = async (prompt: string) => {
  const thread = await Requests.ok(await call(CAROL, "/threads", { method: "POST", body: {} }))
  const answer = await call(CAROL, `/threads/${thread.thread_id}/runs/wait`, {
    method: "POST",
    body: { assistant_id: "lead_agent", input: { messages: [{ role: "user", content: prompt }] } }
  })
  const text = await answer.text()
  assert.strictEqual(answer.status, 200, text)
  const state = await (await call(CAROL, `/threads/${thread.thread_id}/state`)).text()
  const stored = JSON.stringify(await gateway.store.load(thread.thread_id))
  return { text, state, stored }
}

describe("an MCP server's env secret, echoed in a tool result", () => {
  it("is hidden, for a server of the start and for one an admin added while the gateway runs", async () => {
    const first = await run("show the env of first")
    assert.include(first.text, "SERVICE_API_KEY")
    for (const seen of [first.text, first.state, first.stored]) assert.notInclude(seen, AT_START)

    const shown = await Requests.ok(await call(CAROL, "/mcp/config"))
    await Requests.ok(await call(CAROL, "/mcp/config", {
      method: "PUT",
      body: { mcp_servers: { ...shown.mcp_servers, added: server(ADDED) } }
    }))
    const added = await run("show the env of added")
    assert.include(added.text, "SERVICE_API_KEY")
    for (const seen of [added.text, added.state, added.stored]) assert.notInclude(seen, ADDED)
  }, SLOW)

  it("is hidden for a server added by a hand edit of extensions_config.json while the gateway runs", async () => {
    // (no PUT and no reset: the gateway takes the edited file by itself at a next run)
    const raw = JSON.parse(Fs.readFileSync(extensions, "utf8"))
    raw.mcpServers.hand = server(BY_HAND)
    Fs.writeFileSync(extensions, JSON.stringify(raw))
    const seen = await eventually(async () => {
      const ran = await run("show the env by hand")
      return ran.text.includes("SERVICE_API_KEY") ? ran : undefined
    }, "the server added by hand answered", { tries: 60, everyMs: 500 })
    for (const text of [seen.text, seen.state, seen.stored]) assert.notInclude(text, BY_HAND)
  }, SLOW)
})
