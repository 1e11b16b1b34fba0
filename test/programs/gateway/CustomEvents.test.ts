/**
 * DeerFlow's test_custom_events: a delegated task's events reach a client's `custom` stream once each, in order
 * (`task_started`, then `task_completed` with the result), under the task's id (the `task` call's id); and, as
 * DeerFlow dispatches them to the callbacks too, the `events` stream as `on_custom_event`s of the task's tool call.
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
  const delegate = async (mode: string) => {
    const response = await fetch(`${gateway.url}/api/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        input: { messages: [{ type: "human", content: "delegate this" }] },
        context: { subagent_enabled: true },
        stream_mode: [mode]
      })
    })
    assert.strictEqual(response.status, 200)
    return (await Support.readSse(response, () => false)).events
  }

  it("reach the custom stream once each, in order, under the task's id", async () => {
    const events = await delegate("custom")
    const tasks = events
      .filter((e) => e.event === "custom" && String((e.data as any)?.type).startsWith("task_"))
      .map((e) => e.data as any)
    const kinds = tasks.map((t) => t.type).filter((t) => t !== "task_running")
    assert.deepStrictEqual(kinds, ["task_started", "task_completed"])
    assert.isTrue(tasks.every((t) => t.task_id === "task-call-1"))
    assert.strictEqual(tasks[0].description, "validate streaming")
    assert.strictEqual(tasks.at(-1).result, "delegated result")
  })

  it("reach the events stream as on_custom_event, named by their type, under the task's tool call", async () => {
    const events = (await delegate("events")).filter((e) => e.event === "events").map((e) => e.data as any)
    const tasks = events.filter((e) => e.event === "on_custom_event" && String(e.name).startsWith("task_"))
    assert.deepStrictEqual(tasks.map((e) => e.name).filter((n) => n !== "task_running"), [
      "task_started",
      "task_completed"
    ])
    assert.isTrue(tasks.every((e) => e.data.type === e.name && e.data.task_id === "task-call-1"))
    assert.strictEqual(tasks[0].data.description, "validate streaming")
    assert.strictEqual(tasks.at(-1).data.result, "delegated result")
    const toolStart = events.find((e) => e.event === "on_tool_start" && e.name === "task")
    assert.isTrue(tasks.every((e) => e.run_id === toolStart.run_id))
  })
})
