/**
 * The gateway driven by the real `@langchain/langgraph-sdk` Client (what DeerFlow's frontend and LangGraph apps
 * use): threads, streamed runs in values + messages-tuple + custom modes reassembled into the answer, a client
 * that disconnects mid-run and rejoins with its last event id, cancellation, a clarification answered, state and
 * history. The model is SCRIPTED (a loopback Chat Completions server behind the real `openai` client).
 */
import { Client } from "@langchain/langgraph-sdk"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { until as untilPolled } from "../../support/poll.js"

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

/** Polls until `check` holds (for states reached by another party: a run getting under way). */
const until = (check: () => Promise<boolean>, what: string) => untilPolled(check, what, 600, 25)

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
    assert.deepStrictEqual(Support.visibleTypes(last.messages), ["human", "ai", "tool", "ai"])
    assert.strictEqual(Support.visible(last.messages)[3].content, ANSWER)
    // the only hidden message is the date reminder the first turn of a thread gets (the UI does not show it)
    const hidden = last.messages.filter((m: any) => m.additional_kwargs?.hide_from_ui === true)
    assert.deepStrictEqual(hidden.map((m: any) => m.type), ["system"])
    assert.match(hidden[0].content, /<current_date>\d{4}-\d{2}-\d{2}, \w+day<\/current_date>/)
    assert.notProperty(last, "thread_data")
    // the run is recorded as a success
    const run = await client.runs.get(thread.thread_id, created!.run_id)
    assert.strictEqual(run.status, "success")
    const state = await client.threads.getState(thread.thread_id)
    assert.deepStrictEqual(Support.visibleTypes((state.values as any).messages), ["human", "ai", "tool", "ai"])
  })
})

