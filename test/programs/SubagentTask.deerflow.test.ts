/**
 * DeerFlow's `test_task_tool_core_logic.py`, the progress events a `task` call sends while its subagent runs
 * (`test_task_tool_emits_running_and_completed_events`, `test_task_tool_emits_cumulative_usage_on_running_event`,
 * `test_terminal_events_include_usage`): `task_started`, one `task_running` per new step message with a 1-based
 * `message_index` and the usage so far, then `task_completed` with the result and the final usage, every one with the
 * call's id as `task_id` and the subagent's model; and the tools a subagent gets are those of its own model
 * (`test_task_tool_uses_subagent_model_override_for_tool_loading`). The subagent runs the real chain over a scripted
 * model. (The result text and metadata are Subagents.test, SubagentStatus.test and scenarios/Subagents.test.)
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { RunContext } from "../../src/services/RunContext.js"
import * as M from "../../src/state/Message.js"
import { inRun, runContext } from "../support/fixtures.js"
import { subagentRunner } from "../support/subagentRunner.js"

describe("test_task_tool_core_logic.py: the task's progress events", () => {
  it.scoped("started, running per step with the usage so far, completed with the result and the final usage", () =>
    Effect.gen(function*() {
      // one tool step, then the answer; each model call reports its usage
      const model = ScriptedModel.make((request) =>
        request.messages.at(-1)?.type === "tool"
          ? { content: "all done", usage: { input_tokens: 50, output_tokens: 10, total_tokens: 60 } }
          : {
            content: "phase-1",
            toolCalls: [{ name: "ls", args: { description: "look", path: "/mnt/user-data/workspace" } }],
            usage: { input_tokens: 100, output_tokens: 20, total_tokens: 120 }
          }
      )
      const run = inRun({ threadId: "thread-1" })
      const outcome = yield* (yield* subagentRunner(model)).run({
        toolCallId: "tc-123",
        description: "运行子任务",
        prompt: "collect diagnostics",
        subagentType: "general-purpose"
      }).pipe(Effect.provide(run.context))
      assert.deepInclude(outcome, { status: "completed", result: "all done", modelName: "ark-model" })

      const events: Array<Record<string, any>> = run.events.flatMap((e) =>
        e.type === "custom" ? [{ name: e.name, ...(e.data as Record<string, unknown>) }] : []
      )
      assert.deepStrictEqual(events.map((e) => e.name), [
        "task_started",
        "task_running",
        "task_running",
        "task_running",
        "task_completed"
      ])
      for (const event of events) {
        assert.strictEqual(event.task_id, "tc-123", event.name)
        assert.strictEqual(event.model_name, "ark-model", event.name)
      }
      const running = events.filter((e) => e.name === "task_running")
      assert.deepStrictEqual(running.map((e) => e.message_index), [1, 2, 3])
      assert.deepStrictEqual(running.map((e) => e.message.type), ["ai", "tool", "ai"])
      assert.strictEqual(M.text(running[0]!.message), "phase-1")
      const first = { input_tokens: 100, output_tokens: 20, total_tokens: 120 }
      const both = { input_tokens: 150, output_tokens: 30, total_tokens: 180 }
      assert.deepStrictEqual(running.map((e) => e.usage), [first, first, both])
      const completed = events.at(-1)!
      assert.strictEqual(completed.result, "all done")
      assert.deepStrictEqual(completed.usage, both)
      assert.deepStrictEqual(outcome.usage, both)
    }))
})

describe("test_task_tool_core_logic.py: the subagent's model decides its tools", () => {
  // test_task_tool_uses_subagent_model_override_for_tool_loading: tools are loaded for the subagent's own model
  it.scoped("a type whose model sees images gets view_image; one inheriting a text-only parent's model does not", () =>
    Effect.gen(function*() {
      const seen: Array<ModelRequest> = []
      const model = ScriptedModel.make((request) => (seen.push(request), "done"))
      const tasks = yield* subagentRunner(model, {
        models: [
          { name: "text", use: "langchain_openai:ChatOpenAI", model: "t" },
          { name: "eyes", use: "langchain_openai:ChatOpenAI", model: "e", supports_vision: true }
        ],
        subagents: { custom_agents: { viewer: { description: "Looks", system_prompt: "Look.", model: "eyes" } } }
      })
      const run = inRun({ threadId: "thread-1" })
      const parent = Context.add(run.context, RunContext, {
        ...runContext("thread-1"),
        options: { recursionLimit: 10, toolConcurrency: 1, modelName: "text" }
      })
      const task = (id: string, subagentType: string) =>
        tasks.run({ toolCallId: id, description: "d", prompt: "p", subagentType }).pipe(Effect.provide(parent))
      yield* task("tc-inherit", "general-purpose")
      yield* task("tc-viewer", "viewer")
      assert.deepStrictEqual(seen.map((r) => r.settings.modelName), ["text", "eyes"])
      const tools = seen.map((r) => r.tools.map((t) => t.name))
      assert.notInclude(tools[0]!, "view_image")
      assert.include(tools[1]!, "view_image")
    }))
})
