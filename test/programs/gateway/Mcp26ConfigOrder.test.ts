/**
 * `PUT /api/mcp/config`: which answer a body that is both invalid and an edit of a frozen task-enabled server gets.
 * DeerFlow's router (`update_mcp_configuration`) checks the body before anything else: FastAPI decodes it (422),
 * then `_validate_mcp_update_request` refuses a disallowed stdio command (400), then the file is written; it has no
 * freeze check of its own (a changed task server is refused when the tools are next loaded). Antler's 409 for an
 * edit of a frozen server (`Mcp25TaskFreeze.test.ts`) comes after those checks, as DeerFlow's write does: a bad body
 * is told what is wrong with it, whatever it would change. And `GET /api/mcp/status`: an enabled server no run has
 * asked for since the configuration changed is `idle` (the gateway starts the file's servers when it starts; those
 * given since start when a run first asks for their tools), with no starts, no tools and no problems. Real HTTP
 * through the gateway, real stdio MCP server processes, the SCRIPTED model (the real `openai` client on loopback).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { allowNodeServers, reportTaskServer, writeTaskExtensions } from "../../support/mcpTaskServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const CAROL = "carol-token-0123456789abcdef"
const SECRET = "task-key-mcp26-order-DO-NOT-LEAK"
const FROZEN = "MCP task-enabled server configuration changed after Gateway startup"

const ECHO = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../fixtures/echo-secrets-mcp.mjs")
const SERVER = reportTaskServer({ status: `return answer({ task_id: args.task_id, status: "running" })` })

let gateway: TestGateway
let file: string
allowNodeServers()
const call = Requests.api(() => gateway)

beforeAll(async () => {
  const dir = Support.tempDir("antler-mcp26-order-")
  const source = writeTaskExtensions(dir, SERVER, { env: { SERVICE_API_KEY: SECRET } })
  file = Path.join(dir, "extensions_config.json")
  const raw = JSON.parse(Fs.readFileSync(file, "utf8"))
  raw.mcpServers.notes = { type: "stdio", command: "node", args: [ECHO, "stdio"] }
  Fs.writeFileSync(file, JSON.stringify(raw))
  gateway = await Support.start({
    script: () => "ok",
    source,
    config: {
      mcp_tasks: { enabled: true },
      gateway: { auth: { tokens: [{ token: CAROL, user: "carol", admin: true }] } }
    }
  })
}, 120_000)
afterAll(() => gateway?.stop())

/** The servers as the settings page reads them. */
const shown = async () => (await Requests.ok(await call(CAROL, "/mcp/config"))).mcp_servers as Record<string, any>

const put = (servers: Record<string, unknown>) =>
  call(CAROL, "/mcp/config", { method: "PUT", body: { mcp_servers: servers } })

describe("PUT /api/mcp/config: a bad body is told so before a frozen server's edit is refused", () => {
  it("an edit of the frozen server to a disallowed command is a 400 naming it, not the freeze's 409", async () => {
    const before = Fs.readFileSync(file, "utf8")
    const { tasks, notes } = await shown()
    const response = await put({ tasks: { ...tasks, command: "bash", args: ["-c", "true"] }, notes })
    const text = await response.text()
    assert.strictEqual(response.status, 400, text)
    assert.include(text, "MCP server 'tasks' uses disallowed stdio command 'bash'")
    assert.notInclude(text, FROZEN)
    assert.notInclude(text, SECRET)
    assert.strictEqual(Fs.readFileSync(file, "utf8"), before)
  })

  it("an edit of the frozen server beside a server that cannot be read is a 422 naming it, not the 409", async () => {
    const before = Fs.readFileSync(file, "utf8")
    const { tasks, notes } = await shown()
    const response = await put({ tasks: { ...tasks, tool_call_timeout: 30 }, notes: { ...notes, args: "x" } })
    const text = await response.text()
    assert.strictEqual(response.status, 422, text)
    assert.include(text, "mcp_servers.notes")
    assert.notInclude(text, FROZEN)
    assert.strictEqual(Fs.readFileSync(file, "utf8"), before)
    // the same edit with a body that can be read is the freeze's
    const frozen = await put({ tasks: { ...tasks, tool_call_timeout: 30 }, notes })
    const words = await frozen.text()
    assert.strictEqual(frozen.status, 409, words)
    assert.include(words, FROZEN)
    assert.strictEqual(Fs.readFileSync(file, "utf8"), before)
  })
})

describe("GET /api/mcp/status", () => {
  let idle: TestGateway
  beforeAll(async () => {
    const dir = Support.tempDir("antler-mcp26-idle-")
    Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
      mcpServers: { notes: { type: "stdio", command: "node", args: [ECHO, "stdio"] } }
    }))
    idle = await Support.start({
      script: () => "ok",
      source: Path.join(dir, "config.yaml"),
      config: { gateway: { auth: { tokens: [{ token: CAROL, user: "carol", admin: true }] } } }
    })
  }, 120_000)
  afterAll(() => idle?.stop())

  it("shows an enabled server no run has asked for since the configuration changed as idle, then running", async () => {
    const admin = Requests.api(() => idle)
    const server = { type: "stdio", command: "node", args: [ECHO, "stdio"] }
    const put = await admin(CAROL, "/mcp/config", { method: "PUT", body: { mcp_servers: { notes: server } } })
    assert.strictEqual(put.status, 200, await put.text())
    const statusOf = async () => {
      const response = await admin(CAROL, "/mcp/status")
      const text = await response.text()
      assert.strictEqual(response.status, 200, text)
      return JSON.parse(text).mcp_servers as ReadonlyArray<Record<string, unknown>>
    }
    const never = { name: "notes", type: "stdio", enabled: true, state: "idle", tools: 0, starts: 0, problems: [] }
    assert.deepStrictEqual(await statusOf(), [never])
    // a run asks for the servers' tools: started
    const run = await admin(CAROL, "/runs/wait", {
      method: "POST",
      body: { assistant_id: "lead_agent", input: { messages: [{ role: "user", content: "hi" }] } }
    })
    assert.strictEqual(run.status, 200, await run.text())
    assert.deepStrictEqual(await statusOf(), [{ ...never, state: "running", tools: 1, starts: 1 }])
  })
})
