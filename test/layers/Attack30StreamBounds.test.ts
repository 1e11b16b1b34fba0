/**
 * Attack round 30 on the model adapter's bound of a streamed answer (`MAX_ANSWER_CHARS`, `AnswerSize.attack`): it
 * counted the answer's text, reasoning and tool-call arguments only. A hostile model server streaming new tool calls
 * with empty arguments (hundreds of thousands in 40 MB), or a Gemini `thought_signature` of 64 KiB on each, had every
 * one kept in the message (and each call run); one that never ended a line had the whole body held and scanned again
 * with every read (40 MB a line, on the gateway's one thread). Now a call, its name, id and signature count toward the
 * bound, an answer holds at most `MAX_TOOL_CALLS` calls (past them it is cut with finish reason `length`), and an
 * event longer than `SseEvents.MAX_EVENT_CHARS` fails the call, the rest of the body not read.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { MAX_ANSWER_CHARS, MAX_TOOL_CALLS } from "../../src/layers/openai/ChunkAccumulator.js"
import { MAX_EVENT_CHARS } from "../../src/layers/openai/SseEvents.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"
import { chunk, endless, STREAM_BYTES } from "../support/endlessModel.js"
import { inRun } from "../support/fixtures.js"
import { until } from "../support/poll.js"

const call = (url: string) =>
  Effect.gen(function*() {
    const model = yield* OpenAiModel.make({ baseURL: url, apiKey: "test-key", model: "m" })
    const sink = { emit: () => Effect.void }
    const request = { systemPrompt: undefined, messages: [M.human("go on")], tools: [], settings: {} }
    return yield* model.generate(request).pipe(
      Effect.provide(Context.add(inRun().context, RunEvents, sink)),
      Effect.either
    )
  })

/** What the answer keeps of its calls: how many, and the characters of their names, ids, arguments and signatures. */
const callsKept = (message: M.AIMessage) => {
  const calls = [...(message.tool_calls ?? []), ...(message.invalid_tool_calls ?? [])]
  const signatures = Object.values((message.additional_kwargs?.thought_signatures ?? {}) as Record<string, string>)
  const chars = calls.reduce(
    (n, c) => n + (c.name ?? "").length + (c.id ?? "").length + JSON.stringify(c.args ?? "").length,
    signatures.reduce((n, s) => n + s.length, 0)
  )
  return { count: calls.length, chars }
}

describe("a model server's stream past the answer's bound", () => {
  it.scopedLive("of ever new tool calls is cut at MAX_TOOL_CALLS with finish reason length; the rest is not read", () =>
    Effect.gen(function*() {
      const server = yield* endless((i) =>
        chunk({ tool_calls: [{ index: i, id: `call_${i}`, function: { name: "echo", arguments: "{}" } }] })
      )
      const answer = yield* call(server.url)
      assert.isTrue(answer._tag === "Right", String(answer._tag === "Left" && answer.left.message))
      if (answer._tag !== "Right") return
      const { message } = answer.right
      assert.strictEqual(callsKept(message).count, MAX_TOOL_CALLS)
      assert.strictEqual(message.response_metadata?.finish_reason, "length")
      yield* Effect.promise(() => until(server.closed, "the model server's connection closed"))
      assert.isBelow(server.sent(), STREAM_BYTES / 2)
    }))

  it.scopedLive("of tool calls with large thought signatures keeps at most MAX_ANSWER_CHARS of them", () =>
    Effect.gen(function*() {
      const server = yield* endless((i) =>
        chunk({
          tool_calls: [{
            index: i,
            id: `call_${i}`,
            thought_signature: "s".repeat(65_000),
            function: { name: "echo", arguments: "{}" }
          }]
        })
      )
      const answer = yield* call(server.url)
      assert.isTrue(answer._tag === "Right", String(answer._tag === "Left" && answer.left.message))
      if (answer._tag !== "Right") return
      const { message } = answer.right
      assert.isAtMost(callsKept(message).chars, MAX_ANSWER_CHARS)
      assert.strictEqual(message.response_metadata?.finish_reason, "length")
      yield* Effect.promise(() => until(server.closed, "the model server's connection closed"))
      assert.isBelow(server.sent(), STREAM_BYTES / 2)
    }))

  it.scopedLive("in a line that never ends fails the call past MAX_EVENT_CHARS; the rest is not read", () =>
    Effect.gen(function*() {
      const server = yield* endless((i) =>
        i === 0 ? "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" : "x".repeat(64 * 1024)
      )
      const answer = yield* call(server.url)
      assert.strictEqual(answer._tag, "Left")
      if (answer._tag !== "Left") return
      assert.strictEqual(answer.left.reason, "invalid_response")
      assert.include(answer.left.message, `longer than ${MAX_EVENT_CHARS} characters`)
      yield* Effect.promise(() => until(server.closed, "the model server's connection closed"))
      assert.isBelow(server.sent(), STREAM_BYTES / 2)
    }))
})
