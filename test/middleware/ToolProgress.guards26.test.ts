/**
 * DeerFlow's tool_progress_middleware.py, where the model reads the words: the hint the next request carries
 * (`_format_hint`) and a blocked call's result (`[TOOL_BLOCKED] ` and `_block_reason`) are DeerFlow's, word for
 * word. Driven through the real `openai` client against a loopback server, in the lead agent's chain.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
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
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

describe("ToolProgress (DeerFlow's words)", () => {
  it.effect("repeated timeouts: DeerFlow's hint, then '[TOOL_BLOCKED] Repeated transient failures — ...'", () =>
    Effect.gen(function*() {
      let runs = 0
      const fetch = Tool.make({
        name: "web_fetch",
        description: "Fetches a page.",
        parameters: Schema.Struct({ url: Schema.String }),
        handler: () => Effect.sync(() => (runs++, "Error: connection timed out"))
      })
      // a different page each time, so loop detection has nothing to say
      const call = (n: number) => ({
        toolCalls: [{ name: "web_fetch", arguments: { url: `https://example.com/${n}` } }]
      })
      const server = yield* ScriptedChatServer.start([...[0, 1, 2, 3, 4, 5].map(call), "done"])
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "scripted" })
      const config = { memory: { enabled: false }, tool_progress: { enabled: true } }
      const context = yield* Layer.build(
        LeadAgent.layer({ sandboxTools: false, tools: [fetch], systemPrompt: "You are a test agent." }).pipe(
          Layer.provide(Layer.succeed(ModelService, model)),
          Layer.provide(Layer.merge(Layer.succeed(ThreadStore, MemoryThreadStore.make()), LocalSandbox.layer())),
          Layer.provide(ConfigFile.layerFromObject(config, { home: tempDir("antler-tp-") }))
        )
      )
      yield* Context.get(context, LeadAgent.LeadAgent).turn({ threadId: "t", prompt: "fetch it" })
      assert.strictEqual(runs, 5)
      const hint = server.requests[3]!.messages.at(-1)!
      assert.strictEqual(hint.role, "user")
      assert.strictEqual(
        hint.content,
        "[PROGRESS HINT] The tool encountered repeated transient failures. Consider using a different tool or " +
          "strategy."
      )
      const blocked = server.requests[6]!.messages.at(-1)!
      assert.strictEqual(blocked.role, "tool")
      assert.strictEqual(blocked.content, "[TOOL_BLOCKED] Repeated transient failures — try a different approach.")
    }).pipe(Effect.scoped))
})
