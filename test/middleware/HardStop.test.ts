import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FC from "effect/FastCheck"
import * as HardStop from "../../src/middleware/HardStop.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ModelError } from "../../src/services/ModelService.js"
import * as M from "../../src/state/Message.js"

const calling = () =>
  M.ai("Let me look.", {
    id: "ai-1",
    tool_calls: [{ id: "c1", name: "read_file", args: { path: "/a" }, type: "tool_call" }],
    invalid_tool_calls: [{ id: "c2", name: "bash", args: "{oops", error: "bad json" }],
    additional_kwargs: {
      tool_calls: [{ id: "c1", function: { name: "read_file", arguments: "{\"path\":\"/a\"}" } }],
      function_call: { name: "read_file" },
      reasoning_content: "keep me"
    },
    response_metadata: { finish_reason: "tool_calls", model_name: "m" }
  })

// Generic AI messages: text or block content, any mix of structured, invalid and raw tool calls.
const textArb = FC.string({ maxLength: 20 })
const aiArb: FC.Arbitrary<M.AIMessage> = FC.record({
  id: FC.string({ minLength: 1, maxLength: 8 }),
  content: FC.oneof(
    textArb,
    FC.array(
      FC.oneof(
        textArb.map((text) => ({ type: "text" as const, text })),
        textArb.map((thinking) => ({ type: "thinking", thinking }))
      ),
      { maxLength: 3 }
    )
  ),
  calls: FC.array(FC.record({ id: FC.string(), name: FC.constantFrom("read_file", "bash", "task") }), { maxLength: 3 }),
  invalid: FC.boolean(),
  raw: FC.boolean(),
  finish: FC.constantFrom("tool_calls", "function_call", "stop", "length", undefined)
}).map(({ calls, content, finish, id, invalid, raw }) =>
  M.ai(content, {
    id,
    tool_calls: calls.map((c) => ({ ...c, args: { path: "/x" }, type: "tool_call" as const })),
    ...(invalid ? { invalid_tool_calls: [{ id: "bad", name: "bash", args: "{", error: "json" }] } : {}),
    ...(raw ? { additional_kwargs: { tool_calls: [{ id: "raw" }], function_call: { name: "f" }, other: 1 } } : {}),
    ...(finish !== undefined ? { response_metadata: { finish_reason: finish } } : {})
  })
)

const request = (): ModelRequest => ({ systemPrompt: undefined, messages: [M.human("hi")], tools: [], settings: {} })

const fail = new ModelError({ reason: "server", errorType: "InternalServerError", message: "boom" })

describe("HardStop.hardStop", () => {
  it("strips every form of tool call, keeps the id, turns tool_calls into stop and appends the notice", () => {
    const out = HardStop.hardStop(calling(), "[FORCED STOP] enough")
    assert.strictEqual(out.id, "ai-1")
    assert.deepStrictEqual(out.tool_calls, [])
    assert.deepStrictEqual(out.invalid_tool_calls, [])
    assert.deepStrictEqual(out.additional_kwargs, { reasoning_content: "keep me" })
    assert.deepStrictEqual(out.response_metadata, { finish_reason: "stop", model_name: "m" })
    assert.strictEqual(out.content, "Let me look.\n\n[FORCED STOP] enough")
    assert.isFalse(HardStop.hasToolCallIntent(out))
  })

  it("appends a text block to list content and replaces blank text", () => {
    const blocks = HardStop.hardStop(M.ai([{ type: "thinking", thinking: "hmm" }], { id: "x" }), "notice")
    assert.deepStrictEqual(blocks.content, [{ type: "thinking", thinking: "hmm" }, { type: "text", text: "notice" }])
    assert.strictEqual(HardStop.hardStop(M.ai("  ", { id: "y" }), "notice").content, "notice")
  })

  // DeerFlow's _append_text (loop detection, token budget, safety): the new block is "\n\n" + text, so the notice
  // is its own paragraph where the UI joins text blocks with "\n" (test_list_content_appends_text_block).
  it("a notice after list content with text is its own paragraph", () => {
    const content = [{ type: "thinking", thinking: "Let me think..." }, { type: "text", text: "Here is my answer" }]
    const out = HardStop.hardStop(M.ai(content, { id: "x" }), "[FORCED STOP] stop msg")
    assert.deepStrictEqual(out.content, [...content, { type: "text", text: "\n\n[FORCED STOP] stop msg" }])
    assert.strictEqual(M.contentText(out.content), "Here is my answer\n\n\n[FORCED STOP] stop msg")
  })

  it("keeps the provider's finish reason when asked (safety keeps content_filter)", () => {
    const message = { ...calling(), response_metadata: { finish_reason: "content_filter" } }
    const kept = HardStop.hardStop(message, "n", { keepFinishReason: true })
    assert.strictEqual(kept.response_metadata?.finish_reason, "content_filter")
    const toolFinish = HardStop.hardStop(calling(), "n", { keepFinishReason: true })
    assert.strictEqual(toolFinish.response_metadata?.finish_reason, "tool_calls")
  })

  it.prop(
    "for any AI message: same id, no tool-call intent left, the notice is the visible end of the text",
    [aiArb, FC.string({ minLength: 1 }).map((s) => `[FORCED STOP] ${s}`)],
    ([message, notice]) => {
      const out = HardStop.hardStop(message, notice)
      assert.strictEqual(out.id, message.id)
      assert.isFalse(M.hasToolCalls(out))
      assert.isUndefined(out.additional_kwargs?.tool_calls)
      assert.isUndefined(out.additional_kwargs?.function_call)
      assert.isFalse(HardStop.hasToolCallIntent(out))
      assert.isTrue(M.contentText(out.content).endsWith(notice))
    }
  )
})

