/**
 * A task's tokens are its run's as the task ends (DeerFlow's task tool reports each task's usage records to the
 * run's journal when it completes, fails, times out or is cancelled), booked under the model the provider named
 * for each call; its result says so, and TokenUsage's roll-up at the run's next model call does not count them
 * again. The subagents run the app's real runner over a scripted model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as TokenUsage from "../../src/middleware/TokenUsage.js"
import * as M from "../../src/state/Message.js"
import * as SubagentStatus from "../../src/state/SubagentStatus.js"
import { inRun } from "../support/fixtures.js"
import { stalledTask, stallsAfterFirst, subagentRunner } from "../support/subagentRunner.js"

const spent = { input_tokens: 50, output_tokens: 25, total_tokens: 75 }
const look = { name: "ls", args: { description: "look", path: "/mnt/user-data/workspace" } }
// the provider names the model it ran (the configured one is `ark-model`)
const provider = { model_name: "doubao-seed-1-6-250615" }
const request = (id: string) => ({ toolCallId: id, description: "执行任务", prompt: "do it", subagentType: "general-purpose" })

describe("a task's tokens, counted in its run's token usage when it ends", () => {
  it.scoped("completed: in the run's totals as it ends, under the provider's model; the result says so", () =>
    Effect.gen(function*() {
      const runner = yield* subagentRunner(ScriptedModel.make([
        { toolCalls: [look], usage: spent, responseMetadata: provider },
        { content: "Found it.", usage: { input_tokens: 80, output_tokens: 10, total_tokens: 90 } }
      ]))
      const run = inRun({ threadId: "thread-1" })
      const outcome = yield* runner.run(request("tc-done")).pipe(Effect.provide(run.context))
      assert.strictEqual(outcome.status, "completed")
      const usage = run.state().token_usage
      assert.deepInclude(usage?.total ?? {}, { input_tokens: 130, output_tokens: 35, total_tokens: 165 })
      assert.deepInclude(usage?.by_purpose?.subagent ?? {}, { total_tokens: 165, calls: 2 })
      // each call under the model its provider named (the scripted model's second answer names `scripted`)
      assert.deepInclude(usage?.by_model[provider.model_name] ?? {}, spent)
      assert.deepInclude(usage?.by_model.scripted ?? {}, { total_tokens: 90 })
      assert.isUndefined(usage?.by_model["ark-model"])
      const kwargs = SubagentStatus.metadata(outcome)
      assert.deepStrictEqual(kwargs[SubagentStatus.TOKEN_USAGE_KEY], { input_tokens: 130, output_tokens: 35, total_tokens: 165 })
      assert.strictEqual(kwargs[SubagentStatus.USAGE_RECORDED_KEY], true)
    }))

  it.scoped("failed (capped at its turns without an answer): counted as it ends", () =>
    Effect.gen(function*() {
      const runner = yield* subagentRunner(
        ScriptedModel.make([{ toolCalls: [look], usage: spent }]),
        { subagents: { max_turns: 1 } }
      )
      const run = inRun({ threadId: "thread-1" })
      const outcome = yield* runner.run(request("tc-failed")).pipe(Effect.provide(run.context))
      assert.strictEqual(outcome.status, "failed")
      assert.deepInclude(run.state().token_usage?.by_purpose?.subagent ?? {}, { ...spent, calls: 1 })
      assert.strictEqual(SubagentStatus.metadata(outcome)[SubagentStatus.USAGE_RECORDED_KEY], true)
    }))

  it.scoped("timed out: what it spent before its time ran out is counted", () =>
    Effect.gen(function*() {
      const { run, task } = yield* stalledTask(
        stallsAfterFirst(ScriptedModel.make([{ toolCalls: [look], usage: spent }])),
        request("tc-slow"),
        { subagents: { timeout_seconds: 5 } }
      )
      yield* TestClock.adjust(Duration.seconds(6))
      const outcome = yield* Fiber.join(task)
      assert.strictEqual(outcome.status, "timed_out")
      assert.deepInclude(run.state().token_usage?.by_purpose?.subagent ?? {}, { ...spent, calls: 1 })
      assert.strictEqual(SubagentStatus.metadata(outcome)[SubagentStatus.USAGE_RECORDED_KEY], true)
    }))

  it("the roll-up at the next model call moves a counted task's usage onto its dispatch message, not into the totals", () => {
    const dispatch = M.ai("", { id: "a1", tool_calls: [{ id: "tc-1", name: "task", args: {}, type: "tool_call" }] })
    const result = (recorded: boolean) =>
      M.tool("Task Succeeded. Result: x", "tc-1", {
        id: "t1",
        additional_kwargs: {
          [SubagentStatus.TOKEN_USAGE_KEY]: spent,
          ...(recorded ? { [SubagentStatus.USAGE_RECORDED_KEY]: true } : {})
        }
      })
    const counted = TokenUsage.rollUp([M.human("go"), dispatch, result(true)])
    assert.deepStrictEqual(counted.usage, [])
    assert.deepInclude((counted.writes[0] as M.AIMessage).usage_metadata ?? {}, spent)
    // a result no runner counted (an app's own runner) is still counted by the roll-up
    assert.lengthOf(TokenUsage.rollUp([M.human("go"), dispatch, result(false)]).usage, 1)
  })
})
