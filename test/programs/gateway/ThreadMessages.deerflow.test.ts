/**
 * DeerFlow's legacy list of a thread's messages, `GET /api/threads/{id}/messages`, which was a 404: a bare list of
 * the thread's rows (the messages page's, with their `seq`), the last `limit` (1-200, 50), before `before_seq`, or
 * the first `limit` after `after_seq`; the feedback of each run on its last answer in the list and `turn_duration`
 * on it. Cases named after DeerFlow's `test_thread_messages_feedback.py`, `test_thread_run_messages_pagination.py`
 * and `test_thread_run_query_validation.py`, through a real gateway over the scripted model.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway

const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

// alice's thread "chat": a run of 6 messages (two tool calls, three answers), then a short one
const runIds: Array<string> = []

beforeAll(async () => {
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn => {
      const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
      if (!asked.includes("write two notes")) return "Here you go."
      const lastUser = body.messages.findLastIndex((m) => m.role === "user")
      const results = body.messages.slice(lastUser).filter((m) => m.role === "tool").length
      if (results >= 2) return "Wrote them."
      const args = { description: "note", path: `/mnt/user-data/workspace/note${results}.md`, content: "note\n" }
      return { content: `Writing note ${results}.`, toolCalls: [{ name: "write_file", arguments: args }] }
    },
    config: { gateway: Support.twoUsers }
  })
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "chat" })).status, 200)
  for (const text of ["write two notes", "last question"]) {
    const run = await alice("POST", "/api/threads/chat/runs", { input: { messages: [{ type: "human", content: text }] } })
    assert.strictEqual(run.status, 200, run.text)
    runIds.push(run.json().run_id)
    await alice("GET", `/api/threads/chat/runs/${run.json().run_id}/join`)
  }
})
afterAll(() => gateway?.stop())

const pageSeqs = async (): Promise<Array<number>> =>
  (await alice("GET", "/api/threads/chat/messages/page")).json().data.map((row: any) => row.seq)

describe("GET /api/threads/{id}/messages", () => {
  it("a bare list of the thread's rows, oldest first, the page's seqs and shape", async () => {
    const answer = await alice("GET", "/api/threads/chat/messages")
    assert.strictEqual(answer.status, 200, answer.text)
    const rows = answer.json()
    assert.isArray(rows)
    assert.deepStrictEqual(rows.map((row: any) => row.seq), await pageSeqs())
    assert.deepStrictEqual(rows.map((row: any) => row.content.type), ["human", "ai", "tool", "ai", "tool", "ai", "human", "ai"])
    for (const row of rows) {
      assert.deepStrictEqual(
        Object.keys(row).sort(),
        ["category", "content", "created_at", "event_type", "feedback", "metadata", "run_id", "seq", "thread_id"]
      )
      assert.strictEqual(row.thread_id, "chat")
    }
  })

  it("feedback attached to last ai message per run", async () => {
    const rated = await alice("PUT", `/api/threads/chat/runs/${runIds[0]}/feedback`, { rating: 1, comment: "nice" })
    assert.strictEqual(rated.status, 200, rated.text)
    const rows = (await alice("GET", "/api/threads/chat/messages")).json()
    const withFeedback = rows.filter((row: any) => row.feedback !== null)
    assert.strictEqual(withFeedback.length, 1)
    const [last] = withFeedback
    assert.strictEqual(last.run_id, runIds[0])
    assert.strictEqual(last.content.content, "Wrote them.")
    assert.deepStrictEqual(last.feedback, { feedback_id: rated.json().feedback_id, rating: 1, comment: "nice" })
    // (of the run's answers in the list: with a list ending before its last answer, the last one in it)
    const seqs = await pageSeqs()
    const cut = (await alice("GET", `/api/threads/chat/messages?before_seq=${seqs[4]}`)).json()
    assert.deepStrictEqual(cut.map((row: any) => row.feedback === null), [true, true, true, false])
  })

  it("list thread messages injects turn duration once per run", async () => {
    const rows = (await alice("GET", "/api/threads/chat/messages")).json()
    const stamped = rows.filter((row: any) => row.content.additional_kwargs?.turn_duration !== undefined)
    assert.deepStrictEqual(stamped.map((row: any) => row.content.content), ["Wrote them.", "Here you go."])
    assert.deepStrictEqual(stamped.map((row: any) => row.run_id), runIds)
  })

  it("pages: the last limit before before_seq, the first limit after after_seq", async () => {
    const seqs = await pageSeqs()
    const newest = (await alice("GET", "/api/threads/chat/messages?limit=3")).json()
    assert.deepStrictEqual(newest.map((row: any) => row.seq), seqs.slice(-3))
    const before = (await alice("GET", `/api/threads/chat/messages?before_seq=${seqs[5]}&limit=2`)).json()
    assert.deepStrictEqual(before.map((row: any) => row.seq), seqs.slice(3, 5))
    const after = (await alice("GET", `/api/threads/chat/messages?after_seq=${seqs[1]}&limit=3`)).json()
    assert.deepStrictEqual(after.map((row: any) => row.seq), seqs.slice(2, 5))
    const between = (await alice("GET", `/api/threads/chat/messages?after_seq=${seqs[1]}&before_seq=${seqs[4]}`)).json()
    assert.deepStrictEqual(between.map((row: any) => row.seq), seqs.slice(2, 4))
  })

  it("read endpoints accept positive limits, reject non positive limits and seq cursors", async () => {
    assert.strictEqual((await alice("GET", "/api/threads/chat/messages?limit=1")).json().length, 1)
    for (const query of ["limit=0", "limit=-1", "limit=201", "before_seq=0", "before_seq=-1", "after_seq=0"]) {
      const answer = await alice("GET", `/api/threads/chat/messages?${query}`)
      assert.strictEqual(answer.status, 422, query)
      assert.include(answer.json().detail, query.split("=")[0]!)
    }
  })

  it("a thread that does not exist (yet), or another user's, is an empty list, never its messages", async () => {
    const none = await alice("GET", "/api/threads/no-such-chat/messages")
    assert.strictEqual(none.status, 200, none.text)
    assert.deepStrictEqual(none.json(), [])
    const theirs = await bob("GET", "/api/threads/chat/messages")
    assert.strictEqual(theirs.status, 200, theirs.text)
    assert.deepStrictEqual(theirs.json(), [])
  })
})