describe("HardStop readers", () => {
  it("metadataString prefers response_metadata and ignores empty or non-string values", () => {
    const kwargs = { finish_reason: "length" }
    const message = M.ai("x", { response_metadata: { finish_reason: "" }, additional_kwargs: kwargs })
    assert.strictEqual(HardStop.metadataString(message, "finish_reason"), "length")
    const both = M.ai("x", { response_metadata: { finish_reason: "stop" }, additional_kwargs: kwargs })
    assert.strictEqual(HardStop.metadataString(both, "finish_reason"), "stop")
    assert.isUndefined(HardStop.metadataString(M.ai("x", { response_metadata: { finish_reason: 3 } }), "finish_reason"))
  })

  it("hasVisibleText sees non-blank strings and text / output_text blocks only", () => {
    assert.isTrue(HardStop.hasVisibleText(M.ai("hi")))
    assert.isFalse(HardStop.hasVisibleText(M.ai(" \n")))
    assert.isFalse(HardStop.hasVisibleText(M.ai([{ type: "reasoning", text: "private" }])))
    assert.isTrue(HardStop.hasVisibleText(M.ai([{ type: "output_text", text: "shown" }])))
  })

  it("hasToolCallIntent sees raw calls and tool finish reasons too", () => {
    assert.isTrue(HardStop.hasToolCallIntent(M.ai("", { additional_kwargs: { function_call: { name: "f" } } })))
    assert.isTrue(HardStop.hasToolCallIntent(M.ai("", { response_metadata: { finish_reason: "tool_calls" } })))
    assert.isFalse(HardStop.hasToolCallIntent(M.ai("done", { response_metadata: { finish_reason: "stop" } })))
  })
})

describe("HardStop.warningQueue", () => {
  it.effect("passes the request through untouched when nothing is queued", () =>
    Effect.gen(function*() {
      const queue = HardStop.warningQueue("loop_warning")
      const original = request()
      let seen: ModelRequest | undefined
      yield* queue.inject(original, (r) => Effect.sync(() => (seen = r, { message: M.ai("ok") })))
      assert.strictEqual(seen, original)
    }))

  it.effect("appends one hidden named message with every queued warning, then drains on success", () =>
    Effect.gen(function*() {
      const queue = HardStop.warningQueue("budget_warning")
      queue.push("first")
      queue.push("second")
      queue.push("first")
      const seen: Array<ModelRequest> = []
      const next = (r: ModelRequest) => Effect.sync(() => (seen.push(r), { message: M.ai("ok") }))
      yield* queue.inject(request(), next)
      yield* queue.inject(request(), next)
      const injected = seen[0]!.messages.at(-1)!
      assert.strictEqual(injected.type, "human")
      assert.strictEqual(injected.name, "budget_warning")
      assert.isTrue(M.isHidden(injected))
      assert.strictEqual(M.text(injected), "first\n\nsecond")
      assert.lengthOf(seen[1]!.messages, 1)
    }))

  it.effect("a failed call keeps the warnings for the retry", () =>
    Effect.gen(function*() {
      const queue = HardStop.warningQueue("loop_warning")
      queue.push("careful")
      const seen: Array<ModelRequest> = []
      let calls = 0
      const flaky = (r: ModelRequest) =>
        Effect.suspend(() => {
          seen.push(r)
          return calls++ === 0 ? Effect.fail(fail) : Effect.succeed({ message: M.ai("ok") })
        })
      const original = request()
      const first = yield* Effect.exit(queue.inject(original, flaky))
      assert.isTrue(Exit.isFailure(first))
      yield* queue.inject(original, flaky)
      assert.deepStrictEqual(seen.map((r) => M.text(r.messages.at(-1)!)), ["careful", "careful"])
      assert.deepStrictEqual(queue.pending(), [])
    }))

  it.effect("a warning queued while a call is in flight is kept for the next call", () =>
    Effect.gen(function*() {
      const queue = HardStop.warningQueue("loop_warning")
      queue.push("old")
      yield* queue.inject(request(), () => Effect.sync(() => (queue.push("new"), { message: M.ai("ok") })))
      assert.deepStrictEqual(queue.pending(), ["new"])
    }))

  it("holds the newest `max` warnings: a full queue drops its oldest", () => {
    const queue = HardStop.warningQueue("loop_warning", 2)
    for (const w of ["a", "b", "c", "b", "d"]) queue.push(w)
    assert.deepStrictEqual(queue.pending(), ["c", "d"])
  })
})
