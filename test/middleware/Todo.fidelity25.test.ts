/**
 * Plan mode says what DeerFlow's says, word for word: the `<todo_list_system>` guidance appended to the system
 * prompt, `write_todos`'s description, the completion and compaction reminders, and LangChain's parallel-call error.
 * The fixtures under test/fixtures/deerflow/prompts are rendered by DeerFlow's own code (its lead agent's
 * `_create_todo_list_middleware` and `todo_middleware.py`). Also ported: DeerFlow's test_todo_middleware.py
 * (the reminder texts: formatted items, only incomplete ones, the system prompt with no reminder pending).
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
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as Todo from "../../src/middleware/Todo.js"
import * as App from "../../src/programs/App.js"
import * as Factory from "../../src/programs/Factory.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const fixtures = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "deerflow", "prompts")
const fixture = (name: string) => Fs.readFileSync(Path.join(fixtures, name), "utf8")

const TRIP = [
  { content: "Book train", status: "completed" },
  { content: "Pack", status: "in_progress" },
  { content: "Tell Sam", status: "pending" }
] as const

// LangChain's TodoListMiddleware.after_model (test_todo_middleware's parallel case asserts its opening words)
const PARALLEL_ERROR = "Error: The `write_todos` tool should never be called multiple times in parallel. " +
  "Please call it only once per model invocation to update the todo list."

const textOf = (m: { readonly [key: string]: unknown }): string =>
  typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")

const setup = (script: (body: ChatRequestBody, index: number) => Turn) =>
  Effect.gen(function*() {
    let index = 0
    const server = yield* ScriptedChatServer.start((body) => script(body, index++))
    const app = yield* ConfigFile.fromObject({
      models: [{ name: "scripted", model: "scripted-model", base_url: server.url, api_key: "sk-test-fid25" }],
      memory: { enabled: false },
      title: { enabled: false }
    }, { home: tempDir("antler-fid25-todo-") })
    const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
    const context = yield* Layer.build(App.factoryLayer(app, choice).pipe(Layer.provide(NodeFileSystem.layer)))
    return {
      server,
      factory: Context.get(context, Factory.AgentFactory),
      store: Context.get(context, ThreadStore)
    }
  })

const toolsOf = (body: ChatRequestBody) =>
  (body.tools ?? []) as ReadonlyArray<{ readonly function: { readonly name: string; readonly description?: string } }>

describe("Todo: DeerFlow's words, as the model receives them", () => {
  it.scoped("plan mode: the guidance after the system prompt, the tool's description, parallel error, reminder", () =>
    Effect.gen(function*() {
      const { factory, server, store } = yield* setup((_, i) =>
        [
          {
            toolCalls: [
              { id: "w1", name: "write_todos", arguments: { todos: [{ content: "A", status: "pending" }] } },
              { id: "w2", name: "write_todos", arguments: { todos: [{ content: "B", status: "pending" }] } }
            ]
          },
          { toolCalls: [{ id: "w3", name: "write_todos", arguments: { todos: TRIP } }] },
          "All done.",
          "Packing now.",
          "Really done."
        ][i] ?? "Done."
      )
      const events = yield* Stream.runCollect(factory.run({
        threadId: "plan",
        prompt: "Plan the trip",
        settings: { model_name: "scripted", is_plan_mode: true }
      }))
      assert.deepInclude(Array.from(events).at(-1), { type: "run_end", status: "success" })
      const first = server.requests[0]!
      // LangChain appends the guidance to the system message after a blank line
      const system = textOf(first.messages[0]!)
      assert.strictEqual(first.messages[0]!.role, "system")
      assert.isTrue(system.endsWith(`\n\n${fixture("todo_list_system.txt")}`), system.slice(-300))
      const tool = toolsOf(first).find((t) => t.function.name === "write_todos")
      assert.strictEqual(tool?.function.description, fixture("write_todos_description.txt"))
      // every request of the run carries the same system prompt
      assert.strictEqual(new Set(server.requests.map((b) => textOf(b.messages[0]!))).size, 1)

      // the two parallel writes: each refused with LangChain's words, the list unchanged by them
      const state = Option.getOrThrow(yield* store.load("plan")).state
      const refused = state.messages.filter((m): m is M.ToolMessage =>
        m.type === "tool" && (m.tool_call_id === "w1" || m.tool_call_id === "w2")
      )
      assert.deepStrictEqual(refused.map((m) => [M.text(m), m.status]), [
        [PARALLEL_ERROR, "error"],
        [PARALLEL_ERROR, "error"]
      ])
      assert.deepStrictEqual(state.todos, TRIP.map((t) => ({ ...t })))

      // the final answer with open items: the next request ends with DeerFlow's completion reminder
      const reminded = server.requests[3]!.messages.at(-1)!
      assert.strictEqual(reminded.role, "user")
      assert.strictEqual(textOf(reminded), fixture("todo_completion_reminder.txt"))
    }))

  it.scoped("without plan mode: no guidance, no write_todos", () =>
    Effect.gen(function*() {
      const { factory, server } = yield* setup(() => "Hello.")
      yield* Stream.runDrain(factory.run({ threadId: "plain", prompt: "Hi", settings: { model_name: "scripted" } }))
      assert.notInclude(textOf(server.requests[0]!.messages[0]!), "<todo_list_system>")
      assert.isFalse(toolsOf(server.requests[0]!).some((t) => t.function.name === "write_todos"))
    }))
})

// DeerFlow backend/tests/test_todo_middleware.py
describe("Todo: DeerFlow's test_todo_middleware (the texts)", () => {
  it("the compaction reminder is DeerFlow's, listing every item as - [status] content", () => {
    const text = Todo.reminderText(TRIP)
    assert.strictEqual(text, fixture("todo_reminder.txt"))
    assert.include(text, "- [completed] Book train")
    assert.include(text, "- [in_progress] Pack")
    assert.include(text, "- [pending] Tell Sam")
    assert.include(text, "system_reminder")
  })

  it("the completion reminder is DeerFlow's and lists only the incomplete items", () => {
    const open = TRIP.filter((t) => t.status !== "completed")
    const text = Todo.completionReminderText(open)
    assert.strictEqual(text, fixture("todo_completion_reminder.txt"))
    assert.notInclude(text, "Book train")
    assert.include(text, "Pack")
    assert.include(text, "Tell Sam")
  })

  it("the guidance names write_todos and DeerFlow's rules", () => {
    assert.strictEqual(Todo.SYSTEM_PROMPT, fixture("todo_list_system.txt"))
    assert.include(Todo.SYSTEM_PROMPT, "write_todos")
    assert.include(Todo.SYSTEM_PROMPT, "Keep EXACTLY ONE task as `in_progress` at any time")
    assert.strictEqual(Todo.writeTodos.description, fixture("write_todos_description.txt"))
  })
})
