/**
 * DeerFlow's subagent and task-tool tests, the cases where Antler did otherwise (sweep 27): what the model reads
 * when the bash subagent cannot run (`test_task_tool_core_logic.py`), the token usage of a task cancelled with its
 * run (`test_task_tool_core_logic.py`), and the arguments of a large tool call in a subagent's recorded step
 * (`test_subagent_step_events.py`). The subagents run the app's real runner over a scripted model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as SubagentLimit from "../../src/middleware/SubagentLimit.js"
import * as RunJournal from "../../src/programs/gateway/RunJournal.js"
import { ModelService } from "../../src/services/ModelService.js"
import * as M from "../../src/state/Message.js"
import * as SubagentStatus from "../../src/state/SubagentStatus.js"
import * as Harness from "../support/harness.js"
import { stalledTask, stallsAfterFirst, subagentRunner } from "../support/subagentRunner.js"

describe("test_task_tool_core_logic.py", () => {
  // test_task_tool_rejects_bash_subagent_when_host_bash_disabled
  it.scoped("a bash task where commands cannot run fails with DeerFlow's 'Bash subagent is disabled' error", () =>
    Harness.withStore(Effect.gen(function*() {
      const runner = yield* subagentRunner(ScriptedModel.make([]))
      const call = { id: "tc-bash", name: "task", args: { description: "执行任务", prompt: "run commands", subagent_type: "bash" } }
      const out = yield* Harness.run({
        script: [{ toolCalls: [call] }, "done"],
        middlewares: () => [DurableContext.layer(), SubagentLimit.layer({ runner })]
      })
      const result = out.state.messages.find((m) => m.type === "tool" && m.tool_call_id === "tc-bash")!
      assert.isTrue(M.text(result).startsWith("Task failed. Error: Bash subagent is disabled"), M.text(result))
      assert.strictEqual(result.additional_kwargs![SubagentStatus.STATUS_KEY], "failed")
      const error = result.additional_kwargs![SubagentStatus.ERROR_KEY] as string
      assert.isTrue(error.startsWith("Bash subagent is disabled"), error)
      assert.strictEqual(M.text(result), `Task failed. Error: ${error}`)
    })))

  // test_cancellation_reports_subagent_usage: what a task's subagent spent before its run was cancelled is
  // counted in the run's token usage (DeerFlow reports it to the run's journal before the cancellation goes on)
  it.scoped("a task cancelled with its run: the tokens its subagent spent are the run's, as a subagent's", () =>
    Effect.gen(function*() {
      const scripted = ScriptedModel.make([{
        content: "Looking.",
        toolCalls: [{ name: "ls", args: { description: "look", path: "/mnt/user-data/workspace" } }],
        usage: { input_tokens: 50, output_tokens: 25, total_tokens: 75 }
      }])
      // the subagent's second model call never answers: the run is cancelled while it waits
      const { run, task } = yield* stalledTask(
        stallsAfterFirst(scripted),
        { toolCallId: "tc-cancel-report", description: "执行任务", prompt: "cancel me", subagentType: "general-purpose" }
      )
      yield* Fiber.interrupt(task)
      const spent = { input_tokens: 50, output_tokens: 25, total_tokens: 75 }
      const cancelled = run.events.flatMap((e) => e.type === "custom" && e.name === "task_cancelled" ? [e.data as any] : [])
      assert.lengthOf(cancelled, 1)
      assert.deepStrictEqual(cancelled[0].usage, spent)
      const usage = run.state().token_usage
      assert.deepInclude(usage?.total ?? {}, spent)
      assert.deepInclude(usage?.by_purpose?.subagent ?? {}, { ...spent, calls: 1 })
      // (under the model the provider named, `scripted`, as DeerFlow's collector books each call)
      assert.deepInclude(usage?.by_model.scripted ?? {}, spent)
    }))

  it.scoped("a task cancelled before its subagent spent anything adds nothing to the run's token usage", () =>
    Effect.gen(function*() {
      const { run, task } = yield* stalledTask(
        (stall) => ModelService.of({ generate: () => stall }),
        { toolCallId: "tc-idle", description: "d", prompt: "p", subagentType: "general-purpose" }
      )
      yield* Fiber.interrupt(task)
      assert.isNull(run.state().token_usage)
    }))
})

describe("test_subagent_step_events.py", () => {
  // test_ai_step_caps_large_tool_call_args: the preview of large arguments is Python's json.dumps of them (", " and
  // ": " between items, keys in the call's order), cut to SUBAGENT_STEP_MAX_CHARS
  it("a large call's arguments are recorded as DeerFlow's json.dumps text, cut to the step's cap", () => {
    const journal = RunJournal.make(() => "2026-12-07T00:00:00.000Z")
    const payload = "F".repeat(RunJournal.STEP_MAX_CHARS + 4096)
    journal.push([{
      type: "custom",
      name: "task_running",
      data: {
        task_id: "t",
        message_index: 1,
        message: M.ai("writing the file", {
          tool_calls: [{ id: "w", name: "write_file", args: { path: "/mnt/out.txt", content: payload }, type: "tool_call" }]
        })
      }
    }])
    const [step] = journal.events().map((e) => e.content as any)
    const [call] = step.tool_calls
    assert.strictEqual(call.name, "write_file")
    assert.isTrue(call.args_truncated)
    assert.strictEqual(call.args.length, RunJournal.STEP_MAX_CHARS)
    assert.isTrue(call.args.startsWith(`{"path": "/mnt/out.txt", "content": "FFF`), call.args.slice(0, 60))
  })

  it("arguments whose compact JSON fits but whose json.dumps text does not are cut, as DeerFlow cuts them", () => {
    const journal = RunJournal.make(() => "2026-12-07T00:00:00.000Z")
    // compact, `{"n":[1,1,...]}` is 8,187 characters (fits); as json.dumps writes it, `{"n": [1, 1, ...]}`, 12,277
    const args = { n: Array.from({ length: 4090 }, () => 1) }
    assert.isAtMost(JSON.stringify(args).length, RunJournal.STEP_MAX_CHARS)
    journal.push([{
      type: "custom",
      name: "task_running",
      data: {
        task_id: "t",
        message_index: 1,
        message: M.ai("", { tool_calls: [{ id: "c", name: "bash", args, type: "tool_call" }] })
      }
    }])
    const [step] = journal.events().map((e) => e.content as any)
    assert.isTrue(step.tool_calls[0].args_truncated)
    assert.isTrue(step.tool_calls[0].args.startsWith(`{"n": [1, 1, `))
  })
})
