/**
 * DeerFlow's test_summarization_middleware.py, where Antler differed in what an operator reads: a failing
 * before-summarisation hook is logged in DeerFlow's words, naming the hook, and the compaction goes on.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import * as DurableContext from "../../src/middleware/DurableContext.js"
import * as Summarization from "../../src/middleware/Summarization.js"
import type { ContextSize, ModelConfig } from "../../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as Harness from "../support/harness.js"

const flags = { supports_vision: false, supports_thinking: false, supports_reasoning_effort: false }
const models: ReadonlyArray<ModelConfig> = [{ name: "main", model: "gpt-test", ...flags }]
const messages = (value: number): ContextSize => ({ type: "messages", value })

const appConfig = Layer.succeed(AppConfigService, {
  config: { ...defaults(), models },
  source: undefined,
  home: "/tmp",
  ignored: []
})

const echo = Tool.make({
  name: "echo",
  description: "Echo",
  parameters: Schema.Struct({ text: Schema.String }),
  handler: ({ text }) => Effect.succeed(`echo: ${text}`)
})

describe("Summarization, as DeerFlow's test_summarization_middleware", () => {
  // DeerFlow's test_before_summarization_hook_exception_does_not_block_compression
  it.effect("a failing hook is logged as DeerFlow logs it, by name, and the compaction goes on", () =>
    Effect.gen(function*() {
      const store = yield* ThreadStore
      yield* store.ensure("h")
      yield* store.append("h", "seed", [{
        messages: [
          M.human("user-1", { id: "u1" }),
          M.ai("assistant-1", { id: "a1" }),
          M.human("user-2", { id: "u2" }),
          M.ai("assistant-2", { id: "a2" })
        ]
      }])
      const logged: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => {
          const text = (Array.isArray(message) ? message : [message]).join(" ")
          if (text.startsWith("before_summarization hook")) logged.push(`${logLevel.label} ${text}`)
        })
      )
      const later: Array<string> = []
      const brokenHook = (_: Summarization.SummarizationEvent) => Effect.fail(new Error("hook failure"))
      const hooks: ReadonlyArray<Summarization.Hook> = [
        brokenHook,
        (_) => Effect.die(new Error("anonymous failure")),
        (_) => Effect.sync(() => void later.push("ran"))
      ]
      const script = (request: ModelRequest) => request.internal === "summarization" ? "compressed summary" : "done"
      const middlewares = () => [
        DurableContext.layer(),
        Summarization.layer({ config: { enabled: true, trigger: [messages(4)], keep: messages(2) }, hooks })
      ]
      const out = yield* Harness.run({ threadId: "h", script, tools: [echo], middlewares, input: "user-3" }).pipe(
        Effect.provide(capture)
      )
      assert.deepStrictEqual(logged, [
        "ERROR before_summarization hook brokenHook failed",
        "ERROR before_summarization hook #2 failed"
      ])
      assert.deepStrictEqual(later, ["ran"])
      assert.strictEqual(out.end.status, "success")
      assert.strictEqual(out.state.summary_text, "compressed summary")
      assert.notInclude(out.state.messages.map((m) => m.id), "a1")
    }).pipe(Effect.provide(appConfig), Harness.withStore))
})
