/**
 * Attack round 30 on the uploads' bounds through the Markdown a document is converted to
 * (`uploads.auto_convert_documents`): an upload is held to `uploads.max_total_size` and admitted against
 * `gateway.quotas.max_user_bytes` by its files' bytes, but the `{stem}.md` sibling was written whatever its size. A
 * Word file of a few KB declaring megabytes of one repeated text (a 208 KB one became a 200 MB Markdown file in 20 s
 * of the gateway's CPU) put on disk as much as its expansion allowed, past both. Now a conversion that would take the
 * upload past `uploads.max_total_size` is not written (the file's `conversion_error` says why), and a document whose
 * contents expand past it is not opened. On SQLite; the model is SCRIPTED.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import { bytesUnder } from "../../support/uploadForms.js"
import { zipOf } from "../../support/zip.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const KiB = 1024
const MAX_TOTAL = 256 * KiB

/** A Word document (deflated) of `paragraphs` paragraphs of `chars` characters each. */
const docx = (paragraphs: number, chars: number) => {
  const text = "a".repeat(chars)
  const body = Array.from({ length: paragraphs }, () => `<w:p><w:r><w:t>${text}</w:t></w:r></w:p>`).join("")
  const ns = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
  const main = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
  return zipOf({
    "[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types ` +
      `xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ` +
      `ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ` +
      `ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="${main}"/></Types>`,
    "_rels/.rels": `<?xml version="1.0" encoding="UTF-8"?><Relationships ` +
      `xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" ` +
      `Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" ` +
      `Target="word/document.xml"/></Relationships>`,
    "word/document.xml": `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="${ns}">` +
      `<w:body>${body}</w:body></w:document>`
  }, { compress: true })
}

let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "ok",
    config: {
      gateway: Support.twoUsers,
      uploads: { auto_convert_documents: true, max_file_size: MAX_TOTAL, max_total_size: MAX_TOTAL }
    }
  })
}, 60_000)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const alice = Requests.as(() => gateway, Support.ALICE)

const upload = async (name: string, bytes: Uint8Array) => {
  const form = new FormData()
  form.append("files", new Blob([bytes]), name)
  return alice("POST", "/api/threads/docs/uploads", form)
}

describe("an upload's Markdown past uploads.max_total_size", () => {
  it("is not written: the document is kept, its conversion_error says why, the files stay bounded", async () => {
    const uploads = threadPaths(gateway.home, "alice", `docs${ThreadIds.tagOf("alice")}`).uploads
    // a document of a few KB whose text is 40 times the bound
    const bomb = await docx(40, MAX_TOTAL)
    assert.isBelow(bomb.byteLength, MAX_TOTAL / 4)
    const answer = await upload("bomb.docx", bomb)
    assert.strictEqual(answer.status, 200, answer.text.slice(0, 300))
    const [file] = answer.json().files
    assert.strictEqual(file.filename, "bomb.docx")
    assert.isNull(file.markdown_file)
    assert.include(file.conversion_error, "uploads.max_total_size")
    assert.isAtMost(bytesUnder(uploads), MAX_TOTAL)
    // a document whose Markdown fits is converted as before
    const small = await upload("small.docx", await docx(2, 1000))
    assert.strictEqual(small.status, 200, small.text)
    assert.strictEqual(small.json().files[0].markdown_file, "small.md")
  }, 120_000)
})
