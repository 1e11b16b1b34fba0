/**
 * A thread's stream (LangGraph's `GET /threads/{thread_id}/stream`), read with the real LangGraph SDK's
 * `client.threads.joinStream`: the events of the thread's runs one run after the other, each id naming its run,
 * rejoined from an event id, in the lifecycle mode only the runs' starts and ends; another user's thread is a 404.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const script = (body: ChatRequestBody): Turn => `You said: ${JSON.stringify(body.messages.at(-1)?.content)}`

let gateway: TestGateway
let alice: Client
let bob: Client

beforeAll(async () => {
  ;({ gateway, alice, bob } = await Support.startTwoUsers(script))
})
afterAll(() => gateway?.stop())

type Part = { readonly event: string; readonly data: any; readonly id?: string }

/** The thread stream's events from `lastEventId` until `enough` holds (then the client closes it). */
const join = async (
  client: Client,
  threadId: string,
  options: { readonly lastEventId?: string; readonly streamMode?: "run_modes" | "lifecycle" | "state_update" },
  enough: (parts: ReadonlyArray<Part>) => boolean,
  onPart: (parts: ReadonlyArray<Part>) => Promise<void> = async () => {}
) => {
  const controller = new AbortController()
  const parts: Array<Part> = []
  try {
    for await (const part of client.threads.joinStream(threadId, { ...options, signal: controller.signal })) {
      parts.push(part as Part)
      await onPart(parts)
      if (enough(parts)) break
    }
  } finally {
    controller.abort()
  }
  return parts
}

const ends = (parts: ReadonlyArray<Part>) => parts.filter((p) => p.event === "end").length
const runOf = (part: Part) => part.id!.slice(0, part.id!.lastIndexOf(":"))
const seqOf = (part: Part) => Number(part.id!.slice(part.id!.lastIndexOf(":") + 1))
const ask = (content: string) => ({ input: { messages: [{ type: "human", content }] } })

