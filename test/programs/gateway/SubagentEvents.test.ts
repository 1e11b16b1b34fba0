/**
 * A subagent's run events are kept as soon as the subagent ends, not only when the lead's run ends (DeerFlow's
 * test_worker_subagent_persistence test_terminal_event_flushes_eagerly): an app reloaded while the lead agent
 * still works reads the finished subtask's steps.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
const request = Requests.as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn => {
      const text = JSON.stringify(body.messages)
      const last = body.messages.at(-1)
      // the subagent: its prompt is the task's
      if (text.includes("general-purpose subagent")) return "Sub done."
      // the lead, after the task returned: it keeps working (never answers)
      if (last?.role === "tool") return { hang: true }
      const args = { description: "look around", prompt: "list the workspace", subagent_type: "general-purpose" }
      return { toolCalls: [{ name: "task", arguments: args }] }
    }
  })
})
afterAll(() => gateway?.stop())

describe("a subagent's run events", () => {
  it("are listable once the subagent ended, while the lead's run goes on", async () => {
    assert.strictEqual((await request("POST", "/api/threads", { thread_id: "sub" })).status, 200)
    const input = { messages: [{ type: "human", content: "delegate it" }] }
    const run = await request("POST", "/api/threads/sub/runs", { input, context: { subagent_enabled: true } })
    assert.strictEqual(run.status, 200, run.text)
    const runId = run.json().run_id
    const types = "subagent.start,subagent.step,subagent.end"
    let events: Array<any> = []
    for (let i = 0; i < 100 && !events.some((e) => e.event_type === "subagent.end"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      events = (await request("GET", `/api/threads/sub/runs/${runId}/events?event_types=${types}`)).json()
    }
    assert.include(events.map((e) => e.event_type), "subagent.end")
    assert.deepInclude(
      events.find((e) => e.event_type === "subagent.end").content,
      { status: "completed", result: "Sub done." }
    )
    assert.isTrue(events.some((e) => e.event_type === "subagent.step" && e.content.text === "Sub done."))
    assert.strictEqual((await request("GET", `/api/threads/sub/runs/${runId}`)).json().status, "running")
    await request("POST", `/api/threads/sub/runs/${runId}/cancel?action=interrupt&wait=1`)
    // the run's end replaces them with the whole journal
    const all = (await request("GET", `/api/threads/sub/runs/${runId}/events`)).json()
    assert.deepStrictEqual(all.slice(-2).map((e: any) => e.event_type), ["run.end", "run.delivery"])
    assert.include(all.map((e: any) => e.event_type), "subagent.end")
  }, 20_000)
})
