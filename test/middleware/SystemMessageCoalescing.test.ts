import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as MW from "../../src/middleware/Middleware.js"
import * as SMC from "../../src/middleware/SystemMessageCoalescing.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const request = (messages: ReadonlyArray<M.Message>, systemPrompt?: string): ModelRequest => ({
  systemPrompt,
  messages,
  tools: [],
  settings: {}
})

describe("SystemMessageCoalescing", () => {
  it("keeps the system prompt as it is: in-history system messages are sent in place, as hidden user messages", () => {
    const reminder = (date: string) =>
      M.system(`<system-reminder>\n<current_date>${date}</current_date>\n</system-reminder>`, {
        id: `r-${date}`,
        additional_kwargs: { hide_from_ui: true, dynamic_context_reminder: true, reminder_date: date }
      })
    const out = SMC.coalesce(request([
      reminder("2026-11-29, Sunday"),
      M.human("hi"),
      M.system("## Durable context authority contract"),
      reminder("2026-11-30, Monday"),
      M.ai("hello")
    ], "You are Antler."))
    assert.strictEqual(out.systemPrompt, "You are Antler.")
    assert.deepStrictEqual(out.messages.map((m) => m.type), ["human", "human", "human", "human", "ai"])
    assert.deepStrictEqual(out.messages.map((m) => M.isHidden(m)), [true, false, true, true, false])
    // both dates stay where they were told, with their ids: an earlier request stays a prefix of a later one
    assert.strictEqual(out.messages[0]!.id, "r-2026-11-29, Sunday")
    assert.include(M.text(out.messages[3]!), "2026-11-30, Monday")
  })

  it("a request without system messages in its history is passed on as the same object", () => {
    const r = request([M.human("hi"), M.ai("hello")], "You are Antler.")
    assert.strictEqual(SMC.coalesce(r), r)
  })

  it.effect("the model receives the system prompt alone as system, and the saved thread is untouched", () =>
    Effect.gen(function*() {
      const inject = () =>
        MW.make({ model: (r, next) => next({ ...r, messages: [M.system("extra rules"), ...r.messages] }) })
      const o = yield* H.run({ script: ["ok"], systemPrompt: "base", middlewares: () => [inject(), SMC.layer()] })
      assert.strictEqual(o.requests[0]!.systemPrompt, "base")
      assert.isFalse(o.requests[0]!.messages.some((m) => m.type === "system"))
      assert.strictEqual(M.text(o.requests[0]!.messages[0]!), "extra rules")
      assert.deepStrictEqual(o.state.messages.map((m) => m.type), ["human", "ai"])
    }).pipe(H.withStore))
})
