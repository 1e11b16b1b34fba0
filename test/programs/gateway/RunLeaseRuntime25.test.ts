/**
 * The one renewer of a process's run leases (`RunLease`) when the store does not answer a renewal (a stalled
 * PostgreSQL connection): before, that renewal held up every other run's renewal for as long as it hung, and their
 * leases expired (another process could take their threads). Now each renewal gets `RENEWAL_TIMEOUT_MS`: past it
 * the renewer logs a warning naming the run and goes on with the others, and tries that lease again a third of a
 * life later. On Effect's TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
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
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"

const T0 = Date.UTC(2026, 0, 1)
const THIRD = Run.LEASE_TTL_MS / 3

/** A store whose first renewal of `hangs`'s lease never answers (its take at acceptance does); writes counted. */
const hangingOnce = (hangs: string) => {
  const inner = MemoryThreadStore.make()
  const writes = new Map<string, number>()
  const store = ThreadStore.of({
    ...inner,
    acquireLease: (request) =>
      Effect.suspend(() => {
        const n = (writes.get(request.runId) ?? 0) + 1
        writes.set(request.runId, n)
        return request.runId === hangs && n === 2 ? Effect.never : inner.acquireLease(request)
      })
  })
  return { store, writes: (runId: string) => writes.get(runId) ?? 0 }
}

/** Who another run asking for `threadId`'s lease now would find holding it (`undefined`: it gets it). */
const holderOf = (store: ThreadStore["Type"], threadId: string) =>
  Effect.gen(function*() {
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const holder = yield* store.acquireLease({ threadId, runId: "intruder", ttlMs: 1, now })
    if (holder === undefined) yield* store.releaseLease(threadId, "intruder")
    return holder?.run_id
  })

const settle = Effect.repeatN(Effect.yieldNow(), 20)

/** The warnings logged while `effect` runs, with it. */
const warningsOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const warnings: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") warnings.push(String(Array.isArray(message) ? message.join(" ") : message))
    })
    const result = yield* effect.pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
      Logger.withMinimumLogLevel(LogLevel.Warning)
    )
    return { result, warnings }
  })

describe("RunLease: a renewal the store does not answer, on the TestClock", () => {
  it.effect("times out with a warning naming the run; the other runs' leases are renewed and stay theirs", () =>
    Effect.scoped(warningsOf(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store, writes } = hangingOnce("r2")
      const leases = yield* RunLease.make(store)
      const runs = ["r1", "r2", "r3"]
      for (const run of runs) {
        assert.isUndefined(yield* Run.takeLease(store, `t-${run}`, run))
        yield* leases.hold(`t-${run}`, run)
      }
      // the first round: r1 renewed, r2's renewal hangs until its timeout, then r3's
      yield* TestClock.adjust(THIRD)
      yield* settle
      assert.strictEqual(writes("r3"), 1, "r3 waits behind r2's renewal")
      yield* TestClock.adjust(RunLease.RENEWAL_TIMEOUT_MS)
      yield* settle
      assert.strictEqual(writes("r1"), 2)
      assert.strictEqual(writes("r3"), 2, "renewed once r2's renewal timed out")
      // three lease lives on, every thread is still its run's, r2's included (renewed by the rounds after)
      for (let third = 1; third <= 9; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      for (const run of runs) {
        assert.strictEqual(yield* holderOf(store, `t-${run}`), run, `${run} keeps its thread`)
        assert.isAtLeast(writes(run), 10, `${run} renewed each round`)
      }
    }))).pipe(Effect.map(({ warnings }) => {
      assert.deepStrictEqual(warnings, [
        `run r2: renewing its thread's lease got no answer within ${RunLease.RENEWAL_TIMEOUT_MS / 1000} s; ` +
        `the other leases are renewed, this one tried again in ${THIRD / 1000} s`
      ])
    })))

  it.effect("a run whose renewal hung once finishes, its answer written and its thread still its own", () =>
    Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const { store } = hangingOnce("r")
      assert.isUndefined(yield* Run.takeLease(store, "t", "r"))
      const held = yield* (yield* RunLease.make(store)).hold("t", "r")
      // a turn whose model answers once `gate` opens, three lease lives later
      const gate = yield* Deferred.make<void>()
      const scripted = ScriptedModel.make(["done"])
      const model: ModelService["Type"] = {
        generate: (request) => Effect.zipRight(Deferred.await(gate), scripted.generate(request))
      }
      const running = yield* Effect.fork(
        Run.execute({ threadId: "t", runId: "r", input: [M.human("hello")] }, MW.base(model, Toolkit.make([]))).pipe(
          Effect.provideService(RunSettlement, { settles: (id) => id === "r", lost: held.lost, confirm: held.confirm }),
          Effect.provideService(ThreadStore, store)
        )
      )
      for (let third = 1; third <= 9; third++) {
        yield* TestClock.adjust(THIRD)
        yield* settle
      }
      assert.strictEqual(yield* holderOf(store, "t"), "r", "the thread is still the run's")
      yield* Deferred.succeed(gate, undefined)
      const end = yield* Fiber.join(running)
      assert.strictEqual(end.status, "success")
      const loaded = Option.getOrThrow(yield* store.load("t"))
      assert.isTrue(loaded.state.messages.some((m) => m.type === "ai" && M.text(m) === "done"), "its answer written")
      yield* held.release
    })))
})
