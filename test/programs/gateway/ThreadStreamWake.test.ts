/**
 * An idle thread stream (`GET /threads/{id}/stream`, the SDK's `threads.joinStream`) of one process: it waits for
 * the thread's next run to start and reads nothing meanwhile (the store, wrapped here, counts every read of the
 * thread's run records: none while the stream idles, however long), and a run starting on the thread wakes it at
 * once: the stream gives the run's events while the run still goes on (its model stalled), a run queued behind
 * another (`enqueue`) likewise when its turn comes.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ThreadStore } from "../../../src/services/ThreadStore.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

/** Reads of each thread's run records (`runs` asked with a thread), by thread. */
const reads = new Map<string, number>()
const counted = (store: ThreadStore["Type"]): ThreadStore["Type"] => ({
  ...store,
  // (counted as the read runs: an effect made once may run again)
  runs: (filter) =>
    Effect.zipRight(
      Effect.sync(() => {
        if (filter.threadId !== undefined) reads.set(filter.threadId, (reads.get(filter.threadId) ?? 0) + 1)
      }),
      store.runs(filter)
    )
})

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: Support.echoOrHang, wrapStore: counted })
})
afterAll(() => gateway?.stop())

type Block = Support.SseBlock

/** A thread stream opened on `threadId`, read block by block; closed with `close`. */
const open = async (threadId: string) => {
  const controller = new AbortController()
  const response = await fetch(`${gateway.url}/threads/${threadId}/stream`, { signal: controller.signal })
  assert.strictEqual(response.status, 200)
  const read = Support.sseBlocks(response)
  const next = async (): Promise<Block> => {
    const { done, value } = await read.next()
    if (done) throw new Error("the thread stream ended")
    return value
  }
  /** Until `count` heartbeats came; fails on an event meanwhile (the stream is idle). */
  const heartbeats = async (count: number) => {
    for (let seen = 0; seen < count;) {
      const block = await next()
      if (!block.heartbeat) throw new Error(`an idle stream gave ${JSON.stringify(block.event)}`)
      seen++
    }
  }
  /** The events until `enough` holds of the last one (heartbeats skipped). */
  const until = async (enough: (event: Support.SseEvent) => boolean) => {
    const events: Array<Support.SseEvent> = []
    for (;;) {
      const block = await next()
      if (block.heartbeat) continue
      events.push(block.event)
      if (enough(block.event)) return events
    }
  }
  return { heartbeats, until, close: () => controller.abort() }
}

const post = async (path: string, body: unknown) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  const text = await response.text()
  assert.isBelow(response.status, 300, `${path}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text) as any
}
const ask = (content: string, more: Record<string, unknown> = {}) => ({
  assistant_id: "lead_agent",
  input: { messages: [{ type: "human", content }] },
  stream_mode: ["values", "messages-tuple"],
  ...more
})
const runOf = (event: Support.SseEvent) => event.id!.slice(0, event.id!.lastIndexOf(":"))
const says = (event: Support.SseEvent, text: string) =>
  event.event === "messages" && JSON.stringify(event.data).includes(text)

describe("an idle thread stream of one process", () => {
  it("reads none of the thread's run records while idle, and a run starting wakes it at once", async () => {
    const threadId = (await post("/threads", {})).thread_id as string
    await post(`/threads/${threadId}/runs/wait`, ask("first"))
    const stream = await open(threadId)
    try {
      // (the stream began: it read the thread's records once, to know where it starts)
      await stream.heartbeats(1)
      const before = reads.get(threadId) ?? 0
      // three heartbeats idle (one a second: a stream looking at the records once a second read them twice at least)
      await stream.heartbeats(3)
      assert.strictEqual(reads.get(threadId) ?? 0, before, "the thread's run records read while the stream idled")

      // a run starts: its events come while it goes on (its model stalls until it is cancelled)
      const run = await post(`/threads/${threadId}/runs`, ask("hang on"))
      const seen = await stream.until((event) => says(event, "working"))
      assert.strictEqual(seen[0]!.event, "metadata")
      assert.strictEqual((seen[0]!.data as any).run_id, run.run_id)
      for (const event of seen) assert.strictEqual(runOf(event), run.run_id)
      assert.isFalse(gateway.runs.get(run.run_id)!.finished(), "the run went on")

      await post(`/threads/${threadId}/runs/${run.run_id}/cancel?wait=true`, {})
      const rest = await stream.until((event) => event.event === "end")
      for (const event of rest) assert.strictEqual(runOf(event), run.run_id)
      // idle again: nothing read
      await stream.heartbeats(1)
      const after = reads.get(threadId) ?? 0
      await stream.heartbeats(2)
      assert.strictEqual(reads.get(threadId) ?? 0, after, "the thread's run records read while the stream idled")
    } finally {
      stream.close()
    }
  }, 120_000)

  it("follows a run queued behind the one it follows (enqueue) when its turn comes, from its first event", async () => {
    const threadId = (await post("/threads", {})).thread_id as string
    const stream = await open(threadId)
    try {
      await stream.heartbeats(1)
      const first = await post(`/threads/${threadId}/runs`, ask("hang on"))
      await stream.until((event) => says(event, "working"))
      const queued = await post(`/threads/${threadId}/runs`, ask("and then this", { multitask_strategy: "enqueue" }))
      assert.strictEqual(queued.status, "pending")
      await post(`/threads/${threadId}/runs/${first.run_id}/cancel`, {})
      const events = await stream.until((event) => event.event === "end" && runOf(event) === queued.run_id)
      const ofFirst = events.filter((event) => runOf(event) === first.run_id)
      const ofQueued = events.filter((event) => runOf(event) === queued.run_id)
      assert.strictEqual(ofFirst.length + ofQueued.length, events.length)
      assert.strictEqual(ofFirst.at(-1)!.event, "end")
      // the queued run whole, in order, after the first one's end
      assert.strictEqual(runOf(events[ofFirst.length]!), queued.run_id)
      assert.strictEqual(ofQueued[0]!.event, "metadata")
      ofQueued.forEach((event, i) => assert.strictEqual(Number(event.id!.slice(event.id!.lastIndexOf(":") + 1)), i + 1))
      const values = ofQueued.filter((event) => event.event === "values").at(-1)!.data as any
      assert.include(Support.visible(values.messages).at(-1).content, "and then this")
    } finally {
      stream.close()
    }
  }, 120_000)
})
