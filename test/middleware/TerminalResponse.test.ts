/**
 * TerminalResponse: a model that runs tools for the user and then answers nothing is asked again once (with a
 * hidden reminder in that request only); if it stays silent, the user gets a fallback saying so and the run
 * ends as an error. Checked over the scripted model and, end to end, through the lead agent with the real
 * OpenAI client against the loopback scripted server.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import { FALLBACK_MARKER } from "../../src/middleware/LLMErrorHandling.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as TerminalResponse from "../../src/middleware/TerminalResponse.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ModelService, withUpdate } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"

const tempDir = tempDirs()

const lookup = Tool.make({
  name: "lookup",
  description: "Looks something up.",
  parameters: Schema.Struct({ q: Schema.String }),
  handler: ({ q }) => Effect.succeed(`The answer to ${q} is 42.`)
})

const callLookup = { toolCalls: [{ name: "lookup", args: { q: "life" } }] }

const reminders = (request: ModelRequest) => request.messages.filter((m) => m.name === TerminalResponse.RECOVERY_NAME)

const run = (script: H.RunSpec<never>["script"], extra: ReadonlyArray<MW.Middleware> = [], threadId?: string) =>
  H.run({
    script,
    tools: [lookup],
    ...(threadId !== undefined ? { threadId } : {}),
    middlewares: () => [TerminalResponse.layer(), ...extra]
  })

describe("TerminalResponse", () => {
  it.effect("an empty answer after tool results is asked again once, with a hidden reminder in that request only", () =>
    Effect.gen(function*() {
      const out = yield* run([callLookup, "", "The answer is 42."])
      assert.lengthOf(out.requests, 3)
      assert.deepStrictEqual(out.requests.map((r) => reminders(r).length), [0, 0, 1])
      const retry = out.requests[2]!
      const reminder = retry.messages.at(-1)!
      assert.strictEqual(reminder.name, TerminalResponse.RECOVERY_NAME)
      assert.isTrue(M.isHidden(reminder))
      assert.match(M.text(reminder), /^<system_reminder>\n[\s\S]*was empty[\s\S]*\n<\/system_reminder>$/)
      // the retry is the same request plus the reminder: the empty answer is not in it
      assert.deepStrictEqual(retry.messages.slice(0, -1), out.requests[1]!.messages)
      // the thread keeps neither the empty answer nor the reminder
      assert.deepStrictEqual(out.state.messages.map((m) => [m.type, M.text(m)]), [
        ["human", "hello"],
        ["ai", ""],
        ["tool", "The answer to life is 42."],
        ["ai", "The answer is 42."]
      ])
      assert.isTrue(M.hasToolCalls(out.state.messages[1]!))
      assert.strictEqual(out.end.status, "success")
    }).pipe(H.withStore))

  it.effect("a second empty answer becomes a fallback the user reads, and the run ends as an error", () =>
    Effect.gen(function*() {
      const out = yield* run([callLookup, "", "   \n"])
      assert.lengthOf(out.requests, 3)
      const last = out.state.messages.at(-1)!
      assert.strictEqual(last.type, "ai")
      assert.strictEqual(M.text(last), TerminalResponse.FALLBACK_TEXT)
      assert.include(M.text(last), "including after one automatic retry")
      // DeerFlow's test_terminal_response_middleware: these words exactly, and the run's error is the reason
      assert.include(M.text(last), "returned no final response")
      assert.strictEqual(last.additional_kwargs?.[FALLBACK_MARKER], true)
      assert.strictEqual(
        last.additional_kwargs?.error_reason,
        "Model returned an empty terminal response after one retry"
      )
      assert.strictEqual(out.state.messages.filter((m) => m.type === "ai" && !M.hasToolCalls(m)).length, 1)
      assert.strictEqual(out.end.status, "error")
      assert.deepStrictEqual(out.end.error, {
        name: "EmptyTerminalResponse",
        message: "Model returned an empty terminal response after one retry"
      })
      const saved = out.events.filter((e) => e.type === "message" && e.message.type === "ai").at(-1)
      assert.strictEqual(saved?.type === "message" ? M.text(saved.message) : undefined, TerminalResponse.FALLBACK_TEXT)
    }).pipe(H.withStore))

  it.effect("the retry is once per run: a later empty answer after more tools ends the run at once", () =>
    Effect.gen(function*() {
      const out = yield* run([callLookup, "", callLookup, ""])
      assert.lengthOf(out.requests, 4)
      assert.deepStrictEqual(out.requests.map((r) => reminders(r).length), [0, 0, 1, 0])
      assert.strictEqual(out.end.status, "error")
      assert.strictEqual(M.text(out.state.messages.at(-1)!), TerminalResponse.FALLBACK_TEXT)
    }).pipe(H.withStore))

  it.effect("an empty answer with no tool result since the user's message is left alone", () =>
    Effect.gen(function*() {
      const first = yield* run([callLookup, "Done."], [], "two-turns")
      assert.strictEqual(first.end.status, "success")
      // a new turn: the tool results belong to the previous one; hidden messages do not start a turn
      const second = yield* run([""], [], "two-turns")
      assert.lengthOf(second.requests, 1)
      assert.strictEqual(second.end.status, "success")
      assert.strictEqual(M.text(second.state.messages.at(-1)!), "")
      assert.isTrue(TerminalResponse.toolResultInCurrentTurn([
        M.human("q"),
        M.tool("r", "c1", { name: "lookup" }),
        M.human("note", { additional_kwargs: { hide_from_ui: true } })
      ]))
    }).pipe(H.withStore))

  it("empty means no visible text and no tool-call intent in any form", () => {
    assert.isFalse(TerminalResponse.isEmptyTerminal(M.ai([{ type: "text", text: " ok " }])))
    assert.isFalse(TerminalResponse.isEmptyTerminal(M.ai("", { additional_kwargs: { function_call: { name: "x" } } })))
    assert.isFalse(TerminalResponse.isEmptyTerminal(M.ai("", { response_metadata: { finish_reason: "tool_calls" } })))
    assert.isTrue(TerminalResponse.isEmptyTerminal(M.ai([{ type: "reasoning", reasoning: "hmm" }])))
    assert.isTrue(TerminalResponse.isEmptyTerminal(M.ai(" \n\t")))
  })

  it.effect("state changes that came with the dropped answer are kept, before the later answer's", () =>
    Effect.gen(function*() {
      // an inner middleware that writes a hidden note with every response
      let n = 0
      const noting = MW.make({
        model: (request, next) =>
          Effect.map(next(request), (response) =>
            withUpdate(response, {
              messages: [M.human(`note ${n++}`, { name: "note", additional_kwargs: { hide_from_ui: true } })]
            }))
      })
      const out = yield* run([callLookup, "", "Fine."], [noting])
      const notes = out.state.messages.filter((m) => m.name === "note").map((m) => M.text(m))
      assert.deepStrictEqual(notes, ["note 0", "note 1", "note 2"])
      assert.strictEqual(M.text(out.state.messages.at(-1)!), "Fine.")
    }).pipe(H.withStore))

  it.effect("a re-ask that fails is retried by the layer outside with the reminder still in the request", () =>
    Effect.gen(function*() {
      let failed = false
      const script = (request: ModelRequest, call: number) => {
        if (call === 0) return callLookup
        if (call === 1) return ""
        if (!failed) {
          failed = true
          return undefined
        }
        return "Recovered."
      }
      const retryOnce = MW.make({ model: (request, next) => Effect.catchAll(next(request), () => next(request)) })
      const out = yield* H.run({
        script,
        tools: [lookup],
        middlewares: () => [retryOnce, TerminalResponse.layer()]
      })
      assert.deepStrictEqual(out.requests.map((r) => reminders(r).length), [0, 0, 1, 1])
      assert.strictEqual(M.text(out.state.messages.at(-1)!), "Recovered.")
      assert.strictEqual(out.end.status, "success")
    }).pipe(H.withStore))

  it.effect("internal calls are never retried", () =>
    Effect.gen(function*() {
      const out = yield* H.run({
        script: (request, call) => (request.internal !== undefined ? "" : call < 2 ? callLookup : "Done."),
        tools: [lookup],
        middlewares: () => [H.internalCaller(), TerminalResponse.layer()]
      })
      assert.isTrue(out.requests.every((r) => reminders(r).length === 0))
      assert.strictEqual(out.end.status, "success")
    }).pipe(H.withStore))
})

describe("TerminalResponse in the lead agent, over the real OpenAI client", () => {
  it.scopedLive("a whitespace-only answer after a tool call is asked again; the user gets the second answer", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([
        { toolCalls: [{ name: "lookup", arguments: { q: "life" } }] },
        { content: "\n\n  " },
        { content: "It is 42." }
      ])
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "scripted" })
      const store = MemoryThreadStore.make()
      const context = yield* Layer.build(
        LeadAgent.layer({ sandboxTools: false, tools: [lookup], systemPrompt: "You are a test agent." }).pipe(
          Layer.provide(Layer.succeed(ModelService, model)),
          Layer.provide(Layer.merge(Layer.succeed(ThreadStore, store), LocalSandbox.layer())),
          Layer.provide(ConfigFile.layerFromObject({ memory: { enabled: false } }, { home: tempDir("antler-tr-") }))
        )
      )
      const agent = Context.get(context, LeadAgent.LeadAgent)
      const end = yield* agent.turn({ threadId: "silent", prompt: "What is the answer?" })
      assert.strictEqual(end.status, "success")
      assert.lengthOf(server.requests, 3)
      const last = server.requests[2]!.messages.at(-1)!
      assert.strictEqual(last.role, "user")
      assert.include(String(last.content), "was empty")
      const thread = Option.getOrThrow(yield* store.load("silent")).state
      const answers = thread.messages.filter((m) => m.type === "ai" && !M.hasToolCalls(m)).map((m) => M.text(m))
      assert.deepStrictEqual(answers, ["It is 42."])
      assert.isFalse(thread.messages.some((m) => m.name === TerminalResponse.RECOVERY_NAME))
    }))
})
