import { LLMock } from "@copilotkit/aimock"
import { assert, describe, it } from "@effect/vitest"
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"
import * as Path from "node:path"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as SqliteThreadStore from "../../src/layers/SqliteThreadStore.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as LLMErrorHandling from "../../src/middleware/LLMErrorHandling.js"
import * as Middleware from "../../src/middleware/Middleware.js"
import * as Render from "../../src/programs/cli/Render.js"
import * as Run from "../../src/programs/Run.js"
import { AppConfigService, defaults, ModelConfig } from "../../src/services/AppConfig.js"
import type { ModelError, ModelRequest } from "../../src/services/ModelService.js"
import { ModelService } from "../../src/services/ModelService.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as Tool from "../../src/services/Tool.js"
import type { Message } from "../../src/state/Message.js"
import * as Json from "../../src/state/Json.js"
import * as M from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"
import { cutAt } from "../support/pieces.js"

const tempDir = tempDirs()

// ---------------------------------------------------------------------------------------------------------
// Helpers

const request = (messages: ReadonlyArray<Message>, extra: Partial<ModelRequest> = {}): ModelRequest => ({
  systemPrompt: undefined,
  messages,
  tools: [],
  settings: {},
  ...extra
})

/** Runs a model call with a sink that records the run events it emits. */
const generate = (model: ModelService["Type"], req: ModelRequest) =>
  Effect.gen(function*() {
    const events: Array<RunEvent> = []
    const sink = { emit: (event: RunEvent) => Effect.sync(() => void events.push(event)) }
    const response = yield* Effect.either(
      model.generate(req).pipe(Effect.provide(Context.add(inRun().context, RunEvents, sink)))
    )
    return { response, events }
  })

const succeed = <A>(either: Either.Either<A, ModelError>): A => {
  if (Either.isLeft(either)) assert.fail(`expected a response, got ${either.left.reason}: ${either.left.message}`)
  return either.right
}

const failed = <A>(either: Either.Either<A, ModelError>): ModelError => {
  if (Either.isRight(either)) assert.fail("expected a ModelError")
  return either.left
}

/** The message of a call that must succeed. */
const answer = (model: ModelService["Type"], req: ModelRequest) =>
  Effect.map(generate(model, req), ({ response }) => succeed(response).message)

const tokens = (events: ReadonlyArray<RunEvent>, kind: "text" | "reasoning") =>
  events.flatMap((e) => (e.type === "token" && e[kind] !== undefined ? [e[kind]] : [])).join("")

const scripted = (script: ScriptedChatServer.Script, options: OpenAiModel.Options = {}) =>
  Effect.gen(function*() {
    const started = yield* ScriptedChatServer.start(script)
    const model = yield* OpenAiModel.make({ baseURL: started.url, apiKey: "test-key", model: "test-model", ...options })
    return { server: started, model }
  })

const aimock = (setup: (mock: LLMock) => void) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const mock = new LLMock({ host: "127.0.0.1", port: 0, chunkSize: 4 })
      setup(mock)
      await mock.start()
      return mock
    }),
    (mock) => Effect.promise(() => mock.stop())
  )

