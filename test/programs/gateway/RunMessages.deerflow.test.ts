/**
 * DeerFlow's message lists of one run, `GET /api/threads/{id}/runs/{run_id}/messages` and `GET
 * /api/runs/{run_id}/messages`, which were 404s: each case is named after DeerFlow's router tests
 * (`test_thread_run_messages_pagination.py`, `test_runs_api_endpoints.py`), run through a real gateway over the
 * scripted model. A page is `{data, has_more}`, oldest first, with the messages page's `seq`.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-runmsgs-0000000"
const BOB = "bob-token-runmsgs-000000000"

let gateway: TestGateway

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

// the runs of alice's thread "chat": a short one, then one of 8 messages (three tool calls), then a short one
const runIds: Array<string> = []

beforeAll(async () => {
  gateway = await Support.start({
    // ("write three notes": a note per answer until three tool results came back)
    script: (body: ChatRequestBody): Turn => {
      const asked = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "")
      if (!asked.includes("write three notes")) return "Here you go."
      const lastUser = body.messages.findLastIndex((m) => m.role === "user")
      const results = body.messages.slice(lastUser).filter((m) => m.role === "tool").length
      if (results >= 3) return "Wrote them."
      const args = { description: "note", path: `/mnt/user-data/workspace/note${results}.md`, content: "note\n" }
      return { toolCalls: [{ name: "write_file", arguments: args }] }
    },
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
  })
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "chat" })).status, 200)
  for (const text of ["first question", "write three notes", "last question"]) {
    const run = await alice("POST", "/api/threads/chat/runs", { input: { messages: [{ type: "human", content: text }] } })
    assert.strictEqual(run.status, 200, run.text)
    runIds.push(run.json().run_id)
    await alice("GET", `/api/threads/chat/runs/${run.json().run_id}/join`)
  }
})
afterAll(() => gateway?.stop())

const seqsOf = (body: any): Array<number> => body.data.map((row: any) => row.seq)

/** The seqs of the long run's 8 messages, as the thread's messages page numbers them. */
const longRunSeqs = async (): Promise<Array<number>> => {
  const page = (await alice("GET", "/api/threads/chat/messages/page")).json()
  return page.data.filter((row: any) => row.run_id === runIds[1]).map((row: any) => row.seq)
}

