/**
 * DeerFlow's app compacts a chat with `POST /api/threads/{id}/compact` (its `/compact` command): a 404 until now.
 * It summarises the thread's older messages as the Summarization middleware does, per user, refused while a run
 * holds the thread.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-compact-0000000"
const BOB = "bob-token-compact-000000000"

let gateway: TestGateway

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

const textOf = (content: unknown) =>
  typeof content === "string" ? content : JSON.stringify(content ?? "")
const lastUser = (body: ChatRequestBody) => textOf(body.messages.filter((m) => m.role === "user").at(-1)?.content)
const isSummary = (body: ChatRequestBody) => lastUser(body).includes("You are compacting the history")

const ask = async (threadId: string, text: string) => {
  const input = { messages: [{ type: "human", content: text }] }
  const run = await alice("POST", `/api/threads/${threadId}/runs`, { input })
  assert.strictEqual(run.status, 200, run.text)
  await alice("GET", `/api/threads/${threadId}/runs/${run.json().run_id}/join`)
}

const chat = async (threadId: string, texts: ReadonlyArray<string>) => {
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: threadId })).status, 200)
  for (const text of texts) await ask(threadId, text)
}

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => {
      if (isSummary(body)) return lastUser(body).includes("doomed") ? "" : "## Session intent\nSUMMARY-GW-5120"
      return lastUser(body).includes("hold") ? { content: "Working", stall: true } : "Here you go."
    },
    config: (url) => ({
      models: [
        { name: "scripted", model: "scripted", base_url: url, api_key: "sk-test-scripted-key-000000" },
        { name: "second", model: "second-model", base_url: url, api_key: "sk-test-scripted-key-000000" }
      ],
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } },
      // no automatic trigger: only the manual compaction summarises
      summarization: { enabled: true, keep: { type: "messages", value: 2 } }
    })
  })
  await chat("chat", ["first question", "second question"])
})
afterAll(() => gateway?.stop())

describe("POST /api/threads/{id}/compact", () => {
  it("summarises the older messages, recorded as an automatic summary is; another user's thread is a 404", async () => {
    assert.strictEqual((await bob("POST", "/api/threads/chat/compact", {})).status, 404)
    const done = await alice("POST", "/api/threads/chat/compact", {})
    assert.strictEqual(done.status, 200, done.text)
    const body = done.json()
    assert.deepStrictEqual(Object.keys(body).sort(), [
      "checkpoint_id",
      "compacted",
      "preserved_message_count",
      "reason",
      "removed_message_count",
      "summary_updated",
      "thread_id",
      "total_tokens"
    ])
    assert.strictEqual(body.thread_id, "chat")
    assert.isTrue(body.compacted)
    assert.isNull(body.reason)
    assert.strictEqual(body.removed_message_count, 2)
    assert.isTrue(body.summary_updated)
    assert.isAbove(body.total_tokens, 0)
    // the summary call: no tools, the history in its prompt
    const call = gateway.scripted.requests.find(isSummary)!
    assert.deepStrictEqual(call.tools ?? [], [])
    assert.include(lastUser(call), "first question")
    // the thread: the summary stored, the summarised messages gone, its head the compaction's checkpoint
    const state = (await alice("GET", "/api/threads/chat/state")).json()
    assert.strictEqual(state.values.summary_text, "## Session intent\nSUMMARY-GW-5120")
    const visible = state.values.messages.filter((m: any) => m.type === "human" || m.type === "ai")
    assert.deepStrictEqual(visible.map((m: any) => m.content), ["second question", "Here you go."])
    // the date reminder stays, as the automatic path rescues it
    assert.strictEqual(body.preserved_message_count, state.values.messages.length)
    assert.strictEqual(state.checkpoint.checkpoint_id, body.checkpoint_id)
    // the next run's request carries the summary
    const input = { messages: [{ type: "human", content: "third" }] }
    const run = await alice("POST", "/api/threads/chat/runs", { input })
    await alice("GET", `/api/threads/chat/runs/${run.json().run_id}/join`)
    const next = gateway.scripted.requests.findLast((r) => lastUser(r).includes("third"))!
    assert.include(JSON.stringify(next.messages), "SUMMARY-GW-5120")
    assert.notInclude(JSON.stringify(next.messages), "first question")
  })

  it("the summary is asked of the request's model, else the custom agent's, else the default", async () => {
    assert.strictEqual((await alice("POST", "/api/agents", { name: "researcher", model: "second" })).status, 201)
    const modelsOf = async (threadId: string, body: Record<string, unknown>) => {
      await chat(threadId, ["a question", "another question"])
      const before = gateway.scripted.requests.length
      const done = await alice("POST", `/api/threads/${threadId}/compact`, body)
      assert.strictEqual(done.status, 200, done.text)
      return gateway.scripted.requests.slice(before).filter(isSummary).map((r) => r.model)
    }
    assert.deepStrictEqual(await modelsOf("by-agent", { agent_name: "researcher" }), ["second-model"])
    assert.deepStrictEqual(await modelsOf("by-request", { agent_name: "researcher", model_name: "scripted" }), [
      "scripted"
    ])
    assert.deepStrictEqual(await modelsOf("by-default", {}), ["scripted"])
    assert.deepStrictEqual(await modelsOf("unknown-agent", { agent_name: "nobody" }), ["scripted"])
  })

  it("nothing to compact, or not forced below the trigger: compacted false with the reason", async () => {
    await chat("short", ["only question"])
    const nothing = await alice("POST", "/api/threads/short/compact", { force: true })
    assert.strictEqual(nothing.status, 200, nothing.text)
    assert.isFalse(nothing.json().compacted)
    assert.strictEqual(nothing.json().reason, "not_enough_messages")
    assert.isNull(nothing.json().checkpoint_id)
    const unforced = await alice("POST", "/api/threads/chat/compact", { force: false })
    assert.strictEqual(unforced.status, 200, unforced.text)
    assert.strictEqual(unforced.json().reason, "below_trigger")
  })

  it("a summary that cannot be made is a 500, the thread unchanged", async () => {
    await chat("doomed", ["doomed question", "another question"])
    const before = (await alice("GET", "/api/threads/doomed/state")).json()
    const failed = await alice("POST", "/api/threads/doomed/compact", {})
    assert.strictEqual(failed.status, 500, failed.text)
    assert.include(failed.json().detail, "Failed to compact thread context")
    const after = (await alice("GET", "/api/threads/doomed/state")).json()
    assert.deepStrictEqual(after.values.messages, before.values.messages)
    assert.isNull(after.values.summary_text ?? null)
  })

  it("409 while a run holds the thread; a body or model it cannot use is a 422", async () => {
    await chat("busy", ["a question", "a second one"])
    const input = { messages: [{ type: "human", content: "hold on" }] }
    const run = await alice("POST", "/api/threads/busy/runs", { input })
    assert.strictEqual(run.status, 200, run.text)
    for (let i = 0; i < 400 && (await alice("GET", "/api/threads/busy")).json().status !== "busy"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const refused = await alice("POST", "/api/threads/busy/compact", {})
    assert.strictEqual(refused.status, 409, refused.text)
    assert.include(refused.json().detail, "run in flight")
    await alice("POST", `/api/threads/busy/runs/${run.json().run_id}/cancel`)
    await alice("GET", `/api/threads/busy/runs/${run.json().run_id}/join`)
    const fraction = await alice("POST", "/api/threads/busy/compact", { keep: { type: "fraction", value: 3 } })
    assert.strictEqual(fraction.status, 422, fraction.text)
    const model = await alice("POST", "/api/threads/busy/compact", { model_name: "no-such-model" })
    assert.strictEqual(model.status, 422, model.text)
    assert.include(model.json().detail, "no-such-model")
    // an agent name is a directory name of memory: no way out of it
    const agent = await alice("POST", "/api/threads/busy/compact", { agent_name: "../../etc" })
    assert.strictEqual(agent.status, 422, agent.text)
  })
})

describe("the messages page after a compaction", () => {
  // DeerFlow's page reads its run journal (test_thread_messages_page), which a compaction leaves as it is; Antler's
  // read the thread's state, so a chat reloaded after a compaction lost its summarised turns, and the turns left
  // were numbered anew
  it("keeps summarised turns (to branch from) under their seqs; a regenerated answer replaces its turn", async () => {
    await chat("paged", ["first question", "second question"])
    const rows = async () => {
      const page = await alice("GET", "/api/threads/paged/messages/page")
      assert.strictEqual(page.status, 200, page.text)
      return page.json().data.map((row: any) => ({
        seq: row.seq,
        run: row.run_id,
        id: row.content.id,
        // (a regenerated question is replayed as text blocks)
        text: typeof row.content.content === "string" ? row.content.content : row.content.content[0].text
      }))
    }
    const before = await rows()
    assert.deepStrictEqual(before.map((row: any) => row.text), [
      "first question",
      "Here you go.",
      "second question",
      "Here you go."
    ])
    const done = await alice("POST", "/api/threads/paged/compact", {})
    assert.isTrue(done.json().compacted, done.text)
    assert.deepStrictEqual(await rows(), before)
    // the older pages are read by before_seq as before
    const older = (await alice("GET", `/api/threads/paged/messages/page?limit=2&before_seq=${before[2].seq}`)).json()
    assert.deepStrictEqual(older.data.map((row: any) => row.content.id), [before[0].id, before[1].id])
    assert.isFalse(older.has_more)

    await ask("paged", "third question")
    const later = await rows()
    assert.deepStrictEqual(later.slice(0, 4), before)
    assert.deepStrictEqual(later.slice(4).map((row: any) => row.text), ["third question", "Here you go."])
    assert.isAbove(later[4].seq, before[3].seq)

    const answer = later[5]
    const prepare = "/api/threads/paged/runs/regenerate/prepare"
    const prepared = (await alice("POST", prepare, { message_id: answer.id })).json()
    const rerun = await alice("POST", "/api/threads/paged/runs/wait", {
      input: prepared.input,
      checkpoint: prepared.checkpoint,
      metadata: prepared.metadata
    })
    assert.strictEqual(rerun.status, 200, rerun.text)
    const regenerated = await rows()
    assert.deepStrictEqual(regenerated.slice(0, 4), later.slice(0, 4))
    assert.strictEqual(regenerated.length, 6)
    // (the question again, written by the regenerate's run after everything before it, as DeerFlow's journal has it)
    const [latest] = (await alice("GET", "/api/threads/paged/runs")).json()
    assert.deepInclude(regenerated[4], { id: later[4].id, text: "third question", run: latest.run_id })
    assert.isAbove(regenerated[4].seq, later[5].seq)
    assert.strictEqual(regenerated[5].text, "Here you go.")
    assert.notStrictEqual(regenerated[5].id, answer.id)

    // a summarised answer shown on the page can be branched from, as any other; a replaced one cannot
    const branch = await alice("POST", "/api/threads/paged/branches", { message_id: before[1].id })
    assert.strictEqual(branch.status, 200, branch.text)
    const branched = (await alice("GET", `/api/threads/${branch.json().thread_id}/messages/page`)).json()
    assert.deepStrictEqual(branched.data.map((row: any) => row.content.content), ["first question", "Here you go."])
    const replaced = await alice("POST", "/api/threads/paged/branches", { message_id: answer.id })
    assert.strictEqual(replaced.status, 404, replaced.text)
  })
})
