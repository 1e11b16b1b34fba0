/**
 * A run's frames kept as another runner streams them (`FrameMirror`, a cluster's thread stream): a reader after
 * any cursor gets exactly the kept frames after it, in order, or the run's gap once the frames it needs were let
 * go; the newest frame always stays, and the bounds hold.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FC from "effect/FastCheck"
import * as Scope from "effect/Scope"
import * as FrameMirror from "../../../src/programs/gateway/FrameMirror.js"
import type * as Protocol from "../../../src/programs/gateway/Protocol.js"

/** Frames with ascending ids (a jump: a later attempt of the run), each with data of some length. */
const frames = FC.array(FC.tuple(FC.integer({ min: 1, max: 3 }), FC.string({ maxLength: 40 })), { maxLength: 120 })
  .map((parts) => {
    let id = 0
    return parts.map(([step, data]): Protocol.Frame => ({ id: (id += step), event: "messages", data }))
  })

describe("FrameMirror", () => {
  it.prop("after a cursor: the kept frames after it, or a gap when they were let go", [
    frames,
    FC.integer({ min: 1, max: 50 }),
    FC.integer({ min: 1, max: 800 }),
    FC.integer({ min: 0, max: 400 })
  ], ([all, bufferSize, bufferBytes, cursor]) => {
    const mirror = FrameMirror.make("run-1", { bufferSize, bufferBytes })
    let changes = 0
    for (const frame of all) {
      mirror.onChange(() => changes++)
      mirror.put(frame)
    }
    assert.strictEqual(changes, all.length)
    if (all.length === 0) return assert.deepStrictEqual(mirror.after(cursor), { frames: [] })
    // the kept frames: the newest ones, in order, the last one always among them, within the bounds (give or take
    // the batch a trim waits for)
    const from = all.findIndex((f) => mirror.after(f.id - 1).gap === undefined)
    assert.isAtLeast(from, 0)
    assert.deepStrictEqual(mirror.after(all[from]!.id - 1).frames, all.slice(from))
    assert.isAtMost(all.length - from, Math.max(1, bufferSize + Math.ceil(bufferSize / 4)))
    const found = mirror.after(cursor)
    if (from > 0 && cursor < all[from]!.id - 1) {
      assert.deepStrictEqual(found.frames, [])
      assert.include(found.gap!.data, "stream_replay_gap")
    } else {
      assert.deepStrictEqual(found, { frames: all.filter((f) => f.id > cursor) })
    }
    assert.isFalse(mirror.finished())
  })

  it("the run's end finishes it; a gap from the runner is what a reader gets; a frame already kept is not kept again", () => {
    const mirror = FrameMirror.make("run-2", { bufferSize: 10, bufferBytes: 1000 })
    mirror.put({ id: 1, event: "metadata", data: "{}" })
    mirror.put({ id: 1, event: "metadata", data: "{}" })
    mirror.put({ id: 2, event: "end", data: "null" })
    assert.deepStrictEqual(mirror.after(0).frames.map((f) => f.id), [1, 2])
    assert.isTrue(mirror.finished())

    const gapped = FrameMirror.make("run-3", { bufferSize: 10, bufferBytes: 1000 })
    const gap = { id: 40, event: "gap", data: "{\"code\":\"stream_replay_gap\"}" }
    gapped.put(gap)
    assert.deepStrictEqual(gapped.after(7), { frames: [], gap })
    assert.isTrue(gapped.finished())
  })

  it.effect("a stream's mirrors: one per run, the oldest closed beyond the bound, all closed at the end", () =>
    Effect.gen(function*() {
      const kept = FrameMirror.mirrors(2)
      const closed: Array<string> = []
      const made = (runId: string) =>
        Effect.as(
          Effect.addFinalizer(() => Effect.sync(() => closed.push(runId))),
          FrameMirror.make(runId, { bufferSize: 10, bufferBytes: 1000 })
        )
      const a = yield* kept.follow("a", made("a"))
      assert.strictEqual(yield* kept.follow("a", made("a")), a)
      yield* kept.follow("b", made("b"))
      assert.deepStrictEqual(closed, [])
      yield* kept.follow("c", made("c"))
      assert.deepStrictEqual(closed, ["a"])
      yield* kept.close
      assert.deepStrictEqual(closed.sort(), ["a", "b", "c"])
      assert.strictEqual((yield* kept.follow("d", made("d"))).runId, "d")
      yield* kept.close
    }).pipe(Effect.provideService(Scope.Scope, Effect.runSync(Scope.make()))))
})
