/**
 * Attack round 29 on the model adapter's error cut (2,000 characters) and one of the process's own secrets (another
 * configured model's key, a tool's: `ProcessSecrets`): the adapter hid only its own key and the run's request secrets
 * in what a failing server said, before and at the cut. A server (a proxy quoting what it was sent or configured
 * with) saying another key where the cut fell had the key's beginning in the run's error, streamed and kept. So
 * were a tool call's invalid arguments: `JSON.parse`'s error quotes a few characters where it stopped (a key's first
 * ten), and arguments refused as too long were kept cut at 2,000, in the message the model reads back and the thread.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import type { ModelService } from "../../src/services/ModelService.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import { inRun } from "../support/fixtures.js"

const KEY = "sk-other-a29-model-0123456789abcd"
const START = KEY.slice(0, 8)

/** What a call answers, in a run of a process holding `KEY`. */
const call = (model: ModelService["Type"]) =>
  Effect.either(
    model.generate({ systemPrompt: undefined, messages: [M.human("hi")], tools: [], settings: {} }).pipe(
      Effect.provide(Context.add(inRun().context, RunEvents, { emit: () => Effect.void })),
      Effect.provideService(ProcessSecrets, Redact.make([KEY]))
    )
  )

/** The error message of a call the server refuses. */
const refusal = (model: ModelService["Type"]) =>
  Effect.gen(function*() {
    const answer = yield* call(model)
    if (Either.isRight(answer)) return assert.fail("expected a ModelError")
    return answer.left.message
  })

describe("Attack29: the model adapter's error cut inside one of the process's own secrets", () => {
  it.scopedLive("the error says what the server said, none of another configured key", () =>
    Effect.gen(function*() {
      let said = "PROBE"
      const server = yield* ScriptedChatServer.start(() => ({
        status: 400,
        body: ScriptedChatServer.errorBody(said, "invalid_request_error")
      }))
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "sk-own-key-000000000", model: "m" })
      // (where the server's words start in the error: the key is put 1,990 characters into it, where it is cut)
      const at = (yield* refusal(model)).indexOf("PROBE")
      assert.isAtLeast(at, 0)
      said = `${"x".repeat(1990 - at)}${KEY} is not accepted here`
      const message = yield* refusal(model)
      assert.include(message, "xxxx", "the server's words")
      assert.notInclude(message, START, "the run's error")
    }))

  it.scopedLive("a whole key the server says back is hidden too", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(() => ({
        status: 400,
        body: ScriptedChatServer.errorBody(`the key ${KEY} is not valid for this model`, "invalid_request_error")
      }))
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "sk-own-key-000000000", model: "m" })
      const message = yield* refusal(model)
      assert.include(message, "the key [redacted] is not valid")
    }))

  it.scopedLive("a tool call's invalid arguments: the parser's error and a refused call's kept arguments", () =>
    Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start([{
        toolCalls: [
          // (JSON.parse stops at the key and quotes its first characters)
          { name: "lookup", arguments: `{"token": ${KEY}}` },
          // (over the bound: its first 2,000 characters are kept, the key 1,990 in)
          { name: "dump", arguments: `{"a": "${"x".repeat(1983)}${KEY}${"y".repeat(1_000_000)}"}` }
        ]
      }], { chunkSize: 100_000 })
      const model = yield* OpenAiModel.make({ baseURL: server.url, apiKey: "sk-own-key-000000000", model: "m" })
      const answer = yield* call(model)
      if (Either.isLeft(answer)) return assert.fail(answer.left.message)
      const [parsed, refused] = answer.right.message.invalid_tool_calls ?? []
      assert.include(parsed?.error, "not valid JSON", "the parser's error")
      assert.notInclude(parsed?.error, START, "the parser's error")
      assert.include(refused?.error, "longer than", "refused as too long")
      assert.include(refused?.args, "x[redacted]", "masked, then cut")
      assert.notInclude(refused?.args, START, "the kept arguments")
    }))
})
