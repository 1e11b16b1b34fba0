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
  it("folds in-history system messages into one system prompt; only the latest date reminder survives", () => {
    const reminder = (date: string) =>
      M.system(`<system-reminder>\n<current_date>${date}</current_date>\n</system-reminder>`, {
        additional_kwargs: { hide_from_ui: true, dynamic_context_reminder: true, reminder_date: date }
      })
    const out = SMC.coalesce(request([
      reminder("2026-11-29, Sunday"),
      M.human("hi"),
      M.system("## Durable context authority contract"),
      reminder("2026-11-30, Monday"),
      M.ai("hello")
    ], "You are Antler."))
    assert.strictEqual(
      out.systemPrompt,
      "You are Antler.\n\n## Durable context authority contract\n\n<system-reminder>\n<current_date>2026-11-30, Monday</current_date>\n</system-reminder>"
    )
    assert.deepStrictEqual(out.messages.map((m) => m.type), ["human", "ai"])
  })

  it("a request without system messages in its history is passed on as the same object", () => {
    const r = request([M.human("hi"), M.ai("hello")], "You are Antler.")
    assert.strictEqual(SMC.coalesce(r), r)
  })

  it.effect("the model receives one system prompt, and the saved thread is untouched", () =>
    Effect.gen(function*() {
      const inject = () =>
        MW.make({ model: (r, next) => next({ ...r, messages: [M.system("extra rules"), ...r.messages] }) })
      const o = yield* H.run({ script: ["ok"], systemPrompt: "base", middlewares: () => [inject(), SMC.layer()] })
      assert.strictEqual(o.requests[0]!.systemPrompt, "base\n\nextra rules")
      assert.isFalse(o.requests[0]!.messages.some((m) => m.type === "system"))
      assert.deepStrictEqual(o.state.messages.map((m) => m.type), ["human", "ai"])
    }).pipe(H.withStore))
})
