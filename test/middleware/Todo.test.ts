/**
 * Plan mode's todo list: write_todos replaces the thread's list; the guidance is appended to the system prompt
 * (the same text on every request); parallel writes are refused; after a compaction removed the writes, the
 * list comes back as a hidden reminder, once.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as Summarization from "../../src/middleware/Summarization.js"
import * as Todo from "../../src/middleware/Todo.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as TS from "../../src/state/ThreadState.js"
import * as H from "../support/harness.js"
import { assertContained, forgedClosers } from "../support/markup.js"

const withConfig = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provide(
    effect,
    Layer.succeed(AppConfigService, { config: defaults(), source: undefined, home: "/tmp", ignored: [] })
  )

const write = (todos: ReadonlyArray<{ content: string; status: string }>, id?: string) => ({
  name: "write_todos",
  args: { todos },
  ...(id !== undefined ? { id } : {})
})

describe("Todo", () => {
  it.effect("write_todos replaces the list; every request carries the same guidance after the system prompt", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        systemPrompt: "You are a test agent.",
        input: "Plan the trip",
        script: [
          {
            toolCalls: [write([
              { content: "Book train", status: "in_progress" },
              { content: "Pack", status: "pending" }
            ])]
          },
          {
            toolCalls: [write([
              { content: "Book train", status: "completed" },
              { content: "Pack", status: "in_progress" }
            ])]
          },
          "Train booked; packing next."
        ],
        middlewares: () => [Todo.layer()]
      })
      assert.deepStrictEqual(o.state.todos, [
        { content: "Book train", status: "completed" },
        { content: "Pack", status: "in_progress" }
      ])
      const prompts = new Set(o.requests.map((r) => r.systemPrompt))
      assert.deepStrictEqual([...prompts], [`You are a test agent.\n\n${Todo.SYSTEM_PROMPT}`])
      assert.isTrue(o.requests.every((r) => r.tools.some((t) => t.name === "write_todos")))
      const states = o.events.filter((e) => e.type === "state" && e.update.todos !== undefined)
      assert.lengthOf(states, 2)
      const first = o.state.messages.find((m) => m.type === "tool")!
      assert.match(M.text(first), /^Updated todo list to \[/)
    }).pipe(H.withStore))

  it.effect("two write_todos in one response: both refused, the list unchanged", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan",
        script: [
          { toolCalls: [write([{ content: "A", status: "pending" }]), write([{ content: "B", status: "pending" }])] },
          "ok"
        ],
        middlewares: () => [Todo.layer()]
      })
      assert.isNull(o.state.todos)
      const results = o.state.messages.filter((m): m is M.ToolMessage => m.type === "tool")
      assert.deepStrictEqual(results.map((r) => r.status), ["error", "error"])
      assert.include(M.text(results[0]!), "should never be called multiple times in parallel")
    }).pipe(H.withStore))

  it.effect("a final answer with open items is asked again with a hidden reminder, at most twice a run", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan the trip",
        script: [
          {
            toolCalls: [write([
              { content: "Book train", status: "completed" },
              { content: "Pack", status: "in_progress" },
              { content: "Tell Sam", status: "pending" }
            ])]
          },
          "All done.",
          "Packing now.",
          "Really done."
        ],
        middlewares: () => [Todo.layer()]
      })
      assert.lengthOf(o.requests, 4)
      const last = (r: ModelRequest) => r.messages.at(-1)!
      assert.strictEqual(last(o.requests[2]!).name, Todo.COMPLETION_REMINDER_NAME)
      assert.strictEqual(last(o.requests[2]!).additional_kwargs?.hide_from_ui, true)
      assert.include(M.text(last(o.requests[2]!)), "- [in_progress] Pack\n- [pending] Tell Sam")
      assert.notInclude(M.text(last(o.requests[2]!)), "Book train")
      assert.strictEqual(M.text(o.requests[2]!.messages.at(-2)!), "All done.")
      assert.strictEqual(last(o.requests[3]!).name, Todo.COMPLETION_REMINDER_NAME)
      // the answers stay in the thread, in order; the reminders were only sent
      const answers = o.state.messages.filter((m) => m.type === "ai" && !M.hasToolCalls(m)).map(M.text)
      assert.deepStrictEqual(answers, ["All done.", "Packing now.", "Really done."])
      assert.isFalse(o.state.messages.some((m) => m.name === Todo.COMPLETION_REMINDER_NAME))
      assert.strictEqual(o.end.status, "success")
    }).pipe(H.withStore))

  it.effect("a todo item that forges the reminder's end stays inside <system_reminder> in the model's request", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Research the topic",
        script: [
          { toolCalls: [write([{ content: `Read the page ${forgedClosers("system_reminder")}`, status: "pending" }])] },
          "All done.",
          "Done now."
        ],
        middlewares: () => [Todo.layer()]
      })
      const reminder = o.requests[2]!.messages.at(-1)!
      assert.strictEqual(reminder.name, Todo.COMPLETION_REMINDER_NAME)
      assertContained(M.text(reminder), "system_reminder")
      // the reminder that brings the list back after a compaction too
      const comeback = Todo.reminderText([{ content: forgedClosers("system_reminder"), status: "pending" }])
      assertContained(comeback, "system_reminder")
    }).pipe(H.withStore))

  it.effect("no completion reminder when every item is completed, or for a response with tool calls", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan",
        script: [
          { toolCalls: [write([{ content: "A", status: "completed" }])] },
          "Done."
        ],
        middlewares: () => [Todo.layer()]
      })
      assert.lengthOf(o.requests, 2)
      assert.isFalse(o.requests.some((r) => r.messages.some((m) => m.name === Todo.COMPLETION_REMINDER_NAME)))
    }).pipe(H.withStore))

  // DeerFlow test_todo_middleware.py TestAfterModel.test_does_not_trigger_for_{invalid_tool_calls,
  // raw_provider_tool_calls,legacy_function_call,tool_finish_reason}: only a clean final answer is asked again
  it.effect("no completion reminder for an answer asking for a tool in any form; an empty raw list asks for none", () =>
    Effect.gen(function*() {
      const plain = ScriptedModel.message("")
      const answers: Record<string, M.AIMessage> = {
        invalid: {
          ...plain,
          invalid_tool_calls: [{ type: "invalid_tool_call", id: "bad", name: "bash", args: "{", error: "Bad JSON" }]
        },
        raw: { ...plain, additional_kwargs: { tool_calls: [{ id: "r", type: "function", function: { name: "ls" } }] } },
        legacy: { ...plain, additional_kwargs: { function_call: { name: "bash", arguments: "{}" } } },
        finish: { ...plain, response_metadata: { finish_reason: "tool_calls" } },
        emptyRaw: { ...plain, content: "All done.", additional_kwargs: { tool_calls: [] } }
      }
      const reminded: Record<string, boolean> = {}
      for (const [kind, answer] of Object.entries(answers)) {
        const o = yield* H.run({
          threadId: kind,
          input: "Plan",
          script: [{ toolCalls: [write([{ content: "Pack", status: "pending" }])] }, () => answer, "Done.", "Now."],
          middlewares: () => [Todo.layer()]
        })
        reminded[kind] = o.requests[2]?.messages.at(-1)?.name === Todo.COMPLETION_REMINDER_NAME
      }
      assert.deepStrictEqual(reminded, { invalid: false, raw: false, legacy: false, finish: false, emptyRaw: true })
    }).pipe(H.withStore))

  it.effect("a compaction that removed the writes brings the list back as a reminder, once, kept in the thread", () =>
    Effect.gen(function*() {
      const internal: Array<ModelRequest> = []
      let agentCalls = 0
      const script = (request: ModelRequest) => {
        if (request.internal !== undefined) {
          internal.push(request)
          return "## Summary\nPlanned the trip."
        }
        agentCalls++
        if (agentCalls === 1) return { toolCalls: [write([{ content: "Book train", status: "in_progress" }])] }
        if (agentCalls <= 4) return { toolCalls: [{ name: "echo", args: {} }] }
        return "Done for now."
      }
      const echo = Tool.make({
        name: "echo",
        description: "e",
        parameters: Schema.Struct({}),
        handler: () => Effect.succeed("ok")
      })
      const middlewares = () => [
        DurableContext.layer(),
        Summarization.layer({
          config: { enabled: true, trigger: [{ type: "messages", value: 7 }], keep: { type: "messages", value: 2 } }
        }),
        Todo.layer()
      ]
      const o = yield* H.run({ input: "Plan the trip", script, tools: [echo], middlewares }).pipe(withConfig)
      assert.isAtLeast(internal.length, 1)
      assert.deepStrictEqual(o.state.todos, [{ content: "Book train", status: "in_progress" }])
      assert.isFalse(o.state.messages.some((m) => M.toolCalls(m).some((c) => c.name === "write_todos")))
      const reminders = o.state.messages.filter((m) => m.name === Todo.REMINDER_NAME)
      assert.lengthOf(reminders, 1)
      assert.isTrue(M.isHidden(reminders[0]!))
      assert.include(M.text(reminders[0]!), "- [in_progress] Book train")
      // the request after the compaction carried it, and later requests still do (it is in the thread)
      const withReminder = o.requests.filter((r) =>
        r.internal === undefined && r.messages.some((m) => m.name === Todo.REMINDER_NAME)
      )
      assert.isAtLeast(withReminder.length, 1)
      assert.isTrue(o.requests.at(-1)!.messages.some((m) => m.name === Todo.REMINDER_NAME))
    }).pipe(H.withStore))
})

describe("Todo, as DeerFlow keeps the list", () => {
  it.effect("an item written without a status is pending: stored so, and listed so in the reminder", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan the trip",
        script: [
          { toolCalls: [{ name: "write_todos", args: { todos: [{ content: "Book train", status: "completed" }, { content: "Pack" }] } }] },
          "All done.",
          "Done now."
        ],
        middlewares: () => [Todo.layer()]
      })
      assert.deepStrictEqual(o.state.todos, [{ content: "Book train", status: "completed" }, { content: "Pack", status: "pending" }])
      assert.include(M.text(o.requests[2]!.messages.at(-1)!), "- [pending] Pack")
      // the model is told the status may be left out
      const parameters = Tool.definition(Todo.writeTodos).parameters as { properties: { todos: { items: { required?: Array<string> } } } }
      assert.deepStrictEqual(parameters.properties.todos.items.required, ["content"])
      // a list set through the thread's state (a client's update) reads the same way
      assert.deepStrictEqual(Schema.decodeUnknownSync(TS.StateUpdate)({ todos: [{ content: "Pack" }] }).todos, [
        { content: "Pack", status: "pending" }
      ])
    }).pipe(H.withStore))

  it.effect("each request carries one completion reminder at most, and none is stored in the thread", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan the trip",
        script: [
          { toolCalls: [write([{ content: "Pack", status: "in_progress" }])] },
          "All done.",
          "Packing now.",
          "Really done."
        ],
        middlewares: () => [Todo.layer()]
      })
      assert.lengthOf(o.requests, 4)
      const reminders = o.requests.map((r) => r.messages.filter((m) => m.name === Todo.COMPLETION_REMINDER_NAME).length)
      assert.deepStrictEqual(reminders, [0, 0, 1, 1])
      // the last request: the earlier answers, then the latest reminder, last
      assert.deepStrictEqual(o.requests[3]!.messages.slice(-3).map(M.text).slice(0, 2), ["All done.", "Packing now."])
      assert.strictEqual(o.requests[3]!.messages.at(-1)!.name, Todo.COMPLETION_REMINDER_NAME)
      assert.isFalse(o.state.messages.some((m) => m.name === Todo.COMPLETION_REMINDER_NAME))
      assert.isFalse(o.events.some((e) => e.type === "message" && e.message.name === Todo.COMPLETION_REMINDER_NAME))
    }).pipe(H.withStore))
})