describe("reconnecting, cancelling, clarifying, reading state and history", () => {
  it("a client that disconnects mid-run rejoins with its last event id: nothing lost, nothing repeated", async () => {
    const thread = await client.threads.create()
    const controller = new AbortController()
    let runId = ""
    const first: Array<{ event: string; data: any; id?: string }> = []
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "Count slowly" }] },
      streamMode: ["values", "messages-tuple"],
      onDisconnect: "continue",
      signal: controller.signal,
      onRunCreated: (meta) => (runId = meta.run_id)
    })) {
      first.push(part as any)
      if (first.filter((p) => p.event === "messages").length >= 8) {
        controller.abort()
        break
      }
    }
    const lastEventId = first[first.length - 1]!.id!
    const rest: Array<{ event: string; data: any; id?: string }> = []
    for await (const part of client.runs.joinStream(thread.thread_id, runId, { lastEventId })) rest.push(part as any)

    const all = [...first, ...rest]
    const ids = all.map((p) => Number(p.id))
    // every event once, in order: ids 1, 2, 3, ... across the two connections
    assert.deepStrictEqual(ids, ids.map((_, i) => i + 1))
    assert.strictEqual(rest[rest.length - 1]!.event, "end")
    const texts = [...reassemble(all.filter((p) => p.event === "messages").map((p) => p.data)).values()]
    assert.include(texts, LONG)
    assert.strictEqual((await client.runs.get(thread.thread_id, runId)).status, "success")
  })

  it("a page reloaded mid-run rejoins as useStream does (Last-Event-ID -1): from the first event", async () => {
    // (DeerFlow's app keeps the run id in sessionStorage and, on reload, joins with the SDK's `lastEventId ??= "-1"`:
    // DeerFlow's gateway replays from the earliest kept event, where Antler answered 400)
    const thread = await client.threads.create()
    const run = await client.runs.create(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "Count slowly, please" }] },
      streamMode: ["values", "messages-tuple"]
    })
    await until(async () => (await client.runs.get(thread.thread_id, run.run_id)).status === "running", "running")
    const parts: Array<{ event: string; data: any; id?: string }> = []
    for await (const part of client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1" })) {
      parts.push(part as any)
    }
    assert.strictEqual(parts[0]?.event, "metadata", JSON.stringify(parts[0]))
    assert.deepStrictEqual(parts.map((p) => Number(p.id)), parts.map((_, i) => i + 1))
    assert.strictEqual(parts.at(-1)!.event, "end")
    const texts = [...reassemble(parts.filter((p) => p.event === "messages").map((p) => p.data)).values()]
    assert.include(texts, LONG)
    // a run that has ended: the thread's values once, as any join without a cursor
    const again: Array<{ event: string; data: any }> = []
    for await (const part of client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1" })) {
      again.push(part as any)
    }
    assert.strictEqual(again.at(-1)!.event, "end")
    assert.notInclude(again.map((p) => p.event), "error")
  })

  it("a joiner whose cursor fell out of the replay window gets the gap event and reloads state", async () => {
    // a gateway that keeps only the last 20 events of a run (the run streams about 65)
    const small = await Support.start({
      script,
      server: { delayMs: 15 },
      config: { gateway: { replay_buffer_events: 20, heartbeat_seconds: 1 } }
    })
    try {
      const smallClient = new Client({ apiUrl: small.url, apiKey: null })
      const thread = await smallClient.threads.create()
      let runId = ""
      const seen: Array<any> = []
      for await (const part of smallClient.runs.stream(thread.thread_id, "lead_agent", {
        input: { messages: [{ type: "human", content: "Say it slowly" }] },
        streamMode: ["messages-tuple"],
        onRunCreated: (meta) => (runId = meta.run_id)
      })) seen.push(part)
      const latest = Number(seen.at(-1).id)
      assert.strictEqual(seen.at(-1).event, "end")
      assert.deepStrictEqual(seen.map((p) => Number(p.id)), seen.map((_, i) => i + 1))
      // a cursor inside the window replays what follows it
      const replay: Array<any> = []
      const cursor = { lastEventId: String(latest - 2) }
      for await (const part of smallClient.runs.joinStream(thread.thread_id, runId, cursor)) {
        replay.push(part)
      }
      assert.deepStrictEqual(replay.map((p) => Number(p.id)), [latest - 1, latest])
      // one before it gets the gap, and the stream closes
      const response = await fetch(`${small.url}/threads/${thread.thread_id}/runs/${runId}/stream`, {
        headers: { "Last-Event-ID": "2" }
      })
      const { events } = await Support.readSse(response)
      assert.deepStrictEqual(events.map((e) => e.event), ["gap"])
      const gap = events[0]!.data as Record<string, string>
      assert.deepStrictEqual({ ...gap, earliest_available_event_id: "" }, {
        code: "stream_replay_gap",
        run_id: runId,
        requested_event_id: "2",
        earliest_available_event_id: "",
        latest_available_event_id: String(latest),
        recovery: "reload_durable_state"
      })
      const earliest = Number(gap.earliest_available_event_id)
      assert.isTrue(earliest > 3 && earliest <= latest - 19, `earliest ${earliest} of ${latest}`)
      // a cursor the run never reached is no cursor of it
      const bogus = await fetch(`${small.url}/threads/${thread.thread_id}/runs/${runId}/stream`, {
        headers: { "Last-Event-ID": String(latest + 100) }
      })
      assert.deepStrictEqual((await Support.readSse(bogus)).events.map((e) => e.event), ["gap"])
    } finally {
      await small.stop()
    }
  })

  it("cancel: interrupt keeps the completed steps and the streamed answer, rollback restores; disconnecting cancels", async () => {
    const thread = await client.threads.create()
    await client.runs.wait(thread.thread_id, "lead_agent", { input: { messages: [{ type: "human", content: "hello" }] } })
    const before = (await client.threads.getState(thread.thread_id)).values as any

    const hanging = await client.runs.create(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "hang on" }] }
    })
    await until(async () => (await client.runs.get(thread.thread_id, hanging.run_id)).status === "running", "running")
    // a second run is refused while this one runs (multitask_strategy reject, the default)
    const refused = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "x" }] } })
    })
    assert.strictEqual(refused.status, 409)
    // while the model is silent, the stream stays alive with heartbeat comments (every second in this gateway)
    const joined = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/${hanging.run_id}/stream`)
    assert.strictEqual(joined.headers.get("content-type"), "text/event-stream")
    const reader = joined.body!.pipeThrough(new TextDecoderStream()).getReader()
    let raw = ""
    while (!raw.includes(": heartbeat\n\n")) raw += (await reader.read()).value ?? ""
    await reader.cancel()
    assert.match(raw, /^event: metadata\ndata: \{[^\n]*\}\nid: 1\n\n/)
    await client.runs.cancel(thread.thread_id, hanging.run_id, true, "interrupt")
    assert.strictEqual((await client.runs.get(thread.thread_id, hanging.run_id)).status, "interrupted")
    const interrupted = (await client.threads.getState(thread.thread_id)).values as any
    // the question, and the start of the answer the model streamed before the stop
    assert.strictEqual(interrupted.messages.length, before.messages.length + 2)
    assert.strictEqual(interrupted.messages.at(-2).content, "hang on")
    assert.deepInclude(interrupted.messages.at(-1), { type: "ai", content: "Thinking about it", tool_calls: [] })

    const rolled = await client.runs.create(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "hang again" }] }
    })
    await until(async () => (await client.runs.get(thread.thread_id, rolled.run_id)).status === "running", "running")
    await client.runs.cancel(thread.thread_id, rolled.run_id, true, "rollback")
    const record = await client.runs.get(thread.thread_id, rolled.run_id) as any
    assert.strictEqual(record.status, "error")
    assert.strictEqual(record.error, "Rolled back by user")
    assert.deepStrictEqual((await client.threads.getState(thread.thread_id)).values, interrupted)

    // a new run with multitask_strategy "interrupt" stops the active one and goes ahead
    const old = await client.runs.create(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "hang once more" }] }
    })
    await until(async () => (await client.runs.get(thread.thread_id, old.run_id)).status === "running", "running")
    const result = await client.runs.wait(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "over" }] },
      multitaskStrategy: "interrupt"
    }) as any
    assert.strictEqual((await client.runs.get(thread.thread_id, old.run_id)).status, "interrupted")
    assert.match(result.messages.at(-1).content, /^You said: [\s\S]*over/)

    // on_disconnect "cancel" (the default): a stream client going away cancels its run
    const controller = new AbortController()
    let runId = ""
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "hang forever" }] },
      streamMode: ["messages-tuple"],
      signal: controller.signal,
      onRunCreated: (meta) => (runId = meta.run_id)
    })) {
      if ((part as any).event === "messages") {
        controller.abort()
        break
      }
    }
    await until(async () => (await client.runs.get(thread.thread_id, runId)).status === "interrupted", "cancelled")
    const runs = await client.runs.list(thread.thread_id, { limit: 10 })
    assert.deepStrictEqual(
      runs.map((r) => r.status),
      ["interrupted", "success", "interrupted", "error", "interrupted", "success"]
    )
  })

  it("a clarification question ends the run; the next message answers it and the run goes on", async () => {
    const thread = await client.threads.create()
    const asked = await client.runs.wait(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "Which city should I visit?" }] }
    }) as any
    const question = asked.messages.at(-1)
    assert.strictEqual(question.type, "tool")
    assert.strictEqual(question.name, "ask_clarification")
    assert.deepStrictEqual(question.artifact.human_input.options.map((o: any) => o.label), ["Paris", "Rome"])
    const runs = await client.runs.list(thread.thread_id)
    assert.strictEqual(runs[0]!.status, "success")
    // the answer, as a LangGraph resume command (a plain human message works too)
    const answered = await client.runs.wait(thread.thread_id, "lead_agent", { command: { resume: "2" } }) as any
    const answer = answered.messages.at(-2)
    assert.strictEqual(answer.type, "human")
    assert.strictEqual(answer.content, "Rome")
    assert.strictEqual(answer.additional_kwargs.human_input_response.option_id !== undefined, true)
    assert.strictEqual(answered.messages.at(-1).content, "Rome it is: the Colosseum opens at 9.")
  })

  it("state and history: each checkpoint's state, newest first, by id; state updates and metadata patches", async () => {
    const thread = await client.threads.create({ metadata: { project: "trip" } })
    await client.runs.wait(thread.thread_id, "lead_agent", { input: { messages: [{ type: "human", content: "one" }] } })
    await client.runs.wait(thread.thread_id, "lead_agent", { input: { messages: [{ type: "human", content: "two" }] } })
    const history = await client.threads.getHistory(thread.thread_id, { limit: 100 })
    const counts = history.map((s) => Support.visible((s.values as any).messages).length)
    // newest first, each state at most as long as the one after it
    assert.isTrue(counts.every((n, i) => i === 0 || n <= counts[i - 1]!))
    assert.strictEqual(counts[0], 4)
    const current = await client.threads.getState(thread.thread_id)
    // (the same state; history's newest gives its answers their run and the run's last its turn_duration)
    assert.deepStrictEqual(Support.unstamped(history[0]!.values), current.values)
    assert.strictEqual(history[0]!.checkpoint.checkpoint_id, current.checkpoint.checkpoint_id)
    const older = history[history.length - 1]!
    const fetched = await client.threads.getState(thread.thread_id, older.checkpoint.checkpoint_id!)
    assert.deepStrictEqual(fetched.values, older.values)
    assert.strictEqual(history[1]!.parent_checkpoint?.checkpoint_id, history[2]!.checkpoint.checkpoint_id)

    await client.threads.updateState(thread.thread_id, { values: { title: "Trip planning" } })
    assert.strictEqual(((await client.threads.getState(thread.thread_id)).values as any).title, "Trip planning")
    const bad = await fetch(`${gateway.url}/threads/${thread.thread_id}/state`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ values: { todos: "not a list" } })
    })
    assert.strictEqual(bad.status, 422)
    assert.include(((await bad.json()) as any).detail, "todos")

    await client.threads.update(thread.thread_id, { metadata: { stage: "done" } })
    const found = await client.threads.search({ metadata: { project: "trip", stage: "done" } })
    assert.deepStrictEqual(found.map((t) => t.thread_id), [thread.thread_id])
    assert.strictEqual((found[0]!.values as any).title, "Trip planning")
    // metadata filters match as LangGraph's (jsonb containment): nested objects in any key order, in part
    const owner = { team: "ops", name: "ana" }
    await client.threads.update(thread.thread_id, { metadata: { owner, tags: ["a", "b"] } })
    const search = (metadata: Record<string, unknown>) =>
      client.threads.search({ metadata }).then((all) => all.map((t) => t.thread_id))
    assert.deepStrictEqual(await search({ owner: { name: "ana", team: "ops" } }), [thread.thread_id])
    assert.deepStrictEqual(await search({ owner: { team: "ops" }, tags: ["b"] }), [thread.thread_id])
    assert.deepStrictEqual(await search({ owner: { team: "dev" } }), [])
    assert.deepStrictEqual(await search({ tags: ["c"] }), [])
    assert.strictEqual(await client.threads.count({ metadata: { owner: { name: "ana" } } }), 1)
    await client.threads.delete(thread.thread_id)
    const gone = await fetch(`${gateway.url}/threads/${thread.thread_id}`)
    assert.strictEqual(gone.status, 404)
  })

  it("stateless runs, assistants, models, and bodies that are refused with what was wrong", async () => {
    const out = await client.runs.wait(null, "lead_agent", {
      input: { messages: [{ role: "user", content: "stateless" }] }
    }) as any
    assert.deepStrictEqual(Support.visibleTypes(out.messages), ["human", "ai"])
    assert.match(Support.visible(out.messages)[1].content, /stateless/)
    // the stateless thread is gone
    assert.deepStrictEqual(await client.threads.search({ metadata: {}, limit: 1000 }).then((all) =>
      all.filter((t) => (t.values as any)?.title === "stateless")), [])
    const assistants = await client.assistants.search()
    assert.deepStrictEqual(assistants.map((a) => a.assistant_id), ["lead_agent"])
    const models = (await (await fetch(`${gateway.url}/api/models`)).json()) as any
    assert.deepStrictEqual(models.models.map((m: any) => m.name), ["scripted"])
    assert.notProperty(models.models[0], "api_key")
    assert.notProperty(models.models[0], "base_url")
    const skills = (await (await fetch(`${gateway.url}/api/skills`)).json()) as any
    assert.deepStrictEqual(skills, { skills: [] })
    const thread = await client.threads.create()
    const unknownModel = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", context: { model_name: "gpt-nope" } })
    })
    assert.strictEqual(unknownModel.status, 400)
    assert.include(((await unknownModel.json()) as any).detail, "gpt-nope")
    const badMode = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "lead_agent", stream_mode: ["values", "bogus"] })
    })
    assert.strictEqual(badMode.status, 422)
    assert.include(((await badMode.json()) as any).detail, "stream_mode")
    const notJson = await fetch(`${gateway.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{nope"
    })
    assert.strictEqual(notJson.status, 400)
    assert.strictEqual(notJson.headers.get("content-type"), "application/problem+json")
  })

  it("the rest of the client: assistants (custom agents too), a thread by id, a background run joined, updates", async () => {
    // a custom agent is a directory of the data directory's agents with its config.yaml; a directory without
    // one is not an agent
    Fs.mkdirSync(Path.join(gateway.home, "agents", "trip-planner"), { recursive: true })
    Fs.writeFileSync(Path.join(gateway.home, "agents", "trip-planner", "config.yaml"), "name: trip-planner\n")
    Fs.mkdirSync(Path.join(gateway.home, "agents", "half-made"), { recursive: true })
    const assistants = await client.assistants.search()
    assert.deepStrictEqual(assistants.map((a) => a.assistant_id), ["lead_agent", "trip-planner"])
    const planner = await client.assistants.get("trip-planner")
    assert.deepStrictEqual(planner.context, { agent_name: "trip-planner" })
    const graph = await client.assistants.getGraph("lead_agent") as any
    assert.includeMembers(graph.nodes.map((n: any) => n.id), ["model", "tools"])
    assert.strictEqual((await client.assistants.getSchemas("lead_agent")).graph_id, "lead_agent")
    const missing = await fetch(`${gateway.url}/assistants/nobody`)
    assert.strictEqual(missing.status, 404)

    const thread = await client.threads.create({ metadata: { kind: "join" } })
    assert.deepStrictEqual((await client.threads.get(thread.thread_id)).metadata, { kind: "join" })
    // a background run on the custom agent, then joined: the join answers with the thread's final values
    const run = await client.runs.create(thread.thread_id, "trip-planner", {
      input: { messages: [{ type: "human", content: "Make a packing list for Oslo" }] }
    })
    assert.strictEqual(run.assistant_id, "trip-planner")
    const joined = await client.runs.join(thread.thread_id, run.run_id) as any
    assert.strictEqual(Support.visible(joined.messages).at(-1).content, ANSWER)
    assert.strictEqual((await client.runs.get(thread.thread_id, run.run_id)).status, "success")
    assert.strictEqual((await client.threads.get(thread.thread_id)).status, "idle")

    // updates mode: one update per step, keyed by what made it (the model, the tools)
    const parts: Array<{ event: string; data: any }> = []
    for await (const part of client.runs.stream(thread.thread_id, "lead_agent", {
      input: { messages: [{ type: "human", content: "Say hello" }] },
      streamMode: "updates"
    })) parts.push(part as any)
    assert.deepStrictEqual([...new Set(parts.map((p) => p.event))], ["metadata", "updates", "end"])
    const updates = parts.filter((p) => p.event === "updates").map((p) => p.data)
    const written = updates.flatMap((u) => Object.values(u).flatMap((v: any) => v?.messages ?? []))
    assert.isTrue(written.some((m: any) => m.type === "ai" && String(m.content).includes("Say hello")))
  })
})
