/**
 * DeerFlow's `test_worker_stream_subgraph_namespace.py`, the cases about what a client of a run that delegated a
 * task reads (Antler streams no subgraphs, so without `stream_subgraphs` as with it): the subagent's own messages
 * never reach the run's `values` or `messages` events, no event name is namespaced (`values|tools:…`), the
 * `task_*` custom events the app follows are there, and a subagent whose model failed does not fail the run.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway

const SUBAGENT_PROMPT = "child-prompt-sentinel"
const SUBAGENT_ANSWER = "child-answer-sentinel"

const script = (body: ChatRequestBody): Turn => {
  const text = JSON.stringify(body.messages)
  const last = body.messages.at(-1)
  if (text.includes("general-purpose subagent")) {
    // the subagent: it answers, or its model fails (a request it cannot retry)
    return text.includes("fail it") ? { status: 400 } : SUBAGENT_ANSWER
  }
  if (last?.role === "tool") return "Parent done."
  const prompt = `${SUBAGENT_PROMPT}${text.includes("fail the child") ? " fail it" : ""}`
  const args = { description: "delegate it", prompt, subagent_type: "general-purpose" }
  return { toolCalls: [{ id: "task-call-1", name: "task", arguments: args }] }
}

beforeAll(async () => {
  gateway = await Support.start({ script })
})
afterAll(() => gateway?.stop())

const delegate = async (ask: string) => {
  const thread = await (await fetch(`${gateway.url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}"
  })).json() as { thread_id: string }
  const response = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: ask }] },
      context: { subagent_enabled: true },
      stream_mode: ["values", "messages-tuple", "custom"],
      stream_subgraphs: true
    })
  })
  assert.strictEqual(response.status, 200)
  const { events } = await Support.readSse(response, () => false)
  const runs = await (await fetch(`${gateway.url}/threads/${thread.thread_id}/runs`)).json() as Array<any>
  return { events, run: runs[0] }
}

describe("DeerFlow's test_worker_stream_subgraph_namespace.py: a delegated task's stream", () => {
  // DeerFlow: test_without_stream_subgraphs_delegated_frames_stay_out_while_task_events_remain
  // (and test_stream_subgraphs_publishes_delegated_frames_namespaced_never_bare, its bare-frame half)
  it("keeps the subagent's messages out of the run's events, while its task events remain", async () => {
    const { events, run } = await delegate("delegate this")
    assert.strictEqual(run.status, "success")
    assert.deepStrictEqual(events.filter((e) => e.event.includes("|")).map((e) => e.event), [])
    const last = events.filter((e) => e.event === "values").at(-1)!.data as any
    assert.strictEqual(last.messages.at(-1).content, "Parent done.")
    // every message the run's events carry is one of the thread's own (the subagent's are not)
    const own = new Set(last.messages.map((m: any) => m.id))
    for (const e of events.filter((e) => e.event === "values")) {
      for (const m of (e.data as any).messages) assert.isTrue(own.has(m.id), `a subagent message in values: ${m.id}`)
    }
    for (const e of events.filter((e) => e.event === "messages")) {
      const chunk = (e.data as any)[0]
      assert.isTrue(own.has(chunk.id), `a subagent message chunk in messages: ${JSON.stringify(chunk)}`)
    }
    assert.notInclude(JSON.stringify(last.messages.filter((m: any) => m.type === "ai")), SUBAGENT_ANSWER)
    const kinds = events.filter((e) => e.event === "custom").map((e) => (e.data as any).type)
    assert.include(kinds, "task_started")
    assert.include(kinds, "task_completed")
  })

  // DeerFlow: test_delegated_error_fallback_does_not_mark_the_parent_run_as_error
  it("a subagent whose model failed does not fail the run", async () => {
    const { events, run } = await delegate("fail the child")
    assert.strictEqual(run.status, "success")
    assert.deepStrictEqual(events.filter((e) => e.event === "error").map((e) => e.data), [])
    const kinds = events.filter((e) => e.event === "custom").map((e) => (e.data as any).type)
    assert.include(kinds, "task_failed")
  })
})
