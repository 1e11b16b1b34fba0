import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as SubagentLimit from "../../src/middleware/SubagentLimit.js"
import type * as SubagentRunner from "../../src/services/SubagentRunner.js"
import type { AIMessage, ToolCall } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import type { Outcome } from "../../src/state/SubagentStatus.js"
import * as Harness from "../support/harness.js"

/** A runner that answers every task at once with `outcome`, recording the tasks it got. */
const fakeRunner = (outcome: (request: SubagentRunner.TaskRequest) => Outcome = () => ({ status: "completed", result: "done" })) => {
  const seen: Array<SubagentRunner.TaskRequest> = []
  const runner: SubagentRunner.Service = {
    types: [{ name: "general-purpose", description: "does things" }],
    run: (request) => Effect.sync(() => (seen.push(request), outcome(request)))
  }
  return { runner, seen }
}

const task = (id: string, description = `job ${id}`) => ({
  id,
  name: "task",
  args: { description, prompt: `do ${id}`, subagent_type: "general-purpose" }
})

const callArb: FC.Arbitrary<ToolCall> = FC.record({
  id: FC.uuid(),
  name: FC.constantFrom("task", "bash", "read_file"),
  args: FC.constant({ description: "x" })
})

describe("SubagentLimit: which calls are kept", () => {
  it("limits are clamped as DeerFlow clamps them: 1-4 per response, 1-50 per run", () => {
    assert.deepStrictEqual([SubagentLimit.clampConcurrent(0), SubagentLimit.clampConcurrent(9)], [1, 4])
    assert.deepStrictEqual([SubagentLimit.clampTotal(0), SubagentLimit.clampTotal(99)], [1, 50])
    assert.deepStrictEqual(SubagentLimit.allowedCalls(3, 6, 5), { allowed: 1, remaining: 1 })
    assert.deepStrictEqual(SubagentLimit.allowedCalls(3, 6, 9), { allowed: 0, remaining: 0 })
  })

  it("a run's total counts its own ledger entries only: entries without a run id (older threads) are not its own", () => {
    // DeerFlow's test_total_limit_ignores_previous_thread_delegations_for_new_run: with a run id, entries of
    // other runs and entries without one are not counted (DeerFlow counts everything only when the run has no
    // id, which an Antler run never lacks)
    const ledger = [{ id: "old-1" }, { id: "old-2", run_id: "run-0" }, { id: "t1", run_id: "run-1" }, { id: "t1", run_id: "run-1" }]
    assert.strictEqual(SubagentLimit.usedByRun(ledger, "run-1"), 1)
    assert.strictEqual(SubagentLimit.usedByRun(ledger, "run-2"), 0)
  })

  it.prop("keeps every other call in order and the first `allowed` task calls", [
    FC.array(callArb, { maxLength: 8 }),
    FC.nat(4)
  ], ([calls, allowed]) => {
    const message = M.ai("", { tool_calls: calls })
    const { dropped, message: kept } = SubagentLimit.keepTaskCalls(message, allowed)
    const tasks = calls.filter((c) => c.name === "task")
    assert.deepStrictEqual(dropped, tasks.slice(allowed))
    const expected = calls.filter((c) => c.name !== "task" || tasks.indexOf(c) < allowed)
    assert.deepStrictEqual(M.toolCalls(kept).map((c) => c.id), expected.map((c) => c.id))
    if (dropped.length === 0) assert.strictEqual(kept, message)
    assert.strictEqual(kept.id, message.id)
  })

  it("raw provider calls stay in step; a message left without calls finishes with stop", () => {
    const raw = [task("a"), task("b")].map(
      (c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: "{}" } })
    )
    const message: AIMessage = M.ai("", {
      tool_calls: [task("a"), task("b"), { id: "r", name: "read_file", args: {} }],
      additional_kwargs: { tool_calls: [...raw, { id: "r" }] }
    })
    const one = SubagentLimit.keepTaskCalls(message, 1).message
    assert.deepStrictEqual((one.additional_kwargs!.tool_calls as Array<{ id: string }>).map((c) => c.id), ["a", "r"])
    const none = SubagentLimit.keepTaskCalls(
      M.ai("", { tool_calls: [task("a")], response_metadata: { finish_reason: "tool_calls" } }),
      0
    ).message
    assert.deepStrictEqual(M.toolCalls(none), [])
    assert.strictEqual(none.response_metadata!.finish_reason, "stop")
  })
})

