/**
 * Attack round 23 on MCP task notifications with roles (`authorization.enabled`), as a user of a narrow role: the
 * run the gateway starts to tell a task's event must be the task's user's role's, as a scheduled task's and a
 * cron's are (Attack22Roles). Before, the notifier started it with no role, so it ran as `default_role`: a `guest`
 * denied `write_file` and the `deep` model started a task, and the run telling its end was offered `write_file`
 * and ran on `deep`. A real stdio MCP server, the scripted model through the real `openai` client.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import { INSTRUCTION } from "../../../src/programs/gateway/mcptasks/Notifier.js"
import { toolNames } from "../../support/modelRequests.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { allowNodeServers, reportTaskServer, writeTaskExtensions } from "../../support/mcpTaskServer.js"
import { rbac } from "../../support/rbac.js"

const SLOW = 120_000
const GUEST = "guest-token-0123456789abcdef"

/** A stdio MCP server whose task completes at its first status call. */
const SERVER = reportTaskServer({
  status: `return answer({ task_id: args.task_id, status: "completed", result: { report: "done" } })`
})

let gateway: TestGateway
allowNodeServers()

const isNotification = (body: ChatRequestBody) => Support.lastUserText(body).startsWith(INSTRUCTION)

beforeAll(async () => {
  const source = writeTaskExtensions(Support.tempDir("antler-attack23-mcp-role-"), SERVER)
  gateway = await Support.start({
    script: (body: ChatRequestBody) => {
      if (isNotification(body)) return "Your report is ready."
      if (body.messages.at(-1)?.role === "tool") return "Done."
      return { toolCalls: [{ name: "tasks_start_report", arguments: { topic: "x" } }] }
    },
    source,
    config: (url: string) => ({
      // (the first model, the default, is one the guest may not use)
      models: [Support.scriptedModel("deep", url), Support.scriptedModel("scripted", url)],
      gateway: {
        auth: { tokens: [{ token: Support.ALICE, user: "alice" }, { token: GUEST, user: "gus", role: "guest" }] }
      },
      mcp_tasks: { enabled: true, poll_interval_seconds: 1 },
      authorization: rbac({
        user: {},
        guest: { tools: { allow: "*", deny: ["write_file"] }, models: { allow: ["scripted"] } }
      })
    })
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const guest = Requests.as(() => gateway, GUEST)

describe("a narrow role's MCP task notification run", () => {
  it("runs as the task's user's role: no denied tool, no denied model", async () => {
    const thread = (await guest("POST", "/threads", {})).json().thread_id as string
    const ran = await guest("POST", `/threads/${thread}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ role: "user", content: "start a report" }] },
      config: { configurable: { model_name: "scripted" } }
    })
    assert.strictEqual(ran.status, 200, ran.text)
    const told = await eventually(async () => {
      const found = gateway.scripted.requests.filter((r: ChatRequestBody) => isNotification(r))
      return found.length > 0 ? found : undefined
    }, "the notification run's model request", { tries: 600, everyMs: 50 })
    for (const request of told) {
      assert.notInclude(toolNames(request), "write_file")
      assert.include(toolNames(request), "read_file")
      assert.strictEqual(request.model, "model-scripted")
    }
  }, SLOW)
})
