/**
 * A run's events are readable while it goes on, as DeerFlow's journal flushes them in batches during the run
 * (`RunJournal._flush_threshold`, test_run_event_store's put-then-list contract): the process running it answers its
 * journal as it is now, and the store holds them as the run grows (what another process sharing it reads). They
 * answered `[]` until the run ended, for a run without subagents.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-live-events-000"
const BOB = "bob-token-live-events-00000"

/** Tool rounds before the model hangs (each an answer and a tool result: more events than `Runs.SAVE_EVERY`). */
const ROUNDS = 12

let gateway: TestGateway
const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

beforeAll(async () => {
  gateway = await Support.start({
    script: (body: ChatRequestBody): Turn => {
      const text = JSON.stringify(body.messages)
      const rounds = body.messages.filter((m) => m.role === "tool").length
      // "one round": one tool call, then the model never answers; else ROUNDS of them
      const wanted = text.includes("one round") ? 1 : ROUNDS
      if (rounds >= wanted) return { hang: true }
      return { toolCalls: [{ name: "deer_lookup", arguments: { q: `food ${rounds}` } }] }
    },
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
  })
})
afterAll(() => gateway?.stop())

const poll = async <A>(read: () => Promise<A>, done: (value: A) => boolean): Promise<A> => {
  let value = await read()
  for (let i = 0; i < 200 && !done(value); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    value = await read()
  }
  return value
}

describe("a running run's events", () => {
  it("are read while the run goes on, only by its user, and end with run.end", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "live" })).status, 200)
    const input = { messages: [{ type: "human", content: "one round" }] }
    const run = await alice("POST", "/api/threads/live/runs", { input })
    assert.strictEqual(run.status, 200, run.text)
    const runId = run.json().run_id
    const path = `/api/threads/live/runs/${runId}/events`
    const events: Array<any> = await poll(
      async () => (await alice("GET", path)).json(),
      (list: Array<any>) => list.some((e) => e.event_type === "llm.tool.result")
    )
    assert.deepStrictEqual(events.map((e) => e.event_type), [
      "run.start",
      "llm.human.input",
      "llm.ai.response",
      "llm.tool.result"
    ])
    assert.deepStrictEqual(events.map((e) => e.seq), [1, 2, 3, 4])
    assert.strictEqual(events[1].content.content, "one round")
    assert.isTrue(events.every((e) => e.thread_id === "live" && e.run_id === runId))
    assert.strictEqual((await alice("GET", `/api/threads/live/runs/${runId}`)).json().status, "running")
    assert.deepStrictEqual((await alice("GET", `${path}?after_seq=2&limit=1`)).json().map((e: any) => e.seq), [3])

    // another user's: 404, running or not
    assert.strictEqual((await bob("GET", path)).status, 404)
    await bob("POST", "/api/threads", { thread_id: "bob-live" })
    assert.strictEqual((await bob("GET", `/api/threads/bob-live/runs/${runId}/events`)).status, 404)

    await alice("POST", `/api/threads/live/runs/${runId}/cancel?action=interrupt&wait=1`)
    const all = (await alice("GET", path)).json()
    assert.deepStrictEqual(all.slice(0, 4), events)
    assert.deepStrictEqual(all.slice(-2).map((e: any) => e.event_type), ["run.end", "run.delivery"])
  }, 20_000)

  it("are kept in the store as the run grows, before it ends", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "growing" })).status, 200)
    const input = { messages: [{ type: "human", content: "many rounds" }] }
    const run = await alice("POST", "/api/threads/growing/runs", { input })
    assert.strictEqual(run.status, 200, run.text)
    const runId = run.json().run_id
    const stored = (await Effect.runPromise(gateway.store.runs({ runId })))[0]!
    const kept = await poll(
      () => Effect.runPromise(gateway.store.runEvents(stored.thread_id, runId)),
      (list) => list.length > 0
    )
    assert.isAtLeast(kept.length, 20)
    assert.deepStrictEqual(kept.slice(0, 2).map((e) => e.event_type), ["run.start", "llm.human.input"])
    assert.notInclude(kept.map((e) => e.event_type), "run.end")
    assert.strictEqual((await alice("GET", `/api/threads/growing/runs/${runId}`)).json().status, "running")
    await alice("POST", `/api/threads/growing/runs/${runId}/cancel?action=interrupt&wait=1`)
    const ended = await Effect.runPromise(gateway.store.runEvents(stored.thread_id, runId))
    assert.deepStrictEqual(ended.slice(-2).map((e) => e.event_type), ["run.end", "run.delivery"])
    assert.deepStrictEqual(ended.slice(0, kept.length).map((e) => e.seq), kept.map((e) => e.seq))
  }, 20_000)
})
