/**
 * The renewer of a process's run leases tells a run at once when a renewal finds its lease taken (`hold`'s
 * `onLost`, in the renewer's fiber: no fiber of the run waits for it), once, and never a run that keeps its lease;
 * a lease found lost is not given back. And a store's lease, asked by another process for the same run id (one that
 * resumed the run), is refused while the process that holds it lives and its lease lasts: before, a renewal by run
 * id took it back silently, and both processes ran the run. On Effect's TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as RunLease from "../../../src/programs/gateway/RunLease.js"
import * as Run from "../../../src/programs/Run.js"
import type { Lost } from "../../../src/services/RunSettlement.js"
import type { LeaseHolder } from "../../../src/services/ThreadStore.js"
import { leaseBlocks, leaseOwner, ThreadStore } from "../../../src/services/ThreadStore.js"

const T0 = Date.UTC(2026, 0, 1)
const THIRD = Run.LEASE_TTL_MS / 3

const settle = Effect.repeatN(Effect.yieldNow(), 20)

/** A memory store whose lease releases are counted, by run. */
const counting = () => {
  const inner = MemoryThreadStore.make()
  const releases: Array<string> = []
  const store = ThreadStore.of({
    ...inner,
    releaseLease: (threadId, runId) =>
      Effect.zipRight(Effect.sync(() => releases.push(runId)), inner.releaseLease(threadId, runId))
  })
  return { store, releases }
}

describe("RunLease: a lease found taken is told to its run at once, on the TestClock", () => {
  it.effect("tells the run whose lease another run took, once, with who took it; not the run that keeps its own", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, releases } = counting()
      const leases = yield* RunLease.make(store)
      const told: Array<[string, LeaseHolder]> = []
      const tell = (runId: string) => (lost: Lost) => Effect.sync(() => told.push([runId, lost as LeaseHolder]))
      assert.isUndefined(yield* Run.takeLease(store, "t1", "r1"))
      assert.isUndefined(yield* Run.takeLease(store, "t2", "r2"))
      const lost = yield* leases.hold("t1", "r1", tell("r1"))
      const kept = yield* leases.hold("t2", "r2", tell("r2"))
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.deepStrictEqual(told, [], "both leases renewed: nobody told")
      // another process, whose clock is past r1's lease, takes its thread
      assert.isUndefined(yield* store.acquireLease({
        threadId: "t1",
        runId: "other",
        ttlMs: Run.LEASE_TTL_MS * 10,
        now: T0 + THIRD + Run.LEASE_TTL_MS + 1
      }))
      assert.deepStrictEqual(told, [], "not before the next renewal")
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.strictEqual(told.length, 1)
      assert.strictEqual(told[0]![0], "r1")
      assert.strictEqual(told[0]![1].run_id, "other")
      assert.strictEqual(told[0]![1].owner, leaseOwner())
      assert.strictEqual((lost.lost() as LeaseHolder | undefined)?.run_id, "other")
      for (let third = 1; third <= 3; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      assert.strictEqual(told.length, 1, "told once")
      assert.isUndefined(kept.lost())
      // a lease found lost is the other run's: the run's end does not ask the store to give it back
      yield* lost.release
      yield* kept.release
      assert.deepStrictEqual(releases, ["r2"])
    })))
})

describe("a thread's lease, asked for the same run by another process", () => {
  const request = { threadId: "t", runId: "r", ttlMs: Run.LEASE_TTL_MS, now: T0 }
  // (another host: a live process as far as this one can tell, until its lease ends)
  const elsewhere: LeaseHolder = { run_id: "r", owner: "another-host:4242", expires_at: T0 + Run.LEASE_TTL_MS }

  it("is refused while the other process's lease lasts (it resumed the run), and granted once it ended", () => {
    assert.isTrue(leaseBlocks(elsewhere, request, leaseOwner()), "the run resumed elsewhere: taken")
    assert.isFalse(leaseBlocks(elsewhere, { ...request, now: T0 + Run.LEASE_TTL_MS }, leaseOwner()), "expired")
    assert.isFalse(leaseBlocks({ ...elsewhere, owner: leaseOwner() }, request, leaseOwner()), "its own renewal")
    assert.isTrue(leaseBlocks({ ...elsewhere, run_id: "other", owner: leaseOwner() }, request, leaseOwner()))
  })
})
