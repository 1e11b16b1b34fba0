/**
 * DeerFlow's `test_subagent_token_collector.py` and the task tool's usage (`task_tool.py`): a subagent's token
 * collector is a callback on its whole run, so every model call made inside it counts in its task's usage, its own
 * answers and the calls of its middlewares (its summarization's, `middleware:summarize`) alike: the `usage` of its
 * task events, the result's `subagent_token_usage` and what the run's journal books for the task
 * (`record_external_llm_usage_records`, caller `subagent:<name>`, each call under the model it ran on). The
 * subagents run the app's real runner over a scripted model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import * as SubagentStatus from "../../src/state/SubagentStatus.js"
import { inRun } from "../support/fixtures.js"
import { subagentRunner } from "../support/subagentRunner.js"

const look = { name: "ls", args: { description: "look", path: "/mnt/user-data/workspace" } }
const step = { input_tokens: 50, output_tokens: 25, total_tokens: 75 }
const summary = { input_tokens: 300, output_tokens: 40, total_tokens: 340 }
const answer = { input_tokens: 90, output_tokens: 10, total_tokens: 100 }

// the subagent looks twice, then answers; its summarization (on at 4 messages) is due before its answer
const model = (internal: Array<string>) =>
  ScriptedModel.make((request, call) => {
    if (request.internal !== undefined) {
      internal.push(request.internal)
      return { content: "## Summary\nLooked twice.", usage: summary, responseMetadata: { model_name: "summary-model" } }
    }
    const turn = call - internal.length
    return turn < 2 ? { toolCalls: [look], usage: step } : { content: "Found it.", usage: answer }
  })

const summarizing = {
  summarization: { enabled: true, trigger: { type: "messages", value: 4 }, keep: { type: "messages", value: 2 } }
}

const taskEvent = (events: ReadonlyArray<RunEvent>, name: string) =>
  events.find((e): e is Extract<RunEvent, { type: "custom" }> => e.type === "custom" && e.name === name)?.data as
    | Record<string, unknown>
    | undefined

describe("DeerFlow test_subagent_token_collector: every call inside a subagent counts in its task's usage", () => {
  it.scoped("test_multiple_calls_accumulate: its summary's call is in the task's usage, its events and its run's", () =>
    Effect.gen(function*() {
      const internal: Array<string> = []
      const runner = yield* subagentRunner(model(internal), summarizing)
      const run = inRun({ threadId: "thread-1" })
      const outcome = yield* runner.run({
        toolCallId: "tc-1",
        description: "look around",
        prompt: "look around",
        subagentType: "general-purpose"
      }).pipe(Effect.provide(run.context))
      assert.strictEqual(outcome.status, "completed")
      assert.deepStrictEqual(internal, ["summarization"])
      const spent = { input_tokens: 100 + 300 + 90, output_tokens: 50 + 40 + 10, total_tokens: 150 + 340 + 100 }
      // what the lead's dispatch message gets (TokenUsage's roll-up) and its token budget charges
      assert.deepStrictEqual(SubagentStatus.metadata(outcome)[SubagentStatus.TOKEN_USAGE_KEY], spent)
      // what the app shows on the task's card
      assert.deepStrictEqual(taskEvent(run.events, "task_completed")?.usage, spent)
      // the run's subagent tokens (the runs API's `subagent_tokens`), the summary's call under its own model
      const usage = run.state().token_usage
      assert.deepInclude(usage?.by_purpose?.subagent ?? {}, { ...spent, calls: 4 })
      assert.deepInclude(usage?.by_model["summary-model"] ?? {}, summary)
      assert.deepInclude(usage?.by_model.scripted ?? {}, { total_tokens: 250 })
    }))
})
