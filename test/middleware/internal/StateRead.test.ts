import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { RunState } from "../../../src/services/RunContext.js"
import * as M from "../../../src/state/Message.js"
import { readable, withState } from "../../../src/middleware/internal/StateRead.js"
import type { ThreadState } from "../../../src/state/ThreadState.js"
import * as TS from "../../../src/state/ThreadState.js"

// a holder as a run keeps one: `get` counts its reads, `current` is the synchronous read
const holder = () => {
  let state: ThreadState = TS.empty
  let gets = 0
  const service: RunState["Type"] = {
    get: Effect.sync(() => (gets++, state)),
    update: (update) =>
      Effect.sync(() => (state = { ...state, messages: [...state.messages, ...(update.messages ?? [])] as any }))
  }
  return { service, current: () => state, gets: () => gets }
}

describe("StateRead.withState", () => {
  it("reads the state when the effect runs, not when it is made, with or without the synchronous read", () =>
    Effect.runPromise(Effect.gen(function*() {
      for (const sync of [true, false]) {
        const h = holder()
        const state = sync ? readable(h.service, h.current) : h.service
        const count = withState(state, (current) => Effect.succeed(current.messages.length))
        assert.strictEqual(yield* count, 0)
        yield* state.update({ messages: [M.human("one")] })
        assert.strictEqual(yield* count, 1)
        yield* state.update({ messages: [M.human("two")] })
        assert.strictEqual(yield* count, 2)
        // the synchronous read, when the holder has one, instead of `get`
        assert.strictEqual(h.gets(), sync ? 0 : 3)
      }
    })))

  it("passes on the function's failure", () =>
    Effect.runPromise(Effect.gen(function*() {
      const h = holder()
      const failed = yield* Effect.flip(withState(readable(h.service, h.current), () => Effect.fail("no")))
      assert.strictEqual(failed, "no")
    })))
})
