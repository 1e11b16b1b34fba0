/**
 * DeerFlow test_subagent_executor.py, how a delegated task ends when its model fails: a provider error that
 * LLMErrorHandling answers with its marked fallback message is a FAILED task, its error the fallback's text, no
 * result (`test_aexecute_marks_structured_llm_error_fallback_as_failed`), while an answer that merely reads like
 * that error is a completed task (`test_aexecute_does_not_infer_llm_failure_from_message_text`). The subagent
 * runs the real chain over a scripted model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import { inRun } from "../support/fixtures.js"
import { subagentRunner } from "../support/subagentRunner.js"

const runTask = (script: ScriptedModel.Script) =>
  Effect.gen(function*() {
    const runner = yield* subagentRunner(ScriptedModel.make(script))
    const run = inRun({ threadId: "test-thread" })
    const outcome = yield* runner.run({
      toolCallId: "tc-1",
      description: "do something",
      prompt: "Do something",
      subagentType: "general-purpose"
    }).pipe(Effect.provide(run.context))
    const names = run.events.flatMap((e) => e.type === "custom" ? [e.name] : [])
    return { outcome, names }
  })

describe("test_subagent_executor.py: a model failure is a failed task", () => {
  it.scoped("the provider fails every call: failed, with the fallback's text as the error and no result", () =>
    Effect.gen(function*() {
      // no turn: each call fails with a ModelError that is not retried, so LLMErrorHandling answers the fallback
      const { outcome, names } = yield* runTask([])
      assert.strictEqual(outcome.status, "failed")
      assert.isUndefined(outcome.result)
      // the fallback message's text (DeerFlow: result.error == the fallback's content), not the bare provider error
      assert.strictEqual(
        outcome.error,
        "LLM request failed: The scripted model has no turn 1 (its script has 0 turns)"
      )
      assert.strictEqual(names.at(-1), "task_failed")
      assert.notInclude(names, "task_completed")
    }))

  it.scoped("an answer that reads like an LLM failure is still a completed task with that answer", () =>
    Effect.gen(function*() {
      const text = "LLM request failed is the message shown by the previous system."
      const { outcome, names } = yield* runTask([text])
      assert.deepInclude(outcome, { status: "completed", result: text })
      assert.isUndefined(outcome.error)
      assert.strictEqual(names.at(-1), "task_completed")
    }))
})
