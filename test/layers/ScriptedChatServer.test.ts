import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import OpenAI from "openai"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"

const client = (url: string) => new OpenAI({ baseURL: url, apiKey: "test-key", maxRetries: 0 })

const post = (url: string, body: unknown) =>
  Effect.promise(async () => {
    const res = await fetch(`${url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
    return { status: res.status, headers: res.headers, text: await res.text() }
  })

/** The `data:` payloads of an SSE body, in order; `[DONE]` stays a string. */
const frames = (text: string): Array<any> => {
  assert.isTrue(text.endsWith("\n\n"), "an SSE body ends with a blank line")
  return text.split("\n\n").filter((f) => f !== "").map((f) => {
    assert.isTrue(f.startsWith("data: "), `every frame is a data line: ${f}`)
    const data = f.slice("data: ".length)
    return data === "[DONE]" ? data : JSON.parse(data)
  })
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: "m",
  messages: [{ role: "user", content }],
  stream: true,
  ...extra
})

describe("ScriptedChatServer", () => {
  it.scopedLive("streams a reply as SSE: role delta, small content deltas, finish reason, usage, [DONE]", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([{
        reasoning: "Think first.",
        content: "Hello there, friend!",
        usage: { prompt_tokens: 7, completion_tokens: 3 }
      }])
      const res = yield* post(server.url, chat("hi", { stream_options: { include_usage: true } }))
      assert.strictEqual(res.status, 200)
      assert.strictEqual(res.headers.get("content-type"), "text/event-stream")
      const all = frames(res.text)
      assert.strictEqual(all[all.length - 1], "[DONE]")
      const chunks = all.slice(0, -1)
      assert.deepStrictEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" })
      for (const chunk of chunks) assert.strictEqual(chunk.object, "chat.completion.chunk")
      const deltas = chunks.flatMap((c) => c.choices.map((choice: any) => choice.delta))
      const content = deltas.map((d) => d.content ?? "").join("")
      const reasoning = deltas.map((d) => d.reasoning_content ?? "").join("")
      assert.strictEqual(content, "Hello there, friend!")
      assert.strictEqual(reasoning, "Think first.")
      const pieces = deltas.filter((d) => typeof d.content === "string" && d.content !== "")
      assert.isAbove(pieces.length, 1, "content is split")
      const finish = chunks.findIndex((c) => c.choices[0]?.finish_reason != null)
      assert.strictEqual(chunks[finish].choices[0].finish_reason, "stop")
      const usage = chunks[chunks.length - 1]
      assert.strictEqual(finish, chunks.length - 2, "the usage chunk follows the finish chunk")
      assert.deepStrictEqual(usage.choices, [])
      assert.deepStrictEqual(usage.usage, { prompt_tokens: 7, completion_tokens: 3 })
    }))

  it.scopedLive("sends no usage chunk when the client does not ask for one", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["plain"])
      const chunks = frames((yield* post(server.url, chat("hi"))).text).slice(0, -1)
      assert.isTrue(chunks.every((c) => c.usage === undefined))
      assert.strictEqual(chunks[chunks.length - 1].choices[0].finish_reason, "stop")
    }))

  it.scopedLive("streams tool calls by index: id and name first, then argument fragments", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([{
        toolCalls: [
          { name: "get_weather", arguments: { city: "Paris", days: 3 }, id: "call_a" },
          { name: "get_time", arguments: "{\"zone\":\"Europe/Paris\"}" }
        ]
      }], { chunkSize: 5 })
      const chunks = frames((yield* post(server.url, chat("weather"))).text).slice(0, -1)
      const parts = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
      const first = parts.filter((p: any) => p.index === 0)
      assert.deepStrictEqual(first[0], {
        index: 0,
        id: "call_a",
        type: "function",
        function: { name: "get_weather", arguments: "" }
      })
      for (const later of first.slice(1)) {
        assert.deepStrictEqual(Object.keys(later).sort(), ["function", "index"])
        assert.isAtMost(later.function.arguments.length, 5)
      }
      const args = first.map((p: any) => p.function.arguments).join("")
      assert.deepStrictEqual(JSON.parse(args), { city: "Paris", days: 3 })
      const second = parts.filter((p: any) => p.index === 1)
      assert.strictEqual(second[0].function.name, "get_time")
      assert.strictEqual(second[0].id, "call_0_1")
      assert.strictEqual(second.map((p: any) => p.function.arguments).join(""), "{\"zone\":\"Europe/Paris\"}")
      assert.strictEqual(chunks[chunks.length - 1].choices[0].finish_reason, "tool_calls")
    }))

  it.scopedLive("is wire-accurate for the openai SDK's own stream accumulator", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([{
        content: "Checking.",
        toolCalls: [{ name: "get_weather", arguments: { city: "Paris" }, id: "call_1" }]
      }], { chunkSize: 3 })
      const completion = yield* Effect.promise(() =>
        client(server.url).chat.completions
          .stream({ model: "m", messages: [{ role: "user", content: "hi" }] })
          .finalChatCompletion()
      )
      const message = completion.choices[0]!.message
      assert.strictEqual(message.content, "Checking.")
      assert.deepStrictEqual(
        message.tool_calls?.map((c) => c.type === "function" ? [c.id, c.function.name, c.function.arguments] : []),
        [["call_1", "get_weather", "{\"city\":\"Paris\"}"]]
      )
      assert.strictEqual(completion.choices[0]!.finish_reason, "tool_calls")
    }))

  it.scopedLive("answers a non-streaming request with a whole completion", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(
        [{ content: "Whole answer.", reasoning: "hmm" }],
        { model: "demo-model" }
      )
      const completion = yield* Effect.promise(() =>
        client(server.url).chat.completions.create({ model: "x", messages: [{ role: "user", content: "hi" }] })
      )
      assert.strictEqual(completion.model, "demo-model")
      assert.strictEqual(completion.choices[0]!.message.content, "Whole answer.")
      assert.strictEqual((completion.choices[0]!.message as any).reasoning_content, "hmm")
      assert.strictEqual(completion.choices[0]!.finish_reason, "stop")
      assert.isAbove(completion.usage!.total_tokens, 0)
    }))

  it.scopedLive("answers a body that is not JSON, or not a chat request, with an OpenAI-shaped 400", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["never"])
      const bad = yield* post(server.url, "{not json")
      assert.strictEqual(bad.status, 400)
      const body = JSON.parse(bad.text)
      assert.strictEqual(body.error.type, "invalid_request_error")
      assert.match(body.error.message, /not valid JSON/)
      const wrong = yield* post(server.url, { model: "m", messages: "hello" })
      assert.strictEqual(wrong.status, 400)
      assert.match(JSON.parse(wrong.text).error.message, /messages/)
      assert.strictEqual(server.requests.length, 0, "rejected bodies are not counted as calls")
    }))

  it.scopedLive("serves scripted HTTP failures with their status, headers and an OpenAI-shaped body", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        { status: 429, headers: { "retry-after": "2" } },
        { status: 503, body: { error: { message: "overloaded", type: "server_error", code: "busy" } } }
      ])
      const limited = yield* post(server.url, chat("a"))
      assert.strictEqual(limited.status, 429)
      assert.strictEqual(limited.headers.get("retry-after"), "2")
      assert.strictEqual(typeof JSON.parse(limited.text).error.message, "string")
      const busy = yield* post(server.url, chat("b"))
      assert.strictEqual(busy.status, 503)
      assert.strictEqual(JSON.parse(busy.text).error.code, "busy")
    }))

  it.scopedLive("gives a script function each body and call number, and records bodies in order", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start((body, call) =>
        `call ${call}: ${String(body.messages[0]!.content)}`
      )
      const one = frames((yield* post(server.url, chat("first"))).text)
      const two = frames((yield* post(server.url, chat("second"))).text)
      const text = (fs: Array<any>) => fs.slice(0, -1).map((c) => c.choices[0]?.delta?.content ?? "").join("")
      assert.strictEqual(text(one), "call 0: first")
      assert.strictEqual(text(two), "call 1: second")
      assert.deepStrictEqual(server.requests.map((r) => r.messages[0]!.content), ["first", "second"])
      assert.strictEqual(server.headers[0]!["content-type"], "application/json")
    }))

  it.scopedLive("answers with a 500 naming the missing turn when the script is used up", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["only one"])
      yield* post(server.url, chat("a"))
      const res = yield* post(server.url, chat("b"))
      assert.strictEqual(res.status, 500)
      assert.match(JSON.parse(res.text).error.message, /no turn 2/)
    }))

  it.scopedLive("answers unknown routes with a 404", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["x"])
      const res = yield* Effect.promise(() => fetch(`${server.url}/embeddings`, { method: "POST", body: "{}" }))
      assert.strictEqual(res.status, 404)
    }))

  it.live("stops listening when its scope closes", () =>
    Effect.gen(function*() {
      const url = yield* Effect.scoped(Effect.map(ScriptedChatServer.start(["x"]), (server) => server.url))
      const after = yield* Effect.exit(
        Effect.tryPromise(() => fetch(`${url}/chat/completions`, { method: "POST", body: "{}" }))
      )
      assert.isTrue(Exit.isFailure(after), "the port no longer accepts connections")
    }))
})