describe("GET /api/threads/{id}/runs/{run_id}/messages (test_thread_run_messages_pagination)", () => {
  it("returns paginated envelope: the run's own messages, oldest first, in DeerFlow's row shape", async () => {
    const answer = await alice("GET", `/api/threads/chat/runs/${runIds[0]}/messages`)
    assert.strictEqual(answer.status, 200, answer.text)
    const body = answer.json()
    assert.deepStrictEqual(Object.keys(body).sort(), ["data", "has_more"])
    assert.isFalse(body.has_more)
    assert.deepStrictEqual(body.data.map((row: any) => row.content.type), ["human", "ai"])
    assert.deepStrictEqual(body.data.map((row: any) => row.event_type), ["llm.human.input", "llm.ai.response"])
    const [question, answerRow] = body.data
    assert.strictEqual(question.content.content, "first question")
    assert.strictEqual(answerRow.content.content, "Here you go.")
    for (const row of body.data) {
      assert.strictEqual(row.run_id, runIds[0])
      assert.strictEqual(row.thread_id, "chat")
      assert.strictEqual(row.category, "message")
      assert.strictEqual(row.metadata.caller, "lead_agent")
      assert.isString(row.created_at)
    }
  })

  it("the seqs are the messages page's, so a cursor means the same on both", async () => {
    const body = (await alice("GET", `/api/threads/chat/runs/${runIds[1]}/messages`)).json()
    assert.strictEqual(body.data.length, 8)
    assert.deepStrictEqual(seqsOf(body), await longRunSeqs())
    assert.deepStrictEqual(
      body.data.map((row: any) => row.content.type),
      ["human", "ai", "tool", "ai", "tool", "ai", "tool", "ai"]
    )
  })

  it("has more true when extra row returned; default page keeps newest messages", async () => {
    const seqs = await longRunSeqs()
    const body = (await alice("GET", `/api/threads/chat/runs/${runIds[1]}/messages?limit=3`)).json()
    assert.isTrue(body.has_more)
    assert.deepStrictEqual(seqsOf(body), seqs.slice(-3))
  })

  it("before_seq page keeps newest side when extra row returned", async () => {
    const seqs = await longRunSeqs()
    const url = `/api/threads/chat/runs/${runIds[1]}/messages?before_seq=${seqs[6]}&limit=2`
    const body = (await alice("GET", url)).json()
    assert.isTrue(body.has_more)
    assert.deepStrictEqual(seqsOf(body), seqs.slice(4, 6))
    // (the oldest page: nothing before it)
    const oldest = (await alice("GET", `/api/threads/chat/runs/${runIds[1]}/messages?before_seq=${seqs[2]}`)).json()
    assert.isFalse(oldest.has_more)
    assert.deepStrictEqual(seqsOf(oldest), seqs.slice(0, 2))
  })

  it("after_seq page keeps oldest side when extra row returned", async () => {
    const seqs = await longRunSeqs()
    const url = `/api/threads/chat/runs/${runIds[1]}/messages?after_seq=${seqs[1]}&limit=3`
    const body = (await alice("GET", url)).json()
    assert.isTrue(body.has_more)
    assert.deepStrictEqual(seqsOf(body), seqs.slice(2, 5))
    const rest = (await alice("GET", `/api/threads/chat/runs/${runIds[1]}/messages?after_seq=${seqs[4]}`)).json()
    assert.isFalse(rest.has_more)
    assert.deepStrictEqual(seqsOf(rest), seqs.slice(5))
  })

  it("empty data when no messages (a run id the thread has no message of)", async () => {
    const answer = await alice("GET", "/api/threads/chat/runs/no-such-run/messages")
    assert.strictEqual(answer.status, 200, answer.text)
    assert.deepStrictEqual(answer.json(), { data: [], has_more: false })
  })

  it("empty data when no messages: of a thread that does not exist (yet), as DeerFlow reads its journal", async () => {
    const answer = await alice("GET", "/api/threads/no-such-chat/runs/some-run/messages")
    assert.strictEqual(answer.status, 200, answer.text)
    assert.deepStrictEqual(answer.json(), { data: [], has_more: false })
    // (its cursors are still checked; an id no thread could have is still a 404)
    assert.strictEqual((await alice("GET", "/api/threads/no-such-chat/runs/some-run/messages?limit=0")).status, 422)
    assert.strictEqual((await alice("GET", "/api/threads/bad%20id!/runs/some-run/messages")).status, 404)
  })

  it("list run messages injects turn duration only on last ai", async () => {
    const body = (await alice("GET", `/api/threads/chat/runs/${runIds[1]}/messages`)).json()
    const stamped = body.data.filter((row: any) => row.content.additional_kwargs?.turn_duration !== undefined)
    assert.strictEqual(stamped.length, 1)
    assert.strictEqual(stamped[0], body.data.at(-1))
    assert.strictEqual(stamped[0].content.type, "ai")
    assert.isTrue(Number.isInteger(stamped[0].content.additional_kwargs.turn_duration))
    // (on the page's last answer of the run, when the page ends before it)
    const seqs = await longRunSeqs()
    const page = (await alice("GET", `/api/threads/chat/runs/${runIds[1]}/messages?before_seq=${seqs[4]}`)).json()
    const onPage = page.data.filter((row: any) => row.content.additional_kwargs?.turn_duration !== undefined)
    assert.deepStrictEqual(onPage.map((row: any) => row.seq), [seqs[3]])
  })

  it("another user's thread is, for this user, one that does not exist: never its messages", async () => {
    const answer = await bob("GET", `/api/threads/chat/runs/${runIds[0]}/messages`)
    assert.strictEqual(answer.status, 200, answer.text)
    assert.deepStrictEqual(answer.json(), { data: [], has_more: false })
  })
})

