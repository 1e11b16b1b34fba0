/**
 * The gateway's run journal: a subagent's `task_*` events become DeerFlow's `subagent.start` / `subagent.step` /
 * `subagent.end` (the step in DeerFlow's compact shape, which the app's subtask card reads), and a run's events
 * stay bounded in count and size, its end always kept.
 */
import { assert, describe, it } from "@effect/vitest"
import * as RunJournal from "../../../src/programs/gateway/RunJournal.js"
import type { RunEvent } from "../../../src/services/RunEvents.js"
import * as M from "../../../src/state/Message.js"

const at = () => "2026-12-03T00:00:00.000Z"
const task = (name: string, data: Record<string, unknown>): RunEvent => ({ type: "custom", name, data })

describe("the run journal", () => {
  // DeerFlow's test_on_chat_model_start_persists_original_user_input_without_mutating_model_message
  it("records a question as the user wrote it, not with the context a middleware put before it", () => {
    const journal = RunJournal.make(at)
    const question = M.human([{ type: "text", text: "Show revenue" }], { additional_kwargs: { channel: "web" } })
    const framed = M.human([
      { type: "text", text: "<current_uploads>...</current_uploads>\n\n" },
      { type: "text", text: "Show revenue" }
    ], { id: question.id, additional_kwargs: { channel: "web", original_user_content: "Show revenue" } })
    journal.push([
      { type: "run_start", thread_id: "t", run_id: "r" },
      { type: "message", message: question },
      { type: "message", message: framed }
    ])
    const [human] = journal.events().filter((e) => e.event_type === "llm.human.input")
    const content = human!.content as any
    assert.strictEqual(content.id, question.id)
    assert.deepStrictEqual(content.content, [{ type: "text", text: "Show revenue" }])
    assert.deepStrictEqual(content.additional_kwargs, { channel: "web" })
  })

  // DeerFlow's restore_original_human_message: blocks without text get the user's text first
  it("records a question whose blocks hold no text with the user's text before them", () => {
    const journal = RunJournal.make(at)
    const image = { type: "image_url" as const, image_url: { url: "data:image/png;base64,abc" } }
    const question = M.human([image], { additional_kwargs: { original_user_content: "What is this?", source: "web" } })
    journal.push([{ type: "run_start", thread_id: "t", run_id: "r" }, { type: "message", message: question }])
    const [human] = journal.events().filter((e) => e.event_type === "llm.human.input")
    const content = human!.content as any
    assert.deepStrictEqual(content.content, [{ type: "text", text: "What is this?" }, image])
    assert.deepStrictEqual(content.additional_kwargs, { source: "web" })
  })

  // DeerFlow's test_run_journal TestContextEvents and test_run_events_endpoint: the debug API says which memory
  // block a run's model read, by its hash, once a run
  it("records the memory block the run read as context:memory, its hash only, once", () => {
    const journal = RunJournal.make(at)
    const hash = "a".repeat(64)
    journal.push([
      { type: "run_start", thread_id: "t", run_id: "r" },
      task("memory_context", { content_sha256: hash }),
      task("memory_context", { content_sha256: hash })
    ])
    journal.end({ status: "success", stop_reason: "completed" })
    const memory = journal.events().filter((e) => e.event_type === "context:memory")
    assert.deepStrictEqual(memory.map((e) => [e.category, e.content]), [["context", { content_sha256: hash }]])
  })

  it("records a subagent's start, steps and end as DeerFlow's subagent events", () => {
    const journal = RunJournal.make(at)
    journal.push([
      { type: "run_start", thread_id: "t", run_id: "r" },
      task("task_started", { task_id: "call-1", description: "Find deer food" }),
      task("task_running", {
        task_id: "call-1",
        message_index: 1,
        message: M.ai("Searching.", {
          tool_calls: [{ id: "c", name: "web_search", args: { query: "x".repeat(9000) }, type: "tool_call" }]
        })
      }),
      task("task_running", {
        task_id: "call-1",
        message_index: 2,
        message: M.tool("y".repeat(10_000), "c", { name: "web_search" })
      }),
      task("task_running", { task_id: "call-1", message_index: -1, message: M.ai("bad index") }),
      task("task_completed", { task_id: "call-1", result: "Grass.", model_name: "scripted" }),
      task("llm_retry", { task_id: "call-1" })
    ])
    journal.end({ status: "success", stop_reason: "completed" })
    const events = journal.events()
    assert.deepStrictEqual(events.map((e) => [e.seq, e.event_type, e.category]), [
      [1, "run.start", "trace"],
      [2, "subagent.start", "subagent"],
      [3, "subagent.step", "subagent"],
      [4, "subagent.step", "subagent"],
      [5, "subagent.end", "subagent"],
      [6, "run.end", "outputs"],
      [7, "run.delivery", "outputs"]
    ])
    const ai = events[2]!.content as any
    assert.deepInclude(ai, { task_id: "call-1", message_index: 1, kind: "ai", text: "Searching.", truncated: false })
    assert.strictEqual(ai.tool_calls[0].name, "web_search")
    assert.isTrue(ai.tool_calls[0].args_truncated)
    assert.strictEqual(ai.tool_calls[0].args.length, RunJournal.STEP_MAX_CHARS)
    const tool = events[3]!.content as any
    assert.deepInclude(tool, { kind: "tool", tool_name: "web_search", truncated: true })
    assert.strictEqual(tool.text.length, RunJournal.STEP_MAX_CHARS)
    assert.deepStrictEqual(events[3]!.metadata, { task_id: "call-1", message_index: 2 })
    assert.deepStrictEqual(events[4]!.content, {
      task_id: "call-1",
      status: "completed",
      model_name: "scripted",
      result: "Grass."
    })
  })

  it("a step's text joins its content blocks line by line; a terminal model name is trimmed", () => {
    // DeerFlow test_subagent_step_events test_list_content_blocks_are_flattened_to_text (message_content_to_text)
    const journal = RunJournal.make(at)
    const blocks = [{ type: "text", text: "first" }, { type: "text", text: "" }, "second"]
    journal.push([
      task("task_running", { task_id: "c", message_index: 1, message: { type: "ai", content: blocks } }),
      task("task_failed", { task_id: "c", error: "boom", model_name: " scripted " })
    ])
    const events = journal.events()
    assert.deepInclude(events[0]!.content as any, { text: "first\nsecond", tool_calls: [] })
    assert.strictEqual((events[1]!.content as any).model_name, "scripted")
  })

  it("cuts a step's text, a call's arguments and a result in characters (code points), never half an emoji", () => {
    // DeerFlow's truncate_step_text: Python's len and slicing count code points
    const journal = RunJournal.make(at)
    const short = "🦌".repeat(5000)
    const long = "🦌".repeat(RunJournal.STEP_MAX_CHARS + 10)
    journal.push([
      task("task_running", { task_id: "c", message_index: 1, message: M.tool(short, "x", { name: "web_search" }) }),
      task("task_running", {
        task_id: "c",
        message_index: 2,
        message: M.ai(long, { tool_calls: [{ id: "x", name: "write_file", args: long as any, type: "tool_call" }] })
      }),
      task("task_completed", { task_id: "c", result: long })
    ])
    const [kept, cut, end] = journal.events().map((e) => e.content as any)
    assert.deepInclude(kept, { text: short, truncated: false })
    const expected = "🦌".repeat(RunJournal.STEP_MAX_CHARS)
    assert.deepInclude(cut, { text: expected, truncated: true })
    assert.deepStrictEqual(cut.tool_calls, [{ name: "write_file", args: expected, args_truncated: true }])
    assert.deepInclude(end, { result: expected, result_truncated: true })
  })

  it("keeps at most MAX_EVENTS events and MAX_BYTES of them, and always the run's end", () => {
    const journal = RunJournal.make(at)
    for (let i = 0; i < RunJournal.MAX_EVENTS + 50; i++) {
      journal.push([{ type: "message", message: M.tool(`result ${i}`, `call-${i}`, { name: "ls" }) }])
    }
    journal.end({ status: "interrupted", stop_reason: "cancelled" })
    const events = journal.events()
    assert.isAtLeast(events.length, RunJournal.MAX_EVENTS - 1)
    assert.isAtMost(events.length, RunJournal.MAX_EVENTS)
    assert.deepStrictEqual(events.slice(-2).map((e) => e.event_type), ["run.end", "run.delivery"])

    const big = RunJournal.make(at)
    for (let i = 0; i < 100; i++) big.push([{ type: "message", message: M.ai("z".repeat(100_000), { id: `a${i}` }) }])
    big.end({ status: "error", stop_reason: "error", error: "boom", error_type: "ModelError" })
    const kept = big.events()
    assert.isAtMost(JSON.stringify(kept).length, RunJournal.MAX_BYTES + 10_000)
    assert.isTrue((kept[0]!.content as any).additional_kwargs.content_truncated)
    // DeerFlow's contract: run.error's content is the error's message, its metadata names the error's type
    const error = kept.at(-2)!
    assert.strictEqual(error.content, "boom")
    assert.deepStrictEqual(error.metadata, { status: "error", stop_reason: "error", error_type: "ModelError" })
    assert.strictEqual(error.event_type, "run.error")
    assert.strictEqual(kept.at(-1)!.event_type, "run.delivery")
  })

  // DeerFlow's test_run_journal TestDeliveryTracking: the run's terminal receipt of the files it presented
  describe("run.delivery", () => {
    const call = (id: string, name: string) => ({ id, name, args: {}, type: "tool_call" as const })
    const presented = (callId: string, artifacts: ReadonlyArray<string>): RunEvent => ({
      type: "state",
      update: { artifacts },
      tool_call_id: callId
    })
    const delivery = (journal: RunJournal.RunJournal) => {
      const receipts = journal.events().filter((e) => e.event_type === "run.delivery")
      assert.strictEqual(receipts.length, 1)
      assert.strictEqual(receipts[0]!.category, "outputs")
      return receipts[0]!.content
    }

    it("lists each path a tool presented once, by the tool that presented it", () => {
      const journal = RunJournal.make(at)
      journal.push([
        { type: "run_start", thread_id: "t", run_id: "r" },
        { type: "message", message: M.ai("", { tool_calls: [call("c1", "present_files"), call("c2", "ls")] }) },
        { type: "message", message: M.tool("Presented 1 file(s)", "c1", { name: "present_files" }) },
        { type: "message", message: M.tool("a.txt", "c2", { name: "ls" }) },
        { type: "state", update: { sandbox: { sandbox_id: "local" } }, tool_call_id: "c2" },
        presented("c1", ["/mnt/user-data/outputs/report.md"]),
        { type: "message", message: M.ai("", { tool_calls: [call("c3", "present_files")] }) },
        presented("c3", ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/appendix.md"]),
        // a path whose tool is not known is counted, under no tool
        presented("unknown", ["/mnt/user-data/outputs/anon.txt"])
      ])
      journal.end({ status: "success", stop_reason: "completed" })
      assert.deepStrictEqual(delivery(journal), {
        presented: 3,
        paths: [
          "/mnt/user-data/outputs/report.md",
          "/mnt/user-data/outputs/appendix.md",
          "/mnt/user-data/outputs/anon.txt"
        ],
        by_tool: { present_files: ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/appendix.md"] }
      })
      assert.strictEqual(journal.events().at(-1)!.event_type, "run.delivery")
    })

    it("is recorded with nothing presented, whatever the run's end", () => {
      for (const status of ["success", "interrupted", "error"]) {
        const journal = RunJournal.make(at)
        journal.push([{ type: "run_start", thread_id: "t", run_id: "r" }])
        journal.end({ status, stop_reason: status === "error" ? "error" : "completed", error: "boom" })
        assert.deepStrictEqual(delivery(journal), { presented: 0, paths: [], by_tool: {} })
      }
    })

    it("lists at most MAX_DELIVERY_CHARS of paths", () => {
      const journal = RunJournal.make(at)
      const paths = Array.from({ length: 100 }, (_, i) => `/mnt/user-data/outputs/${String(i).padStart(1000, "f")}`)
      journal.push([presented("c", paths)])
      journal.end({ status: "success", stop_reason: "completed" })
      const content = delivery(journal) as { presented: number; paths: ReadonlyArray<string> }
      assert.isAbove(content.presented, 0)
      assert.isBelow(content.presented, 100)
      assert.strictEqual(content.presented, content.paths.length)
      assert.isAtMost(content.paths.join("").length, RunJournal.MAX_DELIVERY_CHARS)
    })
  })

  it("drops a message's event when it is written again as one the app does not show", () => {
    const journal = RunJournal.make(at)
    journal.push([
      { type: "message", message: M.human("hello", { id: "h" }) },
      { type: "message", message: M.system("<reminder>", { id: "h" }) },
      { type: "message", message: M.human("hello", { id: "h__user" }) }
    ])
    assert.deepStrictEqual(journal.events().map((e) => [e.seq, (e.content as any).id]), [[1, "h__user"]])
  })
})
