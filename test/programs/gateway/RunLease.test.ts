/**
 * A gateway run's lease on its thread has one renewer, from the run's acceptance to its end recorded (`RunLease`):
 * before, the run's manager renewed it and each of its turns took and renewed it again (every step of a gateway run
 * renewed twice over, and a run waiting for its place three times). Counted through a store that counts the lease
 * writes (`acquireLease`), on Effect's TestClock (the lease's life is 30 s): the renewer renews every third of it,
 * a waiting or running run keeps its thread for lease lives on end, its turns take and renew nothing, a run whose
 * lease another took writes nothing more; and over HTTP, a gateway run whose turn ends at once writes its lease once.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../../src/layers/Toolkit.js"
import * as MW from "../../../src/middleware/Middleware.js"
import * as RunLease from "../../../src/programs/gateway/RunLease.js"
import * as Run from "../../../src/programs/Run.js"
import type { ModelService } from "../../../src/services/ModelService.js"
import { RunSettlement } from "../../../src/services/RunSettlement.js"
import type { Lost } from "../../../src/services/RunSettlement.js"
import type { LeaseHolder } from "../../../src/services/ThreadStore.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import * as Requests from "../../support/requests.js"
import * as Support from "./support.js"

const T0 = Date.UTC(2026, 0, 1)
const THIRD = Run.LEASE_TTL_MS / 3

/** A store whose lease writes are counted, by run. */
const counting = (inner: ThreadStore["Type"]) => {
  const writes = new Map<string, number>()
  const store = ThreadStore.of({
    ...inner,
    acquireLease: (request) =>
      Effect.zipRight(
        Effect.sync(() => writes.set(request.runId, (writes.get(request.runId) ?? 0) + 1)),
        inner.acquireLease(request)
      )
  })
  return { store, writes: (runId: string) => writes.get(runId) ?? 0 }
}

/** Who another run asking for `threadId`'s lease now would find holding it (`undefined`: it gets it). */
const blocker = (store: ThreadStore["Type"], threadId: string) =>
  Effect.gen(function*() {
    const holder = yield* store.acquireLease({ threadId, runId: "intruder", ttlMs: 1, now: yield* TestClockNow })
    if (holder === undefined) yield* store.releaseLease(threadId, "intruder")
    return holder?.run_id
  })
const TestClockNow = Effect.clockWith((clock) => clock.currentTimeMillis)

