/**
 * The run `antler serve` starts for a user when their MCP task ends (the task's notification run) is their role's:
 * with `authorization.enabled`, a `guest` who may use only the `scripted` model (B) gets its notification run on B,
 * never on the default model `deep` (A). Before, the notifier started that run with no role, so it ran as
 * `default_role`, whose models (and tools) the guest's role may not use.
 * Real parts: a stdio MCP server with a task contract, the real `openai` client against the scripted server.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { INSTRUCTION } from "../../../src/programs/gateway/mcptasks/Notifier.js"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const SLOW = 120_000
const ROOT = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")
const SDK = Path.join(ROOT, "node_modules/@modelcontextprotocol/sdk/dist/esm")
const GUEST = "guest-token-mcptasks-000000"

/** A stdio MCP server whose report task completes at its first status poll. */
const SERVER = `
  import { Server } from ${JSON.stringify(`${SDK}/server/index.js`)}
  import { StdioServerTransport } from ${JSON.stringify(`${SDK}/server/stdio.js`)}
  import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(`${SDK}/types.js`)}
  let n = 0
  const object = (properties) => ({ type: "object", properties })
  const server = new Server({ name: "tasks", version: "1.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [
    { name: "start_report", description: "Writes a report", inputSchema: object({ topic: { type: "string" } }) },
    { name: "report_status", description: "Status", inputSchema: object({ task_id: { type: "string" } }) },
    { name: "report_cancel", description: "Cancels", inputSchema: object({ task_id: { type: "string" } }) }
  ] }))
  const answer = (structuredContent) =>
    ({ content: [{ type: "text", text: "see structuredContent" }], structuredContent })
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const args = request.params.arguments ?? {}
    switch (request.params.name) {
      case "start_report":
        return answer({ task_id: "remote-" + process.pid + "-" + (++n), status: "running" })
      case "report_status":
        return answer({ task_id: args.task_id, status: "completed", result: { report: "Report" } })
      default:
        return answer({ task_id: args.task_id, status: "cancelled" })
    }
  })
  await server.connect(new StdioServerTransport())
`

const isNotification = (body: ChatRequestBody) => Support.lastUserText(body).startsWith(INSTRUCTION)

let gateway: TestGateway
const allowlist = process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST
const guest = Requests.as(() => gateway, GUEST)

beforeAll(async () => {
  process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST = "node"
  const dir = Support.tempDir("antler-modelrole-tasks-")
  Fs.writeFileSync(Path.join(dir, "extensions_config.json"), JSON.stringify({
    mcpServers: {
      tasks: {
        type: "stdio",
        command: "node",
        args: ["--input-type=module", "-e", SERVER],
        task_toolsets: [
          { name: "Report", submit_tool: "start_report", status_tool: "report_status", cancel_tool: "report_cancel" }
        ]
      }
    }
  }))
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn => {
      if (isNotification(body)) return "Your report is ready."
      if (body.messages.at(-1)?.role === "tool") return "Done."
      if (Support.lastUserText(body).includes("start")) {
        return { toolCalls: [{ name: "tasks_start_report", arguments: { topic: "otters" } }] }
      }
      return "Hello."
    },
    source: Path.join(dir, "config.yaml"),
    config: (url: string) => ({
      models: [Support.scriptedModel("deep", url), Support.scriptedModel("scripted", url)],
      mcp_tasks: { enabled: true, poll_interval_seconds: 1 },
      gateway: { auth: { tokens: [{ token: GUEST, user: "gus", role: "guest" }] } },
      authorization: {
        enabled: true,
        provider: {
          use: "deerflow.authz.rbac:RbacAuthorizationProvider",
          config: { roles: { user: {}, guest: { models: { allow: ["scripted"] } } } }
        }
      }
    })
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop()
  if (allowlist === undefined) delete process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST
  else process.env.DEER_FLOW_MCP_STDIO_COMMAND_ALLOWLIST = allowlist
})

describe("an MCP task's notification run", () => {
  it("is its user's role's: on the model the guest may use (B), never the default (A)", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    const ran = await guest("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: Support.userInput("start a report")
    })
    assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
    const told = await eventually(async () => {
      const found = gateway.scripted.requests.filter(isNotification)
      return found.length > 0 ? found : undefined
    }, "the notification run's model request", { tries: 300, everyMs: 100 })
    for (const request of told) assert.strictEqual(request.model, "model-scripted")
    assert.isFalse(gateway.scripted.requests.some((r) => r.model === "model-deep"))
  }, SLOW)
})
