/**
 * A run's stream as its subscribers get it: what is buffered when a client joins (a finished run, or a client
 * behind) comes as one piece of SSE text, every frame in order once, not one write per event; and a client that
 * dropped rejoins a run that ended a moment ago with its last event id, even when more runs than
 * `finished_runs_kept` ended since.
 */
import type { Readable } from "node:stream"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const LONG = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ")

let gateway: TestGateway

/** The pieces of text a subscriber's stream gives, as they come. */
const piecesOf = async (stream: Readable) => {
  const pieces: Array<string> = []
  for await (const piece of stream.setEncoding("utf8")) pieces.push(piece as string)
  return pieces
}

beforeAll(async () => {
  gateway = await Support.start({ script: () => LONG, server: { chunkSize: 6 } })
})
afterAll(() => gateway.stop())

describe("replay", () => {
  it("a client joining a finished run gets its buffered frames in one piece, each once and in order", async () => {
    const thread = await (await fetch(`${gateway.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}"
    })).json() as { thread_id: string }
    const created = await fetch(`${gateway.url}/threads/${thread.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "Say it at length" }] },
        stream_mode: ["values", "messages-tuple"]
      })
    })
    assert.strictEqual(created.status, 200)
    const { run_id } = await created.json() as { run_id: string }
    const run = gateway.runs.get(run_id)!
    await Effect.runPromise(Deferred.await(run.done))

    const texts = await piecesOf(gateway.runs.subscribe(run, 0))
    assert.strictEqual(texts.length, 1, `expected one piece, got ${texts.length}`)
    const ids = [...texts[0]!.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))
    assert.isAbove(ids.length, 10)
    assert.deepStrictEqual(ids, ids.map((_, i) => i + 1))
    assert.match(texts[0]!, /event: end\ndata: null\nid: \d+\n\n$/)
    // the answer streamed token by token, then whole in the last values
    const tokens = [...texts[0]!.matchAll(/^event: messages\ndata: (.*)$/gm)]
      .map((m) => JSON.parse(m[1]!)[0].content as string)
    assert.strictEqual(tokens.join("").includes(LONG), true)

    // a cursor inside the buffer: what follows it, in one piece
    const after = await piecesOf(gateway.runs.subscribe(run, ids.length - 3))
    assert.strictEqual(after.length, 1)
    assert.deepStrictEqual([...after[0]!.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), ids.slice(-3))
  })

  it("a run that ended a moment ago stays joinable with Last-Event-ID past finished_runs_kept", async () => {
    const small = await Support.start({ script: () => LONG, config: { gateway: { finished_runs_kept: 1 } } })
    try {
      const run = async () => {
        const thread = await (await fetch(`${small.url}/threads`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}"
        })).json() as { thread_id: string }
        const response = await fetch(`${small.url}/threads/${thread.thread_id}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            assistant_id: "lead_agent",
            input: { messages: [{ type: "human", content: "Say it at length" }] },
            stream_mode: ["messages-tuple"]
          })
        })
        const runId = /runs\/([^/?]+)/.exec(response.headers.get("content-location") ?? "")![1]!
        const { events } = await Support.readSse(response)
        return { threadId: thread.thread_id, runId, events }
      }
      const first = await run()
      await run()
      await run()
      // the first client dropped after its third event and rejoins now
      const rejoined = await fetch(`${small.url}/threads/${first.threadId}/runs/${first.runId}/stream`, {
        headers: { "Last-Event-ID": "3" }
      })
      const { events } = await Support.readSse(rejoined)
      assert.deepStrictEqual(events.map((e) => e.event), first.events.slice(3).map((e) => e.event))
      assert.deepStrictEqual(events.map((e) => e.id), first.events.slice(3).map((e) => e.id))
    } finally {
      await small.stop()
    }
  })
})
