import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Title from "../../src/middleware/Title.js"
import { TitleConfig } from "../../src/services/AppConfig.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

const config = (extra: Record<string, unknown> = {}) => Schema.decodeUnknownSync(TitleConfig)(extra)

describe("Title", () => {
  it("the local title is the first user message, clipped at 50 characters", () => {
    assert.strictEqual(Title.fallbackTitle("  Plan a trip\nto Lyon ", 60), "Plan a trip to Lyon")
    const long = "Summarise every quarterly report from 2019 to 2025 and compare the margins"
    assert.strictEqual(Title.fallbackTitle(long, 60), "Summarise every quarterly report from 2019 to 2...")
    assert.strictEqual(Title.fallbackTitle("   ", 60), "New Conversation")
  })

  it.effect("the first exchange names the thread; later runs keep the name", () =>
    Effect.gen(function*() {
      const first = yield* H.run({ threadId: "t", input: "Plan a trip to Lyon", script: ["Sure."], middlewares: () => [Title.layer(config())] })
      assert.strictEqual(first.state.title, "Plan a trip to Lyon")
      const second = yield* H.run({ threadId: "t", input: "And Paris?", script: ["Also."], middlewares: () => [Title.layer(config())] })
      assert.strictEqual(second.state.title, "Plan a trip to Lyon")
    }).pipe(H.withStore))

  it.effect("with a title model, one internal call writes the title; the answer's tokens are the only ones streamed", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan a trip to Lyon",
        script: (request) => (request.internal === "title" ? "\"Lyon Trip Plan\"" : "Here is a plan."),
        middlewares: () => [Title.layer(config({ model_name: "small" }))]
      })
      assert.strictEqual(o.state.title, "Lyon Trip Plan")
      const titleCall = o.requests.find((r) => r.internal === "title")!
      assert.strictEqual(titleCall.settings.modelName, "small")
      assert.deepStrictEqual(o.events.filter((e) => e.type === "token").map((e) => (e as { text?: string }).text), ["Here is a plan."])
      assert.deepStrictEqual(o.state.messages.map(M.text), ["Plan a trip to Lyon", "Here is a plan."])
    }).pipe(H.withStore))

  it.effect("a failing title model falls back to the local title", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "Plan a trip to Lyon",
        script: (request) => (request.internal === "title" ? undefined : "Here is a plan."),
        middlewares: () => [Title.layer(config({ model_name: "small" }))]
      })
      assert.strictEqual(o.state.title, "Plan a trip to Lyon")
    }).pipe(H.withStore))

  it.effect("disabled: no title", () =>
    Effect.gen(function*() {
      const o = yield* H.run({ script: ["ok"], middlewares: () => [Title.layer(config({ enabled: false }))] })
      assert.isNull(o.state.title)
    }).pipe(H.withStore))
})
