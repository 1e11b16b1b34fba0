/**
 * The gateway driven by the real `@langchain/langgraph-sdk` Client (what DeerFlow's frontend and LangGraph apps
 * use): threads, streamed runs in values + messages-tuple + custom modes reassembled into the answer, a client
 * that disconnects mid-run and rejoins with its last event id, cancellation, a clarification answered, state and
 * history. The model is SCRIPTED (a loopback Chat Completions server behind the real `openai` client).
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const lastUserText = (body: ChatRequestBody): string => {
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const message = body.messages[i]!
    if (message.role === "user" && typeof message.content === "string") return message.content
  }
  return ""
}
const lastIsTool = (body: ChatRequestBody) => body.messages[body.messages.length - 1]?.role === "tool"

const ANSWER = "The packing list is saved in your workspace: passport, charger and a warm coat."
const LONG = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")

/** One script for the whole file, keyed by what the user said. */
const script = (body: ChatRequestBody, call: number): Turn => {
  const text = lastUserText(body)
  if (text.includes("packing list")) {
    // a first call that fails (an `llm_retry` custom event), then a tool call, then the answer
    if (lastIsTool(body)) return ANSWER
    if (!body.messages.some((m) => m.role === "assistant")) {
      return (call % 2 === 0 && !seenFailure.has(text)) ? (seenFailure.add(text), { status: 503 }) : {
        content: "Writing it down.",
        toolCalls: [{
          name: "write_file",
          arguments: { description: "Save the list", path: "/mnt/user-data/workspace/packing.md", content: "- passport\n" }
        }]
      }
    }
    return ANSWER
  }
  if (text.includes("slowly")) return LONG
  if (text.includes("hang")) return { content: "Thinking about it", stall: true }
  if (text.includes("Which city")) {
    return {
      toolCalls: [{
        name: "ask_clarification",
        arguments: { question: "Which city do you mean?", clarification_type: "approach_choice", options: ["Paris", "Rome"] }
      }]
    }
  }
  if (text.toLowerCase().includes("rome")) return "Rome it is: the Colosseum opens at 9."
  return `You said: ${text}`
}
const seenFailure = new Set<string>()

let gateway: TestGateway
let client: Client

beforeAll(async () => {
  gateway = await Support.start({ script, server: { delayMs: 15 } })
  client = new Client({ apiUrl: gateway.url, apiKey: null })
})
afterAll(() => gateway?.stop())

/** Reassembles the answer from `messages` chunks: text accumulated by message id. */
const reassemble = (chunks: ReadonlyArray<any>) => {
  const byId = new Map<string, string>()
  for (const [message] of chunks) {
    if (message.type !== "AIMessageChunk" && message.type !== "ai") continue
    byId.set(message.id, (byId.get(message.id) ?? "") + (typeof message.content === "string" ? message.content : ""))
  }
  return byId
}

describe("the LangGraph SDK client against antler's gateway", () => {
  it("creates a thread and streams a run in values, messages-tuple and custom modes; the answer reassembles", async () => {
    const thread = await client.threads.create({ metadata: { purpose: "test" } })
    assert.match(thread.thread_id, /^[0-9a-f-]{36}$/)
    assert.deepStrictEqual(thread.metadata, { purpose: "test" })
    let created: { run_id: string; thread_id?: string } | undefined
    const parts: Array<{ event: string; data: any; id?: string }> = []
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "Make a packing list for my trip" }] },
      streamMode: ["values", "messages-tuple", "custom"],
      onRunCreated: (meta) => (created = meta)
    })) parts.push(part as any)

    const events = parts.map((p) => p.event)
    assert.strictEqual(events[0], "metadata")
    assert.strictEqual(parts[0]!.data.run_id, created?.run_id)
    assert.strictEqual(created?.thread_id, thread.thread_id)
    // ids increase by one, with nothing repeated
    const ids = parts.map((p) => Number(p.id))
    assert.deepStrictEqual(ids, ids.map((_, i) => ids[0]! + i))
    // the retry is a custom event, named by its type
    const custom = parts.filter((p) => p.event === "custom").map((p) => p.data)
    assert.isTrue(custom.some((c) => c.type === "llm_retry"), JSON.stringify(custom))
    // the answer from token deltas, accumulated by message id
    const texts = [...reassemble(parts.filter((p) => p.event === "messages").map((p) => p.data)).values()]
    assert.include(texts, ANSWER)
    // the tool call and its result came whole
    const tuples = parts.filter((p) => p.event === "messages").map((p) => p.data[0])
    assert.isTrue(tuples.some((m) => m.tool_call_chunks?.some((c: any) => c.name === "write_file")))
    assert.isTrue(tuples.some((m) => m.type === "tool" && m.name === "write_file"))
    // the last values snapshot is the thread: human, the call, its result, the answer
    const values = parts.filter((p) => p.event === "values").map((p) => p.data)
    const last = values[values.length - 1]
    assert.deepStrictEqual(last.messages.map((m: any) => m.type), ["human", "ai", "tool", "ai"])
    assert.strictEqual(last.messages[3].content, ANSWER)
    assert.notProperty(last, "thread_data")
    // the run is recorded as a success
    const run = await client.runs.get(thread.thread_id, created!.run_id)
    assert.strictEqual(run.status, "success")
    const state = await client.threads.getState(thread.thread_id)
    assert.deepStrictEqual((state.values as any).messages.map((m: any) => m.type), ["human", "ai", "tool", "ai"])
  })
})
