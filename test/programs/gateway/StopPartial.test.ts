/**
 * A run stopped (cancel, action `interrupt`) while the model streams its answer keeps what was streamed: the
 * stream's last `values`, the thread's state, its message page and the next run's model call all hold the start of
 * the answer as an AI message, under the id its chunks were streamed with. A tool call the model had begun is not
 * kept (nothing is left without its result). Without this the answer the user watched vanished at the stop
 * (DeerFlow's app replaced it with the state, which lacked it).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway

const lastText = (body: any) => JSON.stringify(body.messages[body.messages.length - 1]?.content ?? "")

const api = as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) =>
      lastText(body).includes("slowly")
        ? { content: "Deer eat grass, leaves and", stall: true }
        : lastText(body).includes("tool")
        ? {
          content: "I will look it up.",
          toolCalls: [{ name: "web_search", arguments: { query: "what deer eat" } }],
          stall: true
        }
        : "Fawns drink milk."
  })
})
afterAll(() => gateway?.stop())

/** Starts a streamed run, stops it once it has streamed `streamed` of its answer, and returns its events. */
const stopMidAnswer = async (threadId: string, question: string, streamed: string) => {
  assert.strictEqual((await api("POST", "/api/threads", { thread_id: threadId })).status, 200)
  const response = await fetch(`${gateway.url}/api/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      input: { messages: [{ type: "human", content: question }] },
      stream_mode: ["values", "messages-tuple"]
    })
  })
  let runId = ""
  let stopped = false
  let text = ""
  const read = Support.readSse(response, (event) => {
    if (event.event === "metadata") runId = (event.data as any).run_id
    const first = event.event === "messages" ? (event.data as any)[0] : undefined
    if (first?.type === "AIMessageChunk") text += first.content
    if (text === streamed && !stopped) {
      stopped = true
      void fetch(`${gateway.url}/api/threads/${threadId}/runs/${runId}/cancel?action=interrupt`, { method: "POST" })
    }
    return false
  })
  const { events } = await read
  const chunks = events.filter((e) => e.event === "messages" && (e.data as any)[0].type === "AIMessageChunk")
  return { runId, events, chunks }
}

describe("a run stopped while the model streams its answer", () => {
  it("keeps the streamed start of the answer in the stream's last values, the state and the message page", async () => {
    const { runId, events, chunks } = await stopMidAnswer(
      "stopped",
      "Please answer slowly: what do deer eat?",
      "Deer eat grass, leaves and"
    )
    assert.isAbove(chunks.length, 0)
    const streamedId = (chunks[0]!.data as any)[0].id
    const streamedText = chunks.map((c) => (c.data as any)[0].content).join("")
    assert.strictEqual(streamedText, "Deer eat grass, leaves and")
    assert.strictEqual(events.at(-1)?.event, "end")

    const last = [...events].reverse().find((e) => e.event === "values")!.data as any
    const kept = Support.visible(last.messages).at(-1)
    assert.deepInclude(kept, { type: "ai", id: streamedId, content: streamedText, tool_calls: [] })

    const state = (await api("GET", "/api/threads/stopped/state")).json()
    assert.deepStrictEqual(Support.visible(state.values.messages).map((m: any) => [m.type, m.content]), [
      ["human", "Please answer slowly: what do deer eat?"],
      ["ai", streamedText]
    ])
    const page = (await api("GET", "/api/threads/stopped/messages/page")).json()
    assert.deepStrictEqual(page.data.map((row: any) => [row.content.type, row.run_id]), [
      ["human", runId],
      ["ai", runId]
    ])
    const run = (await api("GET", `/api/threads/stopped/runs/${runId}`)).json()
    assert.strictEqual(run.status, "interrupted")

    // the next run goes on from it: the model sees the stopped answer
    const next = await api("POST", "/api/threads/stopped/runs/wait", {
      input: { messages: [{ type: "human", content: "Never mind: what do fawns eat?" }] }
    })
    assert.strictEqual(next.status, 200, next.text)
    const call = gateway.scripted.requests.at(-1)!
    assert.isTrue(call.messages.some((m: any) => m.role === "assistant" && m.content === streamedText))
    assert.deepStrictEqual(Support.visibleTypes(next.json().messages), ["human", "ai", "human", "ai"])
  })

  // DeerFlow's test_prepare_edit_regenerate_payload_requires_successful_source_run (a regenerate may start it over)
  it("is not a turn to edit, but one to regenerate", async () => {
    await stopMidAnswer("stopped-edit", "Please answer slowly: what do deer eat?", "Deer eat grass, leaves and")
    const state = (await api("GET", "/api/threads/stopped-edit/state")).json()
    const [question, answer] = Support.visible(state.values.messages)
    const edit = await api("POST", "/api/threads/stopped-edit/runs/edit-regenerate/prepare", {
      human_message_id: question.id,
      replacement_text: "What do fawns eat?"
    })
    assert.strictEqual(edit.status, 409, edit.text)
    assert.include(edit.json().detail, "Only successful assistant runs can be edited")
    const regenerate = await api("POST", "/api/threads/stopped-edit/runs/regenerate/prepare", { message_id: answer.id })
    assert.strictEqual(regenerate.status, 200, regenerate.text)
  })

  it("keeps the text of an answer stopped while it streamed a tool call, without the call", async () => {
    const { chunks } = await stopMidAnswer("stopped-call", "Use a tool: what do deer eat?", "I will look it up.")
    assert.isAbove(chunks.length, 0)
    const state = (await api("GET", "/api/threads/stopped-call/state")).json()
    const visible = Support.visible(state.values.messages)
    assert.deepStrictEqual(visible.map((m: any) => m.type), ["human", "ai"])
    assert.strictEqual(visible[1].content, "I will look it up.")
    assert.deepStrictEqual(visible[1].tool_calls, [])
  })
})
