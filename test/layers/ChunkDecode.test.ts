import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import { accumulator, Chunk, decodeChunk } from "../../src/layers/openai/ChunkAccumulator.js"

// what the adapter makes of a chunk: the answer assembled from it, or the decoding's refusal
const outcome = (decode: (u: unknown) => Either.Either<Chunk, unknown>, chunks: ReadonlyArray<unknown>) => {
  const acc = accumulator("m1", "model")
  const deltas: Array<unknown> = []
  for (const chunk of chunks) {
    const decoded = decode(chunk)
    if (Either.isLeft(decoded)) return { refused: String(decoded.left) }
    deltas.push(acc.add(decoded.right))
  }
  const finished = acc.finish()
  if (Either.isLeft(finished)) return { deltas, message: String(finished.left) }
  // (a call that came without an id is given a fresh one)
  const calls = (list: ReadonlyArray<{ readonly id?: string | null | undefined }> | undefined) =>
    list?.map((call) => ({ ...call, id: "" }))
  const message = finished.right
  return {
    deltas,
    message: {
      ...message,
      id: "",
      tool_calls: calls(message.tool_calls),
      invalid_tool_calls: calls(message.invalid_tool_calls)
    }
  }
}

const stringish = FastCheck.oneof(FastCheck.string(), FastCheck.constant(null), FastCheck.constant(undefined), FastCheck.integer())
const delta = FastCheck.oneof(
  FastCheck.constant(null),
  FastCheck.record(
    { content: stringish, reasoning_content: stringish, reasoning: stringish, role: FastCheck.string() },
    { requiredKeys: [] }
  ),
  FastCheck.record({
    tool_calls: FastCheck.array(FastCheck.record({
      index: FastCheck.nat(2),
      id: stringish,
      function: FastCheck.record({ name: stringish, arguments: stringish }, { requiredKeys: [] })
    }, { requiredKeys: [] }), { maxLength: 2 })
  }),
  FastCheck.string()
)
const chunk = FastCheck.oneof(
  FastCheck.record({
    id: FastCheck.oneof(FastCheck.string(), FastCheck.integer()),
    model: FastCheck.string(),
    choices: FastCheck.oneof(
      FastCheck.constant(null),
      FastCheck.array(
        FastCheck.oneof(
          FastCheck.record({ index: FastCheck.nat(1), delta, finish_reason: stringish }, { requiredKeys: [] }),
          FastCheck.constant(7)
        ),
        { maxLength: 2 }
      )
    ),
    usage: FastCheck.constant({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 })
  }, { requiredKeys: [] }),
  FastCheck.constant(null),
  FastCheck.string(),
  FastCheck.constant([])
)

describe("stream chunk decoding", () => {
  it("reads every chunk as the Schema does: the same answer, the same deltas, the same refusals", () => {
    const schema = Schema.decodeUnknownEither(Chunk)
    FastCheck.assert(
      FastCheck.property(FastCheck.array(chunk, { maxLength: 6 }), (chunks) => {
        const fast = outcome(decodeChunk, chunks)
        const slow = outcome(schema, chunks)
        assert.deepStrictEqual("refused" in fast, "refused" in slow)
        if (!("refused" in fast)) assert.deepStrictEqual(fast, slow)
      }),
      { numRuns: 2000 }
    )
  })
})
