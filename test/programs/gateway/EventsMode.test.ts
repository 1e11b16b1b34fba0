/**
 * LangGraph's `events` stream mode (LangChain's callback events, `astream_events` v2, as LangGraph's JavaScript API
 * server sends them), read by the real `@langchain/langgraph-sdk` Client: the graph's start and end (`LangGraph`),
 * each model call (`model` node, `on_chat_model_start`, a chunk per token delta, `on_chat_model_end`), each tool
 * call (`tools` node, `on_tool_start` with the call's args, `on_tool_end` with the ToolMessage); beside `values`;
 * replayed to a client that reconnects with `Last-Event-ID`; secrets redacted. The model is SCRIPTED. Then the
 * projector alone: model calls written whole, parallel tool calls, reasoning, a failed run, chunks kept in parts.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Projection from "../../../src/programs/gateway/Projection.js"
import type { RunEvent } from "../../../src/services/RunEvents.js"
import * as M from "../../../src/state/Message.js"
import * as TS from "../../../src/state/ThreadState.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { lastUserText } = Support

const ANSWER = "Hello there, friend: the list is in your workspace."
const CALLING = "Writing it down."
const ARGS = { description: "Save", path: "/mnt/user-data/workspace/list.md", content: "- passport\n" }
// the scripted model's configured key (support.ts): a secret of the gateway's configuration
const SECRET = "sk-test-scripted-key-000000"

const script = (body: ChatRequestBody): Turn => {
  const text = lastUserText(body)
  const last = body.messages[body.messages.length - 1]
  if (text.includes("save") && last?.role !== "tool") {
    return { content: CALLING, toolCalls: [{ name: "write_file", arguments: ARGS }] }
  }
  if (text.includes("leak")) return `The key is ${SECRET} as configured.`
  return ANSWER
}

let gateway: TestGateway
let client: Client

beforeAll(async () => {
  // (deltas of 5 characters: a secret arrives split across them)
  gateway = await Support.start({ script, server: { delayMs: 2, chunkSize: 5 } })
  client = new Client({ apiUrl: gateway.url, apiKey: null })
})
afterAll(() => gateway?.stop())

const human = (content: string) => ({ messages: [{ type: "human", content }] })

const collect = async (stream: AsyncIterable<{ event: string; data: any; id?: string }>) => {
  const events: Array<{ event: string; data: any; id?: string | undefined }> = []
  for await (const chunk of stream) events.push({ event: chunk.event, data: chunk.data, id: chunk.id })
  return events
}

/** The callback events' kinds and names, a model call's chunks as one `on_chat_model_stream*`. */
const kinds = (events: ReadonlyArray<{ event: string; data: any }>) => {
  const out: Array<string> = []
  for (const e of events) {
    if (e.event !== "events") continue
    const kind = e.data.event === "on_chat_model_stream" ? "on_chat_model_stream*" : `${e.data.event}:${e.data.name}`
    if (kind !== out.at(-1) || kind !== "on_chat_model_stream*") out.push(kind)
  }
  return out
}

const MODEL_CALL = ["on_chain_start:model", "on_chat_model_start:scripted", "on_chat_model_stream*"]
const TOOL_STEP_AND_ANSWER = [
  "on_chain_start:LangGraph",
  ...MODEL_CALL,
  "on_chat_model_end:scripted",
  "on_chain_end:model",
  "on_chain_start:tools",
  "on_tool_start:write_file",
  "on_tool_end:write_file",
  "on_chain_end:tools",
  ...MODEL_CALL,
  "on_chat_model_end:scripted",
  "on_chain_end:model",
  "on_chain_end:LangGraph"
]

