import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FC from "effect/FastCheck"
import * as SubagentStatus from "../../src/state/SubagentStatus.js"
import { SubagentStopReason } from "../../src/state/ThreadState.js"

const outcomeArb: FC.Arbitrary<SubagentStatus.Outcome> = FC.record({
  status: Arbitrary.make(SubagentStatus.SubagentStatus),
  stopReason: FC.option(Arbitrary.make(SubagentStopReason), { nil: undefined }),
  result: FC.option(FC.string({ maxLength: 3000 }), { nil: undefined }),
  error: FC.option(FC.string({ maxLength: 3000 }), { nil: undefined }),
  modelName: FC.option(FC.constantFrom("main", " ", "deep"), { nil: undefined }),
  usage: FC.option(Arbitrary.make(SubagentStatus.TokenUsage), { nil: undefined })
}, { requiredKeys: ["status"] })

describe("the subagent status contract", () => {
  it("the text the model reads, per status", () => {
    const text = SubagentStatus.resultText
    assert.strictEqual(text({ status: "completed", result: "42" }), "Task Succeeded. Result: 42")
    assert.strictEqual(
      text({ status: "completed", result: "partial", stopReason: "loop_capped" }),
      "Task Succeeded (capped: repeated tool-call loop). Result: partial"
    )
    assert.strictEqual(text({ status: "failed", error: "boom" }), "Task failed. Error: boom")
    assert.strictEqual(text({ status: "failed", stopReason: "turn_capped" }), "Task failed (capped: turn budget).")
    assert.strictEqual(text({ status: "cancelled" }), "Task cancelled by user.")
    assert.strictEqual(text({ status: "timed_out", error: "Execution timed out after 5 seconds" }),
      "Task timed out. Error: Execution timed out after 5 seconds")
    assert.strictEqual(text({ status: "polling_timed_out", error: "Task polling timed out after 2 minutes." }),
      "Task polling timed out after 2 minutes.")
  })

  it("subagent_error: the error given, else the status's sentence; a cap is told in the text, not the error", () => {
    // DeerFlow's test_subagent_status_contract: format_subagent_result_message("failed", stop_reason="turn_capped")
    // reads "Task failed (capped: turn budget)." while the metadata error stays "Task failed."
    const capped = { status: "failed", stopReason: "turn_capped" } as const
    assert.strictEqual(SubagentStatus.resultText(capped), "Task failed (capped: turn budget).")
    assert.deepStrictEqual(SubagentStatus.metadata(capped), {
      subagent_status: "failed",
      subagent_error: "Task failed.",
      subagent_stop_reason: "turn_capped"
    })
    const withError = { status: "failed", error: " Reached max_turns=10 ", stopReason: "turn_capped" } as const
    assert.strictEqual(SubagentStatus.metadata(withError).subagent_error, "Reached max_turns=10")
    assert.strictEqual(SubagentStatus.metadata({ status: "timed_out", error: "  " }).subagent_error, "Task timed out.")
  })

  it.prop("metadata: a brief and a hash only when completed, an error only otherwise, all bounded", [outcomeArb], ([outcome]) => {
    const kwargs = SubagentStatus.metadata(outcome)
    assert.strictEqual(kwargs.subagent_status, outcome.status)
    const completed = outcome.status === "completed"
    const hasResult = completed && outcome.result !== undefined && outcome.result.trim() !== ""
    assert.strictEqual(kwargs.subagent_result_brief !== undefined, hasResult)
    if (hasResult) {
      assert.strictEqual(kwargs.subagent_result_sha256, SubagentStatus.sha256(outcome.result!))
      assert.isAtMost((kwargs.subagent_result_brief as string).length, SubagentStatus.MAX_METADATA_CHARS)
    }
    assert.strictEqual(kwargs.subagent_error !== undefined, !completed)
    if (!completed) assert.isAtMost((kwargs.subagent_error as string).length, SubagentStatus.MAX_METADATA_CHARS)
    assert.strictEqual(kwargs.subagent_stop_reason, outcome.stopReason)
    if (outcome.modelName?.trim() === "") assert.isUndefined(kwargs.subagent_model_name)
    assert.deepStrictEqual(kwargs.subagent_token_usage, outcome.usage)
  })

  it.prop("reading back what was written gives the same facts", [outcomeArb], ([outcome]) => {
    const kwargs = SubagentStatus.metadata(outcome)
    const read = SubagentStatus.read(kwargs)!
    assert.strictEqual(read.status, outcome.status)
    assert.strictEqual(read.stopReason, outcome.stopReason)
    assert.strictEqual(read.resultBrief, kwargs.subagent_result_brief)
    assert.strictEqual(read.resultSha256, kwargs.subagent_result_sha256)
    assert.deepStrictEqual(SubagentStatus.usageOf(kwargs), outcome.usage)
  })

  it("reading untrusted metadata: unknown statuses are ignored, a bad hash is dropped, legacy max_turns_reached is turn_capped", () => {
    assert.isUndefined(SubagentStatus.read({ subagent_status: "done" }))
    assert.isUndefined(SubagentStatus.read(undefined))
    assert.deepStrictEqual(
      SubagentStatus.read({ subagent_status: "completed", subagent_result_brief: "r", subagent_result_sha256: "xyz" }),
      { status: "completed", stopReason: undefined, resultBrief: "r" }
    )
    assert.deepStrictEqual(SubagentStatus.read({ subagent_status: "max_turns_reached", subagent_result_brief: "partial" }), {
      status: "completed",
      stopReason: "turn_capped",
      resultBrief: "partial"
    })
    assert.deepStrictEqual(SubagentStatus.read({ subagent_status: "max_turns_reached", subagent_error: "ran out" }), {
      status: "failed",
      stopReason: "turn_capped",
      error: "ran out"
    })
    assert.isUndefined(
      SubagentStatus.usageOf({ subagent_token_usage: { input_tokens: -1, output_tokens: 0, total_tokens: 0 } })
    )
  })

  it("bound counts characters as DeerFlow does (code points) and never cuts an emoji in half", () => {
    // DeerFlow's _bound_metadata_text counts Python characters: 1332 letters and 1000 emoji are 2332 of them
    const text = "a".repeat(1332) + "😀".repeat(1000)
    const bounded = SubagentStatus.bound(text)
    assert.notMatch(bounded, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/)
    assert.strictEqual(Array.from(bounded).length, SubagentStatus.MAX_METADATA_CHARS)
    assert.strictEqual(bounded, `${"a".repeat(1332)}😀\n...\n${"😀".repeat(662)}`)
    assert.strictEqual(SubagentStatus.bound("😀".repeat(2000)), "😀".repeat(2000))
  })

  it.prop("bound keeps the head two thirds and the tail within the limit", [FC.string({ maxLength: 5000 })], ([text]) => {
    const bounded = SubagentStatus.bound(text, 300)
    assert.isAtMost(bounded.length, 300)
    if (text.trim().length <= 300) assert.strictEqual(bounded, text.trim())
    else {
      assert.isTrue(text.trim().startsWith(bounded.slice(0, 200)))
      assert.isTrue(text.trim().endsWith(bounded.slice(205)))
    }
  })
})
