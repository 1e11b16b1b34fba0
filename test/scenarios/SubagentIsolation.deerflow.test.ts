/**
 * DeerFlow test_subagent_checkpointer_isolation.py: a subagent is a one-shot delegation that must not inherit its
 * parent run's checkpointer (there it crashed on a synchronous SQLite saver). In Antler's terms, through the
 * factory over SQLite, the real `openai` client and the scripted server: a subagent under a SQLite-backed parent
 * runs, and the parent's thread keeps only the task call and its result, not the subagent's own steps; no thread
 * is stored for the subagent; the parent's next turn resumes from its checkpoint and shows the model none of them.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as Factory from "../../src/programs/Factory.js"
import { threadPaths } from "../../src/services/Sandbox.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const SLOW = 60_000
const PRIVATE = "SUBAGENT-PRIVATE-NOTE"

const textOf = (m: { readonly [key: string]: unknown }): string =>
  typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")

const isSubagent = (body: ChatRequestBody) =>
  body.messages[0]?.role === "system" &&
  textOf(body.messages[0]).startsWith("You are a general-purpose subagent working on a delegated task.")

const answers = (body: ChatRequestBody) => body.messages.filter((m) => m.role === "assistant").length

const script = (body: ChatRequestBody): Turn => {
  const step = answers(body)
  if (isSubagent(body)) {
    return step === 0
      ? {
        content: `${PRIVATE}: writing the file first.`,
        toolCalls: [{
          id: "sub_write",
          name: "write_file",
          arguments: { description: "save", path: "/mnt/user-data/workspace/notes.md", content: "from the subagent" }
        }]
      }
      : "Wrote notes.md."
  }
  if (step === 0) {
    return {
      content: "Delegating.",
      toolCalls: [{
        id: "call_task",
        name: "task",
        arguments: {
          description: "Write notes",
          prompt: "Write notes.md. Report what you did.",
          subagent_type: "general-purpose"
        }
      }]
    }
  }
  return step === 1 ? "The notes are written." : "Still here."
}

describe("a subagent under a SQLite-backed parent", () => {
  it.live("runs; the parent's thread keeps the task call and its result only, and resumes from its checkpoint", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const home = tempDir("antler-sub-iso-")
      const app = yield* ConfigFile.fromObject({
        models: [{ name: "scripted", model: "scripted-model", base_url: server.url, api_key: "sk-test-iso" }],
        memory: { enabled: false }
      }, { home })
      const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
      const context = yield* Layer.build(App.factoryLayer(app, choice, {}).pipe(Layer.provide(NodeFileSystem.layer)))
      const factory = Context.get(context, Factory.AgentFactory)
      const store = Context.get(context, ThreadStore)
      const settings = { model_name: "scripted", subagent_enabled: true }
      const run = (prompt: string) =>
        Effect.map(Stream.runCollect(factory.run({ threadId: "iso", prompt, settings })), (c) => Array.from(c))

      const first = yield* run("Have notes written")
      assert.deepInclude(first.at(-1)!, { type: "run_end", status: "success" })
      const workspace = threadPaths(home, "default", "iso").workspace
      assert.strictEqual(Fs.readFileSync(Path.join(workspace, "notes.md"), "utf8"), "from the subagent")

      const state = Option.getOrThrow(yield* store.load("iso")).state
      const conversation = state.messages.filter((m) => m.type !== "system")
      assert.deepStrictEqual(conversation.map((m) => m.type), ["human", "ai", "tool", "ai"])
      const result = conversation[2]!
      assert.strictEqual(result.type === "tool" && result.tool_call_id, "call_task")
      assert.strictEqual(M.text(result), "Task Succeeded. Result: Wrote notes.md.")
      assert.notInclude(JSON.stringify(state.messages), PRIVATE)
      assert.notInclude(JSON.stringify(state.messages), "sub_write")
      assert.deepStrictEqual((yield* store.list).map((t) => t.thread_id), ["iso"], "no thread of its own")

      const before = server.requests.length
      const second = yield* run("Are you still there?")
      assert.deepInclude(second.at(-1)!, { type: "run_end", status: "success" })
      const next = server.requests.slice(before).find((b) => !isSubagent(b))!
      const sent = JSON.stringify(next.messages)
      assert.include(sent, "Have notes written", "the first turn, from the checkpoint")
      assert.include(sent, "Task Succeeded. Result: Wrote notes.md.")
      assert.notInclude(sent, PRIVATE)
      assert.notInclude(sent, "sub_write")
    })), SLOW)
})