describe("SubagentLimit in a run", () => {
  it.effect("per response, then per run: cut calls are reported and told, the last cut ends the delegation", () =>
    Harness.withStore(Effect.gen(function*() {
      const { runner, seen } = fakeRunner()
      const out = yield* Harness.run({
        script: [
          { toolCalls: [task("a1"), task("a2"), task("a3"), task("a4")] },
          { toolCalls: [task("b1"), task("b2")] },
          { content: "One more.", toolCalls: [task("c1")] },
          "All done."
        ],
        middlewares: () => [DurableContext.layer(), SubagentLimit.layer({ runner, maxConcurrent: 2, maxTotal: 3 })]
      })
      // 2 of 4 (per response), then 1 of 2 (the run has 1 left), then none
      assert.deepStrictEqual(seen.map((r) => r.toolCallId), ["a1", "a2", "b1"])
      const reports = out.events.flatMap(
        (e) => (e.type === "custom" && e.name === "subagent_limit" ? [e.data as any] : [])
      )
      assert.deepStrictEqual(reports.map((r) => [r.requested, r.allowed]), [[4, 2], [2, 1], [1, 0]])
      assert.include(reports[0].message, "at most 2 task calls run per response")
      assert.include(reports[1].message, "may start at most 3 subagents in all and 2 already ran")
      // the model is told on its next request, in a hidden message that is never saved
      const told = (i: number) => out.requests[i]!.messages.filter((m) => m.name === "subagent_limit").map(M.text)
      assert.match(told(1)[0]!, /Not run: "job a3" \(general-purpose\); "job a4" \(general-purpose\)/)
      assert.match(told(2)[0]!, /Not run: "job b2"/)
      assert.isFalse(out.state.messages.some((m) => m.name === "subagent_limit"))
      // the run has no delegations left: the message says so and the run ends capped
      const last = out.state.messages.at(-1)!
      assert.include(M.text(last), SubagentLimit.LIMIT_REACHED_MARKER)
      // DeerFlow's test_subagent_limit_middleware: the notice names the "subagent delegation limit", and only
      // a response cut because the run has none left carries it
      assert.include(M.text(last), "subagent delegation limit")
      const cutEarlier = out.state.messages.filter((m) => m.type === "ai" && M.toolCalls(m).length > 0)
      assert.isTrue(cutEarlier.length > 0 && cutEarlier.every((m) => !M.text(m).includes("subagent delegation limit")))
      assert.deepStrictEqual(M.toolCalls(last), [])
      assert.strictEqual(out.end.stop_reason, "subagent_limit_capped")
      assert.strictEqual(out.requests.length, 3)
      // the ledger counts what ran
      assert.deepStrictEqual(out.state.delegations.map((d) => [d.id, d.status]), [
        ["a1", "completed"],
        ["a2", "completed"],
        ["b1", "completed"]
      ])
    })))

  it.effect("task answers with the status contract; an unknown type or a failure is an error result the ledger records", () =>
    Harness.withStore(Effect.gen(function*() {
      const { runner } = fakeRunner((r) =>
        r.subagentType === "general-purpose"
          ? {
            status: "completed",
            result: "the answer",
            modelName: "m",
            usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 }
          }
          : { status: "failed", error: `Unknown subagent type '${r.subagentType}'. Available: general-purpose` }
      )
      const out = yield* Harness.run({
        script: [
          {
            toolCalls: [task("ok"), { id: "bad", name: "task", args: { description: "odd", prompt: "p", subagent_type: "wizard" } }]
          },
          "done"
        ],
        middlewares: () => [DurableContext.layer(), SubagentLimit.layer({ runner })]
      })
      const results = out.state.messages.filter((m) => m.type === "tool")
      assert.strictEqual(M.text(results[0]!), "Task Succeeded. Result: the answer")
      assert.deepInclude(results[0]!.additional_kwargs!, {
        subagent_status: "completed",
        subagent_model_name: "m",
        subagent_token_usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 }
      })
      assert.strictEqual(results[1]!.type === "tool" && results[1]!.status, "error")
      assert.strictEqual(
        M.text(results[1]!),
        "Task failed. Error: Unknown subagent type 'wizard'. Available: general-purpose"
      )
      assert.deepStrictEqual(out.state.delegations.map((d) => [d.id, d.status, d.result_brief]), [
        ["ok", "completed", "the answer"],
        ["bad", "failed", "Unknown subagent type 'wizard'. Available: general-purpose"]
      ])
      // the task tool is offered with its three arguments
      const definition = out.requests[0]!.tools.find((t) => t.name === "task")!
      assert.deepStrictEqual(
        Object.keys((definition.parameters as any).properties),
        ["description", "prompt", "subagent_type"]
      )
      // DeerFlow test_subagent_routing_prompt.py::test_general_purpose_and_task_descriptions_match_routing_policy and
      // ::test_bash_descriptions_require_benefit_beyond_routine_commands: its description keeps dependent steps in one
      // task and asks for a benefit
      assert.include(definition.description, "expected benefit")
      assert.include(definition.description, "independent")
      assert.include(definition.description, "Splitting dependent steps across parallel subagents")
      assert.include(
        definition.description,
        "Routine git, build, test, or deploy operations are not sufficient reason to delegate"
      )
    })))
})
