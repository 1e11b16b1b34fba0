/**
 * DeerFlow's test_uploads_middleware_core_logic.py, where the model reads the words: the `<current_uploads>`
 * block's guidance (`_create_files_message`) is DeerFlow's, line for line; a file without an outline gets its
 * grep hint, files over the cap their glob and grep lines, and a block with no file says `(empty)`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Uploads from "../../src/middleware/Uploads.js"
import type { UploadedFile } from "../../src/state/ThreadState.js"

const file = (filename: string, size = 2048): UploadedFile => ({
  filename,
  size,
  path: `/mnt/user-data/uploads/${filename}`,
  extension: filename.includes(".") ? filename.slice(filename.lastIndexOf(".")) : ""
})

const GUIDANCE = [
  "To work with these files:",
  "- Read from the file first — use the outline line numbers and `read_file` to locate relevant sections.",
  "- Use `grep` to search for keywords when you are not sure which section to look at",
  "  (e.g. `grep(pattern='revenue', path='/mnt/user-data/uploads/')`).",
  "- Use `glob` to find files by name pattern",
  "  (e.g. `glob(pattern='**/*.md', path='/mnt/user-data/uploads/')`).",
  "- Only fall back to web search if the file content is clearly insufficient to answer the question.",
  "</current_uploads>"
].join("\n")

describe("the uploads block, in DeerFlow's words", () => {
  it("ends with DeerFlow's guidance; a file without an outline gets DeerFlow's grep hint", () => {
    const block = Uploads.renderUploadsBlock([{ file: file("notes.txt") }], [])
    assert.isTrue(block.endsWith(GUIDANCE), block)
    assert.include(
      block,
      "- notes.txt (2.0 KB)\n  Path: /mnt/user-data/uploads/notes.txt\n" +
        "  Use `grep` to search for keywords (e.g. `grep(pattern='keyword', path='/mnt/user-data/uploads/')`).\n"
    )
  })

  it("files over the cap: DeerFlow's glob and grep lines", () => {
    const block = Uploads.renderUploadsBlock([{ file: file("a.txt") }], [file("b.txt"), file("c.txt")])
    assert.include(
      block,
      "... (2 more file(s) from this message omitted from this context.)\n" +
        "  Omitted file types: 2 .txt\n" +
        "  Use `glob(pattern='**/*', path='/mnt/user-data/uploads/')` to list all uploads.\n" +
        "  Use `grep(pattern='keyword', path='/mnt/user-data/uploads/')` to search across uploads.\n"
    )
  })

  it("no file: (empty) (test_empty_files_produces_empty_marker)", () => {
    const block = Uploads.renderUploadsBlock([], [])
    const head = "<current_uploads>\nThe following files were uploaded in this message:\n\n(empty)\n\n"
    assert.isTrue(block.startsWith(head), block)
    assert.isTrue(block.endsWith(GUIDANCE))
  })
})
