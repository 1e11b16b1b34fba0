/**
 * A thread copy (`POST /threads/{id}/copy`) writes the new thread's checkpoints one by one. A delete of the new
 * thread while it does (forced here: the store, wrapped, pauses the copy after its first checkpoint) is refused
 * with a 409 naming the copy, and the copy comes out whole; deleted after it, nothing of it is left in the store.
 * (Before, the delete went through and the copy went on writing checkpoints that no thread owned.)
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ThreadStore } from "../../../src/services/ThreadStore.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

/** The copy's pause: armed for a source thread, it holds the first write to any other thread until `go`. */
interface Pause {
  readonly source: string
  readonly paused: (threadId: string) => void
  readonly go: Promise<void>
  hit: boolean
}
let pause: Pause | undefined

const pausing = (store: ThreadStore["Type"]): ThreadStore["Type"] => {
  const hold = (threadId: string) =>
    Effect.suspend(() => {
      const armed = pause
      if (armed === undefined || armed.hit || threadId === armed.source) return Effect.void
      armed.hit = true
      armed.paused(threadId)
      return Effect.promise(() => armed.go)
    })
  return {
    ...store,
    append: (threadId, runId, updates, options) =>
      Effect.zipRight(hold(threadId), store.append(threadId, runId, updates, options)),
    appendMeasured: (threadId, runId, updates, unownedOf, options) =>
      Effect.zipRight(hold(threadId), store.appendMeasured(threadId, runId, updates, unownedOf, options))
  }
}

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: Support.echoOrHang, wrapStore: pausing })
})
afterAll(() => gateway?.stop())

const api = async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  const text = await response.text()
  return { status: response.status, body: text.length > 0 ? JSON.parse(text) : undefined }
}

describe("a thread copy and a delete of the copy", () => {
  it("refuses the delete while the copy is written, keeps the copy whole; a later delete leaves nothing", async () => {
    const source = (await api("POST", "/threads", {})).body.thread_id as string
    for (const content of ["first note", "second note", "third note"]) {
      const updated = await api("POST", `/threads/${source}/state`, {
        values: { messages: [{ role: "user", content }] }
      })
      assert.strictEqual(updated.status, 200)
    }
    let paused!: (threadId: string) => void
    const reached = new Promise<string>((resolve) => (paused = resolve))
    let go!: () => void
    pause = { source, paused, go: new Promise<void>((resolve) => (go = resolve)), hit: false }
    try {
      const copying = api("POST", `/threads/${source}/copy`)
      const copyId = await reached

      // the copy is under way (one checkpoint to go in, two after it): its thread cannot be deleted now
      const refused = await api("DELETE", `/threads/${copyId}`)
      assert.strictEqual(refused.status, 409)
      assert.include(JSON.stringify(refused.body), "copied")
      const pruned = await api("POST", "/threads/prune", { thread_ids: [copyId], strategy: "delete" })
      assert.deepStrictEqual(pruned.body, { pruned_count: 0 })

      go()
      const copy = await copying
      assert.strictEqual(copy.status, 200)
      assert.strictEqual(copy.body.thread_id, copyId)
      const texts = (values: any) => values.messages.map((m: any) => m.content)
      assert.deepStrictEqual(texts(copy.body.values), ["first note", "second note", "third note"])
      const history = (await api("GET", `/threads/${copyId}/history?limit=10`)).body
      assert.strictEqual(history.length, 3)

      // once it is done, the copy is the user's to delete, and nothing of it stays in the store
      assert.strictEqual((await api("DELETE", `/threads/${copyId}`)).status, 204)
      assert.strictEqual((await api("GET", `/threads/${copyId}`)).status, 404)
      const left = await Effect.runPromise(Effect.all([gateway.store.info(copyId), gateway.store.checkpoints(copyId)]))
      assert.isTrue(Option.isNone(left[0]))
      assert.deepStrictEqual(left[1], [])
      // the source is untouched
      assert.deepStrictEqual(texts((await api("GET", `/threads/${source}/state`)).body.values), [
        "first note",
        "second note",
        "third note"
      ])
    } finally {
      go()
      pause = undefined
    }
  })
})
