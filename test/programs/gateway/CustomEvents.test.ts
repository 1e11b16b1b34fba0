/**
 * DeerFlow's test_custom_events: a delegated task's events reach a client's `custom` stream once each, in order
 * (`task_started`, then `task_completed` with the result), under the task's id (the `task` call's id).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(body.messages)
  const last = body.messages.at(-1)
  if (text.includes("general-purpose subagent")) return "delegated result"
  if (last?.role === "tool") return "Done."
  const args = { description: "validate streaming", prompt: "check it", subagent_type: "general-purpose" }
  return { toolCalls: [{ id: "task-call-1", name: "task", arguments: args }] }
}

beforeAll(async () => {
  gateway = await Support.start({ script })
})
afterAll(() => gateway?.stop())

describe("a delegated task's custom events", () => {
  it("reach the custom stream once each, in order, under the task's id", async () => {
    const response = await fetch(`${gateway.url}/api/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        input: { messages: [{ type: "human", content: "delegate this" }] },
        context: { subagent_enabled: true },
        stream_mode: ["custom"]
      })
    })
    assert.strictEqual(response.status, 200)
    const { events } = await Support.readSse(response, () => false)
    const tasks = events
      .filter((e) => e.event === "custom" && String((e.data as any)?.type).startsWith("task_"))
      .map((e) => e.data as any)
    const kinds = tasks.map((t) => t.type).filter((t) => t !== "task_running")
    assert.deepStrictEqual(kinds, ["task_started", "task_completed"])
    assert.isTrue(tasks.every((t) => t.task_id === "task-call-1"))
    assert.strictEqual(tasks[0].description, "validate streaming")
    assert.strictEqual(tasks.at(-1).result, "delegated result")
  })
})
