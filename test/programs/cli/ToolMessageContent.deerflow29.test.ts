/**
 * DeerFlow's test_serialize_message_content: a tool result whose content is a list of blocks reaches the reader
 * as its text, never as a Python repr. DeerFlow's embedded client (`DeerFlowClient._serialize_message`) is not
 * built; the reader of a saved thread in Antler is `antler threads show` (`Render.message`), so the cases run there.
 * A content of bare string chunks or a number cannot be stored (a message's content is a string or typed blocks,
 * decoded at the boundary): `test_string_chunks_are_joined_without_newlines`, `test_mixed_string_chunks_and_blocks`,
 * `test_plain_string_in_list`, `test_unknown_content_type_falls_back` and `test_fallback_non_iterable` do not apply.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Render from "../../../src/programs/cli/Render.js"
import type { Content } from "../../../src/state/Message.js"
import * as M from "../../../src/state/Message.js"

const shown = (content: Content) => {
  const lines = Render.message(M.tool(content, "tc1", { name: "search" }), Render.style(false)).split("\n")
  assert.strictEqual(lines[0], "[tool search]")
  return lines.slice(1).map((line) => line.replace(/^ {2}/, "")).join("\n")
}

describe("test_serialize_message_content: TestSerializeToolMessageContent", () => {
  it("test_string_content", () => {
    assert.strictEqual(shown("ok"), "ok")
  })

  it("test_list_of_blocks_content", () => {
    const text = shown([{ type: "text", text: "hello world" }])
    assert.strictEqual(text, "hello world")
    assert.notInclude(text, "[")
    assert.notInclude(text, "{")
  })

  it("test_multiple_text_blocks", () => {
    assert.strictEqual(shown([{ type: "text", text: "line 1" }, { type: "text", text: "line 2" }]), "line 1\nline 2")
  })

  // Antler adds a line counting the images (DeerFlow's client drops them silently); their data never shows
  it("test_mixed_blocks_with_non_text", () => {
    const text = shown([
      { type: "text", text: "found results" },
      { type: "image_url", image_url: { url: "http://img.png" } }
    ])
    assert.strictEqual(text, "found results\n(1 image)")
  })

  it("test_empty_list_content", () => {
    assert.strictEqual(shown([]), "")
  })
})

describe("test_serialize_message_content: TestExtractText", () => {
  it("test_string_passthrough", () => {
    assert.strictEqual(M.contentText("hello"), "hello")
  })

  it("test_list_text_blocks", () => {
    assert.strictEqual(M.contentText([{ type: "text", text: "hi" }]), "hi")
  })

  it("test_empty_list", () => {
    assert.strictEqual(M.contentText([]), "")
  })
})
