import { assert, describe, it } from "@effect/vitest"
import * as Render from "../../../src/programs/cli/Render.js"
import type { RunEvent } from "../../../src/services/RunEvents.js"
import * as M from "../../../src/state/Message.js"
import * as Redact from "../../../src/state/Redact.js"

const custom = (name: string, data: Record<string, unknown>): RunEvent => ({ type: "custom", name, data })

describe("subagent progress in the terminal", () => {
  it("one compact line per step, nested, naming the task; text from outside made safe and clipped", () => {
    const render = Render.human({ color: false, redact: Redact.make(["sk-secret-value-1"]) })
    const task = { task_id: "c1", description: "Find sources", subagent_type: "general-purpose", model_name: "main" }
    const out = [
      render({ type: "run_start", thread_id: "t", run_id: "r" }),
      render(custom("task_started", task)),
      render(custom("task_running", {
        ...task,
        message: M.ai("thinking", { tool_calls: [{ id: "x", name: "read_file", args: { path: "a.md" } }] })
      })),
      render(custom("task_running", { ...task, message: M.ai("just text") })),
      render(
        custom("task_running", { ...task, message: M.tool("line one\nline two \x1b[31m sk-secret-value-1", "x", { name: "read_file" }) })
      ),
      render(custom("task_completed", { ...task, result: `${"long ".repeat(40)}end`, usage: { total_tokens: 42 } })),
      render(
        custom("task_timed_out", { ...task, task_id: "c2", description: "Slow one", error: "Execution timed out after 5 seconds" })
      )
    ].join("")
    const lines = out.split("\n")
    assert.deepStrictEqual(lines.slice(0, 3), [
      "  ┌ Find sources (general-purpose · main)",
      `  │ Find sources → read_file({"path":"a.md"})`,
      "  │ Find sources ← line one line two ␛[31m [redacted]"
    ])
    assert.match(lines[3]!, /^ {2}└ Find sources completed · 42 tokens — (long ){19}long…$/)
    assert.strictEqual(lines[4], "  └ Slow one timed out — Execution timed out after 5 seconds")
    assert.notInclude(out, "just text")
  })
})
