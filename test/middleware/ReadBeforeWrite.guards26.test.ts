/**
 * DeerFlow's read_before_write_middleware.py, where the model reads the words: a write refused because the file
 * was not read is DeerFlow's `_BLOCK_MESSAGE`, word for word. Driven through the real `openai` client against a
 * loopback server, in the lead agent's chain with the sandbox's own file tools.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as LeadAgent from "../../src/programs/LeadAgent.js"
import { ModelService } from "../../src/services/ModelService.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const file = "/mnt/user-data/workspace/notes.md"
const write = (content: string) => ({
  toolCalls: [{ name: "write_file", arguments: { description: "notes", path: file, content } }]
})

describe("ReadBeforeWrite (DeerFlow's words)", () => {
  it.effect("a second write without a read reads DeerFlow's block message", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([write("# one\n"), write("# two\n"), "done"])
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "test-key", model: "scripted" })
      const context = yield* Layer.build(
        LeadAgent.layer({ systemPrompt: "You are a test agent." }).pipe(
          Layer.provide(Layer.succeed(ModelService, model)),
          Layer.provide(Layer.merge(Layer.succeed(ThreadStore, MemoryThreadStore.make()), LocalSandbox.layer())),
          Layer.provide(ConfigFile.layerFromObject({ memory: { enabled: false } }, { home: tempDir("antler-rbw-") }))
        )
      )
      yield* Context.get(context, LeadAgent.LeadAgent).turn({ threadId: "t", prompt: "write notes" })
      assert.lengthOf(server.requests, 3)
      const refused = server.requests[2]!.messages.at(-1)!
      assert.strictEqual(refused.role, "tool")
      assert.strictEqual(
        refused.content,
        `Error: write_file blocked — ${file} already exists and you have not read its current version. Any write ` +
          "invalidates earlier reads, so re-read before every modification. Call read_file on it (a ranged read of " +
          "the relevant section is enough, e.g. the last ~30 lines before an append), check what is already " +
          "there, then retry."
      )
    }).pipe(Effect.scoped))
})
