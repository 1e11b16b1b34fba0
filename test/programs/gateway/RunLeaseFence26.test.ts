/**
 * The fence of a run whose lease renewals the store leaves unanswered (`RunLease`), on Effect's TestClock: once the
 * lease's life, from its last renewal that succeeded, ran out, the run is told at once (once, `LAPSED`), its lease is
 * renewed no more and not given back; taken back once the store answers (`reclaim`), it is given back at the run's
 * end. And a turn whose lease lapsed starts no tool, not even a read-only one (which needs no checkpoint before it
 * runs): before, such a call ran, and a renewal finding the lease taken was the only stop.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../../src/layers/Toolkit.js"
import * as MW from "../../../src/middleware/Middleware.js"
import * as RunLease from "../../../src/programs/gateway/RunLease.js"
import * as Run from "../../../src/programs/Run.js"
import type { Lost } from "../../../src/services/RunSettlement.js"
import { LAPSED, RunSettlement } from "../../../src/services/RunSettlement.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as Tool from "../../../src/services/Tool.js"
import * as M from "../../../src/state/Message.js"

const T0 = Date.UTC(2026, 0, 1)
const THIRD = Run.LEASE_TTL_MS / 3

const settle = Effect.repeatN(Effect.yieldNow(), 20)

/** A memory store whose lease calls (after the run's acceptance) hang while `silent`; releases counted. */
const stalling = () => {
  const inner = MemoryThreadStore.make()
  const releases: Array<string> = []
  const state = { silent: false }
  const store = ThreadStore.of({
    ...inner,
    acquireLease: (request) => Effect.suspend(() => (state.silent ? Effect.never : inner.acquireLease(request))),
    releaseLease: (threadId, runId) =>
      Effect.zipRight(Effect.sync(() => releases.push(runId)), inner.releaseLease(threadId, runId))
  })
  return { store, releases, state }
}

describe("RunLease: a lease whose life ran out unrenewed, on the TestClock", () => {
  it.effect("is fenced once, at its life's end: the run told LAPSED, the lease renewed no more nor given back", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, releases, state } = stalling()
      const leases = yield* RunLease.make(store)
      const told: Array<[string, Lost]> = []
      const tell = (runId: string) => (lost: Lost) => Effect.sync(() => told.push([runId, lost]))
      assert.isUndefined(yield* Run.takeLease(store, "t1", "r1"))
      assert.isUndefined(yield* Run.takeLease(store, "t2", "r2"))
      const fenced = yield* leases.hold("t1", "r1", tell("r1"))
      const kept = yield* leases.hold("t2", "r2", tell("r2"))
      yield* TestClock.adjust(THIRD)
      yield* settle
      // the store stops answering (both leases renewed at T0 + 10 s: their lives end at T0 + 40 s)
      state.silent = true
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.deepStrictEqual(told, [], "a renewal unanswered, the lease's life not yet out")
      assert.isUndefined(fenced.lost())
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.deepStrictEqual(told, [], "a life after the lease was taken, not yet after its last renewal that succeeded")
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.deepStrictEqual(told, [["r1", LAPSED], ["r2", LAPSED]], "both told at their life's end")
      assert.strictEqual(fenced.lost(), LAPSED)
      for (let third = 1; third <= 3; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      assert.strictEqual(told.length, 2, "told once")
      yield* fenced.release
      yield* kept.release
      assert.deepStrictEqual(releases, [], "a lapsed lease is not given back: the run may no longer act as its owner")
    })))

  it.effect("taken back once the store answers again, it is the run's until its end, then given back", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, releases, state } = stalling()
      const leases = yield* RunLease.make(store)
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      const held = yield* leases.hold("t", "r")
      state.silent = true
      yield* TestClock.adjust(Run.LEASE_TTL_MS)
      yield* settle
      assert.strictEqual(held.lost(), LAPSED)
      state.silent = false
      assert.isUndefined(yield* held.reclaim, "the thread is the run's again")
      const intruder = yield* store.acquireLease({
        threadId: "t",
        runId: "other",
        ttlMs: 1,
        now: T0 + Run.LEASE_TTL_MS + 1
      })
      assert.strictEqual(intruder?.run_id, "r", "held while the run records its end")
      yield* held.release
      assert.deepStrictEqual(releases, ["r"])
    })))
})

describe("a turn whose lease's life ran out", () => {
  it.effect("starts no tool, a read-only one included, and ends with the fence's error", () =>
    Effect.gen(function*() {
      const store = MemoryThreadStore.make()
      // (its caller took the lease at the run's acceptance)
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      const called: Array<string> = []
      const look = Tool.make({
        name: "look",
        description: "Reads something.",
        parameters: Schema.Struct({}),
        readOnly: true,
        handler: () => Effect.sync(() => (called.push("look"), "seen"))
      })
      let lapsed = false
      // (the model's answer comes as the lease's life runs out: the run is told after it, before the call starts)
      const scripted = ScriptedModel.make([{ toolCalls: [{ name: "look", args: {} }] }, "done"])
      const model = { generate: (request: Parameters<typeof scripted.generate>[0]) =>
        Effect.tap(scripted.generate(request), () => Effect.sync(() => (lapsed = true))) }
      const end = yield* Run.execute(
        { threadId: "t", runId: "r", input: [M.human("hello")] },
        MW.base(model, Toolkit.make([look]))
      ).pipe(
        Effect.provideService(RunSettlement, {
          settles: (id) => id === "r",
          lost: () => (lapsed ? LAPSED : undefined),
          confirm: Effect.sync(() => (lapsed ? LAPSED : undefined))
        }),
        Effect.provideService(ThreadStore, store)
      )
      assert.deepStrictEqual(called, [], "the read-only tool did not run")
      assert.strictEqual(end.status, "error")
      assert.include(end.error?.message ?? "", Run.LAPSED_REASON)
    }))
})
