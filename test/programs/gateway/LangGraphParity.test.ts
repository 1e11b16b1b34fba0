/**
 * Calls of the real `@langchain/langgraph-sdk` Client that LangGraph apps make, answered as LangGraph's own API
 * server (`langgraphjs dev`, `@langchain/langgraph-api`) answers them. Each case is a difference found by running
 * the same calls against both servers. The model is SCRIPTED.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const lastUserText = (body: ChatRequestBody): string => {
  for (let i = body.messages.length - 1; i >= 0; i--) {
    const message = body.messages[i]!
    if (message.role === "user" && typeof message.content === "string") return message.content
  }
  return ""
}

const script = (body: ChatRequestBody) => `You said: ${lastUserText(body)}`

let gateway: TestGateway
let client: Client

beforeAll(async () => {
  gateway = await Support.start({ script })
  client = new Client({ apiUrl: gateway.url, apiKey: null })
})
afterAll(() => gateway?.stop())

const human = (content: string) => ({ messages: [{ type: "human", content }] })

describe("threads a run was made on", () => {
  // LangGraph records the graph and assistant a thread runs on in its metadata; apps list a graph's threads
  // with `threads.search({ metadata: { graph_id } })` (LangGraph's agent-chat-ui does, for its history)
  it("carry graph_id and assistant_id in their metadata, and a search by graph_id finds them", async () => {
    const thread = await client.threads.create({ metadata: { purpose: "parity" } })
    await client.runs.wait(thread.thread_id, "lead_agent", { input: human("hello") })
    const after = await client.threads.get(thread.thread_id)
    assert.deepStrictEqual(after.metadata, { purpose: "parity", graph_id: "lead_agent", assistant_id: "lead_agent" })
    const found = await client.threads.search({ metadata: { graph_id: "lead_agent" }, limit: 100 })
    assert.include(found.map((t) => t.thread_id), thread.thread_id)

    // a thread the run makes (`if_not_exists: create`) has them from the start
    const made = crypto.randomUUID()
    await client.runs.wait(made, "lead_agent", { input: human("hello"), ifNotExists: "create" })
    const madeMetadata = (await client.threads.get(made)).metadata
    assert.deepStrictEqual(madeMetadata, { graph_id: "lead_agent", assistant_id: "lead_agent" })
  })
})

describe("a search by values", () => {
  // `threads.search({ values })` asks for the threads whose values have those values; the filter was ignored, so a
  // filter matching no thread listed every thread
  it("finds only the threads whose values match, and none when none does", async () => {
    const titled = await client.threads.create({ metadata: { purpose: "values" } })
    await client.threads.updateState(titled.thread_id, { values: { title: "Packing for the fells" } })
    const other = await client.threads.create({ metadata: { purpose: "values" } })
    await client.threads.updateState(other.thread_id, { values: { title: "Something else" } })
    const found = await client.threads.search({ values: { title: "Packing for the fells" }, limit: 100 })
    assert.deepStrictEqual(found.map((t) => t.thread_id), [titled.thread_id])
    assert.deepStrictEqual(await client.threads.search({ values: { title: "no such title" }, limit: 100 }), [])
    // a state update's checkpoint is an `update`, as LangGraph labels it; a run's are the loop's
    const [head] = await client.threads.getHistory(titled.thread_id, { limit: 1 })
    assert.strictEqual(head!.metadata?.source, "update")
    await client.runs.wait(titled.thread_id, "lead_agent", { input: human("hello") })
    const [afterRun] = await client.threads.getHistory(titled.thread_id, { limit: 1 })
    assert.strictEqual(afterRun!.metadata?.source, "loop")
    // with the other filters
    const both = await client.threads.search({ metadata: { purpose: "values" }, values: { title: "Something else" } })
    assert.deepStrictEqual(both.map((t) => t.thread_id), [other.thread_id])
  })
})

describe("a thread's history", () => {
  // `getHistory({ metadata })` asks for the checkpoints whose metadata has those values; the filter was ignored
  it("filtered by checkpoint metadata holds only the checkpoints that match, before the limit applies", async () => {
    const thread = await client.threads.create()
    await client.runs.wait(thread.thread_id, "lead_agent", { input: human("first") })
    const second = await client.runs.create(thread.thread_id, "lead_agent", { input: human("second") })
    await client.runs.join(thread.thread_id, second.run_id)
    const all = await client.threads.getHistory(thread.thread_id, { limit: 100 })
    const ofSecond = all.filter((state) => state.metadata?.run_id === second.run_id)
    assert.isAbove(ofSecond.length, 0)
    assert.isAbove(all.length, ofSecond.length)

    const ids = (states: ReadonlyArray<{ checkpoint: { checkpoint_id?: string | null | undefined } }>) =>
      states.map((s) => s.checkpoint.checkpoint_id)
    const filtered = await client.threads.getHistory(thread.thread_id, {
      limit: 100,
      metadata: { run_id: second.run_id }
    })
    assert.deepStrictEqual(ids(filtered), ids(ofSecond))
    // the limit counts matching checkpoints (the newest first)
    const one = await client.threads.getHistory(thread.thread_id, { limit: 1, metadata: { run_id: second.run_id } })
    assert.deepStrictEqual(one.map((s) => s.checkpoint.checkpoint_id), [ofSecond[0]!.checkpoint.checkpoint_id])
    // none matches: none
    const none = await client.threads.getHistory(thread.thread_id, { limit: 100, metadata: { source: "input" } })
    assert.deepStrictEqual(none, [])
  })
})

describe("a state update", () => {
  // LangGraph's time travel: `updateState(threadId, { values, checkpointId })` (or `checkpoint`) writes the update
  // on the state of that checkpoint, forking the thread there; the checkpoint was ignored and the update went on
  // the head
  it("given an older checkpoint applies to the state of that checkpoint, by checkpointId or checkpoint", async () => {
    const thread = await client.threads.create()
    await client.runs.wait(thread.thread_id, "lead_agent", { input: human("first") })
    const afterFirst = (await client.threads.getState(thread.thread_id)) as any
    await client.runs.wait(thread.thread_id, "lead_agent", { input: human("second") })
    const firstContents = Support.visible(afterFirst.values.messages).map((m: any) => m.content)
    assert.strictEqual(firstContents.length, 2)

    await client.threads.updateState(thread.thread_id, {
      values: { messages: [{ type: "ai", content: "edited by id", id: "edit-1" }] },
      checkpointId: afterFirst.checkpoint.checkpoint_id
    })
    const byId = (await client.threads.getState(thread.thread_id)) as any
    assert.deepStrictEqual(
      Support.visible(byId.values.messages).map((m: any) => m.content),
      [...firstContents, "edited by id"]
    )

    await client.threads.updateState(thread.thread_id, {
      values: { messages: [{ type: "ai", content: "edited by config", id: "edit-2" }] },
      checkpoint: afterFirst.checkpoint
    })
    const byConfig = (await client.threads.getState(thread.thread_id)) as any
    assert.deepStrictEqual(
      Support.visible(byConfig.values.messages).map((m: any) => m.content),
      [...firstContents, "edited by config"]
    )

    // a checkpoint the thread does not have: 404, nothing written
    const missing = await client.threads.updateState(thread.thread_id, {
      values: { messages: [{ type: "ai", content: "lost", id: "edit-3" }] },
      checkpointId: "999"
    }).then(() => undefined, (error) => error)
    assert.strictEqual(missing?.status, 404)
    assert.deepStrictEqual((await client.threads.getState(thread.thread_id)).checkpoint, byConfig.checkpoint)
  })
})

describe("joining a run that has ended", () => {
  // LangGraph answers a join with the run's last values; Antler read the thread's state when answering, so a join of
  // a run followed by another one on the thread (a queue, a second turn) answered with the later run's messages
  it("answers the values at that run's end, not the thread's later state", async () => {
    const thread = await client.threads.create()
    const first = await client.runs.create(thread.thread_id, "lead_agent", { input: human("first turn") })
    await client.runs.join(thread.thread_id, first.run_id)
    await client.runs.wait(thread.thread_id, "lead_agent", { input: human("second turn") })
    const joined = (await client.runs.join(thread.thread_id, first.run_id)) as { messages?: Array<{ content: unknown }> }
    const visible = Support.visible((joined.messages ?? []) as any)
    const texts = visible.map((m: any) => `${m.type}: ${m.content}`)
    assert.strictEqual(texts.length, 2, texts.join("\n"))
    assert.strictEqual(texts[0], "human: first turn")
    assert.match(texts[1]!, /^ai: You said: .*first turn/s)
    // the thread itself goes on
    const state = await client.threads.getState(thread.thread_id)
    assert.match(String(Support.visible((state.values as any).messages).at(-1)?.content), /second turn/)
  })
})
