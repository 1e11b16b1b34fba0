import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as TU from "../../src/middleware/TokenUsage.js"
import * as Tool from "../../src/services/Tool.js"
import type { AIMessage, Message, ToolCall } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const call = (name: string, args: Record<string, unknown> = {}, id = `${name}-1`): ToolCall => ({
  id,
  name,
  args,
  type: "tool_call"
})
const withCalls = (...calls: Array<ToolCall>) => M.ai("", { tool_calls: calls })

describe("TokenUsage.attribution", () => {
  it("labels answers, thinking, tool batches, subagent dispatches and todo updates", () => {
    assert.strictEqual(TU.attribution(M.ai("The answer is 4."), []).kind, "final_answer")
    assert.strictEqual(TU.attribution(M.ai([{ type: "reasoning", text: "hmm" }]), []).kind, "thinking")
    const taskArgs = { description: "Research", subagent_type: "general-purpose", prompt: "..." }
    const dispatch = TU.attribution(withCalls(call("task", taskArgs)), [])
    assert.deepStrictEqual(dispatch, {
      version: 1,
      kind: "subagent_dispatch",
      shared_attribution: false,
      tool_call_ids: ["task-1"],
      actions: [{ kind: "subagent", description: "Research", subagent_type: "general-purpose", tool_call_id: "task-1" }]
    })
    const batch = TU.attribution(
      withCalls(
        call("web_search", { query: " effect ts " }, "s1"),
        call("bash", { command: "ls", description: "List" }, "b1")
      ),
      []
    )
    assert.strictEqual(batch.kind, "tool_batch")
    assert.isTrue(batch.shared_attribution)
    assert.deepStrictEqual(batch.actions, [
      { kind: "search", tool_name: "web_search", query: "effect ts", tool_call_id: "s1" },
      { kind: "tool", tool_name: "bash", description: "List", tool_call_id: "b1" }
    ])
    assert.strictEqual(TU.attribution(withCalls(call("present_files")), []).actions[0]!.kind, "present_files")
    assert.strictEqual(TU.attribution(withCalls(call("ask_clarification")), []).actions[0]!.kind, "clarification")
  })

  it("describes write_todos as the diff against the todos in state", () => {
    const before = [
      { content: "Collect data", status: "completed" as const },
      { content: "Write report", status: "pending" as const },
      { content: "Send email", status: "pending" as const }
    ]
    const next = [
      { content: "Collect data", status: "completed" },
      { content: "Write report", status: "in_progress" },
      { content: "Review", status: "pending" }
    ]
    const a = TU.attribution(withCalls(call("write_todos", { todos: next }, "t1")), before)
    assert.strictEqual(a.kind, "tool_batch")
    assert.deepStrictEqual(a.actions, [
      { kind: "todo_start", content: "Write report", tool_call_id: "t1" },
      // New content at a position whose old item is gone reads as that item renamed.
      { kind: "todo_update", content: "Review", tool_call_id: "t1" }
    ])
    const shorter = TU.attribution(withCalls(call("write_todos", { todos: next.slice(0, 2) }, "t4")), before)
    assert.deepStrictEqual(shorter.actions, [
      { kind: "todo_start", content: "Write report", tool_call_id: "t4" },
      { kind: "todo_remove", content: "Send email", tool_call_id: "t4" }
    ])
    const completed = [before[0], { content: "Write report", status: "completed" }, before[2]]
    const one = TU.attribution(withCalls(call("write_todos", { todos: completed }, "t2")), before)
    assert.strictEqual(one.kind, "todo_update")
    assert.deepStrictEqual(one.actions, [{ kind: "todo_complete", content: "Write report", tool_call_id: "t2" }])
    const unchanged = TU.attribution(withCalls(call("write_todos", { todos: before }, "t3")), before)
    assert.deepStrictEqual(unchanged.actions, [{ kind: "tool", tool_name: "write_todos", tool_call_id: "t3" }])
  })

  it("reads untrusted todo lists leniently", () => {
    assert.deepStrictEqual(TU.normalizeTodos([{ content: " a ", status: "weird" }, "junk", { status: "completed" }]), [
      { content: "a" },
      { status: "completed" }
    ])
    assert.deepStrictEqual(TU.normalizeTodos("nope"), [])
  })
})

describe("TokenUsage.normalizeUsage", () => {
  it("requires non-negative integers and derives a missing total", () => {
    assert.deepStrictEqual(TU.normalizeUsage({ input_tokens: 10, output_tokens: 4 }), {
      input_tokens: 10,
      output_tokens: 4,
      total_tokens: 14
    })
    assert.isUndefined(TU.normalizeUsage({ input_tokens: -1, output_tokens: 4, total_tokens: 3 }))
    assert.isUndefined(TU.normalizeUsage({ input_tokens: 1.5, output_tokens: 4 }))
    assert.isUndefined(TU.normalizeUsage("12"))
    const named = TU.normalizeUsage({ input_tokens: 1, output_tokens: 1, model_name: "sub-model" })
    assert.strictEqual(named?.model, "sub-model")
  })
})

