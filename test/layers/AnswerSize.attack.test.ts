/**
 * A model server that streams without end: an answer is read up to `MAX_ANSWER_CHARS` (text, reasoning and tool
 * arguments together), as a whole answer's body is read up to 4 MiB; past it the answer is cut with finish reason
 * `length` and the rest of the stream is not read. Found by the attack round: a 40 MB stream became a 40 MB message.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { MAX_ANSWER_CHARS } from "../../src/layers/openai/ChunkAccumulator.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"
import { chunk, endless, STREAM_BYTES } from "../support/endlessModel.js"
import { inRun } from "../support/fixtures.js"
import { until } from "../support/poll.js"

const PIECE = 64 * 1024

const call = (url: string) =>
  Effect.gen(function*() {
    const model = yield* OpenAiModel.make({ baseURL: url, apiKey: "test-key", model: "m" })
    const events: Array<RunEvent> = []
    const sink = { emit: (event: RunEvent) => Effect.sync(() => void events.push(event)) }
    const request = { systemPrompt: undefined, messages: [M.human("go on")], tools: [], settings: {} }
    const response = yield* model.generate(request).pipe(Effect.provide(Context.add(inRun().context, RunEvents, sink)))
    return { message: response.message, events }
  })

describe("an endless stream", () => {
  it.scopedLive("is cut at MAX_ANSWER_CHARS with finish reason length; the rest is not read", () =>
    Effect.gen(function*() {
      const server = yield* endless(() => chunk({ content: "x".repeat(PIECE) }))
      const { message, events } = yield* call(server.url)
      const text = typeof message.content === "string" ? message.content : ""
      assert.strictEqual(text.length, MAX_ANSWER_CHARS)
      assert.strictEqual(message.response_metadata?.finish_reason, "length")
      // what was streamed to the user is what was kept
      const streamed = events.reduce((n, e) => n + (e.type === "token" ? (e.text ?? "").length : 0), 0)
      assert.strictEqual(streamed, MAX_ANSWER_CHARS)
      // the connection was closed long before the server's 40 MB
      yield* Effect.promise(() => until(server.closed, "the model server's connection closed"))
      assert.isBelow(server.sent(), STREAM_BYTES / 2)
    }))

  it.scopedLive("reasoning and tool-call arguments count toward the same bound", () =>
    Effect.gen(function*() {
      const server = yield* endless((i) =>
        chunk(
          i % 2 === 0
            ? { reasoning_content: "r".repeat(PIECE) }
            : { tool_calls: [{ index: 0, id: "call_1", function: { name: "echo", arguments: "a".repeat(PIECE) } }] }
        )
      )
      const { message } = yield* call(server.url)
      const reasoning = String(message.additional_kwargs?.reasoning_content ?? "")
      const args = [...(message.tool_calls ?? []), ...(message.invalid_tool_calls ?? [])]
        .reduce((n, c) => n + (typeof c.args === "string" ? c.args.length : JSON.stringify(c.args).length), 0)
      assert.isAtMost(reasoning.length + args, MAX_ANSWER_CHARS)
      assert.isAbove(reasoning.length, MAX_ANSWER_CHARS / 4)
      assert.strictEqual(message.response_metadata?.finish_reason, "length")
      yield* Effect.promise(() => until(server.closed, "the model server's connection closed"))
    }))
})
