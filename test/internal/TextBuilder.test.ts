/**
 * A text built in pieces (a streamed answer, its reasoning, a tool call's arguments) reads as the pieces joined,
 * however many there are (past the batches it joins them in) and whenever it is read.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import * as TextBuilder from "../../src/internal/TextBuilder.js"

// pieces as a stream gives them (mostly short, some empty, some long, any characters), and where the text is read
const pieces = FC.array(
  FC.tuple(FC.oneof(FC.string({ maxLength: 6 }), FC.fullUnicodeString({ maxLength: 40 })), FC.boolean()),
  { maxLength: 400 }
)

describe("TextBuilder", () => {
  it.prop("reads as the pieces joined, at any point, however often it is read", [pieces], ([all]) => {
    const text = TextBuilder.make()
    let expected = ""
    for (const [piece, read] of all) {
      text.append(piece)
      expected += piece
      assert.strictEqual(text.length(), expected.length)
      if (read) assert.strictEqual(text.text(), expected)
    }
    assert.strictEqual(text.text(), expected)
    assert.strictEqual(text.text(), expected)
  })
})
