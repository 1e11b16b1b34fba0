/**
 * DeerFlow's safety_finish_reason_middleware.py, where the model and the user read the words: the explanation
 * appended to a safety-stopped response is DeerFlow's `_USER_FACING_MESSAGE` (tool calls suppressed) or
 * `_USER_FACING_EMPTY_MESSAGE` (nothing shown), word for word, the reason and detector as Python's `repr`.
 * Driven through the real `openai` client against a loopback server, in the lead agent's chain.
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
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import { ModelService } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const writeFile = (runs: Array<string>) =>
  Tool.make({
    name: "write_file",
    description: "Writes a file.",
    parameters: Schema.Struct({ path: Schema.String, content: Schema.String }),
    handler: ({ path }) => Effect.sync(() => (runs.push(path), "written"))
  })

/** One turn of the lead agent over the real client; the last AI message's text and the run's end. */
const turn = (script: ScriptedChatServer.Script, runs: Array<string>) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(script)
    const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "scripted" })
    const store = MemoryThreadStore.make()
    const context = yield* Layer.build(
      LeadAgent.layer({ sandboxTools: false, tools: [writeFile(runs)], systemPrompt: "You are a test agent." }).pipe(
        Layer.provide(Layer.succeed(ModelService, model)),
        Layer.provide(Layer.merge(Layer.succeed(ThreadStore, store), LocalSandbox.layer())),
        Layer.provide(ConfigFile.layerFromObject({ memory: { enabled: false } }, { home: tempDir("antler-sfr-") }))
      )
    )
    const end = yield* Context.get(context, LeadAgent.LeadAgent).turn({ threadId: "t", prompt: "write the story" })
    const thread = Option.getOrThrow(yield* store.load("t")).state
    const last = thread.messages.filter((m) => m.type === "ai").at(-1)!
    return { end, text: M.text(last), calls: M.hasToolCalls(last) }
  }).pipe(Effect.scoped)

describe("SafetyFinishReason (DeerFlow's words)", () => {
  it.effect("suppressed tool calls: DeerFlow's sentence, finish_reason='content_filter', detector=... as repr", () =>
    Effect.gen(function*() {
      const runs: Array<string> = []
      const out = yield* turn([{
        content: "Partial",
        toolCalls: [{ name: "write_file", arguments: { path: "/mnt/user-data/outputs/x.md", content: "cut" } }],
        finishReason: "content_filter"
      }], runs)
      assert.deepStrictEqual(runs, [])
      assert.isFalse(out.calls)
      assert.strictEqual(
        out.text,
        "Partial\n\nThe model provider stopped this response with a safety-related signal " +
          "(finish_reason='content_filter', detector='openai_compatible_content_filter'). Any tool calls produced " +
          "in this turn were suppressed because their arguments may be truncated and unsafe to execute. Please " +
          "rephrase the request or ask for a narrower output."
      )
    }))

  it.effect("an empty safety stop: DeerFlow's 'returned no content' sentence, nothing said of suppressed calls", () =>
    Effect.gen(function*() {
      const out = yield* turn([{ content: "", finishReason: "content_filter" }], [])
      assert.strictEqual(
        out.text,
        "The model provider stopped this response with a safety-related signal (finish_reason='content_filter', " +
          "detector='openai_compatible_content_filter') and returned no content. Please rephrase your request or " +
          "start a new conversation."
      )
    }))
})
