/**
 * A subscriber's stream of a run (`RunStream.subscribe`, a Node `Readable` over the run's buffer): it gives the
 * frames after its cursor as they are appended, each once and in order, filtered to its modes, a reader that falls
 * behind too; heartbeats while the run is silent; it ends after `end`; a reader that goes away before that is a
 * disconnect (once), one that read to the end is not; and a stream never read holds no timer. The stream of a run
 * another process runs (`sseOf`, the cluster's) opens with a heartbeat too, so its headers leave at once.
 */
import { assert, describe, it, vi } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as Projection from "../../../src/programs/gateway/Projection.js"
import * as Protocol from "../../../src/programs/gateway/Protocol.js"
import * as RunBuffer from "../../../src/programs/gateway/RunBuffer.js"
import * as RunStream from "../../../src/programs/gateway/RunStream.js"
import * as TS from "../../../src/state/ThreadState.js"
import { readUntil } from "../../support/readStream.js"

const buffer = () => RunBuffer.make("run-1", { bufferSize: 100, bufferBytes: 1_000_000 }, JSON.stringify)

const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))

describe("a run's stream to one subscriber", () => {
  it("gives the frames after its cursor as they come, in order, filtered to its modes; ends after end", async () => {
    const run = buffer()
    run.append([{ event: "metadata", data: { run_id: "run-1" } }, { event: "values", data: { messages: [] } }])
    let disconnects = 0
    // after cursor 1: a values frame, not of the mode asked for, then what is appended while it reads
    const stream = RunStream.subscribe(run, 1, ["messages-tuple"], () => disconnects++, 60)
    setTimeout(() => {
      run.append([{ event: "messages", data: [{ content: "Hel" }, {}] }])
      run.append([{ event: "values", data: {} }, { event: "messages", data: [{ content: "lo" }, {}] }])
      run.append([{ event: "end", data: null }])
    }, 10)
    const rest = await readUntil(stream, () => false)
    assert.deepStrictEqual(ids(rest), [3, 5, 6])
    assert.match(rest, /event: end\ndata: null\nid: 6\n\n$/)
    assert.strictEqual(disconnects, 0, "a reader that read to the end did not disconnect")
  }, 10_000)

  it("a reader that falls behind gets every frame once, in order, when it reads again", async () => {
    const run = RunBuffer.make("run-1", { bufferSize: 1000, bufferBytes: 10_000_000 }, JSON.stringify)
    const stream = RunStream.subscribe(run, 0, undefined, undefined, 60)
    run.append([{ event: "metadata", data: {} }])
    await readUntil(stream, (t) => t.includes("id: 1\n"))
    // the reader paused: appends fill its buffer past its high-water mark, then wait for it
    const big = "x".repeat(2_000)
    for (let i = 0; i < 40; i++) run.append([{ event: "messages", data: [{ content: big }, {}] }])
    assert.isAbove(stream.readableLength, stream.readableHighWaterMark)
    assert.isBelow(stream.readableLength, 40 * big.length, "it stopped taking frames once full")
    run.append([{ event: "end", data: null }])
    const rest = await readUntil(stream, () => false)
    assert.deepStrictEqual(ids(rest), Array.from({ length: 41 }, (_, i) => i + 2))
  })

  it("a reader gone before the end is one disconnect", async () => {
    const run = buffer()
    run.append([{ event: "metadata", data: {} }])
    let disconnects = 0
    const stream = RunStream.subscribe(run, 0, undefined, () => disconnects++, 60)
    const text = await readUntil(stream, (t) => t.includes("id: 1\n"))
    assert.deepStrictEqual(ids(text), [1])
    stream.destroy()
    await new Promise((resolve) => stream.once("close", resolve))
    assert.strictEqual(disconnects, 1)
    // an append after that pushes nothing into the destroyed stream, and the disconnect is not run twice
    run.append([{ event: "end", data: null }])
    stream.destroy()
    assert.strictEqual(disconnects, 1)
  })

  it("heartbeats at once when silent, then every interval; no timer once ended, nor unread", async () => {
    vi.useFakeTimers()
    try {
      const run = buffer()
      const unread = RunStream.subscribe(run, 0, undefined, undefined, 1)
      assert.strictEqual(vi.getTimerCount(), 0, "no timer before the first read")
      const stream = RunStream.subscribe(run, 0, undefined, undefined, 1)
      // one at once (the response starts), then one a second
      const text = readUntil(stream, (t) => t.split(": heartbeat\n\n").length > 3)
      await vi.advanceTimersByTimeAsync(2_500)
      assert.strictEqual(await text, ": heartbeat\n\n".repeat(3))
      run.append([{ event: "end", data: null }])
      const end = await readUntil(stream, () => false)
      assert.match(end, /^event: end\ndata: null\nid: 1\n\n$/)
      assert.strictEqual(vi.getTimerCount(), 0, "the ended stream's timer is gone")
      unread.destroy()
    } finally {
      vi.useRealTimers()
    }
  })

  it("a cursor older than the buffer gets the gap and the stream ends", async () => {
    const run = RunBuffer.make("run-1", { bufferSize: 2, bufferBytes: 1_000_000 }, JSON.stringify)
    for (let i = 0; i < 10; i++) run.append([{ event: "messages", data: [{ content: `${i}` }, {}] }])
    let disconnects = 0
    const text = await readUntil(RunStream.subscribe(run, 1, undefined, () => disconnects++, 60), () => false)
    assert.match(text, /^event: gap\n/)
    assert.strictEqual(text.split("event: ").length - 1, 1, "the gap alone")
    assert.strictEqual(ids(text).length, 0, "the gap has no id (DeerFlow's neither)")
    assert.strictEqual(disconnects, 0)
  })
})