const sse = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`

const closedPort = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const probe = Net.createServer()
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as Net.AddressInfo
      probe.close(() => resolve(port))
    })
  })
)

const weatherTool = (seen: Array<string>) =>
  Tool.make({
    name: "get_weather",
    description: "The current weather in a city",
    parameters: Schema.Struct({ city: Schema.String }),
    handler: ({ city }) =>
      Effect.sync(() => {
        seen.push(city)
        return `Sunny, 21°C in ${city}`
      })
  })

// ---------------------------------------------------------------------------------------------------------
// Against aimock (an independent Chat Completions peer)

describe("OpenAiModel against aimock", () => {
  it.scopedLive("assembles a streamed tool call with parsed args; streams its text; keeps usage, finish reason", () =>
    Effect.gen(function*() {
      const mock = yield* aimock((m) => {
        m.onMessage("weather", {
          content: "Let me check that.",
          toolCalls: [{ name: "get_weather", arguments: "{\"city\":\"Paris\",\"units\":\"metric\"}", id: "call_w1" }]
        })
      })
      const model = yield* OpenAiModel.make({ baseURL: `${mock.url}/v1`, apiKey: "test-key", model: "gpt-test" })
      const { response, events } = yield* generate(model, request([M.human("What is the weather in Paris?")]))
      const message = succeed(response).message
      assert.deepStrictEqual(message.tool_calls, [
        { id: "call_w1", name: "get_weather", args: { city: "Paris", units: "metric" }, type: "tool_call" }
      ])
      assert.deepStrictEqual(message.invalid_tool_calls, [])
      assert.strictEqual(message.content, "Let me check that.")
      assert.strictEqual(message.response_metadata?.finish_reason, "tool_calls")
      assert.strictEqual(message.response_metadata?.model_name, "gpt-test")
      const usage = message.usage_metadata
      assert.isDefined(usage)
      assert.isAbove(usage!.input_tokens, 0)
      assert.isAbove(usage!.output_tokens, 0)
      assert.strictEqual(usage!.total_tokens, usage!.input_tokens + usage!.output_tokens)
      const tokenEvents = events.filter((e) => e.type === "token")
      assert.isAbove(tokenEvents.length, 1, "the text arrives in several deltas")
      assert.isTrue(tokenEvents.every((e) => e.type === "token" && e.message_id === message.id))
      assert.strictEqual(tokens(events, "text"), "Let me check that.")
    }))

  it.scopedLive("runs a whole turn: the tool runs with the model's arguments, its result goes back, answer saved", () =>
    Effect.gen(function*() {
      const mock = yield* aimock((m) => {
        m.onToolResult("call_w1", { content: "It is sunny in Paris, 21°C." })
        m.onMessage("weather", {
          toolCalls: [{ name: "get_weather", arguments: "{\"city\":\"Paris\"}", id: "call_w1" }]
        })
      })
      const model = yield* OpenAiModel.make({ baseURL: `${mock.url}/v1`, apiKey: "test-key", model: "gpt-test" })
      const seen: Array<string> = []
      const events: Array<RunEvent> = []
      const end = yield* Run.execute(
        {
          threadId: "weather-thread",
          input: [M.human("What is the weather in Paris?")],
          systemPrompt: "You are a weather bot."
        },
        Middleware.base(model, Toolkit.make([weatherTool(seen)])),
        (event) => events.push(event)
      )
      assert.strictEqual(end.status, "success")
      assert.strictEqual(end.stop_reason, "completed")
      assert.deepStrictEqual(seen, ["Paris"])
      const thread = Option.getOrThrow(yield* (yield* ThreadStore).load("weather-thread"))
      const messages = thread.state.messages
      assert.deepStrictEqual(messages.map((m) => m.type), ["human", "ai", "tool", "ai"])
      assert.strictEqual(M.text(messages[2]!), "Sunny, 21°C in Paris")
      assert.strictEqual(M.text(messages[3]!), "It is sunny in Paris, 21°C.")
      assert.strictEqual(tokens(events, "text"), "It is sunny in Paris, 21°C.")
      // What aimock received on turn 2: the system prompt first, the call, and the tool result under its id.
      const second = mock.getRequests()[1]!.body as any
      assert.deepStrictEqual(second.messages[0], { role: "system", content: "You are a weather bot." })
      assert.strictEqual(second.messages[2].tool_calls[0].id, "call_w1")
      assert.deepStrictEqual(second.messages[3], {
        role: "tool",
        tool_call_id: "call_w1",
        content: "Sunny, 21°C in Paris"
      })
      assert.strictEqual(second.tools[0].function.name, "get_weather")
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.scopedLive("works with aimock run as a separate process (CLI with a fixture directory)", () =>
    Effect.gen(function*() {
      const cli = Path.resolve("node_modules/@copilotkit/aimock/dist/cli.js")
      const fixtures = Path.resolve("test/fixtures/aimock")
      const child = yield* Effect.acquireRelease(
        Effect.sync(() =>
          ChildProcess.spawn(
            process.execPath,
            [cli, "-p", "0", "-h", "127.0.0.1", "-f", fixtures, "--log-level", "info"],
            { stdio: ["ignore", "pipe", "pipe"] }
          )
        ),
        (child) => Effect.sync(() => child.kill("SIGTERM"))
      )
      // With `-p 0` the CLI picks a free port and prints `aimock server listening on <url>`.
      const url = yield* Effect.async<string, Error>((resume) => {
        let out = ""
        const onData = (data: Buffer) => {
          out += data.toString()
          const found = /listening on (http:\/\/\S+)/.exec(out)
          if (found !== null) resume(Effect.succeed(found[1]!))
        }
        child.stdout!.on("data", onData)
        child.stderr!.on("data", onData)
        child.once("exit", (code) => resume(Effect.fail(new Error(`aimock exited with ${code}: ${out}`))))
      }).pipe(Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("aimock did not start") }))
      const model = yield* OpenAiModel.make({ baseURL: `${url}/v1`, apiKey: "test-key", model: "gpt-test" })
      const { response } = yield* generate(model, request([M.human("weather in Lyon?")]))
      const message = succeed(response).message
      assert.strictEqual(message.content, "Let me look that up.")
      assert.deepStrictEqual(
        M.toolCalls(message).map((c) => [c.id, c.name, c.args]),
        [["call_cli_1", "get_weather", { city: "Lyon" }]]
      )
      const followUp = yield* generate(
        model,
        request([M.human("weather in Lyon?"), message, M.tool("Sunny", "call_cli_1", { name: "get_weather" })])
      )
      assert.strictEqual(M.text(succeed(followUp.response).message), "It is sunny in Lyon.")
    }))
})

// ---------------------------------------------------------------------------------------------------------
// Against the scripted server

describe("OpenAiModel against the scripted server", () => {
  it.scopedLive("keeps reasoning in additional_kwargs.reasoning_content and streams it as reasoning tokens", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([{ reasoning: "The user greets me. I greet back.", content: "Hello!" }])
      const { response, events } = yield* generate(model, request([M.human("hi")]))
      const message = succeed(response).message
      assert.strictEqual(message.content, "Hello!")
      assert.strictEqual(message.additional_kwargs?.reasoning_content, "The user greets me. I greet back.")
      assert.strictEqual(tokens(events, "reasoning"), "The user greets me. I greet back.")
      assert.strictEqual(tokens(events, "text"), "Hello!")
      assert.strictEqual(message.response_metadata?.finish_reason, "stop")
      assert.strictEqual(message.response_metadata?.system_fingerprint, "scripted")
    }))

  it.scopedLive("turns unparsable or non-object arguments into invalid_tool_calls, keeping the valid ones", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([{
        toolCalls: [
          { name: "search", arguments: "{\"query\": \"effect", id: "call_bad" },
          { name: "search", arguments: "[1, 2]", id: "call_array" },
          { name: "search", arguments: { query: "ok" }, id: "call_good" },
          // Python's json.loads (DeerFlow's ChatOpenAI) reads these and DeerFlow's SSE then writes a bare NaN, which
          // its app's JSON.parse refuses: here they are not JSON, and the model is told so
          { name: "search", arguments: "{\"query\": \"x\", \"limit\": NaN}", id: "call_nan" },
          { name: "search", arguments: "{\"query\": \"x\", \"limit\": -Infinity}", id: "call_inf" }
        ]
      }])
      const message = succeed((yield* generate(model, request([M.human("find")]))).response).message
      assert.deepStrictEqual(message.tool_calls, [
        { id: "call_good", name: "search", args: { query: "ok" }, type: "tool_call" }
      ])
      const invalid = message.invalid_tool_calls ?? []
      assert.deepStrictEqual(invalid.map((c) => [c.id, c.name, c.args]), [
        ["call_bad", "search", "{\"query\": \"effect"],
        ["call_array", "search", "[1, 2]"],
        ["call_nan", "search", "{\"query\": \"x\", \"limit\": NaN}"],
        ["call_inf", "search", "{\"query\": \"x\", \"limit\": -Infinity}"]
      ])
      assert.match(invalid[0]!.error!, /not valid JSON/)
      assert.match(invalid[1]!.error!, /JSON object, not an array/)
      assert.match(invalid[2]!.error!, /not valid JSON/)
      assert.match(invalid[3]!.error!, /not valid JSON/)
    }))

  // LangChain's ChatOpenAI (DeerFlow's model) sends `message.name or additional_kwargs["name"]` with each
  // message, and a tool message's role, content and call id only: the model reads a hidden warning's name
  it.scopedLive("sends a message's name with it, as DeerFlow's ChatOpenAI does, and a tool message's never", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted(["ok"])
      yield* generate(model, request([
        M.human("Earlier turns, condensed.", { name: "summary" }),
        M.human("plain"),
        M.ai("", { tool_calls: [{ id: "call_1", name: "ls", args: {}, type: "tool_call" }], name: "lead_agent" }),
        M.tool("a.txt", "call_1", { name: "ls" }),
        M.human("You are repeating yourself.", { additional_kwargs: { name: "loop_warning" } }),
        M.system("Be brief.", { name: "todo_reminder" })
      ]))
      const wire = (server.requests[0] as any).messages as Array<Record<string, unknown>>
      assert.deepStrictEqual(wire.map((m) => [m.role, m.name]), [
        ["user", "summary"],
        ["user", undefined],
        ["assistant", "lead_agent"],
        ["tool", undefined],
        ["user", "loop_warning"],
        ["system", "todo_reminder"]
      ])
      assert.isFalse("name" in wire[3]!)
    }))

  it.scopedLive("sends the system prompt first, assistant tool calls, tool results and tools in the wire shape", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted(["ok"], { maxTokens: 256, temperature: 0.2 })
      const prior = M.ai("", {
        id: "ai-1",
        tool_calls: [{ id: "call_1", name: "get_weather", args: { city: "Oslo" }, type: "tool_call" }],
        invalid_tool_calls: [
          { id: null, name: "get_weather", args: "{\"city\": ", error: "bad" },
          { id: "call_3", name: null, args: "{\"city\": \"Rome\"}", error: "no name" }
        ]
      })
      const tool = Tool.definition(weatherTool([]))
      const image = { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } } as const
      yield* generate(model, request([
        M.human([{ type: "text", text: "Weather?" }, image]),
        prior,
        M.tool("Snow", "call_1", { name: "get_weather" }),
        M.tool("Error: bad arguments", "ai-1_invalid_0", { name: "get_weather", status: "error" }),
        M.tool([{ type: "text", text: "Error:" }, { type: "text", text: "no name" }], "call_3", { status: "error" }),
        M.system("Be brief.")
      ], { systemPrompt: "You are Antler.", tools: [tool] }))
      const body = server.requests[0]! as any
      assert.strictEqual(body.model, "test-model")
      assert.strictEqual(body.stream, true)
      assert.deepStrictEqual(body.stream_options, { include_usage: true })
      assert.strictEqual(body.max_tokens, 256)
      assert.strictEqual(body.temperature, 0.2)
      assert.isUndefined(body.reasoning_effort)
      assert.deepStrictEqual(body.messages, [
        { role: "system", content: "You are Antler." },
        { role: "user", content: [{ type: "text", text: "Weather?" }, image] },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } },
            { id: "ai-1_invalid_0", type: "function", function: { name: "get_weather", arguments: "{}" } },
            { id: "call_3", type: "function", function: { name: "unknown_tool", arguments: "{\"city\":\"Rome\"}" } }
          ]
        },
        { role: "tool", tool_call_id: "call_1", content: "Snow" },
        { role: "tool", tool_call_id: "ai-1_invalid_0", content: "Error: bad arguments" },
        { role: "tool", tool_call_id: "call_3", content: "Error:\nno name" },
        { role: "system", content: "Be brief." }
      ])
      assert.deepStrictEqual(body.tools, [{
        type: "function",
        function: { name: "get_weather", description: tool.description, parameters: tool.parameters }
      }])
      assert.strictEqual(server.headers[0]!.authorization, "Bearer test-key")
    }))

  it.scopedLive("sends reasoning_effort to a model that supports it; replaces images for a model without vision", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted(["ok"], { supportsReasoningEffort: true, supportsVision: false })
      const image = { type: "image_url", image_url: { url: "https://example.com/a.png" } } as const
      yield* generate(model, request(
        [M.human([{ type: "text", text: "Look" }, image])],
        { settings: { reasoningEffort: "high" } }
      ))
      const body = server.requests[0]! as any
      assert.strictEqual(body.reasoning_effort, "high")
      assert.strictEqual(body.messages[0].content[0].text, "Look")
      assert.strictEqual(body.messages[0].content[1].type, "text", "the image became a note")
      assert.notInclude(JSON.stringify(body), "example.com")
    }))

  it.scopedLive("classifies a 429 with retry-after as rate_limit, with its headers, and does not retry by itself", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted([
        {
          status: 429,
          headers: { "retry-after": "2", "retry-after-ms": "1500" },
          body: { error: { message: "Slow down", type: "requests", code: "rate_limit_exceeded" } }
        }
      ])
      const error = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(error._tag, "ModelError")
      assert.strictEqual(error.reason, "rate_limit")
      assert.strictEqual(error.errorType, "RateLimitError")
      assert.strictEqual(error.status, 429)
      assert.strictEqual(error.code, "rate_limit_exceeded")
      assert.strictEqual(error.headers?.["retry-after"], "2")
      assert.strictEqual(error.headers?.["retry-after-ms"], "1500")
      assert.match(error.message, /Slow down/)
      assert.strictEqual(server.requests.length, 1, "the SDK made no retry of its own")
    }))

  it.scopedLive("classifies HTTP failures: 500 server, 401 auth, 402 / insufficient_quota quota, 400 bad_request", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted([
        { status: 500 },
        { status: 401 },
        { status: 402 },
        {
          status: 429,
          body: { error: { message: "Out of quota", type: "insufficient_quota", code: "insufficient_quota" } }
        },
        {
          status: 400,
          body: { error: { message: "too long", type: "invalid_request_error", code: "context_length_exceeded" } }
        }
      ])
      const outcomes: Array<[string, string, number | undefined]> = []
      for (let i = 0; i < 5; i++) {
        const error = failed((yield* generate(model, request([M.human("hi")]))).response)
        outcomes.push([error.reason, error.errorType, error.status])
      }
      assert.deepStrictEqual(outcomes, [
        ["server", "InternalServerError", 500],
        ["auth", "AuthenticationError", 401],
        ["quota", "APIError", 402],
        ["quota", "RateLimitError", 429],
        ["bad_request", "BadRequestError", 400]
      ])
      assert.strictEqual(server.requests.length, 5)
    }))

  it.live("classifies a connection to a closed port as connection", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const model = yield* OpenAiModel.make({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "k", model: "m" })
      const error = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(error.reason, "connection")
      assert.strictEqual(error.errorType, "APIConnectionError")
      assert.isUndefined(error.status)
      assert.match(error.message, /ECONNREFUSED/)
    }))

  it.scopedLive("reports an error event inside the stream as a ModelError", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([{
        content: "Half an ans",
        streamError: { message: "The server had an error while processing", code: "server_error" }
      }])
      const error = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(error.reason, "server")
      assert.strictEqual(error.errorType, "APIError")
      assert.strictEqual(error.code, "server_error")
      assert.match(error.message, /while processing/)
    }))

  it.scopedLive("reports a connection dropped mid-answer as connection", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([{ content: "The answer is", disconnect: true }])
      const error = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(error.reason, "connection")
      assert.strictEqual(error.errorType, "APIConnectionError")
    }))

  it.scopedLive("reports a malformed stream as invalid_response with a readable message", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([
        { raw: `${sse({ id: "x", choices: [{ index: 0, delta: { content: "hi" } }] })}data: {not json\n\n` },
        { raw: `${sse({ id: "x", choices: [{ index: 0, delta: { content: 42 } }] })}data: [DONE]\n\n` }
      ])
      const notJson = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(notJson.reason, "invalid_response")
      assert.match(notJson.message, /not JSON/)
      const wrongType = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(wrongType.reason, "invalid_response")
      assert.match(wrongType.message, /content/)
    }))

  it.scopedLive("reports an answer with nothing in it as empty_response, but returns an empty cut-off answer", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([
        { content: "" },
        { raw: "data: {\"id\":\"x\",\"choices\":[]}\n\ndata: [DONE]\n\n" },
        { content: "", finishReason: "content_filter" }
      ])
      const empty = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(empty.reason, "empty_response")
      const noChoices = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(noChoices.reason, "empty_response")
      const filtered = succeed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(filtered.message.response_metadata?.finish_reason, "content_filter")
    }))

  it.scopedLive("streams no tokens for internal calls (summaries, titles)", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([{ reasoning: "hm", content: "A short title" }])
      const { response, events } = yield* generate(model, request([M.human("summarise")], { internal: "title" }))
      assert.strictEqual(succeed(response).message.content, "A short title")
      assert.deepStrictEqual(events, [])
    }))

  it.scopedLive("fails a stream that stalls for longer than the timeout with StreamChunkTimeoutError", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted([{ content: "Partial", stall: true }], { timeoutMs: 300 })
      const error = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(error.reason, "timeout")
      assert.strictEqual(error.errorType, "StreamChunkTimeoutError")
      yield* Effect.sync(() => server.aborted.length).pipe(
        Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: (n) => n > 0 }),
        Effect.timeout("5 seconds")
      )
      assert.deepStrictEqual(server.aborted, [0], "the stalled request was closed")
    }))

  it.scopedLive("aborts the HTTP request when the run is interrupted mid-stream", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted([{ content: "This answer never ends", stall: true }])
      const firstToken = yield* Deferred.make<void>()
      const events: Array<RunEvent> = []
      const fiber = yield* Run.execute(
        { threadId: "cancelled-thread", input: [M.human("hi")] },
        Middleware.base(model, Toolkit.make([])),
        (event) => {
          events.push(event)
          if (event.type === "token") Deferred.unsafeDone(firstToken, Effect.void)
        }
      ).pipe(Effect.provide(MemoryThreadStore.layer()), Effect.fork)
      yield* Deferred.await(firstToken)
      yield* Fiber.interrupt(fiber)
      yield* Effect.sync(() => server.aborted.length).pipe(
        Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: (n) => n > 0 }),
        Effect.timeout("5 seconds")
      )
      assert.deepStrictEqual(server.aborted, [0], "the server saw the client close the stream")
      const end = events[events.length - 1]
      assert.strictEqual(end?.type === "run_end" ? end.stop_reason : undefined, "cancelled")
    }))
})

// ---------------------------------------------------------------------------------------------------------
// Configuration

// ---------------------------------------------------------------------------------------------------------
// Hostile model output, through the real client against the scripted server

/** Runs one turn over the real model with the weather tool; returns the end, events, thread and what it printed. */
const hostileTurn = (model: ModelService["Type"], threadId: string, seen: Array<string> = []) =>
  Effect.gen(function*() {
    const events: Array<RunEvent> = []
    const end = yield* Run.execute(
      { threadId, input: [M.human("What is the weather?")] },
      Middleware.base(model, Toolkit.make([weatherTool(seen)])),
      (event) => events.push(event)
    )
    const thread = Option.getOrThrow(yield* (yield* ThreadStore).load(threadId))
    const render = Render.human({ color: false })
    return { end, events, messages: thread.state.messages, shown: events.map(render).join("") }
  })

/** Every tool call of the thread answered by exactly one tool message, and every id unique. */
const assertPaired = (messages: ReadonlyArray<Message>) => {
  const calls: Array<string> = []
  for (const message of messages) {
    if (message.type !== "ai") continue
    for (const call of M.toolCalls(message)) calls.push(call.id)
    message.invalid_tool_calls?.forEach((call, i) => calls.push(M.invalidCallId(message, call, i)))
  }
  const results = messages.flatMap((m) => (m.type === "tool" ? [m.tool_call_id] : []))
  assert.strictEqual(new Set(calls).size, calls.length, `tool call ids are unique: ${calls}`)
  assert.deepStrictEqual([...results].sort(), [...calls].sort())
}

const ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\x9b31m"

describe("OpenAiModel against a hostile server", () => {
  it.scopedLive("arguments nested 5,000 levels deep become invalid calls with a readable error; run goes on", () =>
    Effect.gen(function*() {
      const deep = `{"city":${"[".repeat(5000)}${"]".repeat(5000)}}`
      assert.isAbove(deep.length, 10_000)
      // Built as text: JSON.stringify itself overflows the stack on a value this deep.
      const deepObject = `{"a":${"{\"a\":".repeat(5000)}1${"}".repeat(5001)}`
      const { model, server } = yield* scripted([
        {
          toolCalls: [
            { name: "get_weather", arguments: deep, id: "call_deep" },
            { name: "get_weather", arguments: { city: "Oslo" }, id: "call_ok" }
          ]
        },
        // Arguments sent as an object rather than a JSON string (some servers do), just as deep.
        {
          raw: `data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_obj",` +
            `"function":{"name":"get_weather","arguments":${deepObject}}}]},"finish_reason":"tool_calls"}]}\n\n` +
            "data: [DONE]\n\n"
        },
        "Oslo is sunny."
      ])
      const seen: Array<string> = []
      const o = yield* hostileTurn(model, "deep-args", seen)
      assert.deepInclude(o.end, { type: "run_end", status: "success", stop_reason: "completed" })
      assert.deepStrictEqual(seen, ["Oslo"])
      assertPaired(o.messages)
      const refused = o.messages.filter((m) => m.type === "tool" && m.status === "error").map(M.text)
      assert.strictEqual(refused.length, 2)
      for (const text of refused) assert.include(text, "The arguments nest more than 64 levels deep; flatten them.")
      assert.include(o.shown, "→ get_weather(The arguments nest more than 64 levels deep; flatten them.)")
      // The refused call goes back to the model with `{}` as its arguments, paired with its error.
      const second = server.requests[1]!.messages as ReadonlyArray<any>
      const deepCall = second[1].tool_calls.find((c: any) => c.id === "call_deep")
      assert.strictEqual(deepCall.function.arguments, "{}")
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.scopedLive("repeated tool-call ids in one answer: each call runs once under its own id, results paired", () =>
    Effect.gen(function*() {
      const { model, server } = yield* scripted([
        {
          toolCalls: [
            { name: "get_weather", arguments: { city: "Oslo" }, id: "call_1" },
            { name: "get_weather", arguments: { city: "Rome" }, id: "call_1" },
            { name: "get_weather", arguments: "{\"city\": ", id: "call_1" },
            { name: "get_weather", arguments: { city: "Lima" }, id: "call_1_2" }
          ]
        },
        "Done."
      ])
      const seen: Array<string> = []
      const o = yield* hostileTurn(model, "dup-ids", seen)
      assert.strictEqual(o.end.status, "success")
      assert.deepStrictEqual([...seen].sort(), ["Lima", "Oslo", "Rome"])
      assertPaired(o.messages)
      const ai = o.messages[1] as M.AIMessage
      assert.deepStrictEqual(ai.tool_calls?.map((c) => c.id), ["call_1", "call_1_3", "call_1_2"])
      assert.deepStrictEqual(ai.invalid_tool_calls?.map((c) => c.id), ["call_1_4"])
      // The next request carries each id once, each with its own result.
      const sent = server.requests[1]!.messages as ReadonlyArray<any>
      const ids = sent[1].tool_calls.map((c: any) => c.id)
      assert.deepStrictEqual(ids, ["call_1", "call_1_3", "call_1_2", "call_1_4"])
      assert.deepStrictEqual(sent.slice(2, 6).map((m: any) => m.tool_call_id).sort(), [...ids].sort())
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.scopedLive("a __proto__ key in the arguments is dropped: the tool, the next request and a reload see the rest", () =>
    Effect.gen(function*() {
      const filename = Path.join(tempDir("antler-proto-"), "threads.sqlite")
      const { model, server } = yield* scripted([
        {
          toolCalls: [{
            name: "get_weather",
            arguments: `{"city":"Oslo","__proto__":{"city":"Atlantis","units":"imperial"}}`,
            id: "call_p"
          }]
        },
        "Oslo is sunny."
      ])
      const seen: Array<string> = []
      const o = yield* hostileTurn(model, "proto-args", seen).pipe(
        Effect.provide(SqliteThreadStore.layer({ filename }))
      )
      assert.strictEqual(o.end.status, "success")
      assert.deepStrictEqual(seen, ["Oslo"])
      const sent = server.requests[1]!.messages as ReadonlyArray<any>
      assert.strictEqual(sent[1].tool_calls[0].function.arguments, `{"city":"Oslo"}`)
      // read back by another store on the same file: plain arguments, nothing inherited
      const loaded = yield* Effect.scoped(
        Effect.flatMap(ThreadStore, (store) => store.load("proto-args")).pipe(
          Effect.provide(SqliteThreadStore.layer({ filename }))
        )
      )
      const ai = Option.getOrThrow(loaded).state.messages.find((m) => m.type === "ai") as M.AIMessage
      const args = ai.tool_calls![0]!.args as Record<string, unknown>
      assert.deepStrictEqual(args, { city: "Oslo" })
      assert.strictEqual(Object.getPrototypeOf(args), Object.prototype)
      assert.isUndefined(args.units)
    }))

  it.scopedLive("a malformed usage or metadata field costs nothing but itself: the answer is kept", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([
        { content: "Kept.", usage: { prompt_tokens: "many", completion_tokens: -1, total_tokens: null } },
        { content: "Kept too.", usage: { prompt_tokens: 12, completion_tokens: 3.7, prompt_tokens_details: "x" } },
        {
          raw: sse({
            id: 7,
            model: ["m"],
            system_fingerprint: {},
            choices: [{ index: 0, delta: { content: "Odd." }, finish_reason: 3 }],
            usage: "lots"
          }) + "data: [DONE]\n\n"
        }
      ])
      const first = yield* answer(model, request([M.human("hi")]))
      assert.strictEqual(first.content, "Kept.")
      assert.isUndefined(first.usage_metadata)
      const second = yield* answer(model, request([M.human("hi")]))
      assert.deepStrictEqual(second.usage_metadata, { input_tokens: 12, output_tokens: 3, total_tokens: 15 })
      const third = yield* answer(model, request([M.human("hi")]))
      assert.strictEqual(third.content, "Odd.")
      assert.deepStrictEqual(third.response_metadata, { model_name: "test-model" })
    }))

  it.scopedLive("a 200 that is not a stream says what came and from where; a whole completion is taken as is", () =>
    Effect.gen(function*() {
      const page = "<!DOCTYPE html><html><head><title>Sign in - Corp Proxy</title></head>" +
        "<body>Please log in</body></html>"
      const completion = {
        id: "chatcmpl-1",
        object: "chat.completion",
        model: "proxy-model",
        choices: [{
          index: 0,
          message: {
            role: "assistant",
            content: "Not streamed.",
            tool_calls: [{
              id: "call_w",
              type: "function",
              function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }
            }]
          },
          finish_reason: "tool_calls"
        }],
        usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 }
      }
      const { model, server } = yield* scripted([
        { raw: page, contentType: "text/html; charset=utf-8" },
        { raw: JSON.stringify(completion), contentType: "application/json" },
        {
          raw: JSON.stringify({ error: { message: "model overloaded", code: "overloaded" } }),
          contentType: "application/json"
        },
        { raw: JSON.stringify({ status: "ok", version: "1.2" }), contentType: "application/json" },
        { raw: "hello there, this is not a stream", contentType: "text/plain" }
      ])
      const where = `model test-model at ${server.url}`
      const html = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(html.reason, "invalid_response")
      assert.strictEqual(
        html.message,
        `The model server answered with status 200 but sent an HTML page titled "Sign in - Corp Proxy" ` +
          `(${page.length} characters) instead of an event stream (${where}). ` +
          "Check that the base URL points at an OpenAI-compatible API (it usually ends in /v1)."
      )
      // Not a "provider unavailable": the fallback the user sees says what came.
      const fallback = LLMErrorHandling.fallbackMessage(html, LLMErrorHandling.classify(html))
      assert.include(M.text(fallback), "sent an HTML page titled \"Sign in - Corp Proxy\"")
      const whole = succeed((yield* generate(model, request([M.human("hi")]))).response).message
      assert.strictEqual(whole.content, "Not streamed.")
      assert.deepStrictEqual(M.toolCalls(whole).map((c) => [c.id, c.args]), [["call_w", { city: "Oslo" }]])
      assert.deepInclude(whole.usage_metadata!, { input_tokens: 5, output_tokens: 4 })
      const inside = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.include(inside.message, `with status 200 but with an error (${where}): model overloaded`)
      const other = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.include(other.message, `a JSON body that is not a chat completion (${where}): keys status, version.`)
      const text = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.strictEqual(text.reason, "empty_response")
      assert.include(text.message, `content type text/plain, but its stream held no answer (${where})`)
    }))

  it.scopedLive("escape sequences in text, reasoning, tool names and error bodies reach no terminal raw", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([
        {
          reasoning: `thinking ${ESCAPES}`,
          content: `Hello ${ESCAPES} there\r\n`,
          toolCalls: [{ name: `get_weather${ESCAPES}`, arguments: { city: `Oslo${ESCAPES}` }, id: "c1" }]
        },
        { status: 400, body: ScriptedChatServer.errorBody(`bad ${ESCAPES}`, "invalid_request_error") }
      ])
      const o = yield* hostileTurn(model, "escapes")
      assert.strictEqual(o.end.status, "error")
      assert.notMatch(o.shown, /[\x00-\x08\x0b-\x1f\x7f-\x9f]/)
      assert.include(
        o.shown,
        "Hello ␛]52;c;ZXZpbA==␇␛]0;pwned␇␛[2J␛]8;;http://evil␛\\link␛]8;;␛\\\\u009b31m there"
      )
      assert.include(o.shown, "→ get_weather␛]52;c;ZXZpbA==␇")
      assert.include(o.shown, "✗ Error: Tool 'get_weather␛]52;c;ZXZpbA==␇")
      // The model error is neutralised where it is made, so logs and the stored fallback are clean too.
      const detail = o.end.error?.message ?? ""
      assert.include(detail, "bad ␛]52;c;ZXZpbA==␇")
      assert.notMatch(detail, /\x1b/)
    }).pipe(Effect.provide(MemoryThreadStore.layer())))

  it.live("the adapter's own key and base-URL credentials never appear in its errors", () =>
    Effect.gen(function*() {
      const key = "sk-adapter-secret-0042"
      const server = yield* ScriptedChatServer.start([
        {
          status: 401,
          body: ScriptedChatServer.errorBody(`Incorrect API key provided: ${key}`, "invalid_request_error")
        }
      ])
      const plain = yield* OpenAiModel.make({ baseURL: server.url, apiKey: key, model: "m" })
      const echoed = failed((yield* generate(plain, request([M.human("hi")]))).response)
      assert.include(echoed.message, "Incorrect API key provided: [redacted]")
      assert.notInclude(echoed.message + String((echoed.cause as Error).message), key)
      const withUser = server.url.replace("http://", "http://admin:hunter2pass@")
      const credentialed = yield* OpenAiModel.make({ baseURL: withUser, apiKey: key, model: "m" })
      const refused = failed((yield* generate(credentialed, request([M.human("hi")]))).response)
      assert.include(refused.message, "http://[redacted]@127.0.0.1")
      assert.notInclude(`${refused.message} ${String((refused.cause as Error).message)}`, "hunter2pass")
    }).pipe(Effect.scoped))

  it.scopedLive("a 401 of a model with no key says none was configured and where to give one; with a key it does not", () =>
    Effect.gen(function*() {
      const refusal = {
        status: 401,
        body: ScriptedChatServer.errorBody("Unauthorized", "invalid_request_error")
      }
      const server = yield* ScriptedChatServer.start([refusal, refusal])
      const noKeys = ConfigProvider.fromMap(new Map())
      const keyless = yield* OpenAiModel.make({ baseURL: server.url, model: "m" }).pipe(Effect.withConfigProvider(noKeys))
      const bare = failed((yield* generate(keyless, request([M.human("hi")]))).response)
      assert.strictEqual(bare.reason, "auth")
      assert.include(bare.message, "401 Unauthorized No API key was sent: none is configured for this model")
      assert.include(bare.message, "api_key in its config.yaml entry, --api-key, or OPENAI_API_KEY")
      const keyed = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "sk-wrong-key-0001", model: "m" })
      const wrong = failed((yield* generate(keyed, request([M.human("hi")]))).response)
      assert.strictEqual(wrong.reason, "auth")
      assert.notInclude(wrong.message, "No API key was sent")
    }))

  it.scopedLive("a stream cut in the middle of a frame is a connection error, not a crash", () =>
    Effect.gen(function*() {
      const { model } = yield* scripted([
        {
          raw: `${sse({ id: "x", choices: [{ index: 0, delta: { content: "Half" } }] })}data: {"id":"x","choi`,
          cut: true
        }
      ])
      const error = failed((yield* generate(model, request([M.human("hi")]))).response)
      assert.oneOf(error.reason, ["connection", "invalid_response"])
    }))
})