const subagentResult = (toolCallId: string, usage: unknown, extra: Record<string, unknown> = {}) =>
  M.tool("done", toolCallId, { additional_kwargs: { [TU.SUBAGENT_USAGE_KEY]: usage, ...extra } })

describe("TokenUsage.rollUp", () => {
  const dispatch = M.ai("", {
    id: "dispatch",
    tool_calls: [call("task", {}, "t1"), call("task", {}, "t2"), call("bash", {}, "b1")],
    usage_metadata: { input_tokens: 100, output_tokens: 10, total_tokens: 110 }
  })
  const thread: Array<Message> = [
    M.human("go"),
    dispatch,
    subagentResult("t1", { input_tokens: 50, output_tokens: 5, total_tokens: 55 }),
    M.tool("ok", "b1"),
    subagentResult("t2", { input_tokens: 20, output_tokens: 2 })
  ]

  it("adds every subagent's usage to the dispatch message and marks the results attributed", () => {
    const { usage, writes } = TU.rollUp(thread)
    assert.lengthOf(usage, 2)
    const ai = writes.find((m) => m.id === "dispatch") as AIMessage
    assert.deepStrictEqual(ai.usage_metadata, { input_tokens: 170, output_tokens: 17, total_tokens: 187 })
    const marked = writes.filter((m) => m.type === "tool")
    assert.lengthOf(marked, 2)
    for (const m of marked) assert.isTrue(m.additional_kwargs?.[TU.SUBAGENT_ATTRIBUTED_KEY] === true)
    assert.deepStrictEqual(writes.map((m) => m.id), [thread[1]!.id, thread[2]!.id, thread[4]!.id])
  })

  it("is idempotent: a replay over the rolled-up thread moves nothing", () => {
    const { writes } = TU.rollUp(thread)
    const replayed = thread.map((m) => writes.find((w) => w.id === m.id) ?? m)
    assert.deepStrictEqual(TU.rollUp(replayed), { writes: [], usage: [] })
  })

  it("leaves malformed usage and orphan results alone, and stops at the last non-tool message", () => {
    const one = { input_tokens: 1, output_tokens: 1 }
    assert.deepStrictEqual(TU.rollUp([M.human("x"), subagentResult("t9", one)]).writes, [])
    assert.deepStrictEqual(TU.rollUp([dispatch, subagentResult("t1", { input_tokens: "many" })]).writes, [])
    assert.deepStrictEqual(TU.rollUp([dispatch, subagentResult("t1", one), M.ai("later")]).writes, [])
  })
})

