/**
 * `GET /threads/{id}/history?limit=` takes what `POST .../history` takes: an integer from 1 to 1000 (default 10).
 * Any other limit is a 422 naming it; a fractional one was a 500 (the states were indexed by it). `POST
 * .../history` pages by `before`: a checkpoint, or its id alone (as LangGraph's Python SDK and DeerFlow's API send
 * it; it was ignored, so each page was the first). Each state names its checkpoint and its parent's by id too, as
 * DeerFlow's states and history entries do.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
let threadId = ""
beforeAll(async () => {
  gateway = await Support.start({ script: () => "Hello." })
  threadId = ((await (await fetch(`${gateway.url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}"
  })).json()) as any).thread_id
  const waited = await fetch(`${gateway.url}/threads/${threadId}/runs/wait`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "hi" }] } })
  })
  assert.strictEqual(waited.status, 200)
})
afterAll(() => gateway.stop())

describe("a thread's history by GET", () => {
  it("refuses a limit that is not an integer from 1 to 1000 with a 422 naming it", async () => {
    for (const limit of ["1.5", "0", "-1", "1001", "abc", "1e400"]) {
      const response = await fetch(`${gateway.url}/threads/${threadId}/history?limit=${limit}`)
      assert.strictEqual(response.status, 422, limit)
      assert.strictEqual(response.headers.get("content-type"), "application/problem+json")
      assert.include(((await response.json()) as any).detail, `limit must be an integer from 1 to 1000, got "${limit}"`)
    }
  })

  it("takes one that is, and gives that many states at most", async () => {
    const all = (await (await fetch(`${gateway.url}/threads/${threadId}/history`)).json()) as Array<any>
    assert.isAbove(all.length, 1)
    const one = (await (await fetch(`${gateway.url}/threads/${threadId}/history?limit=1`)).json()) as Array<any>
    assert.deepStrictEqual(one, all.slice(0, 1))
    // LangGraph's bound, not DeerFlow's test_threads_router 100 (a 422 there): docs/deerflow.md
    const most = (await (await fetch(`${gateway.url}/threads/${threadId}/history?limit=1000`)).json()) as Array<any>
    assert.deepStrictEqual(most, all)
  })
})

describe("a thread's history paged by before", () => {
  const page = async (before: unknown) => {
    const response = await fetch(`${gateway.url}/threads/${threadId}/history`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ limit: 10, before })
    })
    assert.strictEqual(response.status, 200)
    return ((await response.json()) as Array<any>).map((state) => state.checkpoint.checkpoint_id)
  }

  it("gives the states before a checkpoint named by its id alone, as before one given whole", async () => {
    const all = await page(null)
    assert.isAbove(all.length, 1)
    const anchor = all[0]
    const byId = await page(anchor)
    assert.deepStrictEqual(byId, all.slice(1))
    assert.deepStrictEqual(await page({ checkpoint_id: anchor }), byId)
    // (an empty id names no checkpoint: the newest states)
    assert.deepStrictEqual(await page(""), all)
    // and by GET, as LangGraph's
    const got = await (await fetch(`${gateway.url}/threads/${threadId}/history?before=${anchor}`)).json()
    assert.deepStrictEqual((got as Array<any>).map((state) => state.checkpoint.checkpoint_id), byId)
  })
})

describe("a thread's states name their checkpoints by id", () => {
  it("checkpoint_id and parent_checkpoint_id, as DeerFlow's; its history paged by the one a state gives", async () => {
    const post = async (body: unknown) =>
      (await (await fetch(`${gateway.url}/threads/${threadId}/history`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      })).json()) as Array<any>
    const entries = await post({ limit: 10 })
    assert.isAbove(entries.length, 1)
    for (const entry of entries) {
      assert.strictEqual(entry.checkpoint_id, entry.checkpoint.checkpoint_id)
      assert.strictEqual(entry.parent_checkpoint_id, entry.parent_checkpoint?.checkpoint_id ?? null)
    }
    assert.strictEqual(entries[0].parent_checkpoint_id, entries[1].checkpoint_id)
    const state = (await (await fetch(`${gateway.url}/threads/${threadId}/state`)).json()) as any
    assert.strictEqual(state.checkpoint_id, entries[0].checkpoint_id)
    const paged = await post({ limit: 10, before: entries[0].checkpoint_id })
    assert.strictEqual(paged[0].checkpoint_id, entries[1].checkpoint_id)
  })
})