describe("a thread's stream", () => {
  let threadId = ""
  let first: Array<Part> = []

  it("streams the thread's runs one after the other, from the latest run's first event with '-'", async () => {
    threadId = (await alice.threads.create()).thread_id
    await alice.runs.wait(threadId, "lead_agent", ask("one"))
    let started = false
    first = await join(alice, threadId, { lastEventId: "-" }, (parts) => ends(parts) === 2, async (parts) => {
      // the second run starts once the stream has given the first one's end
      if (!started && ends(parts) === 1) {
        started = true
        await alice.runs.create(threadId, "lead_agent", ask("two"))
      }
    })
    const runs = (await alice.runs.list(threadId)).map((r) => r.run_id).reverse()
    assert.strictEqual(runs.length, 2)
    const byRun = runs.map((runId) => first.filter((p) => runOf(p) === runId))
    assert.strictEqual(byRun[0]!.length + byRun[1]!.length, first.length)
    for (const [index, parts] of byRun.entries()) {
      assert.strictEqual(parts[0]!.event, "metadata")
      assert.strictEqual(parts[0]!.data.run_id, runs[index])
      assert.strictEqual(parts.at(-1)!.event, "end")
      // each run's events in order, from its first, nothing repeated
      assert.deepStrictEqual(parts.map(seqOf), parts.map((_, i) => i + 1))
      assert.isTrue(parts.some((p) => p.event === "values"))
    }
    // the first run's events all came before the second's
    assert.strictEqual(runOf(first[byRun[0]!.length]!), runs[1])
    const answer = byRun[1]!.filter((p) => p.event === "values").at(-1)!.data.messages.at(-1)
    assert.include(answer.content, "two")
  })

  it("goes on after the Last-Event-ID it is rejoined with", async () => {
    const second = first.filter((p) => runOf(p) === runOf(first.at(-1)!))
    const rest = await join(alice, threadId, { lastEventId: second[2]!.id! }, (parts) => ends(parts) === 1)
    assert.deepStrictEqual(rest.map((p) => p.id), second.slice(3).map((p) => p.id))
  })

  it("in the lifecycle mode gives each run's start and end only", async () => {
    const [one] = first
    const parts = await join(
      alice,
      threadId,
      { lastEventId: `${runOf(one!)}:0`, streamMode: "lifecycle" },
      (parts) => ends(parts) === 2
    )
    assert.deepStrictEqual(parts.map((p) => p.event), ["metadata", "end", "metadata", "end"])
    assert.deepStrictEqual(parts.map((p) => p.data?.run_id ?? null), [runOf(one!), null, runOf(first.at(-1)!), null])
  })

  it("is the thread's user's: another user's thread is a 404; a bad cursor a 400, a bad mode a 422", async () => {
    const as = (token: string, headers: Record<string, string> = {}, query = "") =>
      fetch(`${gateway.url}/threads/${threadId}/stream${query}`, {
        headers: { authorization: `Bearer ${token}`, ...headers }
      })
    let refused: unknown
    try {
      await join(bob, threadId, {}, () => true)
    } catch (error) {
      refused = error
    }
    assert.match(String(refused), /404/)
    const bobs = await as(Support.BOB)
    assert.strictEqual(bobs.status, 404)
    assert.strictEqual((await as(Support.ALICE, { "last-event-id": "nope" })).status, 400)
    assert.strictEqual((await as(Support.ALICE, {}, "?stream_mode=values")).status, 422)
    // her thread's stored id is none of his either
    const stored = await fetch(`${gateway.url}/threads/${threadId}${ThreadIds.tagOf("alice")}/stream`, {
      headers: { authorization: `Bearer ${Support.BOB}` }
    })
    assert.strictEqual(stored.status, 404)
  })

  it("follows none of another thread's runs, whatever run its Last-Event-ID names (only that run's gap)", async () => {
    // (a cursor is the client's text: bob names alice's run on his own thread, alice a run of her other thread)
    const run = runOf(first.at(-1)!)
    const bobs = (await bob.threads.create()).thread_id
    const hers = (await alice.threads.create()).thread_id
    for (const [client, thread] of [[bob, bobs], [alice, hers]] as const) {
      const parts = await join(client, thread, { lastEventId: `${run}:0` }, (parts) => parts.length > 0)
      assert.deepStrictEqual(parts.map((p) => [p.event, p.id]), [["gap", `${run}:0`]])
      assert.notInclude(JSON.stringify(parts), "You said")
    }
  })

  it("one user holds at most 32 open at a time (429 past that, Retry-After); closing one frees it; others unaffected", async () => {
    const thread = (await alice.threads.create()).thread_id
    const bobs = (await bob.threads.create()).thread_id
    const open = (token: string, id: string) => {
      const controller = new AbortController()
      return fetch(`${gateway.url}/threads/${id}/stream`, {
        headers: { authorization: `Bearer ${token}` },
        signal: controller.signal
      }).then((response) => ({ response, close: () => controller.abort() }))
    }
    const held = await Promise.all(Array.from({ length: 32 }, () => open(Support.ALICE, thread)))
    try {
      for (const { response } of held) assert.strictEqual(response.status, 200)
      const refused = await open(Support.ALICE, thread)
      assert.strictEqual(refused.response.status, 429)
      assert.strictEqual(refused.response.headers.get("retry-after"), "5")
      assert.include(((await refused.response.json()) as any).detail, "At most 32 thread streams")
      // under another of the gateway's prefixes too (one count per user)
      const prefixed = await fetch(`${gateway.url}/api/langgraph/threads/${thread}/stream`, {
        headers: { authorization: `Bearer ${Support.ALICE}` }
      })
      assert.strictEqual(prefixed.status, 429)
      const his = await open(Support.BOB, bobs)
      assert.strictEqual(his.response.status, 200)
      his.close()
      held.pop()!.close()
      let again = await open(Support.ALICE, thread)
      for (let i = 0; i < 50 && again.response.status === 429; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        again = await open(Support.ALICE, thread)
      }
      assert.strictEqual(again.response.status, 200)
      again.close()
    } finally {
      for (const { close } of held) close()
    }
  })
})