describe("GET /api/runs/{run_id}/messages (test_runs_api_endpoints)", () => {
  it("run messages returns envelope", async () => {
    const answer = await alice("GET", `/api/runs/${runIds[2]}/messages`)
    assert.strictEqual(answer.status, 200, answer.text)
    const body = answer.json()
    assert.isFalse(body.has_more)
    assert.deepStrictEqual(body.data.map((row: any) => row.content.content), ["last question", "Here you go."])
    assert.deepStrictEqual(body.data.map((row: any) => row.thread_id), ["chat", "chat"])
    // (no turn_duration by run id alone, as DeerFlow's runs router stamps none)
    assert.isUndefined(body.data[1].content.additional_kwargs?.turn_duration)
  })

  it("run messages 404 when run not found", async () => {
    const answer = await alice("GET", "/api/runs/missing-run/messages")
    assert.strictEqual(answer.status, 404)
    assert.include(answer.json().detail, "missing-run")
  })

  it("run messages has more true when extra row returned (default page keeps newest, before_seq, after_seq)", async () => {
    const seqs = await longRunSeqs()
    const newest = (await alice("GET", `/api/runs/${runIds[1]}/messages?limit=2`)).json()
    assert.isTrue(newest.has_more)
    assert.deepStrictEqual(seqsOf(newest), seqs.slice(-2))
    const before = (await alice("GET", `/api/runs/${runIds[1]}/messages?before_seq=${seqs[3]}&limit=2`)).json()
    assert.deepStrictEqual(seqsOf(before), seqs.slice(1, 3))
    assert.isTrue(before.has_more)
    const after = (await alice("GET", `/api/runs/${runIds[1]}/messages?after_seq=${seqs[0]}&limit=2`)).json()
    assert.deepStrictEqual(seqsOf(after), seqs.slice(1, 3))
    assert.isTrue(after.has_more)
  })

  it("run messages rejects non positive seq cursors (and a limit past 200)", async () => {
    for (const query of ["before_seq=0", "before_seq=-1", "after_seq=0", "after_seq=-1", "limit=0", "limit=201"]) {
      const answer = await alice("GET", `/api/runs/${runIds[0]}/messages?${query}`)
      assert.strictEqual(answer.status, 422, query)
      assert.include(answer.json().detail, query.split("=")[0]!)
      const scoped = await alice("GET", `/api/threads/chat/runs/${runIds[0]}/messages?${query}`)
      assert.strictEqual(scoped.status, 422, query)
    }
  })

  it("another user's run is a 404 naming the run, never its messages", async () => {
    const answer = await bob("GET", `/api/runs/${runIds[0]}/messages`)
    assert.strictEqual(answer.status, 404)
    assert.include(answer.json().detail, runIds[0]!)
    assert.notInclude(answer.text, "first question")
  })
})

describe("a run's messages after a regenerate took its turn back", () => {
  it("are still the run's (DeerFlow's journal keeps every run's); the regenerate's are its own", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "regen" })).status, 200)
    const run = await alice("POST", "/api/threads/regen/runs", { input: { messages: [{ type: "human", content: "q" }] } })
    const original = run.json().run_id as string
    await alice("GET", `/api/threads/regen/runs/${original}/join`)
    const before = (await alice("GET", `/api/threads/regen/runs/${original}/messages`)).json()
    assert.deepStrictEqual(before.data.map((row: any) => row.content.type), ["human", "ai"])
    const prepared = await alice("POST", "/api/threads/regen/runs/regenerate/prepare", {
      message_id: before.data[1].content.id
    })
    assert.strictEqual(prepared.status, 200, prepared.text)
    const { input, checkpoint, metadata } = prepared.json()
    const again = (await alice("POST", "/api/threads/regen/runs", { input, checkpoint, metadata })).json().run_id
    await alice("GET", `/api/threads/regen/runs/${again}/join`)
    // (the page shows the regenerated turn only; the original run still lists what it wrote)
    const page = (await alice("GET", "/api/threads/regen/messages/page")).json()
    assert.deepStrictEqual(page.data.map((row: any) => row.run_id), [again, again])
    const after = (await alice("GET", `/api/runs/${original}/messages`)).json()
    assert.deepStrictEqual(seqsOf(after), seqsOf(before))
    const regenerated = (await alice("GET", `/api/runs/${again}/messages`)).json()
    assert.deepStrictEqual(regenerated.data.map((row: any) => row.content.type), ["human", "ai"])
    assert.deepStrictEqual(seqsOf(regenerated), page.data.map((row: any) => row.seq))
    assert.isAbove(regenerated.data[0].seq, before.data[1].seq)
  })
})
