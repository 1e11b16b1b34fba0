/**
 * DeerFlow's `test_memory_upload_filtering.py`, its `_strip_upload_mentions_from_memory` cases not already pinned by
 * `Memory.test.ts` ("an update leaves no upload event in the summaries or the facts"): an upload told with words
 * between ("by uploading a test file titled ...") leaves the summary, the sentences around it stay; facts that are
 * no upload are kept; an empty memory is kept as it is. And its `filter_messages_for_memory` cases beyond that
 * test's: an upload-only turn in list content goes with its answer, a question sent with an upload is read without
 * the block and its path, a hidden reminder is left out while the answer after it stays, `hide_from_ui: false` is
 * read.
 */
import { assert, describe, it } from "@effect/vitest"
import * as MemoryDoc from "../../src/state/Memory.js"
import * as M from "../../src/state/Message.js"

const UPLOAD_BLOCK = "<uploaded_files>\nThe following files have been uploaded and are available for use:\n\n" +
  "- filename: secret.txt\n  path: /mnt/user-data/uploads/abc123/secret.txt\n  size: 42 bytes\n</uploaded_files>"

const withSummary = (summary: string, facts: MemoryDoc.Document["facts"] = []): MemoryDoc.Document => {
  const empty = MemoryDoc.empty()
  return { ...empty, user: { ...empty.user, topOfMind: { summary, updatedAt: "" } }, facts }
}

const fact = (id: string, content: string, category: string) => ({
  id,
  content,
  category,
  confidence: 0.9,
  createdAt: "",
  source: "t"
})

describe("test_memory_upload_filtering.py TestStripUploadMentionsFromMemory", () => {
  it("test_uploading_a_test_file_removed", () => {
    const summary = MemoryDoc.stripUploadMentions(withSummary(
      "User conducted a hands-on test by uploading a test file titled 'test_deerflow_memory_bug.txt'. " +
        "User is also learning Python."
    )).user.topOfMind.summary
    assert.notInclude(summary, "test_deerflow_memory_bug.txt")
    assert.notInclude(summary, "uploading a test file")
    assert.include(summary, "User is also learning Python.")
  })

  it("test_non_upload_facts_preserved / test_empty_memory_handled_gracefully", () => {
    const facts = [
      fact("a", "User graduated from Peking University", "context"),
      fact("b", "User prefers Python over JavaScript", "preference")
    ]
    assert.deepStrictEqual(MemoryDoc.stripUploadMentions(withSummary("", facts)).facts, facts)
    const empty = MemoryDoc.empty()
    assert.deepStrictEqual(MemoryDoc.stripUploadMentions(empty), empty)
  })
})

describe("test_memory_upload_filtering.py TestFilterMessagesForMemory", () => {
  it("test_multimodal_content_list_handled: an upload-only turn in list content goes, its answer too", () => {
    const turns = MemoryDoc.conversation([M.human([{ type: "text", text: UPLOAD_BLOCK }]), M.ai("Done.")])
    assert.deepStrictEqual(turns, [])
  })

  it("test_upload_with_real_question_preserves_question / test_file_path_not_in_filtered_content", () => {
    const turns = MemoryDoc.conversation([M.human(`${UPLOAD_BLOCK}\n\nSummarise the file please.`), M.ai("It says hello.")])
    assert.deepStrictEqual(turns, [
      { role: "user", text: "Summarise the file please." },
      { role: "assistant", text: "It says hello." }
    ])
  })

  it("test_hide_from_ui_human_message_is_excluded / test_hide_from_ui_false_is_preserved", () => {
    const reminder = M.human(
      "<system_reminder>\nYour todo list from earlier is no longer visible.\n</system_reminder>",
      { additional_kwargs: { hide_from_ui: true, name: "todo_reminder" } }
    )
    assert.deepStrictEqual(
      MemoryDoc.conversation([
        M.human("What is the capital of France?"),
        M.ai("The capital of France is Paris."),
        reminder,
        M.ai("Is there anything else I can help with?")
      ]),
      [
        { role: "user", text: "What is the capital of France?" },
        { role: "assistant", text: "The capital of France is Paris." },
        { role: "assistant", text: "Is there anything else I can help with?" }
      ]
    )
    const visible = M.human("Visible message", { additional_kwargs: { hide_from_ui: false } })
    assert.deepStrictEqual(MemoryDoc.conversation([visible, M.ai("Reply.")]), [
      { role: "user", text: "Visible message" },
      { role: "assistant", text: "Reply." }
    ])
  })
})
