/**
 * A run's buffer keeps a streamed message's chunks by their own text (the parts they share kept once), and reads
 * them back as the frames they were: a reader after any cursor gets exactly the kept frames after it, in order,
 * with their ids and data, or the run's gap once the frames it needs were let go (what a client rejoining with
 * `Last-Event-ID` sees: nothing lost, nothing repeated); the newest frame always stays, and the bounds hold.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import type * as Protocol from "../../../src/programs/gateway/Protocol.js"
import * as RunBuffer from "../../../src/programs/gateway/RunBuffer.js"
import type { Out } from "../../../src/programs/gateway/StreamEvent.js"
import { SplicedOut } from "../../../src/programs/gateway/StreamEvent.js"

// events as a projection makes them: chunks of a few messages (each message's chunks sharing their head and tail,
// a message streamed again after another in between), whole events between them; appended in batches
const event = FC.oneof(
  FC.tuple(FC.constant("chunk" as const), FC.integer({ min: 0, max: 2 }), FC.string({ maxLength: 12 })),
  FC.tuple(
    FC.constantFrom("values" as const, "updates" as const),
    FC.integer({ min: 0, max: 2 }),
    FC.string({ maxLength: 30 })
  )
)
const batches = FC.array(FC.array(event, { minLength: 1, maxLength: 6 }), { maxLength: 60 })

const outOf = ([kind, n, text]: readonly [string, number, string]): Out =>
  kind === "chunk"
    ? new SplicedOut("messages", {
      head: `[{"id":"m${n}","content":`,
      body: JSON.stringify(text),
      tail: `},{"n":${n}}]`
    })
    : { event: kind, data: { n, text } }

const dataOf = (out: Out) =>
  out.spliced !== undefined ? out.spliced.head + out.spliced.body + out.spliced.tail : JSON.stringify(out.data)

describe("a run's buffer", () => {
  it.prop("after a cursor: the kept frames after it, whole and in order, or a gap when they were let go", [
    batches,
    FC.integer({ min: 1, max: 40 }),
    FC.integer({ min: 1, max: 1500 }),
    FC.integer({ min: 0, max: 300 }),
    FC.constantFrom(1, 2 ** 40 + 1)
  ], ([all, bufferSize, bufferBytes, offset, firstId]) => {
    const buffer = RunBuffer.make("run-1", { bufferSize, bufferBytes }, JSON.stringify, firstId)
    const appended: Array<Protocol.Frame> = []
    const plain = (frames: ReadonlyArray<Protocol.Frame>) =>
      frames.map((f) => ({ id: f.id, event: f.event, data: f.data }))
    let changes = 0
    for (const batch of all) {
      buffer.onChange(() => changes++)
      const outs = batch.map(outOf)
      buffer.append(outs)
      for (const out of outs) appended.push({ id: firstId + appended.length, event: out.event, data: dataOf(out) })
      // read after every batch, as a live reader does: the newest frame is always there
      const newest = buffer.after(appended.at(-1)!.id - 1)
      assert.deepStrictEqual(plain(newest.frames), [appended.at(-1)!])
    }
    assert.strictEqual(changes, all.length)
    if (appended.length === 0) return assert.deepStrictEqual(buffer.after(0), { frames: [] })
    const kept = plain(buffer.after(0).frames)
    const from = appended.length - kept.length
    // the newest frames, as they were appended
    assert.deepStrictEqual(kept, appended.slice(from))
    assert.isAtMost(kept.length, Math.max(1, bufferSize + Math.ceil(bufferSize / 4)))
    const chars = kept.reduce((n, f) => n + f.data.length, 0)
    assert.isTrue(kept.length === 1 || chars <= bufferBytes, `${chars} characters kept, at most ${bufferBytes}`)
    // every cursor: from before the run's first event to past its last, and one from an earlier attempt
    for (let cursor = firstId - 1; cursor <= appended.at(-1)!.id + 1; cursor++) {
      const found = buffer.after(cursor)
      if (cursor > 0 && (cursor < appended[from]!.id - 1 || cursor > appended.at(-1)!.id)) {
        assert.deepStrictEqual(found.frames, [])
        assert.include(found.gap!.data, "stream_replay_gap")
        assert.strictEqual(found.gap!.id, appended.at(-1)!.id)
      } else {
        assert.isUndefined(found.gap)
        const expected = appended.filter((f) => f.id > cursor && f.id >= appended[from]!.id)
        assert.deepStrictEqual(plain(found.frames), expected)
      }
    }
    // (a cursor of an earlier attempt reads as the one just before this attempt's first event)
    if (firstId > 1) {
      assert.deepStrictEqual(plain(buffer.after(offset + 1).frames), plain(buffer.after(firstId - 1).frames))
    }
  }, { fastCheck: { numRuns: 300 } })
})
