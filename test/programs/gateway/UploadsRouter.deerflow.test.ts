/**
 * DeerFlow's test_uploads_router, through HTTP as its app uploads: an upload of a name the thread has replaces the
 * file (`test_upload_files_overwrites_existing_regular_file`); a replacement over `uploads.max_file_size` is a 413
 * that leaves the earlier file as it was and no staging file behind
 * (`test_upload_files_oversized_replacement_preserves_existing_regular_file`); files each within the limits that
 * together pass `uploads.max_total_size` are a 413 and none of them is kept
 * (`test_upload_files_rejects_total_size_over_limit_and_cleans_request_files`).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import * as Requests from "../../support/requests.js"
import { textForm } from "../../support/uploadForms.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-uploads-router-0"

let gateway: TestGateway
const alice = Requests.as(() => gateway, ALICE)

beforeAll(async () => {
  gateway = await Support.start({
    script: Support.echoOrHang,
    config: {
      gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }] } },
      uploads: { max_files: 10, max_file_size: 10, max_total_size: 15 }
    }
  })
  assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "files" })).status, 200)
})
afterAll(() => gateway?.stop())

const upload = (files: ReadonlyArray<[string, string]>) => alice("POST", "/api/threads/files/uploads", textForm(files))

const uploadsDir = () => threadPaths(gateway.home, "alice", `files${ThreadIds.tagOf("alice")}`).uploads

describe("DeerFlow's uploads router", () => {
  it("a name uploaded again replaces the file", async () => {
    assert.strictEqual((await upload([["notes.txt", "old"]])).status, 200)
    const again = await upload([["notes.txt", "new upload"]])
    assert.strictEqual(again.status, 200, again.text)
    assert.deepStrictEqual(again.json().files.map((f: { filename: string }) => f.filename), ["notes.txt"])
    assert.strictEqual(Fs.readFileSync(Path.join(uploadsDir(), "notes.txt"), "utf8"), "new upload")
    assert.strictEqual(Fs.statSync(Path.join(uploadsDir(), "notes.txt")).nlink, 1)
  })

  it("a replacement over max_file_size is a 413; the earlier file stays as it was, nothing else is left", async () => {
    assert.strictEqual((await upload([["a.txt", "original"]])).status, 200)
    const before = Fs.readdirSync(uploadsDir()).sort()
    const tooBig = await upload([["a.txt", "tiny" + "x".repeat(8)]])
    assert.strictEqual(tooBig.status, 413, tooBig.text)
    assert.strictEqual(Fs.readFileSync(Path.join(uploadsDir(), "a.txt"), "utf8"), "original")
    assert.deepStrictEqual(Fs.readdirSync(uploadsDir()).sort(), before)
  })

  it("files together over max_total_size are a 413, and none of them is kept", async () => {
    const before = Fs.readdirSync(uploadsDir()).sort()
    const tooMuch = await upload([["first.txt", "123456789"], ["second.txt", "987654321"]])
    assert.strictEqual(tooMuch.status, 413, tooMuch.text)
    assert.include(tooMuch.json().detail, "uploads.max_total_size")
    assert.deepStrictEqual(Fs.readdirSync(uploadsDir()).sort(), before)
    const listed = (await alice("GET", "/api/threads/files/uploads/list")).json()
    assert.notInclude(listed.files.map((f: { filename: string }) => f.filename), "first.txt")
  })
})
