/**
 * `GET /threads/{id}/history?limit=` takes what `POST .../history` takes: an integer from 1 to 1000 (default 10).
 * Any other limit is a 422 naming it; a fractional one was a 500 (the states were indexed by it).
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
  })
})
