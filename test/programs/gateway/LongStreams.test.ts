/**
 * Long streamed answers, in many more pieces than the batches a run's text so far is kept in (`TextBuilder`): an
 * answer and its reasoning of hundreds of deltas, a tool call whose arguments arrive 8 characters at a time, and an
 * answer stopped after hundreds of deltas reach the stream, the thread and the tool whole, in order.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway

const api = as(() => gateway)

const words = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${prefix}${i}${i % 7 === 0 ? " é😀" : ""}`).join(" ")

const ANSWER = words("w", 300)
const THOUGHT = words("t", 150)
// about 3,000 characters: some 380 argument deltas of 8 characters
const NOTE = `# Notes\n\n${words("n", 400)}\n`
const STOPPED = words("s", 300)

const textOf = (message: any) => JSON.stringify(message?.content ?? "")

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => {
      const last = body.messages[body.messages.length - 1]
      if (last?.role === "tool") return "Saved."
      return textOf(last).includes("save")
        ? {
          toolCalls: [{
            name: "write_file",
            arguments: { description: "Save the notes", path: "/mnt/user-data/outputs/notes.md", content: NOTE }
          }]
        }
        : textOf(last).includes("slowly")
        ? { content: STOPPED, stall: true }
        : { reasoning: THOUGHT, content: ANSWER }
    }
  })
})
afterAll(() => gateway?.stop())

const stream = async (threadId: string, question: string, stop?: (text: string) => boolean) => {
  assert.strictEqual((await api("POST", "/api/threads", { thread_id: threadId })).status, 200)
  const response = await fetch(`${gateway.url}/api/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      input: { messages: [{ type: "human", content: question }] },
      stream_mode: ["values", "messages-tuple", "messages"]
    })
  })
  let runId = ""
  let text = ""
  let stopped = false
  const { events } = await Support.readSse(response, (event) => {
    if (event.event === "metadata") runId = (event.data as any).run_id
    const first = event.event === "messages" ? (event.data as any)[0] : undefined
    if (first?.type === "AIMessageChunk") text += first.content
    if (stop?.(text) === true && !stopped) {
      stopped = true
      void fetch(`${gateway.url}/api/threads/${threadId}/runs/${runId}/cancel?action=interrupt`, { method: "POST" })
    }
    return false
  })
  return { events, text }
}

const lastValues = (events: ReadonlyArray<Support.SseEvent>) =>
  [...events].reverse().find((e) => e.event === "values")!.data as any

describe("a long streamed answer", () => {
  it("reaches the stream, its partial messages and the thread whole, with its reasoning", async () => {
    const { events, text } = await stream("long-answer", "Tell me everything.")
    assert.strictEqual(text, ANSWER)
    const partials = events.filter((e) => e.event === "messages/partial")
    assert.isAbove(partials.length, 300)
    const whole = (partials.at(-1)!.data as any)[0]
    assert.strictEqual(whole.content, ANSWER)
    assert.strictEqual(whole.additional_kwargs.reasoning_content, THOUGHT)
    const answer = Support.visible(lastValues(events).messages).at(-1)
    assert.deepInclude(answer, { type: "ai", content: ANSWER })
    assert.strictEqual(answer.additional_kwargs.reasoning_content, THOUGHT)
    const state = (await api("GET", "/api/threads/long-answer/state")).json()
    assert.strictEqual(Support.visible(state.values.messages).at(-1).content, ANSWER)
  })

  it("passes a tool call's arguments streamed in hundreds of pieces to the tool whole", async () => {
    const { events } = await stream("long-call", "Please save my notes.")
    assert.strictEqual(events.at(-1)?.event, "end")
    const call = Support.visible(lastValues(events).messages).find((m: any) => m.type === "ai" && m.tool_calls?.length)
    assert.strictEqual(call.tool_calls[0].args.content, NOTE)
    const file = await fetch(`${gateway.url}/api/threads/long-call/artifacts/mnt/user-data/outputs/notes.md`)
    assert.strictEqual(file.status, 200)
    assert.strictEqual(await file.text(), NOTE)
  })

  it("stopped after hundreds of pieces, keeps all it streamed in the thread", async () => {
    const { events, text } = await stream("long-stopped", "Please answer slowly.", (sofar) => sofar === STOPPED)
    assert.strictEqual(text, STOPPED)
    assert.strictEqual(events.at(-1)?.event, "end")
    const state = (await api("GET", "/api/threads/long-stopped/state")).json()
    assert.deepStrictEqual(Support.visible(state.values.messages).map((m: any) => [m.type, m.content]), [
      ["human", "Please answer slowly."],
      ["ai", STOPPED]
    ])
  })
})
