/**
 * Attack round 29b on the run loop's own cuts and one of the process's own secrets (a configured model's or tool's key,
 * an MCP server's env value: `ProcessSecrets`), masked after them only as whole values (the stream's and the store's
 * masks): a tool failure's detail cut at 500 characters where no ToolErrorHandling is in the chain, an invalid call's
 * parser error cut at 500 over a model other than the OpenAI adapter, and a stopped answer kept to its first 200,000
 * characters. A key where the cut fell had its beginning read by the model and kept in the thread.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Toolkit from "../../src/layers/Toolkit.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as PartialAnswer from "../../src/programs/PartialAnswer.js"
import * as Run from "../../src/programs/Run.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"

const KEY = "VAULTKEY-a29b-run-0123456789abcdefghijklmnop"
const START = KEY.slice(0, 8)

const withKey = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, ProcessSecrets, Redact.make([KEY]))

const leaking = Tool.make({
  name: "leaking",
  description: "Fails saying the key where the cut falls.",
  parameters: Schema.Struct({}),
  handler: (_, call) => Effect.fail(Tool.failure(call, new Error(`${"x".repeat(480)}${KEY} was refused`)))
})

const toolTexts = (messages: ReadonlyArray<M.Message>) => messages.filter((m) => m.type === "tool").map(M.text)

describe("Attack29b: the run loop's cuts inside one of the process's own secrets", () => {
  it.effect("a tool failure cut at 500 without ToolErrorHandling: the model reads none of the key", () =>
    Effect.gen(function*() {
      const o = yield* H.run({ script: [{ toolCalls: [{ name: "leaking", args: {} }] }, "ok"], tools: [leaking] })
      const [read] = toolTexts(o.requests[1]!.messages)
      assert.include(read, "failed with Error: xxx", "the model read the failure")
      assert.include(read, "x[redacted]", "masked, then cut")
      assert.notInclude(read, START, "the model's request")
      assert.notInclude(JSON.stringify(o.state), START, "the thread")
    }).pipe(withKey, H.withStore))

  it.effect("an invalid call's error cut at 500: the model reads none of the key", () =>
    Effect.gen(function*() {
      const broken = M.ai("", {
        id: "ai-broken",
        invalid_tool_calls: [{ id: "call-1", name: "leaking", args: "{", error: `${"x".repeat(480)}${KEY} at 3` }]
      })
      const o = yield* H.run({ script: [() => broken, "recovered"], tools: [leaking] })
      const [read] = toolTexts(o.requests[1]!.messages)
      assert.include(read, "not valid JSON (xxx", "the model read the error")
      assert.include(read, "x[redacted]", "masked, then cut")
      assert.notInclude(read, START, "the model's request")
      // (the model's own message keeps its error whole: a store that masks finds it; the result is the loop's cut)
      assert.notInclude(toolTexts(o.state.messages).join("\n"), START, "the thread's result")
    }).pipe(withKey, H.withStore))

  it.live("a stopped answer kept to 200,000 characters: the thread keeps none of the key", () =>
    Effect.gen(function*() {
      const streamed = yield* Deferred.make<void>()
      const said = `${"a".repeat(PartialAnswer.MAX_PARTIAL_CHARS - 10)}${KEY} and more`
      const model = {
        generate: () =>
          Effect.gen(function*() {
            const events = yield* RunEvents
            yield* events.emit({ type: "token", message_id: "answer-1", text: said })
            yield* Deferred.succeed(streamed, undefined)
            return yield* Effect.never
          })
      }
      const fiber = yield* Run.execute(
        { threadId: "stopped", input: [M.human("go")] },
        MW.base(model, Toolkit.make([]))
      ).pipe(Effect.fork)
      yield* Deferred.await(streamed)
      yield* Fiber.interrupt(fiber)
      const saved = Option.getOrThrow(yield* (yield* ThreadStore).load("stopped")).state.messages
      const kept = saved.find((m) => m.id === "answer-1")
      assert.isDefined(kept, "the stopped answer is kept")
      assert.isTrue(M.text(kept!).startsWith("aaaa"), "what was streamed")
      assert.notInclude(M.text(kept!), START, "the thread")
    }).pipe(withKey, H.withStore))
})