describe("stream_mode events", () => {
  it("a tool step and an answer: the graph, model calls, their chunks and the tool call, in order", async () => {
    const thread = await client.threads.create()
    const events = await collect(client.runs.stream(thread.thread_id, "lead_agent", {
      input: human("please save the list"),
      streamMode: "events"
    }))
    assert.deepStrictEqual([...new Set(events.map((e) => e.event))], ["metadata", "events", "end"])
    assert.deepStrictEqual(kinds(events), TOOL_STEP_AND_ANSWER)
    const runId: string = events[0]!.data.run_id
    const callbacks = events.filter((e) => e.event === "events").map((e) => e.data)

    // every event names the run and thread in its metadata; the graph's start and end are the run's own
    for (const e of callbacks) {
      assert.strictEqual(e.metadata.run_id, runId)
      assert.strictEqual(e.metadata.thread_id, thread.thread_id)
      assert.isArray(e.tags)
      assert.isArray(e.parent_ids)
    }
    const [graphStart, graphEnd] = [callbacks[0]!, callbacks.at(-1)!]
    assert.strictEqual(graphStart.run_id, runId)
    assert.strictEqual(graphEnd.run_id, runId)
    assert.deepStrictEqual(graphStart.parent_ids, [])
    assert.strictEqual(graphStart.data.input.messages[0].content, "please save the list")

    // each model call: one run id from start to end, under its node; its chunks (of the message's id) concatenate
    // to the message its end gives
    const state = await client.threads.getState<{ messages: Array<any> }>(thread.thread_id)
    const ais = state.values.messages.filter((m) => m.type === "ai")
    assert.strictEqual(ais.length, 2)
    const starts = callbacks.filter((e) => e.event === "on_chat_model_start")
    assert.strictEqual(starts.length, 2)
    for (const [i, start] of starts.entries()) {
      const mine = callbacks.filter((e) => e.run_id === start.run_id)
      assert.deepStrictEqual(
        [...new Set(mine.map((e) => e.event))],
        ["on_chat_model_start", "on_chat_model_stream", "on_chat_model_end"]
      )
      const node = callbacks.find((e) => e.event === "on_chain_start" && e.run_id === start.parent_ids[1])
      assert.strictEqual(node?.name, "model")
      assert.strictEqual(node?.metadata.langgraph_node, "model")
      assert.deepStrictEqual(start.parent_ids, [runId, node!.run_id])
      assert.notStrictEqual(start.run_id, runId)
      const chunks = mine.filter((e) => e.event === "on_chat_model_stream").map((e) => e.data.chunk)
      assert.isAbove(chunks.length, 2)
      for (const chunk of chunks) {
        assert.strictEqual(chunk.id, ais[i].id)
        assert.strictEqual(chunk.type, "ai")
      }
      const end = mine.at(-1)!
      assert.strictEqual(chunks.map((c) => c.content).join(""), end.data.output.content)
      assert.strictEqual(end.data.output.id, ais[i].id)
      assert.strictEqual(end.data.output.type, "ai")
    }
    assert.strictEqual(starts[1]!.data.input.messages[0].at(-1).type, "tool")
    const firstEnd = callbacks.find((e) => e.event === "on_chat_model_end")!
    assert.strictEqual(firstEnd.data.output.content, CALLING)
    const lastEnd = callbacks.findLast((e) => e.event === "on_chat_model_end")!
    assert.strictEqual(lastEnd.data.output.content, ANSWER)
    // the tool call arrives whole in the first call's last chunk
    const lastChunk = callbacks.filter((e) => e.event === "on_chat_model_stream" && e.run_id === starts[0]!.run_id)
      .at(-1)!.data.chunk
    assert.strictEqual(lastChunk.tool_call_chunks[0].name, "write_file")
    assert.deepStrictEqual(JSON.parse(lastChunk.tool_call_chunks[0].args), ARGS)

    // the tool call: input its args, output its ToolMessage, one run id, under the tools node
    const toolStart = callbacks.find((e) => e.event === "on_tool_start")!
    const toolEnd = callbacks.find((e) => e.event === "on_tool_end")!
    assert.deepStrictEqual(toolStart.data.input, ARGS)
    assert.strictEqual(toolEnd.run_id, toolStart.run_id)
    assert.strictEqual(toolEnd.data.output.type, "tool")
    assert.strictEqual(toolEnd.data.output.tool_call_id, ais[0].tool_calls[0].id)
    const toolMessage = state.values.messages.find((m) => m.type === "tool")
    assert.strictEqual(toolEnd.data.output.id, toolMessage.id)
    assert.strictEqual(toolEnd.data.output.content, toolMessage.content)
    const tools = callbacks.find((e) => e.event === "on_chain_start" && e.name === "tools")!
    assert.deepStrictEqual(toolStart.parent_ids, [runId, tools.run_id])
    assert.strictEqual(toolStart.metadata.langgraph_node, "tools")

    // the graph's output: the thread's values
    assert.deepStrictEqual(
      graphEnd.data.output.messages.map((m: any) => m.id),
      state.values.messages.map((m) => m.id)
    )
  })

  it("in the shapes of a stream recorded from LangGraph's server (fixture): fields, chunk fields, order", async () => {
    const recorded = JSON.parse(
      Fs.readFileSync(new URL("../../fixtures/langgraph-api/events-stream.json", import.meta.url), "utf8")
    ) as { order: Array<string>; shapes: Array<Record<string, any>> }
    // LangGraph's createAgent names its model node `model_request` and the model `ChatOpenAI`; middleware nodes
    // (and their RunnableLambdas) have no counterpart in Antler
    const theirs = (name: string) => name === "model_request" ? "model" : name === "ChatOpenAI" ? "scripted" : name
    const middleware = (name: string) => name.includes("Middleware") || name === "RunnableLambda"
    const thread = await client.threads.create()
    const events = await collect(client.runs.stream(thread.thread_id, "lead_agent", {
      input: human("please save the list"),
      streamMode: "events"
    }))
    const expected: Array<string> = []
    for (const entry of recorded.order) {
      const [kind, name] = entry.split(":") as [string, string]
      if (middleware(name)) continue
      const mine = kind === "on_chat_model_stream" ? "on_chat_model_stream*" : `${kind}:${theirs(name)}`
      if (mine !== expected.at(-1) || mine !== "on_chat_model_stream*") expected.push(mine)
    }
    assert.deepStrictEqual(kinds(events), expected)
    const ours = events.filter((e) => e.event === "events").map((e) => e.data)
    for (const shape of recorded.shapes.filter((s) => !middleware(s.name))) {
      const mine = ours.find((e) => e.event === shape.event && e.name === theirs(shape.name))
      assert.isDefined(mine, `${shape.event} ${shape.name}`)
      // the same fields, and LangChain's `parent_ids` (which LangGraph's JavaScript server leaves out)
      assert.sameMembers(Object.keys(mine), [...shape.keys, "parent_ids"], shape.event)
      if (shape.chunk !== undefined) {
        // (every chunk has the fields of LangGraph's first ones; the last has usage too, as LangGraph's last)
        for (const e of ours.filter((o) => o.event === "on_chat_model_stream")) {
          for (const key of shape.chunk) assert.property(e.data.chunk, key)
          assert.strictEqual(e.data.chunk.type, shape.chunkType)
        }
      }
      if (shape.outputType !== undefined) assert.strictEqual(mine.data.output.type, shape.outputType)
      for (const key of ["thread_id", "run_id", "graph_id", "assistant_id", "run_attempt"]) {
        assert.property(mine.metadata, key)
      }
      if (shape.metadata.includes("langgraph_node")) assert.property(mine.metadata, "langgraph_node")
      if (shape.metadata.includes("ls_model_name")) assert.strictEqual(mine.metadata.ls_model_name, "scripted")
    }
  })

  it("beside values and messages-tuple: each under its own event name, chunks of the same message ids", async () => {
    const thread = await client.threads.create()
    const events = await collect(client.runs.stream(thread.thread_id, "lead_agent", {
      input: human("hello"),
      streamMode: ["values", "messages-tuple", "events"]
    }))
    assert.deepStrictEqual(
      [...new Set(events.map((e) => e.event))].sort(),
      ["end", "events", "messages", "metadata", "values"]
    )
    assert.deepStrictEqual(kinds(events), [
      "on_chain_start:LangGraph",
      ...MODEL_CALL,
      "on_chat_model_end:scripted",
      "on_chain_end:model",
      "on_chain_end:LangGraph"
    ])
    const streamed = events.filter((e) => e.event === "events" && e.data.event === "on_chat_model_stream")
    // (the run's input and context messages go as tuples too)
    const tuples = events.filter((e) =>
      e.event === "messages" && ["AIMessageChunk", "ai"].includes(e.data[0].type)
    )
    assert.deepStrictEqual(
      [...new Set(streamed.map((e) => e.data.data.chunk.id))],
      [...new Set(tuples.map((e) => e.data[0].id))]
    )
    assert.strictEqual(streamed.map((e) => e.data.data.chunk.content).join(""), ANSWER)
    // the last values (the answer in it) come before the graph's end, which gives them too
    const lastValues = events.findLastIndex((e) => e.event === "values")
    const graphEnd = events.findIndex((e) =>
      e.event === "events" && e.data.event === "on_chain_end" && e.data.name === "LangGraph"
    )
    assert.isBelow(lastValues, graphEnd)
    assert.strictEqual(events[lastValues]!.data.messages.at(-1).content, ANSWER)
    assert.deepStrictEqual(events[graphEnd]!.data.data.output.messages, events[lastValues]!.data.messages)
  })

  it("reconnecting with Last-Event-ID gets the rest of the events, none twice; joins filter them by mode", async () => {
    const thread = await client.threads.create()
    const response = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: human("please save the list"),
        stream_mode: ["events"],
        on_disconnect: "continue"
      })
    })
    // cut off after the first model call's third chunk
    let chunks = 0
    const first = await Support.readSse(response, (e) =>
      e.event === "events" && (e.data as any).event === "on_chat_model_stream" && ++chunks === 3
    )
    const runId = (first.events[0]!.data as any).run_id as string
    const cursor = first.events.at(-1)!.id!
    const rest = await collect(
      client.runs.joinStream(thread.thread_id, runId, { lastEventId: cursor, streamMode: "events" })
    )
    assert.strictEqual(Number(rest.find((e) => e.id !== undefined)!.id), Number(cursor) + 1)
    const all = [...first.events, ...rest]
    assert.deepStrictEqual(kinds(all), TOOL_STEP_AND_ANSWER)
    const ids = all.filter((e) => e.id !== undefined).map((e) => Number(e.id))
    assert.deepStrictEqual(ids, [...ids].sort((a, b) => a - b))
    assert.strictEqual(new Set(ids).size, ids.length)

    // a join asking for another mode gets none of them; one asking for events, all of them again
    const values = await collect(client.runs.joinStream(thread.thread_id, runId, { streamMode: "values" }))
    assert.notInclude(values.map((e) => e.event), "events")
    const again = await collect(client.runs.joinStream(thread.thread_id, runId, { streamMode: ["events"] }))
    assert.deepStrictEqual(kinds(again), TOOL_STEP_AND_ANSWER)
  })

  it("secrets are redacted in the events as in every other mode, one split across deltas too", async () => {
    const thread = await client.threads.create()
    const response = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", input: human("leak it"), stream_mode: "events" })
    })
    const { events } = await Support.readSse(response)
    const callbacks = events.filter((e) => e.event === "events").map((e) => e.data as any)
    const chunks = callbacks.filter((e) => e.event === "on_chat_model_stream").map((e) => e.data.chunk.content)
    assert.isAbove(chunks.length, 5)
    const streamed = chunks.join("")
    assert.include(streamed, "The key is [redacted]")
    assert.notInclude(streamed, SECRET.slice(0, 12))
    const end = callbacks.find((e) => e.event === "on_chat_model_end")
    assert.strictEqual(end.data.output.content, streamed)
    assert.notInclude(JSON.stringify(events), SECRET)
  })
})

