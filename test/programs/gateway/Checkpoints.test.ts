/**
 * Runs from a checkpoint, as LangGraph takes them. DeerFlow's app (`useStream`) sends the thread's head
 * checkpoint with every follow-up message; the gateway refused it (422 "forking is not supported"), so every
 * follow-up failed. Now a run given the head runs as usual, and a run given an older checkpoint forks the thread
 * there: the new turn follows the older state, the later turns stay in `history`, and the fork's checkpoint
 * names the one it forked from as its parent. A checkpoint the thread does not have is a 404.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-checkpoints-000"
const BOB = "bob-token-checkpoints-00000"

let gateway: TestGateway

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

const human = (text: string) => ({ messages: [{ type: "human", content: [{ type: "text", text }] }] })
const texts = (values: any): ReadonlyArray<string> =>
  Support.visible(values.messages).map((m: any) =>
    typeof m.content === "string" ? m.content : m.content.map((c: any) => c.text).join("")
  )

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => {
      const last = body.messages[body.messages.length - 1] as { content?: unknown }
      const text = JSON.stringify(last.content ?? "")
      return `Answer to ${text.match(/question \w+/)?.[0] ?? "?"}`
    },
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
  })
})
afterAll(() => gateway?.stop())

/** A run as DeerFlow's app starts it: streamed, with the checkpoint it holds. */
const streamFrom = async (threadId: string, question: string, checkpoint?: unknown) => {
  const response = await fetch(`${gateway.url}/api/langgraph/threads/${threadId}/runs/stream`, {
    method: "POST",
    headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "lead_agent",
      input: human(question),
      stream_mode: ["values", "messages-tuple"],
      ...(checkpoint !== undefined ? { checkpoint } : {})
    })
  })
  return { status: response.status, events: response.ok ? (await Support.readSse(response)).events : [] }
}

describe("runs from a checkpoint", () => {
  it("a follow-up given the head checkpoint (as useStream sends it) runs as any run", async () => {
    assert.strictEqual((await alice("POST", "/threads", { thread_id: "chat" })).status, 200)
    const first = await streamFrom("chat", "question one")
    assert.strictEqual(first.status, 200)
    const head = (await alice("GET", "/threads/chat/state")).json().checkpoint
    assert.isString(head.checkpoint_id)
    const second = await streamFrom("chat", "question two", head)
    assert.strictEqual(second.status, 200)
    assert.notInclude(second.events.map((e) => e.event), "error")
    const state = (await alice("GET", "/threads/chat/state")).json()
    assert.deepStrictEqual(texts(state.values), [
      "question one",
      "Answer to question one",
      "question two",
      "Answer to question two"
    ])
    assert.strictEqual(state.parent_checkpoint.thread_id, "chat")
    // checkpoint_id at the top level of the request too
    const third = await alice("POST", "/threads/chat/runs/wait", {
      input: human("question three"),
      checkpoint_id: state.checkpoint.checkpoint_id
    })
    assert.strictEqual(third.status, 200, third.text)
    assert.deepStrictEqual(texts(third.json()).slice(-2), ["question three", "Answer to question three"])
  })

  it("a run given an older checkpoint forks there; the later turns stay in history", async () => {
    assert.strictEqual((await alice("POST", "/threads", { thread_id: "fork" })).status, 200)
    await streamFrom("fork", "question one")
    const afterOne = (await alice("GET", "/threads/fork/state")).json().checkpoint
    await streamFrom("fork", "question two", afterOne)
    const afterTwo = (await alice("GET", "/threads/fork/state")).json()
    assert.deepStrictEqual(texts(afterTwo.values).slice(-1), ["Answer to question two"])

    const forked = await streamFrom("fork", "question three", afterOne)
    assert.strictEqual(forked.status, 200)
    const values = forked.events.filter((e) => e.event === "values").at(-1)!.data
    assert.deepStrictEqual(texts(values), [
      "question one",
      "Answer to question one",
      "question three",
      "Answer to question three"
    ])
    const state = (await alice("GET", "/threads/fork/state")).json()
    assert.deepStrictEqual(texts(state.values), texts(values))

    const history = (await alice("POST", "/threads/fork/history", { limit: 100 })).json() as Array<any>
    // the turn of question two is still there, at its checkpoint
    const old = history.find((h) => h.checkpoint.checkpoint_id === afterTwo.checkpoint.checkpoint_id)
    assert.deepStrictEqual(texts(old.values).slice(-1), ["Answer to question two"])
    // the fork's first checkpoint is the older state, and its parent is the checkpoint forked from
    const forkPoint = history.find((h) => h.parent_checkpoint?.checkpoint_id === afterOne.checkpoint_id &&
      h.checkpoint.checkpoint_id !== afterTwo.checkpoint.checkpoint_id &&
      !texts(h.values).includes("question two"))
    assert.isDefined(forkPoint)
    assert.deepStrictEqual(texts(forkPoint.values).slice(0, 2), ["question one", "Answer to question one"])
  })

  it("a head that only a usage record (the memory update's) followed runs on, without a fork", async () => {
    assert.strictEqual((await alice("POST", "/threads", { thread_id: "stale" })).status, 200)
    await streamFrom("stale", "question one")
    const head = (await alice("GET", "/threads/stale/state")).json().checkpoint
    // what the memory update writes after a run: the tokens of its model call
    const usage = { model: "scripted", purpose: "memory", input_tokens: 5, output_tokens: 1, total_tokens: 6 }
    await Effect.runPromise(
      gateway.store.append(`stale${ThreadIds.tagOf("alice")}`, "memory-1", [{ token_usage: [usage] }])
    )
    const memory = (await alice("GET", "/threads/stale/state")).json().checkpoint
    assert.notStrictEqual(memory.checkpoint_id, head.checkpoint_id)
    assert.strictEqual((await streamFrom("stale", "question two", head)).status, 200)
    const history = (await alice("POST", "/threads/stale/history", { limit: 100 })).json() as Array<any>
    // the run's first checkpoint follows the usage record: the thread did not fork
    const runOwn = history.filter((h) =>
      h.metadata.run_id !== undefined && !String(h.metadata.run_id).startsWith("memory")
    )
    const firstOfSecond = runOwn.filter((h) => JSON.stringify(h.values).includes("question two")).at(-1)
    assert.strictEqual(firstOfSecond.parent_checkpoint.checkpoint_id, memory.checkpoint_id)
  })

  it("a checkpoint the thread does not have is a 404; another user's thread is a 404", async () => {
    assert.strictEqual((await alice("POST", "/threads", { thread_id: "lone" })).status, 200)
    await streamFrom("lone", "question one")
    const missing = await alice("POST", "/threads/lone/runs/wait", {
      input: human("question two"),
      checkpoint: { checkpoint_id: "999999" }
    })
    assert.strictEqual(missing.status, 404)
    assert.include(missing.json().detail, "999999")
    const head = (await alice("GET", "/threads/lone/state")).json().checkpoint
    const other = await bob("POST", "/threads/lone/runs/wait", { input: human("question x"), checkpoint: head })
    assert.strictEqual(other.status, 404)
    const stateless = await alice("POST", "/runs/wait", { input: human("question y"), checkpoint: head })
    assert.strictEqual(stateless.status, 422)
  })
})
