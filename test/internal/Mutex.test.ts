import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Mutex from "../../src/internal/Mutex.js"

describe("Mutex", () => {
  it.live("bodies never overlap, even when they wait inside; every one runs, in the order they asked", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const trace: Array<string> = []
      let inside = 0
      let most = 0
      const body = (i: number) =>
        lock.exclusively(Effect.gen(function*() {
          inside++
          most = Math.max(most, inside)
          trace.push(`start ${i}`)
          yield* Effect.sleep(i % 3 === 0 ? "2 millis" : "0 millis")
          yield* Effect.yieldNow()
          trace.push(`end ${i}`)
          inside--
          return i
        }))
      const results = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), body, { concurrency: "unbounded" })
      assert.deepStrictEqual(results, Array.from({ length: 20 }, (_, i) => i))
      assert.strictEqual(most, 1)
      assert.deepStrictEqual(trace, Array.from({ length: 20 }, (_, i) => [`start ${i}`, `end ${i}`]).flat())
    }))

  it.live("a failing or dying body gives the lock back", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const failed = yield* Effect.exit(lock.exclusively(Effect.fail("no")))
      const died = yield* Effect.exit(lock.exclusively(Effect.die(new Error("boom"))))
      assert.isTrue(Exit.isFailure(failed) && Exit.isFailure(died))
      assert.strictEqual(yield* lock.exclusively(Effect.succeed("after")), "after")
    }))

  it.live("locked: the body stays interruptible, and an interrupted body gives the lock back", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const holder = yield* Effect.fork(lock.locked(Effect.never))
      yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(holder)
      assert.strictEqual(yield* lock.locked(Effect.succeed("next")), "next")
    }))

  it.live("a waiter interrupted while it waits leaves the lock usable; a running body is not interrupted", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      const trace: Array<string> = []
      const holder = yield* Effect.fork(lock.exclusively(
        Effect.zipRight(Effect.sleep("20 millis"), Effect.sync(() => trace.push("holder done")))
      ))
      yield* Effect.sleep("5 millis")
      const waiter = yield* Effect.fork(lock.exclusively(Effect.sync(() => trace.push("waiter ran"))))
      yield* Effect.sleep("5 millis")
      yield* Fiber.interrupt(waiter)
      // the holder is interrupted too, but its body runs to its end
      yield* Fiber.interrupt(holder)
      assert.strictEqual(yield* lock.exclusively(Effect.succeed("next")), "next")
      assert.deepStrictEqual(trace, ["holder done"])
    }))

  it.live("ifFree runs synchronous code when the lock is free, never while a body holds it, and gives the lock back", () =>
    Effect.gen(function*() {
      const lock = Mutex.make()
      assert.strictEqual(lock.ifFree(() => "now"), "now")
      const holder = yield* Effect.fork(lock.locked(Effect.never))
      yield* Effect.sleep("5 millis")
      let ran = false
      assert.isUndefined(lock.ifFree(() => (ran = true)))
      assert.isFalse(ran)
      yield* Fiber.interrupt(holder)
      assert.throws(() => lock.ifFree(() => { throw new Error("thrown inside") }), "thrown inside")
      // thrown or not, the lock is free again for bodies and for ifFree
      assert.strictEqual(yield* lock.exclusively(Effect.succeed("body")), "body")
      assert.strictEqual(lock.ifFree(() => 1), 1)
    }))
})
