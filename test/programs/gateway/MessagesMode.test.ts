/**
 * LangGraph's `messages` stream mode, read by the real `@langchain/langgraph-sdk` Client, in the shapes LangGraph's
 * own API server (`langgraphjs dev`, `@langchain/langgraph-api`) sends: `messages/metadata` once per streamed
 * message (`{[id]: {metadata}}`), `messages/partial` with the message so far (`[{type: "ai", content, ...}]`,
 * content growing), `messages/complete` with the run's messages once they are in the state (after the `values`
 * event that holds them). A mode it does not know is refused, naming it (`events` is served: EventsMode.test).
 * The model is SCRIPTED.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { lastUserText } = Support

const ANSWER = "Hello there, friend: the list is in your workspace."

const script = (body: ChatRequestBody): Turn => {
  const text = lastUserText(body)
  const last = body.messages[body.messages.length - 1]
  if (text.includes("save") && last?.role !== "tool") {
    return {
      content: "Writing it down.",
      toolCalls: [{
        name: "write_file",
        arguments: { description: "Save", path: "/mnt/user-data/workspace/list.md", content: "- passport\n" }
      }]
    }
  }
  return ANSWER
}

let gateway: TestGateway
let client: Client

beforeAll(async () => {
  gateway = await Support.start({ script })
  client = new Client({ apiUrl: gateway.url, apiKey: null })
})
afterAll(() => gateway?.stop())

const human = (content: string) => ({ messages: [{ type: "human", content }] })

const collect = async (stream: AsyncIterable<{ event: string; data: any }>) => {
  const events: Array<{ event: string; data: any }> = []
  for await (const chunk of stream) events.push({ event: chunk.event, data: chunk.data })
  return events
}

describe("stream_mode messages", () => {
  it("streams messages/metadata, growing messages/partial and messages/complete beside values", async () => {
    const thread = await client.threads.create()
    const events = await collect(client.runs.stream(thread.thread_id, "lead_agent", {
      input: human("hello"),
      streamMode: ["values", "messages"]
    }))
    const names = events.map((e) => e.event)
    assert.strictEqual(names[0], "metadata")
    assert.include(names, "values")
    assert.notInclude(names, "messages")

    // the run's input message is complete from the first values on, as LangGraph's server says
    const completes = events.filter((e) => e.event === "messages/complete").flatMap((e) => e.data as Array<any>)
    const humanMessage = completes.find((m) => m.type === "human")
    assert.strictEqual(humanMessage?.content, "hello")
    assert.isString(humanMessage?.id)

    // one metadata event for the streamed AI message, before its first partial, keyed by its id
    const metas = events.filter((e) => e.event === "messages/metadata")
    assert.strictEqual(metas.length, 1)
    const [id] = Object.keys(metas[0]!.data)
    const metadata = metas[0]!.data[id!].metadata
    assert.strictEqual(metadata.thread_id, thread.thread_id)
    assert.isString(metadata.run_id)
    assert.isString(metadata.langgraph_node)
    assert.isBelow(names.indexOf("messages/metadata"), names.indexOf("messages/partial"))

    // partials: one message each, of that id, type ai, content growing to the whole answer
    const partials = events.filter((e) => e.event === "messages/partial").map((e) => e.data as Array<any>)
    assert.isAbove(partials.length, 1)
    let before = ""
    for (const data of partials) {
      assert.strictEqual(data.length, 1)
      assert.strictEqual(data[0].id, id)
      assert.strictEqual(data[0].type, "ai")
      assert.isTrue(data[0].content.startsWith(before), `${JSON.stringify(data[0].content)} grows ${before}`)
      before = data[0].content
    }
    assert.strictEqual(before, ANSWER)

    // complete: the AI message whole, once, after the values event that holds it
    const ai = completes.filter((m) => m.id === id)
    assert.strictEqual(ai.length, 1)
    assert.strictEqual(ai[0].type, "ai")
    assert.strictEqual(ai[0].content, ANSWER)
    const completeAt = events.findIndex((e) => e.event === "messages/complete" && e.data.some((m: any) => m.id === id))
    const valuesAt = events.findIndex((e) =>
      e.event === "values" && (e.data.messages as Array<any>).some((m) => m.id === id)
    )
    assert.isAbove(completeAt, valuesAt)
    assert.isAbove(valuesAt, -1)
  })

  it("alone, sends no values; tool calls reach the last partial and tool messages complete", async () => {
    const thread = await client.threads.create()
    const events = await collect(client.runs.stream(thread.thread_id, "lead_agent", {
      input: human("please save the list"),
      streamMode: "messages"
    }))
    const names = new Set(events.map((e) => e.event))
    assert.deepStrictEqual(
      [...names].sort(),
      ["end", "messages/complete", "messages/metadata", "messages/partial", "metadata"].sort()
    )
    const completes = events.filter((e) => e.event === "messages/complete").flatMap((e) => e.data as Array<any>)
    // (the input, and the copy of it the thread keeps beside its dynamic context, are in the state too)
    assert.strictEqual(completes[0].type, "human")
    const turns = completes.filter((m) => m.type !== "human")
    assert.deepStrictEqual(turns.map((m) => m.type), ["ai", "tool", "ai"])
    const call = turns[0]
    assert.strictEqual(call.tool_calls[0].name, "write_file")
    assert.strictEqual(turns[1].tool_call_id, call.tool_calls[0].id)
    assert.strictEqual(turns[2].content, ANSWER)
    // ids complete once each
    assert.strictEqual(new Set(completes.map((m) => m.id)).size, completes.length)
    const lastPartialOfCall = events.filter((e) => e.event === "messages/partial" && e.data[0].id === call.id).at(-1)
    assert.strictEqual(lastPartialOfCall?.data[0].tool_calls[0].name, "write_file")
    assert.strictEqual(lastPartialOfCall?.data[0].content, "Writing it down.")

    // a join asking for messages gets them again from the run's buffer, and nothing of other modes
    const [run] = await client.runs.list(thread.thread_id)
    const joined = await collect(client.runs.joinStream(thread.thread_id, run!.run_id, { streamMode: ["messages"] }))
    const joinedNames = new Set(joined.map((e) => e.event))
    assert.isTrue(joinedNames.has("messages/partial"))
    assert.isFalse(joinedNames.has("values"))
  })

  it("refuses a mode it does not know with a 422 naming it and the modes it serves (events among them)", async () => {
    const thread = await client.threads.create()
    const response = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", input: human("hi"), stream_mode: ["values", "callbacks"] })
    })
    assert.strictEqual(response.status, 422)
    const problem = await response.json() as { detail: string }
    assert.include(problem.detail, `"callbacks"`)
    assert.include(problem.detail, "messages, updates, custom, events,")
    assert.deepStrictEqual(await client.runs.list(thread.thread_id), [])
  })
})
