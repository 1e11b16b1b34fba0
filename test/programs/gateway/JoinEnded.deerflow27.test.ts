/**
 * DeerFlow's `test_wait_disconnect_handling.py`, its case of a client joining a run that has ended and whose events
 * its process no longer keeps (`sse_consumer` asks `_terminal_record_stream_missing`): the stream is DeerFlow's
 * `end` alone, with or without a `Last-Event-ID`, as the run's record says it is over. DeerFlow's web app and the
 * SDK's `useStream` then reload the thread (its state, its history), as after any run. A `gap` there would send the
 * app's replay-gap recovery rejoining at the cursor it named, for a gap again, until it gives up with an error.
 *
 * Here the run ends in one gateway, which then stops; a second one on the same data directory (the same SQLite
 * store) keeps none of its events.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

let gateway: TestGateway
let threadId = ""
let runId = ""
let streamed: ReadonlyArray<Support.SseEvent> = []

beforeAll(async () => {
  const home = Support.tempDir("antler-join-ended-")
  const first = await Support.start({ script: () => "All done here.", home })
  try {
    const thread = await (await fetch(`${first.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}"
    })).json() as { thread_id: string }
    threadId = thread.thread_id
    const response = await fetch(`${first.url}/threads/${threadId}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: Support.userInput("Finish it"), stream_mode: ["values", "messages-tuple"] })
    })
    runId = /runs\/([^/?]+)/.exec(response.headers.get("content-location") ?? "")![1]!
    streamed = (await Support.readSse(response)).events
  } finally {
    await first.stop()
  }
  gateway = await Support.start({ script: () => "unused", home })
}, 60_000)
afterAll(() => gateway?.stop())

/** The raw text of the run's stream joined at `path` (under the thread's run) with `headers`. */
const joined = async (path: string, headers: Record<string, string> = {}) => {
  const response = await fetch(`${gateway.url}/threads/${threadId}/runs/${runId}${path}`, {
    headers,
    signal: AbortSignal.timeout(10_000)
  })
  assert.strictEqual(response.status, 200)
  assert.include(response.headers.get("content-type") ?? "", "text/event-stream")
  return response.text()
}

describe("DeerFlow's test_wait_disconnect_handling.py: a run ended, its events no longer kept", () => {
  it("the run streamed to its end in the process that ran it", () => {
    assert.strictEqual(streamed.at(-1)?.event, "end")
    assert.isAbove(streamed.length, 3)
  })

  // DeerFlow: test_sse_consumer_terminal_missing_stream_yields_end
  it("a join without a cursor, with the SDK's -1, or with an old cursor gets the end alone, without an id", async () => {
    const record = await (await fetch(`${gateway.url}/threads/${threadId}/runs/${runId}`)).json() as any
    assert.strictEqual(record.status, "success")
    const end = "event: end\ndata: null\n\n"
    assert.strictEqual(await joined("/stream"), end)
    assert.strictEqual(await joined("/stream", { "Last-Event-ID": "-1" }), end)
    assert.strictEqual(await joined("/stream", { "Last-Event-ID": "3" }), end)
    assert.strictEqual(await joined("/stream?stream_mode=values"), end)
    // the SDK's joinStream without the thread (LangGraph's `GET /runs/{run_id}/stream`)
    const bare = await fetch(`${gateway.url}/runs/${runId}/stream`, { signal: AbortSignal.timeout(10_000) })
    assert.strictEqual(await bare.text(), end)
  })

  it("the SDK's joinStream reads the end and nothing else, with or without its last event id", async () => {
    const client = new Client({ apiUrl: gateway.url, apiKey: null })
    for (const lastEventId of ["-1", String(streamed.length - 1)]) {
      const parts: Array<{ event: string; data: unknown }> = []
      for await (const part of client.runs.joinStream(threadId, runId, { lastEventId })) parts.push(part)
      assert.deepStrictEqual(parts.map((p) => [p.event, p.data]), [["end", null]], `lastEventId ${lastEventId}`)
    }
    // what the client reloads after it: the thread as the run left it
    const state = await client.threads.getState(threadId)
    const messages = Support.visible((state.values as any).messages)
    assert.strictEqual(messages.at(-1).content, "All done here.")
  })
})
