/**
 * A model server that streams without end: an answer is read up to `MAX_ANSWER_CHARS` (text, reasoning and tool
 * arguments together), as a whole answer's body is read up to 4 MiB; past it the answer is cut with finish reason
 * `length` and the rest of the stream is not read. Found by the attack round: a 40 MB stream became a 40 MB message.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Http from "node:http"
import type * as Net from "node:net"
import { MAX_ANSWER_CHARS } from "../../src/layers/openai/ChunkAccumulator.js"
import * as OpenAiModel from "../../src/layers/OpenAiModel.js"
import type { RunEvent } from "../../src/services/RunEvents.js"
import { RunEvents } from "../../src/services/RunEvents.js"
import * as M from "../../src/state/Message.js"
import { inRun } from "../support/fixtures.js"
import { until } from "../support/poll.js"

const STREAM_BYTES = 40 * 1024 * 1024
const PIECE = 64 * 1024

/** A Chat Completions server streaming `delta(i)` pieces until it has sent 40 MB or the client goes away. */
const endless = (delta: (i: number) => unknown) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly sent: () => number; readonly closed: () => boolean }>((resume) => {
      let sent = 0
      let closed = false
      const server = Http.createServer((req, res) => {
        req.resume()
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.on("close", () => void (closed = true))
        let i = 0
        const write = () => {
          while (sent < STREAM_BYTES && !res.destroyed) {
            const frame = `data: ${JSON.stringify({ id: "c", model: "m", choices: [{ index: 0, delta: delta(i++) }] })}\n\n`
            sent += frame.length
            if (!res.write(frame)) return void res.once("drain", write)
          }
          if (!res.destroyed) res.end("data: [DONE]\n\n")
        }
        write()
      })
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as Net.AddressInfo).port
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}/v1`, sent: () => sent, closed: () => closed, server }))
      })
    }),
    (started) => Effect.promise(() => new Promise<void>((done) => (started as any).server.close(() => done())))
  )

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
      const server = yield* endless(() => ({ content: "x".repeat(PIECE) }))
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
        i % 2 === 0
          ? { reasoning_content: "r".repeat(PIECE) }
          : { tool_calls: [{ index: 0, id: "call_1", function: { name: "echo", arguments: "a".repeat(PIECE) } }] }
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
