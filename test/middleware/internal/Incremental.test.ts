import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import * as Incremental from "../../../src/middleware/internal/Incremental.js"
import type { Message } from "../../../src/state/Message.js"
import * as M from "../../../src/state/Message.js"

// What a request's history goes through between two calls: it grows (a step), a message is replaced, or it is
// compacted (the front dropped); the same array may come again.
type Change = { readonly grow: number } | { readonly replace: number } | { readonly compact: number } | "same"

const change: FC.Arbitrary<Change> = FC.oneof(
  { weight: 6, arbitrary: FC.integer({ min: 1, max: 3 }).map((grow) => ({ grow })) },
  FC.nat().map((replace) => ({ replace })),
  FC.integer({ min: 1, max: 4 }).map((compact) => ({ compact })),
  FC.constant("same" as const)
)

let made = 0
const fresh = (system: boolean): Message => system ? M.system(`s${made++}`) : M.human(`h${made++}`)

describe("Incremental.mapMessages", () => {
  it("gives with its memo what a full pass gives: the same messages slot by slot, the input when none changes", () => {
    FC.assert(FC.property(
      FC.array(FC.boolean(), { minLength: 1, maxLength: 6 }),
      FC.array(FC.tuple(change, FC.array(FC.boolean(), { minLength: 3, maxLength: 3 })), { maxLength: 40 }),
      (start, changes) => {
        // the pass of SystemMessageCoalescing: system messages mapped once each (cached), the rest kept
        const cache = new WeakMap<Message, Message>()
        const f = (message: Message): Message => {
          if (message.type !== "system") return message
          let hidden = cache.get(message)
          if (hidden === undefined) cache.set(message, hidden = M.human(message.content, { id: message.id }))
          return hidden
        }
        const memo = Incremental.makeMemo<ReadonlyArray<Message>>()
        let history: ReadonlyArray<Message> = start.map(fresh)
        const check = () => {
          const full = Incremental.mapMessages(history, f)
          const incremental = Incremental.mapMessages(history, f, memo)
          assert.strictEqual(incremental.length, history.length)
          for (let i = 0; i < history.length; i++) assert.strictEqual(incremental[i], full[i])
          if (full === history) assert.isTrue(history.every((m) => m.type !== "system"))
        }
        check()
        for (const [c, kinds] of changes) {
          if (c === "same") history = [...history]
          else if ("grow" in c) history = [...history, ...kinds.slice(0, c.grow).map(fresh)]
          else if ("replace" in c) {
            const at = c.replace % history.length
            history = history.map((m, i) => (i === at ? fresh(kinds[0]!) : m))
          } else if (history.length > c.compact) history = history.slice(c.compact)
          check()
        }
      }
    ))
  })
})