describe("OpenAiModel configuration", () => {
  it.scopedLive("default_headers, extra_body and the thinking settings of DeerFlow's model entries reach the wire", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => "ok")
      const [doubao, vllm] = Schema.decodeUnknownSync(Schema.Array(ModelConfig))([
        {
          name: "doubao",
          use: "deerflow.models.patched_deepseek:PatchedChatDeepSeek",
          model: "doubao-seed",
          api_base: server.url,
          default_headers: { "X-Tenant": "antlers" },
          extra_body: { service_tier: "flex", thinking: { budget: 100 } },
          supports_thinking: true,
          supports_reasoning_effort: true,
          when_thinking_enabled: { extra_body: { thinking: { type: "enabled" } } }
        },
        {
          name: "qwen",
          use: "deerflow.models.vllm_provider:VllmChatModel",
          model: "qwen3",
          base_url: server.url,
          supports_thinking: true,
          when_thinking_enabled: { extra_body: { chat_template_kwargs: { enable_thinking: true } } }
        }
      ])
      const model = yield* OpenAiModel.fromConfig([doubao!, vllm!])
      const call = (modelName: string, thinkingEnabled: boolean) =>
        generate(model, request([M.human("hi")], { settings: { modelName, thinkingEnabled } }))
      yield* call("doubao", true)
      yield* call("doubao", false)
      yield* call("qwen", false)
      const [on, off, qwen] = server.requests as ReadonlyArray<any>
      assert.deepStrictEqual(on.thinking, { budget: 100, type: "enabled" })
      assert.strictEqual(on.service_tier, "flex")
      assert.deepStrictEqual(off.thinking, { budget: 100, type: "disabled" })
      assert.strictEqual(off.reasoning_effort, "minimal")
      assert.deepStrictEqual(qwen.chat_template_kwargs, { enable_thinking: false })
      assert.strictEqual(server.headers[0]!["x-tenant"], "antlers")
      assert.strictEqual(on.model, "doubao-seed", "a provider field never replaces the protocol's own")
    }))

  // DeerFlow's ModelConfig passes its extra keys to ChatOpenAI, which sends them with every request
  // (test_model_factory: stream_usage kept when set to false)
  it.scopedLive("a model's top_p, seed, stop, penalties, model_kwargs and reasoning_effort reach the wire", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => "ok")
      const models = Schema.decodeUnknownSync(Schema.Array(ModelConfig))([
        {
          name: "tuned",
          model: "tuned-v1",
          base_url: server.url,
          top_p: 0.9,
          seed: 42,
          stop: ["</answer>"],
          frequency_penalty: 0.5,
          presence_penalty: -0.5,
          logit_bias: { "50256": -100 },
          service_tier: "flex",
          verbosity: "low",
          supports_reasoning_effort: true,
          reasoning_effort: "low",
          model_kwargs: { top_k: 20, model: "not-this", repetition_penalty: 1.1 },
          extra_body: { repetition_penalty: 1.05 },
          temperature: 0.2
        },
        { name: "quiet", model: "quiet-v1", base_url: server.url, stream_usage: false, reasoning_effort: "high" }
      ])
      const model = yield* OpenAiModel.fromConfig(models)
      const tuned = yield* answer(model, request([M.human("hi")], { settings: { modelName: "tuned" } }))
      yield* answer(model, request([M.human("hi")], { settings: { modelName: "tuned", reasoningEffort: "high" } }))
      const quiet = yield* answer(model, request([M.human("hi")], { settings: { modelName: "quiet" } }))
      const [first, second, third] = server.requests as ReadonlyArray<any>
      assert.strictEqual(first.model, "tuned-v1", "a provider field never replaces the protocol's own")
      assert.strictEqual(first.top_p, 0.9)
      assert.strictEqual(first.seed, 42)
      assert.deepStrictEqual(first.stop, ["</answer>"])
      assert.strictEqual(first.frequency_penalty, 0.5)
      assert.strictEqual(first.presence_penalty, -0.5)
      assert.deepStrictEqual(first.logit_bias, { "50256": -100 })
      assert.strictEqual(first.service_tier, "flex")
      assert.strictEqual(first.verbosity, "low")
      assert.strictEqual(first.top_k, 20)
      assert.strictEqual(first.repetition_penalty, 1.05, "extra_body wins over model_kwargs")
      assert.strictEqual(first.temperature, 0.2)
      assert.strictEqual(first.reasoning_effort, "low")
      assert.strictEqual(second.reasoning_effort, "high", "the run's reasoning effort wins over the model's")
      assert.deepStrictEqual(first.stream_options, { include_usage: true })
      assert.isDefined(tuned.usage_metadata)
      // stream_usage: false asks for no usage (a server that refuses stream_options); without
      // supports_reasoning_effort the model's reasoning_effort is not sent
      assert.notProperty(third, "stream_options")
      assert.isUndefined(quiet.usage_metadata)
      assert.notProperty(third, "reasoning_effort")
      assert.notProperty(third, "top_p")
    }))

  // DeerFlow's test_reasoning_effort_cleared_when_not_supported / _preserved_when_supported: thinking off sends
  // `reasoning_effort: minimal` only to a model with supports_reasoning_effort (others may refuse the field)
  it.scopedLive("a model without supports_reasoning_effort gets no reasoning_effort from its thinking settings", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => "ok")
      const thinking = { extra_body: { thinking: { type: "enabled", budget_tokens: 5000 } }, reasoning_effort: "high" }
      const models = Schema.decodeUnknownSync(Schema.Array(ModelConfig))([
        {
          name: "plain",
          model: "plain-v1",
          base_url: server.url,
          supports_thinking: true,
          when_thinking_enabled: thinking
        },
        {
          name: "effort",
          model: "effort-v1",
          base_url: server.url,
          supports_thinking: true,
          supports_reasoning_effort: true,
          when_thinking_enabled: thinking
        }
      ])
      const model = yield* OpenAiModel.fromConfig(models)
      for (const modelName of ["plain", "effort"]) {
        for (const thinkingEnabled of [false, true]) {
          yield* generate(model, request([M.human("hi")], { settings: { modelName, thinkingEnabled } }))
        }
      }
      const sent = server.requests.map((r: any) => [r.model, r.thinking?.type, r.reasoning_effort])
      assert.deepStrictEqual(sent, [
        ["plain-v1", "disabled", undefined],
        ["plain-v1", "enabled", undefined],
        ["effort-v1", "disabled", "minimal"],
        ["effort-v1", "enabled", "high"]
      ])
    }))

  it("a model class Antler cannot speak is refused, naming the entry and the OpenAI-compatible way", () => {
    const decode = Schema.decodeUnknownEither(ModelConfig)
    const claude = decode({ name: "claude", use: "langchain_anthropic:ChatAnthropic", model: "claude-sonnet-4" })
    assert.isTrue(Either.isLeft(claude))
    const message = Either.isLeft(claude) ? claude.left.message : ""
    assert.include(message, "the model \"claude\" uses langchain_anthropic:ChatAnthropic")
    assert.include(message, "https://api.anthropic.com/v1/")
    const ollama = decode({ name: "local", use: "langchain_ollama:ChatOllama", model: "qwen3" })
    assert.include(Either.isLeft(ollama) ? ollama.left.message : "", "http://localhost:11434/v1")
    const mine = decode({ name: "mine", use: "my_company.models:Special", model: "x" })
    assert.include(Either.isLeft(mine) ? mine.left.message : "", "a class Antler does not know")
    const vllm = decode({ name: "v", use: "deerflow.models.vllm_provider:VllmChatModel", model: "x" })
    assert.include(Either.isLeft(vllm) ? vllm.left.message : "", "needs its server's address")
    assert.isTrue(Either.isRight(decode({ name: "gpt", use: "langchain_openai:ChatOpenAI", model: "gpt-4o" })))
    const deepseek = Schema.decodeUnknownSync(ModelConfig)({ name: "ds", use: "langchain_deepseek:ChatDeepSeek", model: "deepseek-chat" })
    assert.strictEqual(OpenAiModel.optionsFromConfig(deepseek).baseURL, "https://api.deepseek.com/v1")
  })

  // DeerFlow's PatchedChatDeepSeek / MiMo / StepFun (test_assistant_payload_replay): in thinking mode their servers
  // want each earlier answer's reasoning back, and refuse a call after a tool call without it
  it.scopedLive("sends an answer's reasoning back to DeepSeek's, MiMo's and StepFun's classes, to no other", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start((body) =>
        body.messages.some((m) => m.role === "tool")
          ? "Done."
          : { reasoning: "I should look first.", toolCalls: [{ name: "look", arguments: {} }] }
      )
      const models = Schema.decodeUnknownSync(Schema.Array(ModelConfig))([
        {
          name: "ds",
          use: "deerflow.models.patched_deepseek:PatchedChatDeepSeek",
          model: "deepseek-v4",
          base_url: server.url
        },
        { name: "gpt", use: "langchain_openai:ChatOpenAI", model: "gpt-4o", base_url: server.url }
      ])
      const model = yield* OpenAiModel.fromConfig(models)
      for (const modelName of ["ds", "gpt"]) {
        const settings = { modelName }
        const first = yield* answer(model, request([M.human("look")], { settings }))
        if (first.type !== "ai") return assert.fail("an answer")
        assert.strictEqual(first.additional_kwargs?.reasoning_content, "I should look first.")
        const call = first.tool_calls![0]!
        const result = M.tool("seen", call.id, { name: "look" })
        yield* answer(model, request([M.human("look"), first, result], { settings }))
      }
      const [, ds, , gpt] = server.requests as ReadonlyArray<any>
      assert.strictEqual(ds.messages[1].role, "assistant")
      assert.strictEqual(ds.messages[1].reasoning_content, "I should look first.")
      assert.strictEqual(ds.messages[1].tool_calls[0].function.name, "look")
      assert.notProperty(gpt.messages[1], "reasoning_content")
    }))

  /**
   * A server streaming `calls` as one answer's tool calls, then "Done." once their results come: the answer the
   * model got, and the tool calls it sent back with the results.
   */
  const roundTrip = (calls: ReadonlyArray<unknown>) =>
    Effect.gen(function*() {
      const chunk = (delta: unknown, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "c1", model: "gemini", choices: [{ index: 0, delta, finish_reason: finish }] })}` +
          "\n\n"
      const server = yield* ScriptedChatServer.start((body) =>
        body.messages.some((m) => m.role === "tool")
          ? "Done."
          : { raw: chunk({ role: "assistant", tool_calls: calls }) + chunk({}, "tool_calls") + "data: [DONE]\n\n" }
      )
      const model = yield* OpenAiModel.make({ apiKey: "k", baseURL: server.url, model: "gemini" })
      const first = yield* answer(model, request([M.human("look")]))
      if (first.type !== "ai") return yield* Effect.dieMessage("not an answer")
      const results = first.tool_calls!.map((c) => M.tool("seen", c.id, { name: "look" }))
      yield* answer(model, request([M.human("look"), first, ...results]))
      return { first, sent: (server.requests[1] as any).messages[1].tool_calls as ReadonlyArray<any> }
    })

  // DeerFlow's PatchedChatOpenAI (test_patched_openai): a Gemini thinking model behind an OpenAI-compatible gateway
  // refuses the request after a tool call unless each call comes back with its thought_signature
  it.scopedLive("sends each tool call's thought_signature back as the server gave it (either spelling)", () =>
    Effect.gen(function*() {
      const { first, sent } = yield* roundTrip([
        { index: 0, id: "call_a", thought_signature: "sig-A==", function: { name: "look", arguments: "{}" } },
        { index: 1, id: "call_b", thoughtSignature: "sig-B==", function: { name: "look", arguments: "{}" } },
        { index: 2, id: "call_c", function: { name: "look", arguments: "{}" } }
      ])
      assert.deepStrictEqual(first.tool_calls!.map((c) => c.id), ["call_a", "call_b", "call_c"])
      assert.deepStrictEqual(sent.map((c: any) => [c.id, c.thought_signature]), [
        ["call_a", "sig-A=="],
        ["call_b", "sig-B=="],
        ["call_c", undefined]
      ])
    }))

  // (an attack: a hostile server's signature is the model's text, kept in the thread and sent with every later call)
  it.scopedLive("a thought_signature over 64 KiB, or not a text, is not kept: the call goes back without it", () =>
    Effect.gen(function*() {
      const call = (id: string, signature: unknown) =>
        ({ index: Number(id.at(-1)), id, thought_signature: signature, function: { name: "look", arguments: "{}" } })
      const { first, sent } = yield* roundTrip([
        call("call_0", "s".repeat(65_537)),
        call("call_1", { nested: "sig" }),
        call("call_2", ["sig"]),
        call("call_3", "s".repeat(65_536))
      ])
      assert.deepStrictEqual(Object.keys(first.additional_kwargs?.thought_signatures as object), ["call_3"])
      assert.deepStrictEqual(sent.map((c: any) => [c.id, c.thought_signature?.length]), [
        ["call_0", undefined],
        ["call_1", undefined],
        ["call_2", undefined],
        ["call_3", 65_536]
      ])
    }))

  it.scopedLive("routes each request by settings.modelName; an unknown name is a bad_request listing the models", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => "ok")
      const models = Schema.decodeUnknownSync(Schema.Array(ModelConfig))([
        { name: "fast", model: "fast-v1", base_url: server.url, api_key: "key-fast" },
        {
          name: "deep",
          model: "deep-v2",
          api_base: server.url,
          api_key: "key-deep",
          supports_reasoning_effort: true,
          max_tokens: 100,
          timeout: 30
        }
      ])
      const model = yield* OpenAiModel.fromConfig(models)
      succeed((yield* generate(model, request([M.human("a")]))).response)
      const deep = request([M.human("b")], { settings: { modelName: "deep", reasoningEffort: "low" } })
      succeed((yield* generate(model, deep)).response)
      const nope = request([M.human("c")], { settings: { modelName: "nope" } })
      const unknown = failed((yield* generate(model, nope)).response)
      assert.strictEqual(unknown.reason, "bad_request")
      assert.match(unknown.message, /"nope".*fast, deep/)
      assert.deepStrictEqual(server.requests.map((r: any) => [r.model, r.max_tokens, r.reasoning_effort]), [
        ["fast-v1", undefined, undefined],
        ["deep-v2", 100, "low"]
      ])
      assert.deepStrictEqual(server.headers.map((h) => h.authorization), ["Bearer key-fast", "Bearer key-deep"])
    }))

  it.scopedLive("takes base URL, key and model from the environment when not given", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["from env", "no models configured", "keyless"])
      const env = ConfigProvider.fromMap(new Map([
        ["OPENAI_BASE_URL", server.url],
        ["OPENAI_API_KEY", "sk-from-env"],
        ["OPENAI_MODEL", "env-model"]
      ]))
      const model = yield* OpenAiModel.make().pipe(Effect.withConfigProvider(env))
      const message = succeed((yield* generate(model, request([M.human("hi")]))).response).message
      assert.strictEqual(message.content, "from env")
      assert.strictEqual((server.requests[0] as any).model, "env-model")
      assert.strictEqual(server.headers[0]!.authorization, "Bearer sk-from-env")
      const missing = yield* Effect.either(
        OpenAiModel.make().pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      )
      assert.isTrue(Either.isLeft(missing))
      if (Either.isLeft(missing)) assert.include(String(missing.left), "OPENAI_MODEL")
      // With no `models` in config.yaml, the one model comes from the environment too.
      const fallback = yield* OpenAiModel.fromConfig([]).pipe(Effect.withConfigProvider(env))
      assert.strictEqual((yield* answer(fallback, request([M.human("hi")]))).content, "no models configured")
      // A local server needs no key: a placeholder is sent rather than failing.
      const keyless = yield* OpenAiModel.make({ baseURL: server.url, model: "local" }).pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map()))
      )
      succeed((yield* generate(keyless, request([M.human("hi")]))).response)
      assert.deepStrictEqual(server.requests.map((r: any) => r.model), ["env-model", "env-model", "local"])
      assert.match(server.headers[2]!.authorization!, /^Bearer \S+$/)
      assert.notInclude(server.headers[2]!.authorization!, "sk-from-env")
    }))

  it.scopedLive("layerFromAppConfig serves the models of the loaded config.yaml", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(["configured"])
      const models = Schema.decodeUnknownSync(Schema.Array(ModelConfig))([
        { name: "main", model: "main-v1", base_url: server.url, api_key: "k" }
      ])
      const app = Layer.succeed(AppConfigService, {
        config: { ...defaults(), models },
        source: undefined,
        home: "/tmp",
        ignored: []
      })
      const model = yield* Effect.provide(ModelService, OpenAiModel.layerFromAppConfig().pipe(Layer.provide(app)))
      assert.strictEqual((yield* answer(model, request([M.human("hi")]))).content, "configured")
      assert.strictEqual((server.requests[0] as any).model, "main-v1")
    }))
})

// ---------------------------------------------------------------------------------------------------------
// Pure parts

const jsonObject = FastCheck.dictionary(FastCheck.string(), FastCheck.jsonValue())
  .map((o) => JSON.parse(JSON.stringify(o)) as Record<string, unknown>)

describe("OpenAiModel assembly", () => {
  it.prop(
    "assembles the same text and tool call however the stream is split",
    { args: jsonObject, text: FastCheck.string(), cuts: FastCheck.array(FastCheck.nat(), { maxLength: 12 }) },
    ({ args, cuts, text }) => {
      const acc = OpenAiModel.accumulator("msg-1", "m")
      let streamed = ""
      for (const piece of cutAt(text, cuts)) {
        streamed += acc.add({ id: "c1", choices: [{ index: 0, delta: { content: piece } }] }).text
      }
      const pieces = cutAt(JSON.stringify(args), cuts)
      const callDelta = (part: Record<string, unknown>) =>
        acc.add({ choices: [{ index: 0, delta: { tool_calls: [part] } }] })
      callDelta({ index: 0, id: "call_1", function: { name: "f", arguments: pieces[0]! } })
      for (const piece of pieces.slice(1)) callDelta({ index: 0, function: { arguments: piece } })
      acc.add({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] })
      const message = Either.getOrThrow(acc.finish())
      assert.strictEqual(streamed, text)
      assert.strictEqual(message.content, text)
      // (less any `__proto__` key, which the arguments are parsed without: see Json.parse)
      const kept = Json.withoutProto(args)
      assert.deepStrictEqual(message.tool_calls, [{ id: "call_1", name: "f", args: kept, type: "tool_call" }])
      // And back on the wire: the arguments string decodes to the same object.
      const wire = OpenAiModel.toChatMessage(message) as any
      assert.deepStrictEqual(JSON.parse(wire.tool_calls[0].function.arguments), kept)
    }
  )

  it("keeps calls apart by index, even when their deltas interleave", () => {
    const acc = OpenAiModel.accumulator("msg-2", "m")
    const part = (index: number, fn: Record<string, string>, id?: string) =>
      acc.add({ choices: [{ index: 0, delta: { tool_calls: [{ index, ...(id ? { id } : {}), function: fn }] } }] })
    part(0, { name: "a", arguments: "{\"x\":" }, "call_a")
    part(1, { name: "b", arguments: "" }, "call_b")
    part(1, { arguments: "{\"y\":2}" })
    part(0, { arguments: "1}" })
    const message = Either.getOrThrow(acc.finish())
    assert.deepStrictEqual(
      message.tool_calls?.map((c) => [c.id, c.name, c.args]),
      [["call_a", "a", { x: 1 }], ["call_b", "b", { y: 2 }]]
    )
  })

  it("maps usage, with cache and reasoning details when present", () => {
    const acc = OpenAiModel.accumulator("msg-3", "m")
    acc.add({ choices: [{ index: 0, delta: { content: "x" }, finish_reason: "stop" }] })
    acc.add({
      choices: [],
      usage: {
        prompt_tokens: 100,
        completion_tokens: 20,
        total_tokens: 120,
        prompt_tokens_details: { cached_tokens: 64 },
        completion_tokens_details: { reasoning_tokens: 12 }
      }
    })
    assert.deepStrictEqual(Either.getOrThrow(acc.finish()).usage_metadata, {
      input_tokens: 100,
      output_tokens: 20,
      total_tokens: 120,
      input_token_details: { cache_read: 64 },
      output_token_details: { reasoning: 12 }
    })
  })

  it("keeps the answer when usage is malformed: counts that are not token counts are dropped", () => {
    const answerWith = (usage: unknown) => {
      const acc = OpenAiModel.accumulator("msg-4", "m")
      acc.add({ choices: [{ index: 0, delta: { content: "x" }, finish_reason: "stop" }], usage })
      return Either.getOrThrow(acc.finish())
    }
    assert.deepStrictEqual(answerWith({ prompt_tokens: -3, completion_tokens: 1.5 }).usage_metadata, {
      input_tokens: 0,
      output_tokens: 1,
      total_tokens: 1
    })
    for (const usage of ["lots", 12, [1, 2], { prompt_tokens: "12" }, { completion_tokens: Infinity }]) {
      const message = answerWith(usage)
      assert.strictEqual(message.content, "x")
      assert.isUndefined(message.usage_metadata)
    }
  })
})
