import { assert, describe, it } from "@effect/vitest"
import * as Render from "../../../src/programs/cli/Render.js"
import * as RunStateHolder from "../../../src/programs/RunStateHolder.js"
import type { RunEvent } from "../../../src/services/RunEvents.js"
import * as M from "../../../src/state/Message.js"
import * as Redact from "../../../src/state/Redact.js"
import * as TS from "../../../src/state/ThreadState.js"

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

describe("a compaction in the terminal", () => {
  it("the earlier answers a compaction keeps are not printed again", () => {
    const earlier = [M.human("first", { id: "u1" }), M.ai("EARLIER ANSWER", { id: "a1" })]
    const events: Array<RunEvent> = []
    const holder = RunStateHolder.make({ ...TS.empty, messages: earlier }, (event) => events.push(event))
    holder.apply({ messages: [M.human("second", { id: "u2" })] })
    // Summarization's update: every message removed, the kept ones written again, the summary stored
    const kept = [earlier[1]!, M.human("second", { id: "u2" })]
    holder.apply({ messages: [M.remove(M.REMOVE_ALL_MESSAGES), ...kept], summary_text: "S" })
    holder.apply({ messages: [M.ai("NEW ANSWER", { id: "a2" })] })
    const render = Render.human({ color: false })
    const out = [{ type: "run_start", thread_id: "t", run_id: "r" } as RunEvent, ...events].map(render).join("")
    assert.include(out, "NEW ANSWER")
    assert.notInclude(out, "EARLIER ANSWER")
    assert.deepStrictEqual(holder.current().messages.map((m) => m.id), ["a1", "u2", "a2"])
  })
})
