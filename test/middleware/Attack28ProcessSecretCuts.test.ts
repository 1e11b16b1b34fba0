/**
 * Attack round 28 on the cuts of a text that holds one of the process's own secrets (a model's or a tool's key, an MCP
 * server's env value: `ProcessSecrets`), where only a run's request secrets were masked before the cut and the masks
 * after it (the stream's, the store's) find whole values only:
 * - ToolErrorHandling cuts a tool failure's detail at 500 characters for the result the model reads: a tool (an app's
 *   own, a library's HTTP tool quoting its request) failing with the key where the cut fell had its beginning read by
 *   the model and kept;
 * - LLMErrorHandling cuts a library model's error at 2,000 characters for the run's error: a model failing with the
 *   key where the cut fell had its beginning in the run's end (streamed, recorded).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as LLMErrorHandling from "../../src/middleware/LLMErrorHandling.js"
import * as MW from "../../src/middleware/Middleware.js"
import * as ToolErrorHandling from "../../src/middleware/ToolErrorHandling.js"
import { ModelError } from "../../src/services/ModelService.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"

const KEY = "sk-proc-a28-0123456789abcdefghij"
const START = KEY.slice(0, 8)
/** The process's secrets, as the factory provides them to the agents it builds. */
const processSecrets = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, ProcessSecrets, Redact.make([KEY]))

// (fails quoting its request: the key where the detail's cut at 500 falls, 487 characters in)
const failing = Tool.make({
  name: "fetcher",
  description: "The fetcher tool.",
  parameters: Schema.Struct({}),
  handler: (_, call) =>
    Effect.fail(Tool.failure(call, new Error(`refused: ${"x".repeat(478)}${KEY} is not accepted here`)))
})

describe("Attack28: a cut of a text holding one of the process's own secrets", () => {
  it.effect("a tool failure's detail: the model reads the error, none of the key", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "pull the report",
        tools: [failing],
        script: [{ toolCalls: [{ name: "fetcher", args: {} }] }, "Done."],
        middlewares: () => [ToolErrorHandling.layer()]
      })
      const [result] = o.state.messages.filter((m) => m.type === "tool").map(M.text)
      assert.include(result, "Error: Tool 'fetcher' failed with Error: refused: xxx")
      assert.include(result, "x[redacted]", "masked, then cut")
      assert.notInclude(JSON.stringify(o.requests), START, "what the model read")
      assert.notInclude(JSON.stringify([o.events, o.state]), START, "what is streamed and kept")
    }).pipe(processSecrets, H.withStore))

  it.effect("a library model's error: the run's error and the thread say it, none of the key", () =>
    Effect.gen(function*() {
      // (a model of a library, failing with the key 1,990 characters into its message: the run's error is cut at 2,000)
      const library = MW.make({
        model: () =>
          Effect.fail(
            new ModelError({
              reason: "other",
              errorType: "LibraryError",
              message: `request refused: ${"x".repeat(1973)}${KEY} is not accepted here`
            })
          )
      })
      const o = yield* H.run({
        input: "hello",
        script: ["never called"],
        middlewares: () => [LLMErrorHandling.layer({ llmCall: { retry_max_attempts: 1 } }), library]
      })
      assert.strictEqual(o.end.status, "error")
      assert.include(o.end.error?.message ?? "", "request refused: xxx", "the run's error")
      assert.include(o.end.error?.message ?? "", "x[redacted]", "masked, then cut")
      assert.notInclude(JSON.stringify([o.events, o.state]), START, "what is streamed and kept")
    }).pipe(processSecrets, H.withStore))
})