describe("TokenUsage.layer", () => {
  const usage = (input: number, output: number) => ({
    input_tokens: input,
    output_tokens: output,
    total_tokens: input + output
  })
  const kindOf = (message: Message) => (message.additional_kwargs?.token_usage_attribution as TU.Attribution).kind
  const echo = Tool.make({
    name: "bash",
    description: "Run",
    parameters: Schema.Struct({ command: Schema.String }),
    handler: ({ command }) => Effect.succeed(`ran ${command}`)
  })

  it.effect("keeps thread totals per model across runs and stamps each step's attribution", () =>
    Effect.gen(function*() {
      const first = yield* Harness.run({
        script: [
          { toolCalls: [{ name: "bash", args: { command: "ls" } }], usage: usage(100, 20) },
          { content: "Two files.", usage: usage(150, 10), responseMetadata: { model_name: "gpt-big" } }
        ],
        tools: [echo],
        middlewares: () => [TU.layer()]
      })
      assert.deepStrictEqual(first.state.token_usage, {
        total: { input_tokens: 250, output_tokens: 30, total_tokens: 280, calls: 2 },
        by_model: {
          scripted: { input_tokens: 100, output_tokens: 20, total_tokens: 120, calls: 1 },
          "gpt-big": { input_tokens: 150, output_tokens: 10, total_tokens: 160, calls: 1 }
        },
        by_purpose: { agent: { input_tokens: 250, output_tokens: 30, total_tokens: 280, calls: 2 } }
      })
      const ais = first.state.messages.filter((m) => m.type === "ai")
      assert.deepStrictEqual(ais.map(kindOf), ["tool_batch", "final_answer"])

      const second = yield* Harness.run({
        script: [{ content: "Still two.", usage: usage(300, 5) }],
        middlewares: () => [TU.layer()]
      })
      assert.deepStrictEqual(second.state.token_usage?.total, {
        input_tokens: 550,
        output_tokens: 35,
        total_tokens: 585,
        calls: 3
      })
    }).pipe(Harness.withStore))

  it.effect("internal calls are counted under their model but not stamped", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: (request) =>
          request.internal !== undefined
            ? { content: "summary", usage: usage(1000, 100), responseMetadata: { model_name: "summary-model" } }
            : { content: "answer", usage: usage(50, 5) },
        middlewares: () => [Harness.internalCaller(), TU.layer()]
      })
      assert.deepStrictEqual(out.state.token_usage?.by_model["summary-model"], { ...usage(1000, 100), calls: 1 })
      assert.strictEqual(out.state.token_usage?.total.total_tokens, 1155)
      assert.deepStrictEqual(out.state.token_usage?.by_purpose?.["summarization"], { ...usage(1000, 100), calls: 1 })
      assert.strictEqual(out.state.token_usage?.by_purpose?.["agent"]?.total_tokens, 55)
      const answer = out.state.messages.at(-1)!
      assert.strictEqual((answer.additional_kwargs?.token_usage_attribution as TU.Attribution).kind, "final_answer")
    }).pipe(Harness.withStore))

  it.effect("rolls subagent usage up into the dispatch message and the totals, once", () =>
    Effect.gen(function*() {
      const task = Tool.make({
        name: "task",
        description: "Delegate",
        parameters: Schema.Struct({ description: Schema.String, prompt: Schema.String, subagent_type: Schema.String }),
        handler: (_args, c) =>
          Effect.succeed({
            message: M.tool("The subagent found 3 sources.", c.id, {
              name: "task",
              additional_kwargs: { [TU.SUBAGENT_USAGE_KEY]: usage(4000, 600), subagent_model_name: "sub-model" }
            })
          })
      })
      const out = yield* Harness.run({
        script: [
          {
            toolCalls: [{
              name: "task",
              args: { description: "Find", prompt: "...", subagent_type: "general-purpose" }
            }],
            usage: usage(100, 10)
          },
          { content: "Found 3 sources.", usage: usage(200, 20) }
        ],
        tools: [task],
        middlewares: () => [TU.layer()]
      })
      const dispatch = out.state.messages.find((m) => m.type === "ai" && M.hasToolCalls(m)) as AIMessage
      assert.deepStrictEqual(dispatch.usage_metadata, { input_tokens: 4100, output_tokens: 610, total_tokens: 4710 })
      assert.strictEqual(kindOf(dispatch), "subagent_dispatch")
      const result = out.state.messages.find((m) => m.type === "tool")!
      assert.isTrue(result.additional_kwargs?.[TU.SUBAGENT_ATTRIBUTED_KEY] === true)
      assert.deepStrictEqual(out.state.token_usage?.total, { ...usage(4300, 630), calls: 3 })
      // the subagent's tokens are its model's, not the lead's (DeerFlow's by-model totals)
      assert.deepStrictEqual(out.state.token_usage?.by_model, {
        scripted: { ...usage(300, 30), calls: 2 },
        "sub-model": { ...usage(4000, 600), calls: 1 }
      })
    }).pipe(Harness.withStore))

  it.effect("disabled: no totals, no stamps", () =>
    Effect.gen(function*() {
      const out = yield* Harness.run({
        script: [{ content: "hi", usage: usage(1, 1) }],
        middlewares: () => [TU.layer({ enabled: false })]
      })
      assert.isNull(out.state.token_usage)
      assert.isUndefined(out.state.messages.at(-1)!.additional_kwargs?.token_usage_attribution)
    }).pipe(Harness.withStore))
})

describe("TokenUsage logs", () => {
  it.effect("each model call's usage is logged as DeerFlow logs it (at debug): model, input, output, total", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => {
          const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
          if (text.startsWith("LLM token usage")) lines.push(`${logLevel.label} ${text}`)
        })
      )
      yield* Harness.run({
        script: [
          { toolCalls: [{ name: "noop", args: {} }], usage: { input_tokens: 120, output_tokens: 30, total_tokens: 150 } },
          { content: "done", usage: { input_tokens: 200, output_tokens: 10, total_tokens: 210 } }
        ],
        tools: [Tool.make({ name: "noop", description: "n", parameters: Schema.Struct({}), handler: () => Effect.succeed("ok") })],
        middlewares: () => [TU.layer()]
      }).pipe(Effect.provide(capture), Logger.withMinimumLogLevel(LogLevel.Debug))
      assert.deepStrictEqual(lines, [
        "DEBUG LLM token usage: model=scripted input=120 output=30 total=150",
        "DEBUG LLM token usage: model=scripted input=200 output=10 total=210"
      ])
    }).pipe(Harness.withStore))
})
