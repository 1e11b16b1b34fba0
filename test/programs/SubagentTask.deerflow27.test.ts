/**
 * DeerFlow's subagent and task-tool tests, the cases where Antler did otherwise (sweep 27): what the model reads
 * when the bash subagent cannot run (`test_task_tool_core_logic.py`), the token usage of a task cancelled with its
 * run (`test_task_tool_core_logic.py`), and the arguments of a large tool call in a subagent's recorded step
 * (`test_subagent_step_events.py`). The subagents run the app's real runner over a scripted model.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as SubagentLimit from "../../src/middleware/SubagentLimit.js"
import * as M from "../../src/state/Message.js"
import * as SubagentStatus from "../../src/state/SubagentStatus.js"
import * as Harness from "../support/harness.js"
import { subagentRunner } from "../support/subagentRunner.js"

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
})

