/**
 * Shared values (the factory's agents, its subagent runners): a value's scope is closed once it is retired and no
 * user holds it, never before, and once only; `using` releases what it held whatever ends the use.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as Shared from "../../src/programs/Shared.js"

// a shared value whose scope counts how often it was closed
const counted = Effect.gen(function*() {
  const scope = yield* Scope.make()
  let closes = 0
  yield* Scope.addFinalizer(scope, Effect.sync(() => void closes++))
  return { shared: Shared.make("agent", scope), closes: () => closes }
})

describe("Shared", () => {
  it.effect("a retired value is closed when its last user releases it, once", () =>
    Effect.gen(function*() {
      const { shared, closes } = yield* counted
      shared.hold()
      shared.hold()
      yield* shared.retire
      assert.strictEqual(closes(), 0, "two users hold it")
      yield* shared.release
      assert.strictEqual(closes(), 0, "one user still holds it")
      yield* shared.release
      assert.strictEqual(closes(), 1)
      assert.isTrue(shared.closed())
      yield* shared.retire
      yield* shared.release
      assert.strictEqual(closes(), 1, "closed once")
    }))

  it.effect("a value not retired stays open without users; retired without users it closes at once", () =>
    Effect.gen(function*() {
      const { shared, closes } = yield* counted
      shared.hold()
      yield* shared.release
      assert.strictEqual(closes(), 0, "still the current one")
      yield* shared.retire
      assert.strictEqual(closes(), 1)
    }))

  it.effect("using releases what it held when the use fails or is interrupted", () =>
    Effect.gen(function*() {
      const { shared, closes } = yield* counted
      const get = (onHold: (s: Shared.Shared<string>) => void) =>
        Effect.sync(() => {
          shared.hold()
          onHold(shared)
          return shared.value
        })
      const failed = yield* Effect.exit(Shared.using(get, () => Effect.fail("no")))
      assert.isTrue(Exit.isFailure(failed))
      assert.strictEqual(shared.users(), 0)
      const fiber = yield* Effect.fork(Shared.using(get, () => Effect.never))
      yield* Effect.yieldNow()
      assert.strictEqual(shared.users(), 1, "held while it is used")
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(shared.users(), 0)
      assert.strictEqual(closes(), 0, "not retired")
    }))

  it.effect("retireAll retires every value kept and keeps none; a held one closes with its user", () =>
    Effect.gen(function*() {
      const kept = Shared.kept<string>()
      const a = yield* counted
      const b = yield* counted
      kept.keep("a", a.shared)
      kept.keep("b", b.shared)
      assert.strictEqual(kept.hold("a"), a.shared)
      yield* kept.retireAll
      assert.isUndefined(kept.hold("a"))
      assert.isUndefined(kept.hold("b"))
      assert.deepStrictEqual([a.closes(), b.closes()], [0, 1])
      yield* a.shared.release
      assert.deepStrictEqual([a.closes(), b.closes()], [1, 1])
    }))
})
