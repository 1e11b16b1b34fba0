/**
 * Attack round 23 on MCP task notifications, as a hostile MCP server: a task that keeps asking for input with a
 * new question at each poll is a new event each time, and each event was told by a run of the model on the user's
 * thread (DeerFlow's notifier tells every changed event): one run a minute, for as long as the server likes, on the
 * user's model and money. Now at most `mcp_tasks.max_notifications_per_task` events of a task are told; past it an
 * event that does not end the task is given up, its task saying why; the task's end is still told. A real stdio MCP
 * server, the scripted model through the real `openai` client.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import { INSTRUCTION } from "../../../src/programs/gateway/mcptasks/Notifier.js"
import { eventually } from "../../support/poll.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { allowNodeServers, reportTaskServer, writeTaskExtensions } from "../../support/mcpTaskServer.js"

const SLOW = 120_000

/** A stdio MCP server whose task asks a new question at each poll, and ends at its eighth. */
const SERVER = reportTaskServer({
  prelude: "let polls = 0",
  status: `polls++
    if (polls >= 8) return answer({ task_id: args.task_id, status: "completed", result: { report: "done" } })
    return answer({ task_id: args.task_id, status: "input_required", input_required: { question: "Q" + polls } })`
})

let gateway: TestGateway
allowNodeServers()
const call = Requests.api(() => gateway)

const isNotification = (body: ChatRequestBody) => Support.lastUserText(body).startsWith(INSTRUCTION)

beforeAll(async () => {
  const source = writeTaskExtensions(Support.tempDir("antler-attack23-storm-"), SERVER)
  gateway = await Support.start({
    script: (body: ChatRequestBody) => {
      if (isNotification(body)) return "An update."
      if (body.messages.at(-1)?.role === "tool") return "Done."
      return { toolCalls: [{ name: "tasks_start_report", arguments: { topic: "x" } }] }
    },
    source,
    config: {
      gateway: Support.twoUsers,
      mcp_tasks: {
        enabled: true,
        poll_interval_seconds: 1,
        input_required_poll_interval_seconds: 5,
        max_notifications_per_task: 2
      }
    }
  })
}, SLOW)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

describe("a task whose server keeps asking new questions", () => {
  it("is told at most max_notifications_per_task times, then its end", async () => {
    const thread = (await Requests.ok(await call(Support.ALICE, "/threads", { method: "POST", body: {} })))
      .thread_id as string
    const ran = await call(Support.ALICE, `/threads/${thread}/runs/wait`, {
      method: "POST",
      body: { assistant_id: "lead_agent", input: { messages: [{ role: "user", content: "start a report" }] } }
    })
    assert.strictEqual(ran.status, 200, await ran.clone().text())
    // (the task ends at the server's eighth poll, some 35 s on: its end is told)
    const told = await eventually(async () => {
      const found = gateway.scripted.requests.filter((r: ChatRequestBody) => isNotification(r))
      return found.some((r) => Support.lastUserText(r).includes('"status":"completed"')) ? found : undefined
    }, "the task's end told", { tries: 1200, everyMs: 100 })
    const questions = told.filter((r) => Support.lastUserText(r).includes('"status":"input_required"'))
    assert.strictEqual(questions.length, 2, questions.map((r) => Support.lastUserText(r).slice(-300)).join("\n---\n"))
    const runs = await Requests.ok(await call(Support.ALICE, `/threads/${thread}/runs?limit=50`))
    assert.strictEqual(runs.filter((r: any) => r.metadata?.mcp_task_notification !== undefined).length, 3)
  }, SLOW)
})