/** Lets forked fibers run until they wait. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("RunLease: the one renewer of a gateway run's lease, on the TestClock", () => {
  it.effect("renews every third of the lease's life, keeps the thread for lives on end, frees it on release", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, writes } = counting(MemoryThreadStore.make())
      // accepted: the manager took the lease
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      const held = yield* (yield* RunLease.make(store)).hold("t", "r")
      for (let third = 1; third <= 9; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      assert.strictEqual(writes("r"), 1 + 9, "taken once, then renewed once each third of its life")
      assert.strictEqual(yield* blocker(store, "t"), "r", "three lease lives later, the thread is still the run's")
      assert.isUndefined(held.lost())
      yield* held.release
      assert.isUndefined(yield* blocker(store, "t"), "released with the run's end: free at once")
      yield* TestClock.adjust(Run.LEASE_TTL_MS)
      assert.strictEqual(writes("r"), 10, "and no longer renewed")
    })))

  it.effect("says who took the lease when another run took the thread (this process stalled past its life)", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = MemoryThreadStore.make()
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      const held = yield* (yield* RunLease.make(store)).hold("t", "r")
      // another process, whose clock is past the lease's end, takes the thread
      const taken = yield* store.acquireLease({
        threadId: "t",
        runId: "other",
        ttlMs: Run.LEASE_TTL_MS * 10,
        now: T0 + Run.LEASE_TTL_MS + 1
      })
      assert.isUndefined(taken)
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.strictEqual((held.lost() as LeaseHolder | undefined)?.run_id, "other")
      yield* held.release
      assert.strictEqual(yield* blocker(store, "t"), "other", "releasing does not free another run's lease")
    })))
})

describe("RunLease: one renewer for all the runs of a process, on the TestClock", () => {
  it.effect("renews every run's lease held, each until its own release", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, writes } = counting(MemoryThreadStore.make())
      const leases = yield* RunLease.make(store)
      const runs = ["r1", "r2", "r3"]
      const held = []
      for (const run of runs) {
        assert.isUndefined(yield* Run.takeLease(store, `t-${run}`, run))
        held.push(yield* leases.hold(`t-${run}`, run))
      }
      for (let third = 1; third <= 6; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      for (const run of runs) {
        assert.strictEqual(writes(run), 1 + 6, `${run}: renewed each third`)
        assert.strictEqual(yield* blocker(store, `t-${run}`), run, `${run}: two lease lives later, still its thread`)
      }
      yield* held[1]!.release
      assert.isUndefined(yield* blocker(store, "t-r2"), "the released run's thread is free at once")
      for (let third = 1; third <= 3; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      assert.strictEqual(writes("r2"), 7, "the released lease is no longer renewed")
      assert.strictEqual(writes("r1"), 10, "the others are")
      assert.strictEqual(writes("r3"), 10)
      assert.strictEqual(yield* blocker(store, "t-r1"), "r1")
      assert.strictEqual(yield* blocker(store, "t-r3"), "r3")
    })))

  it.effect("a run's end leaves its lease to expire: no longer renewed once the run's scope closed", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, writes } = counting(MemoryThreadStore.make())
      const leases = yield* RunLease.make(store)
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      yield* Effect.scoped(leases.hold("t", "r"))
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.strictEqual(writes("r"), 1, "not renewed")
      assert.strictEqual(yield* blocker(store, "t"), "r", "still held until it expires")
      yield* TestClock.adjust(Run.LEASE_TTL_MS)
      assert.isUndefined(yield* blocker(store, "t"), "expired")
    })))

  it.effect("a release while its lease is being renewed waits for the renewal, then frees the thread", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const inner = MemoryThreadStore.make()
      const gate = yield* Deferred.make<void>()
      const renewing = yield* Deferred.make<void>()
      let taken = 0
      // a store whose renewals (after the first take) wait for `gate`
      const store = ThreadStore.of({
        ...inner,
        acquireLease: (request) =>
          Effect.suspend(() =>
            request.runId !== "r" || taken++ === 0
              ? inner.acquireLease(request)
              : Effect.zipRight(Effect.zipRight(Deferred.succeed(renewing, undefined), Deferred.await(gate)),
                inner.acquireLease(request))
          )
      })
      const leases = yield* RunLease.make(store)
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      const held = yield* leases.hold("t", "r")
      yield* TestClock.adjust(THIRD)
      yield* Deferred.await(renewing)
      const releasing = yield* Effect.fork(held.release)
      yield* settle
      assert.isNull(yield* Fiber.poll(releasing).pipe(Effect.map(Option.getOrNull)), "waits for the renewal")
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(releasing)
      assert.isUndefined(yield* blocker(store, "t"), "the renewal under way did not take the thread again")
    })))
})

describe("a turn of a run whose caller holds the lease (RunSettlement), on the TestClock", () => {
  /** A turn whose model answers once `gate` opens, run with the caller holding the lease (`lost`). */
  const turn = (
    store: ThreadStore["Type"],
    gate: Deferred.Deferred<void>,
    lost: () => Lost | undefined,
    confirm: Effect.Effect<Lost | undefined> = Effect.sync(lost)
  ) => {
    const scripted = ScriptedModel.make(["done"])
    const model: ModelService["Type"] = {
      generate: (request) => Effect.zipRight(Deferred.await(gate), scripted.generate(request))
    }
    return Run.execute(
      { threadId: "t", runId: "r", input: [M.human("hello")] },
      MW.base(model, Toolkit.make([]))
    ).pipe(
      Effect.provideService(RunSettlement, { settles: (id) => id === "r", lost, confirm }),
      Effect.provideService(ThreadStore, store)
    )
  }

  it.effect("takes and renews no lease of its own however long it runs; the caller's renewer keeps the thread", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, writes } = counting(MemoryThreadStore.make())
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      const held = yield* (yield* RunLease.make(store)).hold("t", "r")
      const gate = yield* Deferred.make<void>()
      const running = yield* Effect.fork(turn(store, gate, held.lost, held.confirm))
      for (let third = 1; third <= 9; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      yield* Deferred.succeed(gate, undefined)
      const end = yield* Fiber.join(running)
      assert.strictEqual(end.status, "success")
      // before: 1 + 9 by the manager's renewer, 1 + 9 more by the turn (each of its thirds), 19 more when waiting
      assert.strictEqual(writes("r"), 1 + 9)
      // the turn left the lease held, for its caller to release once it recorded the run's end
      assert.strictEqual(yield* blocker(store, "t"), "r")
      const record = (yield* store.runs({ runId: "r" }))[0]
      assert.strictEqual(record?.status, "running", "the caller records the end")
      yield* held.release
    })))

  it.effect("whose lease another run took, writes nothing more: it ends an error naming the other run", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = MemoryThreadStore.make()
      // (its caller took the lease at the run's acceptance)
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      let lost: LeaseHolder | undefined
      const gate = yield* Deferred.make<void>()
      const running = yield* Effect.fork(turn(store, gate, () => lost))
      yield* settle
      lost = { run_id: "other", owner: "elsewhere:1", expires_at: T0 + Run.LEASE_TTL_MS }
      yield* Deferred.succeed(gate, undefined)
      const end = yield* Fiber.join(running)
      assert.strictEqual(end.status, "error")
      assert.include(end.error?.message ?? "", "run other")
      const loaded = Option.getOrThrow(yield* store.load("t"))
      assert.isFalse(loaded.state.messages.some((m) => m.type === "ai"), "its answer was not written")
    }))
})

describe("a gateway run over HTTP", () => {
  it("writes its lease once when its turn ends at once: taken at acceptance, renewed by no turn", async () => {
    let counted: ReturnType<typeof counting> | undefined
    const gateway = await Support.start({
      script: () => "Short answer.",
      wrapStore: (configured) => (counted = counting(configured)).store
    })
    try {
      const api = Requests.as(() => gateway)
      const thread = (await api("POST", "/threads", {})).json().thread_id as string
      const done = await api("POST", `/threads/${thread}/runs/wait`, {
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: "hi" }] }
      })
      assert.strictEqual(done.status, 200)
      const runs = (await api("GET", `/threads/${thread}/runs`)).json() as Array<{ run_id: string; status: string }>
      assert.strictEqual(runs[0]?.status, "success")
      // before: twice (the manager at acceptance, the turn at its start)
      assert.strictEqual(counted!.writes(runs[0]!.run_id), 1)
      const free = await Effect.runPromise(counted!.store.acquireLease({
        threadId: thread,
        runId: "next",
        ttlMs: 1000,
        now: Date.now()
      }))
      assert.isUndefined(free, "the thread is free once the run's end is recorded")
    } finally {
      await gateway.stop()
    }
  })
})
