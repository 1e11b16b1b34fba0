/**
 * `GET /api/mcp/status` (Antler's own: DeerFlow's MCP routes show the configuration, never what the servers are
 * doing): each MCP server of the running gateway with its state (disabled, idle until a run first asks for its
 * tools, running, failed), its tool count and its problems, never its env or header values. Admin-only as
 * DeerFlow's MCP routes are. Real HTTP through the gateway, real stdio MCP server processes (one that works, one
 * that says its token on stderr and exits), the SCRIPTED model (the real `openai` client on loopback).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const CAROL = "carol-token-0123456789abcdef"
const ECHO = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../fixtures/echo-secrets-mcp.mjs")
const GOOD_TOKEN = "erp-token-mcp25-status-DO-NOT-LEAK"
const BAD_TOKEN = "svc-token-mcp25-status-DO-NOT-LEAK"
const HEADER = "hdr-value-mcp25-status-DO-NOT-LEAK"

let gateway: TestGateway
const call = Requests.api(() => gateway)

beforeAll(async () => {
  const dir = Support.tempDir("antler-mcp25-status-")
  Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
    mcpServers: {
      erp: { type: "stdio", command: process.execPath, args: [ECHO, "stdio"], env: { ERP_TOKEN: GOOD_TOKEN } },
      broken: {
        type: "stdio",
        command: process.execPath,
        args: ["-e", "console.error('starting with ' + process.env.SVC_TOKEN); process.exit(3)"],
        env: { SVC_TOKEN: BAD_TOKEN }
      },
      off: { enabled: false, type: "http", url: "http://127.0.0.1:9/mcp", headers: { "X-Key": HEADER } }
    }
  }))
  gateway = await Support.start({
    script: () => "ok",
    source: Path.join(dir, "config.yaml"),
    config: {
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: CAROL, user: "carol", admin: true }] } }
    }
  })
}, 120_000)
afterAll(() => gateway?.stop())

const statusOf = async () => {
  const response = await call(CAROL, "/mcp/status")
  const text = await response.text()
  assert.strictEqual(response.status, 200, text)
  for (const secret of [GOOD_TOKEN, BAD_TOKEN, HEADER]) assert.notInclude(text, secret)
  const body = JSON.parse(text) as { mcp_servers: ReadonlyArray<Record<string, any>> }
  return Object.fromEntries(body.mcp_servers.map((s) => [s.name, s]))
}

describe("GET /api/mcp/status", () => {
  it("is an admin's: another token is refused with 403, saying so", async () => {
    const response = await call(ALICE, "/mcp/status")
    assert.strictEqual(response.status, 403)
    assert.include(await response.text(), "Admin privileges required to manage MCP configuration.")
  })

  it("shows each server's state, tool count and problems once a run has asked for their tools", async () => {
    // (the gateway starts its servers when it starts; a run asks for their tools in any case)
    const run = await call(ALICE, "/runs/wait", {
      method: "POST",
      body: { assistant_id: "lead_agent", input: { messages: [{ role: "user", content: "hi" }] } }
    })
    assert.strictEqual(run.status, 200, await run.text())
    const after = await statusOf()
    assert.deepStrictEqual(Object.keys(after), ["erp", "broken", "off"])
    assert.deepInclude(after.erp, { type: "stdio", enabled: true })
    assert.deepInclude(after.erp, { state: "running", tools: 1, starts: 1, problems: [] })
    assert.strictEqual(after.broken.state, "failed")
    assert.strictEqual(after.broken.tools, 0)
    assert.isAbove(after.broken.problems.length, 0)
    assert.match(after.broken.problems.join("\n"), /broken/)
    assert.deepInclude(after.off, { type: "http", enabled: false, state: "disabled", tools: 0, problems: [] })
    // no env, header or pid is shown
    for (const server of Object.values(after) as ReadonlyArray<Record<string, unknown>>) {
      assert.deepStrictEqual(Object.keys(server).sort(), [
        "enabled", "name", "problems", "starts", "state", "tools", "type"
      ])
    }
  }, 120_000)
})