describe("the stream of a run another process runs (sseOf)", () => {
  it.effect("opens with a heartbeat before any frame, filters to its modes, and heartbeats while silent", () =>
    Effect.gen(function*() {
      const frames = Stream.concat(
        Stream.make(
          { id: 1, event: "values", data: "{}" },
          { id: 2, event: "messages", data: "[{},{}]" }
        ),
        Stream.never
      )
      const fiber = yield* Effect.fork(Stream.runCollect(Stream.take(RunStream.sseOf(frames, ["messages-tuple"], 5), 4)))
      yield* TestClock.adjust("10 seconds")
      const text = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      assert.deepStrictEqual(text, [
        ": heartbeat\n\n",
        "event: messages\ndata: [{},{}]\nid: 2\n\n",
        ": heartbeat\n\n",
        ": heartbeat\n\n"
      ])
    }))

  it.effect("a run with nothing to send yet still gets its first heartbeat at once", () =>
    Effect.gen(function*() {
      const first = yield* Stream.runHead(RunStream.sseOf(Stream.never, undefined, 15))
      assert.deepStrictEqual(first._tag === "Some" ? first.value : undefined, ": heartbeat\n\n")
    }))
})

describe("a streamed chunk kept in parts", () => {
  /** Tokens of one message as the projector makes them. */
  const tokens = (texts: ReadonlyArray<string>) => {
    const projector = Projection.makeProjector({ runId: "r", threadId: "t", modes: ["messages-tuple"], initial: TS.empty })
    return texts.flatMap((text) => projector.push([{ type: "token", message_id: "m1", text }]))
  }
  const json = (data: unknown) => JSON.stringify(data)

  it("reads back as the JSON of its event, is streamed as such, and counts at its whole size", async () => {
    const outs = tokens(["Hel", "lo \"world\"", " \u2603"])
    const run = RunBuffer.make("run-1", { bufferSize: 100, bufferBytes: 1_000_000 }, json)
    run.append(outs)
    run.append([{ event: "end", data: null }])
    const frames = run.after(0).frames
    assert.deepStrictEqual(frames.slice(0, 3).map((f) => f.data), outs.map((o) => JSON.stringify(o.data)))
    const text = await readUntil(RunStream.subscribe(run, 0, undefined, undefined, 60), () => false)
    assert.strictEqual(text, frames.map(Protocol.sse).join(""))
    // bounded by the characters of the whole frames: two of these fit in a buffer of a bit over twice one's size
    const one = frames[0]!.data.length
    const small = RunBuffer.make("run-2", { bufferSize: 100, bufferBytes: Math.floor(one * 2.5) }, json)
    small.append(tokens(Array.from({ length: 10 }, () => "Hel")))
    assert.isAtMost(small.after(0).frames.length, 3)
    assert.match(small.after(1).gap?.data ?? "", /stream_replay_gap/)
  })
})
