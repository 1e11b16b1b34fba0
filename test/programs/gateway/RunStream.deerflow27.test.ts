/**
 * DeerFlow's `test_stream_bridge.py`, the cases where Antler's run stream differed in what a client reads: the
 * `gap` control event (`sse_consumer` maps DeerFlow's `StreamGap` to it) is sent without an `id:`, so a client's
 * `Last-Event-ID` stays the last event of the run it got, and a gap for a client that gave no cursor names none
 * (`requested_event_id: null`, the app's "initial stream").
 */
import { assert, describe, it } from "@effect/vitest"
import * as Protocol from "../../../src/programs/gateway/Protocol.js"
import * as RunBuffer from "../../../src/programs/gateway/RunBuffer.js"
import * as RunStream from "../../../src/programs/gateway/RunStream.js"
import { readUntil } from "../../support/readStream.js"

/** The SSE events of `text` (heartbeats left out), each with its fields as sent. */
const events = (text: string) =>
  text.split("\n\n").filter((block) => block.startsWith("event: ")).map((block) => {
    const fields = Object.fromEntries(block.split("\n").map((line) => {
      const at = line.indexOf(": ")
      return [line.slice(0, at), line.slice(at + 2)]
    }))
    return { event: fields.event, id: fields.id, data: JSON.parse(fields.data ?? "null") }
  })

const append = (run: RunBuffer.RunBuffer, names: ReadonlyArray<string>) =>
  run.append(names.map((name) => ({ event: "custom", data: { name } })))

describe("DeerFlow's test_stream_bridge.py: the gap event", () => {
  // DeerFlow: test_evicted_last_event_id_yields_gap_before_partial_replay
  it("a cursor older than the kept events gets the gap alone, without an id, naming the cursor", async () => {
    const run = RunBuffer.make("run-evicted-cursor", { bufferSize: 2, bufferBytes: 1_000_000 }, JSON.stringify)
    append(run, ["e1", "e2", "e3", "e4", "e5"])
    append(run, ["e6"])
    const text = await readUntil(RunStream.subscribe(run, 1, undefined, undefined, 60))
    const sent = events(text)
    assert.deepStrictEqual(sent.map((e) => e.event), ["gap"])
    assert.isUndefined(sent[0]!.id, "the gap has no id: a client's Last-Event-ID stays its last event")
    assert.notMatch(text, /^id:/m)
    const gap = sent[0]!.data
    assert.strictEqual(gap.requested_event_id, "1")
    assert.strictEqual(gap.latest_available_event_id, "6")
    assert.isTrue(Number(gap.earliest_available_event_id) > 2, gap.earliest_available_event_id)
  })

  // DeerFlow: test_slow_subscriber_yields_gap_after_buffer_trim
  it("a subscriber that fell behind the kept events gets the gap after what it read, without an id, and ends", async () => {
    const run = RunBuffer.make("run-slow-subscriber", { bufferSize: 2, bufferBytes: 1_000_000 }, JSON.stringify)
    append(run, ["e1"])
    const stream = RunStream.subscribe(run, 0, undefined, undefined, 60)
    const first = await readUntil(stream, (text) => text.includes("event: custom"))
    assert.deepStrictEqual(events(first).map((e) => [e.event, e.id]), [["custom", "1"]])
    append(run, ["e2", "e3", "e4", "e5", "e6"])
    const rest = events(await readUntil(stream))
    assert.deepStrictEqual(rest.map((e) => [e.event, e.id]), [["gap", undefined]])
    assert.strictEqual(rest[0]!.data.requested_event_id, "1")
  })

  // DeerFlow: test_concurrent_slow_consumers_receive_gap (a gap for a subscriber without a cursor names none)
  it("a gap for a client that gave no cursor has requested_event_id null", () => {
    const gap = Protocol.gapPayload("run-1", 0, 7, 9)
    assert.deepStrictEqual(gap, {
      code: "stream_replay_gap",
      run_id: "run-1",
      requested_event_id: null,
      earliest_available_event_id: "7",
      latest_available_event_id: "9",
      recovery: "reload_durable_state"
    })
  })
})

describe("DeerFlow's test_stream_bridge.py: a subscriber without a cursor", () => {
  // DeerFlow: test_concurrent_slow_consumers_receive_gap
  it("subscribed before the run's events, gets the gap alone (naming no cursor) once they were let go unread", async () => {
    const run = RunBuffer.make("concurrent-0", { bufferSize: 4, bufferBytes: 1_000_000 }, JSON.stringify)
    const stream = RunStream.subscribe(run, 0, undefined, undefined, 60)
    // ten events in one go, then the end: the first six are let go before the subscriber reads
    run.append(Array.from({ length: 10 }, (_, i) => ({ event: "custom", data: { i } })))
    run.append([{ event: "end", data: null }])
    const sent = events(await readUntil(stream))
    assert.deepStrictEqual(sent.map((e) => [e.event, e.id]), [["gap", undefined]])
    assert.isNull(sent[0]!.data.requested_event_id)
    assert.isTrue(Number(sent[0]!.data.earliest_available_event_id) > 1)
  })

  // DeerFlow: test_subscribe_replays_after_last_event_id's first pass, test_history_is_bounded
  it("joined after events were let go, gets the kept ones and the end, no gap", async () => {
    const run = RunBuffer.make("run-bp", { bufferSize: 4, bufferBytes: 1_000_000 }, JSON.stringify)
    run.append(Array.from({ length: 10 }, (_, i) => ({ event: "custom", data: { i } })))
    run.append([{ event: "end", data: null }])
    const sent = events(await readUntil(RunStream.subscribe(run, 0, undefined, undefined, 60)))
    assert.strictEqual(sent.at(-1)!.event, "end")
    assert.notInclude(sent.map((e) => e.event), "gap")
    const ids = sent.map((e) => Number(e.id))
    assert.deepStrictEqual(ids, Array.from({ length: ids.length }, (_, i) => 12 - ids.length + i))
  })
})