describe("events of a run's events (the projector alone)", () => {
  const project = (
    batches: ReadonlyArray<ReadonlyArray<RunEvent>>,
    modes: ReadonlyArray<"events" | "values" | "messages-tuple" | "custom"> = ["events"],
    input: ReadonlyArray<M.Message> = []
  ) => {
    const projector = Projection.makeProjector({
      runId: "r",
      threadId: "t",
      modes,
      initial: TS.empty,
      modelName: "m",
      input: { messages: input }
    })
    return batches.flatMap((batch) => projector.push(batch))
  }
  const start: RunEvent = { type: "run_start", thread_id: "t", run_id: "r" }
  const calls = [{ id: "c1", name: "ls", args: { path: "/a" } }, { id: "c2", name: "cat", args: { path: "/b" } }]

  it("a message written whole is a model call of one chunk; parallel calls end in their answers' order", () => {
    const out = project([
      [start],
      [{ type: "message", message: M.ai("", { id: "a", tool_calls: calls }) }],
      [{ type: "message", message: M.tool("b", "c2", { id: "t2", name: "cat" }) }],
      [{ type: "message", message: M.tool("a", "c1", { id: "t1", name: "ls" }) }],
      [{ type: "run_end", status: "success", stop_reason: "completed" }]
    ])
    const data = out.filter((o) => o.event === "events").map((o) => o.data as any)
    assert.deepStrictEqual(data.map((d) => `${d.event}:${d.name}`), [
      "on_chain_start:LangGraph",
      "on_chain_start:model",
      "on_chat_model_start:m",
      "on_chat_model_stream:m",
      "on_chat_model_end:m",
      "on_chain_end:model",
      "on_chain_start:tools",
      "on_tool_start:ls",
      "on_tool_start:cat",
      "on_tool_end:cat",
      "on_tool_end:ls",
      "on_chain_end:tools",
      "on_chain_end:LangGraph"
    ])
    assert.deepStrictEqual(data[3].data.chunk.tool_call_chunks.map((c: any) => c.id), ["c1", "c2"])
    assert.strictEqual(data[9].run_id, data[8].run_id)
    assert.strictEqual(data[10].run_id, data[7].run_id)
    assert.deepStrictEqual(data[11].data.output.messages.map((m: any) => m.id), ["t2", "t1"])
  })

  it("reasoning goes as additional_kwargs.reasoning_content; a message written again is not a second call", () => {
    const out = project([
      [start],
      [{ type: "token", message_id: "a", reasoning: "hmm" }, { type: "token", message_id: "a", text: "Hi" }],
      [{ type: "message", message: M.ai("Hi", { id: "a" }) }],
      [{ type: "message", message: M.ai("Hi!", { id: "a" }) }]
    ])
    const data = out.map((o) => o.data as any)
    const chunks = data.filter((d) => d.event === "on_chat_model_stream").map((d) => d.data.chunk)
    assert.deepStrictEqual(chunks[0].additional_kwargs, { reasoning_content: "hmm" })
    assert.strictEqual(chunks.map((c: any) => c.content).join(""), "Hi")
    assert.strictEqual(data.filter((d) => d.event === "on_chat_model_start").length, 1)
    assert.strictEqual(data.filter((d) => d.event === "on_chat_model_end").length, 1)
  })

  it("a failed run has no end of the graph, its error follows; without the mode, no events at all", () => {
    const batches: ReadonlyArray<ReadonlyArray<RunEvent>> = [
      [start],
      [{ type: "token", message_id: "a", text: "Hi" }],
      [{ type: "run_end", status: "error", stop_reason: "error", error: { name: "ModelError", message: "boom" } }]
    ]
    const out = project(batches)
    assert.deepStrictEqual(
      out.map((o) => o.event === "events" ? (o.data as any).event : o.event),
      ["metadata", "on_chain_start", "on_chain_start", "on_chat_model_start", "on_chat_model_stream", "error"]
    )
    assert.notInclude(project(batches, ["values", "messages-tuple"]).map((o) => o.event), "events")
  })

  it("the run's input is the graph's; an AI message in it (a client's history) is no model call", () => {
    const given = [M.human("again", { id: "h" }), M.ai("Earlier", { id: "old", tool_calls: [calls[0]!] })]
    const out = project([
      [start, ...given.map((message): RunEvent => ({ type: "message", message }))],
      [{ type: "message", message: M.ai("Now", { id: "a" }) }]
    ], ["events"], given)
    const data = out.filter((o) => o.event === "events").map((o) => o.data as any)
    assert.deepStrictEqual(data[0].data.input.messages.map((m: any) => m.id), ["h", "old"])
    assert.deepStrictEqual(
      data.filter((d) => d.event === "on_chat_model_end").map((d) => d.data.output.id),
      ["a"]
    )
    assert.notInclude(data.map((d) => d.event), "on_tool_start")
  })

  // DeerFlow test_custom_events.py::test_real_task_tool_events_reach_astream_events: every custom event DeerFlow
  // emits is dispatched to the callbacks as well, so `astream_events` sees the task's events under its tool call
  it("each custom event is also on_custom_event, named by its type: under the tool call it names, or the step", () => {
    const task = { id: "task-call-1", name: "task", args: { description: "validate streaming", prompt: "go" } }
    const custom = (name: string, data: unknown): RunEvent => ({ type: "custom", name, data })
    const out = project([
      [start, custom("memory_injected", { content_sha256: "abc" })],
      [{ type: "token", message_id: "a", text: "Hi" }, custom("llm_retry", { attempt: 1 })],
      [{ type: "message", message: M.ai("Hi", { id: "a", tool_calls: [task] }) }],
      [custom("task_started", { task_id: "task-call-1", description: "validate streaming" })],
      [custom("task_completed", { task_id: "task-call-1", result: "delegated result" })],
      [{ type: "message", message: M.tool("delegated result", "task-call-1", { id: "t1", name: "task" }) }],
      [custom("note", "plain text")]
    ], ["events", "custom"])
    const events = out.filter((o) => o.event === "events").map((o) => o.data as any)
    const customs = events.filter((d) => d.event === "on_custom_event")
    assert.deepStrictEqual(
      customs.map((d) => d.name),
      ["memory_injected", "llm_retry", "task_started", "task_completed", "note"]
    )
    // the data is the payload the custom mode sends
    assert.deepStrictEqual(
      customs.map((d) => d.data),
      out.filter((o) => o.event === "custom").map((o) => o.data)
    )
    assert.deepStrictEqual(customs[2].data, {
      type: "task_started",
      task_id: "task-call-1",
      description: "validate streaming"
    })
    assert.strictEqual(customs[3].data.result, "delegated result")
    // under the task's tool call, as DeerFlow's task tool dispatches them
    const toolStart = events.find((d) => d.event === "on_tool_start")
    const tools = events.find((d) => d.event === "on_chain_start" && d.name === "tools")
    for (const d of customs.slice(2, 4)) {
      assert.strictEqual(d.run_id, toolStart.run_id)
      assert.deepStrictEqual(d.parent_ids, ["r", tools.run_id])
      assert.strictEqual(d.metadata.langgraph_node, "tools")
    }
    // a retry under the model call's node; what comes outside any step under the graph
    const node = events.find((d) => d.event === "on_chain_start" && d.name === "model")
    assert.deepStrictEqual([customs[1].run_id, customs[1].parent_ids], [node.run_id, ["r"]])
    assert.deepStrictEqual([customs[0].run_id, customs[0].parent_ids], ["r", []])
    assert.deepStrictEqual([customs[4].run_id, customs[4].data], ["r", { type: "note", data: "plain text" }])
    // without the events mode, the custom mode alone
    const alone = project([[start, custom("llm_retry", { attempt: 1 })]], ["custom"])
    assert.deepStrictEqual(alone.map((o) => o.event), ["metadata", "custom"])
  })

  it("a token's chunk kept in parts (for the replay buffer) reads back as the chunk it is", () => {
    const out = project([[start], [{ type: "token", message_id: "a", text: "Hello \"you\"" }]])
    const chunk = out.at(-1)!
    const parts = chunk.spliced!
    assert.isDefined(parts)
    assert.deepStrictEqual(JSON.parse(parts.head + parts.body + parts.tail), chunk.data)
    // the same fields, in the same order, as a chunk sent whole (a reasoning delta's)
    const whole = project([[start], [{ type: "token", message_id: "a", reasoning: "x" }]]).at(-1)!
    assert.isUndefined(whole.spliced)
    assert.deepStrictEqual(Object.keys(chunk.data as any), Object.keys(whole.data as any))
    assert.deepStrictEqual(Object.keys((chunk.data as any).data.chunk), Object.keys((whole.data as any).data.chunk))
    assert.strictEqual((chunk.data as any).data.chunk.content, "Hello \"you\"")
  })
})
