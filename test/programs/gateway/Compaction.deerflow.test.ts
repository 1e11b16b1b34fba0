/**
 * What a manual compaction leaves of a thread besides its messages. Mirrors DeerFlow's test_context_compaction.py
 * (test_compact_thread_context_preserves_middleware_contributed_channels, ..._reads_materialized_state...): the
 * compaction writes the summary and the messages it keeps (and the summary call's token usage); every other field
 * of the thread (its title and todos among them) is as it was, and the run after it still has them. A compaction
 * that does not happen (nothing to compact, no summary made) writes nothing: no checkpoint, the state as it was.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const isSummary = (body: ChatRequestBody) => JSON.stringify(body.messages).includes("You are compacting the history")

let gateway: TestGateway
const call = Requests.as(() => gateway)

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => {
      if (!isSummary(body)) return "Noted."
      // a summary model that answers nothing: no summary can be made
      return JSON.stringify(body.messages).includes("doomed") ? "" : "## Session intent\nSUMMARY-CHANNELS"
    },
    config: (url) => ({
      ...Support.baseConfig(url),
      // no automatic trigger: only the manual compaction summarises
      summarization: { enabled: true, keep: { type: "messages", value: 2 } }
    })
  })
})
afterAll(() => gateway?.stop())

const ask = async (threadId: string, text: string) => {
  const answer = await call("POST", `/threads/${threadId}/runs/wait`, {
    assistant_id: "lead_agent",
    input: { messages: [{ type: "human", content: text }] }
  })
  assert.strictEqual(answer.status, 200, answer.text)
}

describe("a manual compaction", () => {
  it("changes the messages and the summary only: the title and todos stay, for the next run too", async () => {
    assert.strictEqual((await call("POST", "/threads", { thread_id: "planned" })).status, 200)
    await ask("planned", "plan the trip")
    const todos = [{ content: "book the train", status: "in_progress" }, { content: "pack", status: "pending" }]
    const set = await call("POST", "/threads/planned/state", { values: { title: "Trip to Lyon", todos } })
    assert.strictEqual(set.status, 200, set.text)
    await ask("planned", "and the hotel")
    const before = (await call("GET", "/threads/planned/state")).json().values

    const done = await call("POST", "/api/threads/planned/compact", {})
    assert.strictEqual(done.status, 200, done.text)
    assert.isTrue(done.json().compacted)
    const after = (await call("GET", "/threads/planned/state")).json().values
    assert.strictEqual(after.summary_text, "## Session intent\nSUMMARY-CHANNELS")
    assert.isBelow(after.messages.length, before.messages.length)
    const { messages: _m1, summary_text: _s1, token_usage: _t1, ...otherBefore } = before
    const { messages: _m2, summary_text: _s2, token_usage: _t2, ...otherAfter } = after
    assert.deepStrictEqual(otherAfter, otherBefore)
    assert.strictEqual(after.title, "Trip to Lyon")
    assert.deepStrictEqual(after.todos, todos)

    await ask("planned", "what is left?")
    const next = (await call("GET", "/threads/planned/state")).json().values
    assert.strictEqual(next.title, "Trip to Lyon")
    assert.deepStrictEqual(next.todos, todos)
  })
})

describe("a compaction that does not happen", () => {
  const checkpoints = async (threadId: string) =>
    (await call("POST", `/threads/${threadId}/history`, { limit: 100 })).json().length as number

  it("writes nothing: nothing to compact (compacted false), or no summary made (500)", async () => {
    assert.strictEqual((await call("POST", "/threads", { thread_id: "short" })).status, 200)
    await ask("short", "only question")
    const shortBefore = await checkpoints("short")
    const stateBefore = (await call("GET", "/threads/short/state")).json()
    const nothing = await call("POST", "/api/threads/short/compact", {})
    assert.strictEqual(nothing.status, 200, nothing.text)
    assert.deepInclude(nothing.json(), { compacted: false, reason: "not_enough_messages", checkpoint_id: null })
    assert.strictEqual(await checkpoints("short"), shortBefore)
    assert.deepStrictEqual((await call("GET", "/threads/short/state")).json(), stateBefore)

    assert.strictEqual((await call("POST", "/threads", { thread_id: "doomed" })).status, 200)
    await ask("doomed", "doomed question")
    await ask("doomed", "another question")
    const doomedBefore = await checkpoints("doomed")
    const failed = await call("POST", "/api/threads/doomed/compact", {})
    assert.strictEqual(failed.status, 500, failed.text)
    assert.strictEqual(await checkpoints("doomed"), doomedBefore)
    assert.isNull((await call("GET", "/threads/doomed/state")).json().values.summary_text ?? null)
  })
})
