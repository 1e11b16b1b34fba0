/**
 * DeerFlow's test_utils_messages, the `restore_original_human_message` cases: the run journal keeps (and the run's
 * messages show) a question as the user wrote it, not as a middleware framed it for the model
 * (`RunJournal.original`). The copies DeerFlow makes so that editing the restored message cannot touch the model's
 * are Python aliasing: Antler's messages are immutable values, written out as JSON.
 * The `message_to_text` / `message_content_to_text` cases (9) read content shapes Antler's boundary never lets in
 * (bare strings, nested `content`, numbers, a `.text` attribute): not ported.
 */
import { assert, describe, it } from "@effect/vitest"
import * as RunJournal from "../../../src/programs/gateway/RunJournal.js"
import * as M from "../../../src/state/Message.js"

describe("test_utils_messages: restore_original_human_message", () => {
  it("test_restore_original_human_message_restores_string_without_mutating_model_copy", () => {
    const framed = "--- BEGIN USER INPUT ---\nhello\n--- END USER INPUT ---"
    const wrapped = M.human(framed, {
      id: "human-1",
      name: "request",
      additional_kwargs: { original_user_content: "hello", hide_from_ui: false },
      response_metadata: { source: "gateway" }
    })
    const restored = RunJournal.original(wrapped)
    assert.notStrictEqual(restored, wrapped)
    assert.deepStrictEqual(restored, {
      type: "human",
      id: "human-1",
      name: "request",
      content: "hello",
      additional_kwargs: { hide_from_ui: false },
      response_metadata: { source: "gateway" }
    })
    assert.strictEqual(wrapped.content, framed)
    assert.strictEqual(wrapped.additional_kwargs?.original_user_content, "hello")
  })

  it("test_restore_original_human_message_preserves_mixed_non_text_blocks_in_order", () => {
    const image = { type: "image_url", image_url: { url: "data:image/png;base64,abc" } } as const
    const file = { type: "file", file_id: "file-1" } as const
    const wrapped = M.human([
      image,
      { type: "text", text: "--- BEGIN USER INPUT ---\ncompare\n--- END USER INPUT ---" },
      file
    ], { additional_kwargs: { original_user_content: "compare", metadata: { source: "user" } } })
    const restored = RunJournal.original(wrapped)
    assert.deepStrictEqual(restored.content, [image, { type: "text", text: "compare" }, file])
    assert.deepStrictEqual(restored.additional_kwargs, { metadata: { source: "user" } })
    assert.isTrue(M.text(wrapped).startsWith("--- BEGIN USER INPUT ---"))
  })

  it("test_restore_original_human_message_without_original_metadata_is_unchanged", () => {
    const message = M.human("already UI-facing", { additional_kwargs: { source: "user" } })
    assert.strictEqual(RunJournal.original(message), message)
  })
})
