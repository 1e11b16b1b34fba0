/**
 * DeerFlow's uploads router, as its web app reads it: an upload whose name is a folder in the thread's uploads
 * (one the agent made there) is refused naming the file (a 409, the app's toast shows its `detail`), never a 500,
 * and nothing of the upload is written (DeerFlow skips that file into `skipped_files`, which the app never shows, so
 * the user's file would be left out without a word); and the upload's and the list's files carry DeerFlow's
 * `UploadedFileInfo` fields, those without a value `null` (FastAPI sends every field of the model).
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

const ALICE = "alice-token-uploads-fields-27"

let gateway: TestGateway
const alice = Requests.as(() => gateway, ALICE)

beforeAll(async () => {
  gateway = await Support.start({
    script: Support.echoOrHang,
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }] } } }
  })
})
afterAll(() => gateway?.stop())

const uploadsDir = (thread: string) =>
  threadPaths(gateway.home, "alice", `${thread}${ThreadIds.tagOf("alice")}`).uploads

const formOf = (files: Record<string, string>) => textForm(Object.entries(files))

/** DeerFlow's `UploadedFileInfo` fields (backend/app/gateway/routers/uploads.py). */
const FIELDS = [
  "artifact_url",
  "extension",
  "filename",
  "markdown_artifact_url",
  "markdown_file",
  "markdown_path",
  "markdown_virtual_path",
  "modified",
  "original_filename",
  "path",
  "size",
  "virtual_path"
]

describe("DeerFlow's uploads router: a folder in the way, and the fields of a file", () => {
  it("an upload whose name is a folder in the thread's uploads is a 409 naming it; nothing is written", async () => {
    assert.strictEqual((await alice("POST", "/api/threads/folder/uploads", formOf({ "a.txt": "a" }))).status, 200)
    Fs.mkdirSync(Path.join(uploadsDir("folder"), "notes.txt", "inside"), { recursive: true })
    const refused = await alice("POST", "/api/threads/folder/uploads", formOf({ "b.txt": "b", "notes.txt": "n" }))
    assert.strictEqual(refused.status, 409, refused.text)
    assert.include(refused.json().detail, "notes.txt")
    assert.include(refused.json().detail, "folder")
    assert.deepStrictEqual(Fs.readdirSync(uploadsDir("folder")).sort(), ["a.txt", "notes.txt"])
    assert.isTrue(Fs.statSync(Path.join(uploadsDir("folder"), "notes.txt")).isDirectory())
    // an empty folder too (a rename would fail on it as well)
    Fs.mkdirSync(Path.join(uploadsDir("folder"), "empty.txt"))
    const empty = await alice("POST", "/api/threads/folder/uploads", formOf({ "empty.txt": "e" }))
    assert.strictEqual(empty.status, 409, empty.text)
    assert.include(empty.json().detail, "empty.txt")
    // the thread's list shows the files and no folder, as before
    const listed = await alice("GET", "/api/threads/folder/uploads/list")
    assert.deepStrictEqual(listed.json().files.map((f: any) => f.filename), ["a.txt"])
  })

  // a write that fails is the server's fault, told in its log: the answer names no path of the host
  it("an upload whose write fails is a 500 that names no path of the server's disk", async () => {
    assert.strictEqual((await alice("POST", "/api/threads/broken/uploads", formOf({ "a.txt": "a" }))).status, 200)
    const dir = uploadsDir("broken")
    Fs.rmSync(dir, { recursive: true })
    Fs.writeFileSync(dir, "not a folder")
    const failed = await alice("POST", "/api/threads/broken/uploads", formOf({ "b.txt": "b" }))
    assert.strictEqual(failed.status, 500, failed.text)
    assert.include(failed.json().detail, "could not be written")
    assert.notInclude(failed.text, gateway.home)
    assert.notInclude(failed.text, "/users/")
  })

  it("the upload's and the list's files have DeerFlow's fields, those without a value null", async () => {
    const uploaded = await alice("POST", "/api/threads/fields/uploads", formOf({ "data.csv": "a,b\n", "x.csv": "1" }))
    assert.strictEqual(uploaded.status, 200, uploaded.text)
    const first = uploaded.json().files[0]
    assert.deepStrictEqual(Object.keys(first).sort(), FIELDS)
    assert.deepStrictEqual(first, {
      filename: "data.csv",
      size: 4,
      path: "/mnt/user-data/uploads/data.csv",
      virtual_path: "/mnt/user-data/uploads/data.csv",
      artifact_url: "/api/threads/fields/artifacts/mnt/user-data/uploads/data.csv",
      // (DeerFlow's upload answer leaves these to the model's defaults)
      extension: null,
      modified: null,
      original_filename: null,
      markdown_file: null,
      markdown_path: null,
      markdown_virtual_path: null,
      markdown_artifact_url: null
    })
    const listed = await alice("GET", "/api/threads/fields/uploads/list")
    assert.strictEqual(listed.status, 200, listed.text)
    const body = listed.json()
    assert.strictEqual(body.count, 2)
    for (const file of body.files) assert.deepStrictEqual(Object.keys(file).sort(), FIELDS, file.filename)
    const { modified, ...rest } = body.files[0]
    assert.isNumber(modified)
    assert.deepStrictEqual(rest, {
      filename: "data.csv",
      size: 4,
      path: "/mnt/user-data/uploads/data.csv",
      virtual_path: "/mnt/user-data/uploads/data.csv",
      artifact_url: "/api/threads/fields/artifacts/mnt/user-data/uploads/data.csv",
      extension: ".csv",
      original_filename: null,
      markdown_file: null,
      markdown_path: null,
      markdown_virtual_path: null,
      markdown_artifact_url: null
    })
  })

  it("a name given twice keeps original_filename; the others' is null", async () => {
    const uploaded = await alice("POST", "/api/threads/twice/uploads", formOf({ "r.txt": "1" }))
    assert.strictEqual(uploaded.status, 200)
    const form = formOf({ "r.txt": "2" })
    form.append("files", new Blob(["3"], { type: "text/plain" }), "r.txt")
    const again = await alice("POST", "/api/threads/twice/uploads", form)
    assert.deepStrictEqual(
      again.json().files.map((f: any) => [f.filename, f.original_filename]),
      [["r.txt", null], ["r_1.txt", "r.txt"]]
    )
  })
})
