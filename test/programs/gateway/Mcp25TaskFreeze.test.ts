/**
 * DeerFlow freezes its task-enabled MCP servers' settings when the gateway starts (`set_mcp_task_config_snapshot`,
 * `validate_mcp_task_config_snapshot`): an edit of an enabled server with `task_toolsets` (its launch, env, toolsets,
 * switching it off; not its description, routing, tools or prefix) fails with "MCP task-enabled server configuration
 * changed after Gateway startup (<names>); restart DeerFlow before using durable task tools", so the tools the agents
 * get never split from the server the background tasks are polled on. Antler refuses such an edit itself, with those
 * words: `PUT`/`PATCH /api/mcp/config` answer 409 and leave the file alone, `POST /api/mcp/cache/reset` over a hand
 * edit making one answers 409, and the hand edit is not taken by the next run. An edit of what only presents the
 * tools, or of another server, is taken. Real HTTP through the gateway, a real stdio task server process, the
 * SCRIPTED model (the real `openai` client on loopback).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { toolNames } from "../../support/modelRequests.js"
import { allowNodeServers, reportTaskServer, writeTaskExtensions } from "../../support/mcpTaskServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const CAROL = "carol-token-0123456789abcdef"
const SECRET = "task-key-mcp25-freeze-DO-NOT-LEAK"
const MESSAGE = "MCP task-enabled server configuration changed after Gateway startup (tasks); restart Antler " +
  "before using durable task tools"

const SERVER = reportTaskServer({ status: `return answer({ task_id: args.task_id, status: "running" })` })

let gateway: TestGateway
let file: string
allowNodeServers()
const call = Requests.api(() => gateway)

beforeAll(async () => {
  const dir = Support.tempDir("antler-mcp25-freeze-")
  const source = writeTaskExtensions(dir, SERVER, { env: { SERVICE_API_KEY: SECRET } })
  file = Path.join(dir, "extensions_config.json")
  gateway = await Support.start({
    script: () => "ok",
    source,
    config: {
      mcp_tasks: { enabled: true },
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: CAROL, user: "carol", admin: true }] } }
    }
  })
}, 120_000)
afterAll(() => gateway?.stop())

/** The servers as the settings page reads them. */
const shown = async () => (await Requests.ok(await call(CAROL, "/mcp/config"))).mcp_servers as Record<string, any>

/** The tool names the model is offered in a fresh run of Alice's. */
const offered = async () => {
  const before = gateway.scripted.requests.length
  const run = await call(ALICE, "/runs/wait", {
    method: "POST",
    body: { assistant_id: "lead_agent", input: { messages: [{ role: "user", content: "hi" }] } }
  })
  assert.strictEqual(run.status, 200, await run.text())
  return toolNames(gateway.scripted.requests[before]!).filter((name) => name.startsWith("tasks_"))
}

const refused = async (response: Response) => {
  const text = await response.text()
  assert.strictEqual(response.status, 409, text)
  assert.include(text, MESSAGE)
  assert.notInclude(text, SECRET)
}

describe("a task-enabled MCP server's settings while the gateway runs", () => {
  it("an edit of its settings, removing it or switching it off is refused with DeerFlow's words", async () => {
    const before = Fs.readFileSync(file, "utf8")
    const servers = await shown()
    const timeout = { ...servers.tasks, tool_call_timeout: 30 }
    await refused(await call(CAROL, "/mcp/config", { method: "PUT", body: { mcp_servers: { tasks: timeout } } }))
    const withoutToolsets = { ...servers.tasks, task_toolsets: [] }
    await refused(
      await call(CAROL, "/mcp/config", { method: "PUT", body: { mcp_servers: { tasks: withoutToolsets } } })
    )
    await refused(await call(CAROL, "/mcp/config", { method: "PUT", body: { mcp_servers: {} } }))
    await refused(
      await call(CAROL, "/mcp/config", { method: "PATCH", body: { server_name: "tasks", enabled: false } })
    )
    assert.strictEqual(Fs.readFileSync(file, "utf8"), before)
    assert.deepStrictEqual(await offered(), ["tasks_start_report"])
  }, 120_000)

  it("an edit of its description, or another server added, is taken", async () => {
    const servers = await shown()
    const response = await call(CAROL, "/mcp/config", {
      method: "PUT",
      body: {
        mcp_servers: {
          tasks: { ...servers.tasks, description: "Reports, in the background" },
          other: { type: "http", url: "http://127.0.0.1:9/mcp", enabled: false }
        }
      }
    })
    assert.strictEqual(response.status, 200, await response.text())
    const after = JSON.parse(Fs.readFileSync(file, "utf8")).mcpServers
    assert.strictEqual(after.tasks.description, "Reports, in the background")
    assert.strictEqual(after.tasks.env.SERVICE_API_KEY, SECRET)
    assert.deepStrictEqual(Object.keys(after), ["tasks", "other"])
  }, 120_000)

  it("a hand edit making one is not taken by the next run, and a cache reset over it is refused", async () => {
    const raw = JSON.parse(Fs.readFileSync(file, "utf8"))
    raw.mcpServers.tasks.task_toolsets = []
    Fs.writeFileSync(file, JSON.stringify(raw))
    // (the file is looked at again at most every 2 s, when a run's agent is built)
    await new Promise((resolve) => setTimeout(resolve, 2_200))
    // taken, the server's status and cancel tools would be offered as plain tools
    assert.deepStrictEqual(await offered(), ["tasks_start_report"])
    await refused(await call(CAROL, "/mcp/cache/reset", { method: "POST" }))
    assert.deepStrictEqual(await offered(), ["tasks_start_report"])
  }, 120_000)
})
