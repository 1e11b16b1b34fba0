/**
 * The message stream of a thread over several turns, through the gateway's whole lead chain and the real `openai`
 * client against the scripted server. Mirrors DeerFlow's test_multiturn_message_stream_graph_integration.py (two
 * turns with memory on: the model's second request reasons about the newest user message, given once; the saved
 * thread has no duplicate ids and no `__user__user`), the strict-backend cases of
 * test_system_message_coalescing_middleware.py (one system message, first, in every request; Antler sends the
 * in-history reminders as hidden user messages instead of merging them, docs/deerflow.md), and the usage and
 * `additional_kwargs` a client reads of a message (test_token_usage.py, test_client_message_serialization.py:
 * the embedded client's `messages-tuple`; here the `messages` stream and `/state`), and a provider's safety stop
 * as the app reads it (test_safety_finish_reason_graph_integration.py: the filtered call never runs, the answer
 * says why and keeps the provider's finish reason, the `safety_termination` event names the thread).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const TURN_1 = "what is the capital of france"
const TURN_2 = "tell me the weather of next week in berlin"
const FACT = "User prefers concise answers about travel."
const USAGE = { prompt_tokens: 120, completion_tokens: 30, total_tokens: 150 }

const PARTIAL = "Here is the report:\n# Weekly Politics\n- Meeting time: 2026-05-12"

const script = (body: ChatRequestBody): Turn => {
  const said = JSON.stringify(body.messages)
  const asked = Support.lastUserText(body)
  if (asked.includes("write me a report")) {
    // a provider cutting a response that calls a tool (Moonshot's content_filter), the call's content cut short
    const args = { description: "save", path: "/mnt/user-data/outputs/report.md", content: "# Weekly Politics" }
    return { content: PARTIAL, toolCalls: [{ name: "write_file", arguments: args }], finishReason: "content_filter" }
  }
  if (asked.includes("a sensitive question")) return { content: "", finishReason: "content_filter" }
  if (said.includes("no usage")) return { content: "Answered without usage.", usage: null }
  if (said.includes("zero usage")) {
    return { content: "Answered for free.", usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } }
  }
  return { content: said.includes(TURN_2) ? "ack-2" : "ack-1", usage: USAGE }
}

let gateway: TestGateway
const call = Requests.as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: (url) => ({
      ...Support.baseConfig(url),
      // memory on, as in DeerFlow's test: the dateless <memory> block joins the history on the first turn
      memory: { enabled: true, backend_config: { debounce_seconds: 3600 }, shutdown_flush_timeout_seconds: 0.1 }
    })
  })
  const added = await call("POST", "/api/memory/facts", { content: FACT, category: "preference", confidence: 0.9 })
  assert.strictEqual(added.status, 200, added.text)
})
afterAll(() => gateway?.stop())

const ask = async (threadId: string, text: string, id?: string) => {
  const answer = await call("POST", `/threads/${threadId}/runs/wait`, {
    assistant_id: "lead_agent",
    input: { messages: [{ type: "human", content: text, ...(id !== undefined ? { id } : {}) }] }
  })
  assert.strictEqual(answer.status, 200, answer.text)
}

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((b) => (typeof b?.text === "string" ? b.text : "")).join("\n")
    : ""

const count = (haystack: string, needle: string) => haystack.split(needle).length - 1

describe("two turns on one thread, memory on", () => {
  it("the second request reads the newest message last, once; one system message, first and unchanged", async () => {
    assert.strictEqual((await call("POST", "/threads", { thread_id: "turns" })).status, 200)
    const before = gateway.scripted.requests.length
    // with the ids a client gives its messages (the SDK's useStream does)
    await ask("turns", TURN_1, "u1")
    await ask("turns", TURN_2, "u2")
    const requests = gateway.scripted.requests.slice(before)
    assert.lengthOf(requests, 2)
    for (const request of requests) {
      // a strict backend (vLLM, SGLang, Qwen) takes one system message, at the start
      assert.deepStrictEqual(request.messages.map((m) => m.role).filter((r) => r === "system"), ["system"])
      assert.strictEqual(request.messages[0]!.role, "system")
    }
    // Antler's own: the system prompt is the same on both turns (providers cache it)
    assert.strictEqual(requests[1]!.messages[0]!.content, requests[0]!.messages[0]!.content)

    const second = requests[1]!.messages
    const users = second.filter((m) => m.role === "user").map((m) => textOf(m.content))
    // the newest user message is the last thing the model reads, once; the first turn's is there once too
    assert.include(users.at(-1)!, TURN_2)
    assert.strictEqual(users.filter((u) => u.includes(TURN_2)).length, 1, JSON.stringify(users))
    assert.strictEqual(users.filter((u) => u.includes(TURN_1)).length, 1, JSON.stringify(users))
    assert.strictEqual(second.at(-1)!.role, "user")
    // the memory block of the first turn is kept, not injected again
    const all = JSON.stringify(second)
    assert.strictEqual(count(all, FACT), 1, all)
    // one date reminder a day (a second only if the day changed between the turns)
    const days = new Set([...all.matchAll(/<current_date>([^<]*)<\/current_date>/g)].map((m) => m[1]))
    assert.strictEqual(days.size >= 1 ? count(all, "<current_date>") : -1, days.size, all)
    // the first turn was answered once, and that answer is before the second question
    const answers = second.filter((m) => m.role === "assistant").map((m) => textOf(m.content))
    assert.deepStrictEqual(answers, ["ack-1"])

    const state = (await call("GET", "/threads/turns/state")).json()
    const messages: ReadonlyArray<any> = state.values.messages
    const ids = messages.map((m) => m.id)
    assert.strictEqual(new Set(ids).size, ids.length, JSON.stringify(ids))
    assert.isFalse(ids.some((id) => id.includes("__user__user")), JSON.stringify(ids))
    // the first turn's question was swapped once for its context (the date reminder takes its id), the second
    // (the same day) is kept as sent
    const question = (text: string) => messages.find((m) => m.type === "human" && textOf(m.content) === text)
    assert.strictEqual(question(TURN_1).id, "u1__user")
    assert.strictEqual(question(TURN_2).id, "u2")
    assert.include(ids, "u1__memory")
    // what the user sees: the two turns in order, as typed (the framing the model reads is the request's only)
    const shown = Support.visible(messages).map((m) => [m.type, textOf(m.content)])
    assert.deepStrictEqual(shown, [["human", TURN_1], ["ai", "ack-1"], ["human", TURN_2], ["ai", "ack-2"]])
    assert.strictEqual(messages.filter((m) => textOf(m.content).includes(TURN_2)).length, 1)
  })
})

describe("what a client reads of a message", () => {
  it("an answer has the provider's usage and its attribution, in the last streamed chunk and the state", async () => {
    assert.strictEqual((await call("POST", "/threads", { thread_id: "usage" })).status, 200)
    const response = await fetch(`${gateway.url}/threads/usage/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: {
          messages: [{ type: "human", content: "hello", additional_kwargs: { files: [{ filename: "a.png" }] } }]
        },
        stream_mode: ["messages-tuple"]
      })
    })
    const { events } = await Support.readSse(response)
    const chunks = events.filter((e) => e.event === "messages").map((e) => (e.data as [any, any])[0])
    const withUsage = chunks.filter((c) => c.usage_metadata !== undefined)
    assert.lengthOf(withUsage, 1, JSON.stringify(chunks))
    const usage = { input_tokens: 120, output_tokens: 30, total_tokens: 150 }
    assert.deepInclude(withUsage[0]!.usage_metadata, usage)

    const messages: ReadonlyArray<any> = (await call("GET", "/threads/usage/state")).json().values.messages
    const answer = messages.findLast((m) => m.type === "ai")
    assert.deepInclude(answer.usage_metadata, usage)
    assert.deepInclude(answer.additional_kwargs.token_usage_attribution, {
      version: 1,
      kind: "final_answer",
      shared_attribution: false
    })
    // a human message keeps what the client sent beside its text
    const question = Support.visible(messages).find((m) => m.type === "human")
    assert.deepStrictEqual(question.additional_kwargs.files, [{ filename: "a.png" }])
  })

  it("an answer the provider reported no usage for has none, in the stream and in the state", async () => {
    assert.strictEqual((await call("POST", "/threads", { thread_id: "no-usage" })).status, 200)
    const response = await fetch(`${gateway.url}/threads/no-usage/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "no usage please" }] },
        stream_mode: ["messages-tuple"]
      })
    })
    const { events } = await Support.readSse(response)
    const chunks = events.filter((e) => e.event === "messages").map((e) => (e.data as [any, any])[0])
    assert.isAbove(chunks.length, 0)
    assert.isTrue(chunks.every((c) => c.usage_metadata === undefined), JSON.stringify(chunks))
    const messages: ReadonlyArray<any> = (await call("GET", "/threads/no-usage/state")).json().values.messages
    const answer = messages.findLast((m) => m.type === "ai")
    assert.strictEqual(textOf(answer.content), "Answered without usage.")
    assert.notProperty(answer, "usage_metadata")
  })

  it("a usage of zero tokens is a usage: kept as reported", async () => {
    assert.strictEqual((await call("POST", "/threads", { thread_id: "zero-usage" })).status, 200)
    await ask("zero-usage", "zero usage please")
    const messages: ReadonlyArray<any> = (await call("GET", "/threads/zero-usage/state")).json().values.messages
    const answer = messages.findLast((m) => m.type === "ai")
    assert.deepInclude(answer.usage_metadata, { input_tokens: 0, output_tokens: 0, total_tokens: 0 })
  })
})

describe("a provider's safety stop", () => {
  const stream = async (threadId: string, text: string) => {
    assert.strictEqual((await call("POST", "/threads", { thread_id: threadId })).status, 200)
    const response = await fetch(`${gateway.url}/threads/${threadId}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: text }] },
        stream_mode: ["custom"]
      })
    })
    const { events } = await Support.readSse(response)
    const messages: ReadonlyArray<any> = (await call("GET", `/threads/${threadId}/state`)).json().values.messages
    return { events, answer: messages.findLast((m) => m.type === "ai"), messages }
  }

  it("a filtered call never runs; the answer keeps its text and finish reason, and says why", async () => {
    const { events, answer, messages } = await stream("filtered", "write me a report")
    const outputs = threadPaths(gateway.home, "default", "filtered").outputs
    assert.isFalse(Fs.existsSync(Path.join(outputs, "report.md")))
    assert.isFalse(messages.some((m) => m.type === "tool"))
    assert.deepStrictEqual(answer.tool_calls, [])
    assert.include(textOf(answer.content), "Weekly Politics")
    assert.include(textOf(answer.content), "safety-related signal")
    assert.strictEqual(answer.response_metadata.finish_reason, "content_filter")
    assert.deepInclude(answer.additional_kwargs.safety_termination, {
      detector: "openai_compatible_content_filter",
      reason_field: "finish_reason",
      reason_value: "content_filter",
      suppressed_tool_call_count: 1,
      suppressed_tool_call_names: ["write_file"]
    })
    const custom = events.filter((e) => e.event === "custom").map((e) => e.data as any)
    const safety = custom.filter((d) => d.type === "safety_termination")
    assert.lengthOf(safety, 1, JSON.stringify(custom))
    assert.deepInclude(safety[0], {
      type: "safety_termination",
      detector: "openai_compatible_content_filter",
      reason_field: "finish_reason",
      reason_value: "content_filter",
      suppressed_tool_call_count: 1,
      suppressed_tool_call_names: ["write_file"],
      thread_id: "filtered"
    })
  })

  it("an empty filtered answer is explained, so the next request has no empty assistant message", async () => {
    const { answer } = await stream("refused", "a sensitive question")
    assert.include(textOf(answer.content), "safety-related signal")
    assert.include(textOf(answer.content), "returned no content")
    assert.strictEqual(answer.additional_kwargs.safety_termination.suppressed_tool_call_count, 0)
    assert.strictEqual(answer.response_metadata.finish_reason, "content_filter")
    await ask("refused", "ok, something else")
    const next = gateway.scripted.requests.at(-1)!
    const assistants = next.messages.filter((m) => m.role === "assistant")
    assert.isTrue(assistants.every((m) => textOf(m.content).trim() !== ""), JSON.stringify(assistants))
  })
})
