import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { _iterSSEMessages } from "openai/core/streaming"
import { makeParser } from "../../src/layers/openai/SseEvents.js"
import { cutAt } from "../support/pieces.js"

// what the SDK's own reader makes of a body that arrives in these pieces
const sdkEvents = async (pieces: ReadonlyArray<string>) => {
  const encoder = new TextEncoder()
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece))
      controller.close()
    }
  })
  const out: Array<{ event: string | null; data: string }> = []
  for await (const sse of _iterSSEMessages(new Response(body), new AbortController())) {
    out.push({ event: sse.event, data: sse.data })
  }
  return out
}

const ours = (pieces: ReadonlyArray<string>) => {
  const parser = makeParser()
  return [...pieces.flatMap((piece) => parser.push(piece)), ...parser.end()]
}

const line = FastCheck.oneof(
  FastCheck.constantFrom("", "data: {\"a\":1}", "data:x", "data:  two spaces", "event: error", "event:thread.x", ": ping"),
  FastCheck.constantFrom("id: 7", "retry: 10", "data", "event", "data: [DONE]", "data: é ü 漢"),
  FastCheck.string({ maxLength: 12 }).map((s) => s.replace(/[\r\n]/g, ""))
)
const body = FastCheck.tuple(
  FastCheck.array(FastCheck.tuple(line, FastCheck.constantFrom("\n", "\r\n", "\r")), { maxLength: 14 }),
  FastCheck.array(FastCheck.nat(200), { maxLength: 6 })
).map(([lines, cuts]) => cutAt(lines.map(([l, end]) => l + end).join(""), cuts))

describe("the server-sent events of a streamed completion", () => {
  it("are read as the openai SDK reads them, however the body is cut into pieces", async () => {
    await FastCheck.assert(
      FastCheck.asyncProperty(body, async (pieces) => {
        assert.deepStrictEqual(ours(pieces), await sdkEvents(pieces))
      }),
      { numRuns: 1000 }
    )
  })
})
