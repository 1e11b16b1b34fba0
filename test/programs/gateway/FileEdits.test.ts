/**
 * DeerFlow's uploads limits and artifact edits on `antler serve`, through HTTP as its app calls them: the limits
 * are the configured `uploads.*` (whatever the thread: a new chat asks before its thread exists), a new chat's upload
 * makes its thread, and the artifact panel's edit replaces an
 * output file's text when the text it was opened with is still there, refusing everything else: another user's
 * thread, a file outside the outputs, a link, a binary file, a changed file, a thread whose run is in flight.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as ThreadIds from "../../../src/programs/gateway/ThreadIds.js"
import { threadPaths } from "../../../src/services/Sandbox.js"
import { textForm } from "../../support/uploadForms.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const ALICE = "alice-token-0123456789abcdef"
const BOB = "bob-token-0123456789abcdef00"

const script = (body: ChatRequestBody): Turn => {
  const last = body.messages.at(-1)
  const text = JSON.stringify(body.messages.filter((m) => m.role === "user").at(-1) ?? "")
  if (text.includes("hang")) return { content: "working", stall: true }
  if (last?.role === "tool") return "Saved the report."
  return {
    toolCalls: [{
      name: "write_file",
      arguments: { description: "save", path: "/mnt/user-data/outputs/report.md", content: "# Report\n\nfirst draft\n" }
    }]
  }
}

const sha = (text: string | Uint8Array) => Crypto.createHash("sha256").update(text).digest("hex")

describe("uploads limits and artifact edits", () => {
  let gateway: TestGateway
  let outputs = ""
  const as = (token: string) => async (path: string, init: { method?: string; body?: unknown } = {}) => {
    const response = await fetch(`${gateway.url}${path}`, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
    })
    const text = await response.text()
    const parsed = (() => {
      try {
        return JSON.parse(text)
      } catch {
        return text
      }
    })()
    return { status: response.status, text, body: parsed as any }
  }
  const alice = as(ALICE)
  const bob = as(BOB)
  const put = (who: typeof alice, file: string, content: string, expected: string) =>
    who(`/api/threads/work/artifacts/mnt/user-data/outputs/${file}`, {
      method: "PUT",
      body: { content, expected_sha256: expected }
    })

  beforeAll(async () => {
    gateway = await Support.start({
      script,
      config: {
        gateway: {
          heartbeat_seconds: 1,
          auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] }
        },
        uploads: { max_files: 4, max_file_size: 1000, max_total_size: 5000 }
      }
    })
    await alice("/api/threads", { body: { thread_id: "work" } })
    const run = await alice("/api/threads/work/runs/wait", {
      body: { assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "Write the report" }] } }
    })
    assert.strictEqual(run.status, 200)
    outputs = threadPaths(gateway.home, "alice", `work${ThreadIds.tagOf("alice")}`).outputs
    assert.strictEqual(Fs.readFileSync(Path.join(outputs, "report.md"), "utf8"), "# Report\n\nfirst draft\n")
  })
  afterAll(() => gateway.stop())

  it("answers the configured upload limits, also for a new chat whose thread does not exist yet", async () => {
    const limits = await alice("/api/threads/work/uploads/limits")
    assert.deepStrictEqual(limits.body, { max_files: 4, max_file_size: 1000, max_total_size: 5000 })
    // the server's limits, whatever the id: nothing of alice's thread is told to bob
    const fresh = await alice(`/api/threads/${Crypto.randomUUID()}/uploads/limits`)
    assert.strictEqual(fresh.status, 200)
    assert.deepStrictEqual(fresh.body, limits.body)
    assert.deepStrictEqual((await bob("/api/threads/work/uploads/limits")).body, limits.body)
  })

  it("takes a new chat's upload before its first run, as DeerFlow's app sends it", async () => {
    const chat = Crypto.randomUUID()
    const form = new FormData()
    form.append("files", new Blob(["field notes\n"], { type: "text/plain" }), "notes.txt")
    const upload = await fetch(`${gateway.url}/api/threads/${chat}/uploads`, {
      method: "POST",
      headers: { authorization: `Bearer ${ALICE}` },
      body: form
    })
    assert.strictEqual(upload.status, 200)
    const uploaded = await upload.json() as { files: ReadonlyArray<{ filename: string; virtual_path: string }> }
    assert.deepStrictEqual(uploaded.files.map((f) => [f.filename, f.virtual_path]), [
      ["notes.txt", "/mnt/user-data/uploads/notes.txt"]
    ])
    // then the app's SDK creates the thread: DeerFlow's gateway answers the existing one
    const created = await alice("/api/threads", { body: { thread_id: chat, metadata: {} } })
    assert.strictEqual(created.status, 200)
    assert.strictEqual(created.body.thread_id, chat)
    const listed = await alice(`/api/threads/${chat}/uploads/list`)
    assert.deepStrictEqual(listed.body.files.map((f: { filename: string }) => f.filename), ["notes.txt"])
    // the thread is alice's: bob has none of that id, and LangGraph's own path still raises on a second create
    assert.deepStrictEqual((await bob(`/api/threads/${chat}/uploads/list`)).body, { files: [], count: 0 })
    assert.strictEqual((await alice("/threads", { body: { thread_id: chat } })).status, 409)
  })

  // DeerFlow's test_uploads_router: a name given twice in one form is renamed (`data_1.txt`, with its
  // original_filename), too many or too large files are a 413, and deleting a document deletes its conversion
  it("answers an upload, its refusals and a deletion as DeerFlow's uploads router does", async () => {
    const send = (files: ReadonlyArray<[string, string]>) =>
      fetch(`${gateway.url}/api/threads/work/uploads`, {
        method: "POST",
        headers: { authorization: `Bearer ${ALICE}` },
        body: textForm(files)
      })
    const uploaded = await send([["data.txt", "first"], ["data.txt", "second"]])
    assert.strictEqual(uploaded.status, 200)
    const body = await uploaded.json() as {
      success: boolean
      message: string
      skipped_files: ReadonlyArray<string>
      files: ReadonlyArray<{ filename: string; original_filename: string | null; size: number }>
    }
    assert.strictEqual(body.success, true)
    assert.strictEqual(body.message, "Successfully uploaded 2 file(s)")
    assert.deepStrictEqual(body.skipped_files, [])
    assert.deepStrictEqual(body.files.map((f) => [f.filename, f.original_filename, f.size]), [
      ["data.txt", null, 5],
      ["data_1.txt", "data.txt", 6]
    ])
    const uploads = threadPaths(gateway.home, "alice", `work${ThreadIds.tagOf("alice")}`).uploads
    assert.strictEqual(Fs.readFileSync(Path.join(uploads, "data_1.txt"), "utf8"), "second")

    const tooBig = await send([["big.txt", "x".repeat(2000)]])
    assert.strictEqual(tooBig.status, 413, await tooBig.clone().text())
    assert.include(((await tooBig.json()) as { detail: string }).detail, "uploads.max_file_size")
    const tooMany = await send([["1.txt", "1"], ["2.txt", "2"], ["3.txt", "3"], ["4.txt", "4"], ["5.txt", "5"]])
    assert.strictEqual(tooMany.status, 413)
    assert.isFalse(Fs.existsSync(Path.join(uploads, "1.txt")))

    // a converted document (report.md beside report.pdf) goes with its document; a text file's namesake stays
    Fs.writeFileSync(Path.join(uploads, "report.pdf"), "%PDF-1.4")
    Fs.writeFileSync(Path.join(uploads, "report.md"), "converted")
    Fs.writeFileSync(Path.join(uploads, "data.md"), "the user's own")
    const deleted = await alice("/api/threads/work/uploads/report.pdf", { method: "DELETE" })
    assert.strictEqual(deleted.status, 200)
    assert.deepStrictEqual(deleted.body, { success: true, message: "Deleted report.pdf" })
    assert.isFalse(Fs.existsSync(Path.join(uploads, "report.md")))
    assert.strictEqual((await alice("/api/threads/work/uploads/data.txt", { method: "DELETE" })).status, 200)
    assert.strictEqual(Fs.readFileSync(Path.join(uploads, "data.md"), "utf8"), "the user's own")
    assert.strictEqual((await bob("/api/threads/work/uploads/data_1.txt", { method: "DELETE" })).status, 404)
    assert.isTrue(Fs.existsSync(Path.join(uploads, "data_1.txt")))
  })

  // DeerFlow's test_uploads_manager (list_files_in_dir, delete_file_safe): files only, by name, an upload in
  // progress left out (not a name that merely looks like one), `modified` a number of seconds; a folder is no upload
  it("lists a thread's uploads as DeerFlow's list_files_in_dir does; deleting a folder's name is a 404", async () => {
    const chat = Crypto.randomUUID()
    const form = new FormData()
    form.append("files", new Blob(["b"], { type: "text/plain" }), "b.txt")
    const sent = await fetch(`${gateway.url}/api/threads/${chat}/uploads`, {
      method: "POST",
      headers: { authorization: `Bearer ${ALICE}` },
      body: form
    })
    assert.strictEqual(sent.status, 200)
    const uploads = threadPaths(gateway.home, "alice", `${chat}${ThreadIds.tagOf("alice")}`).uploads
    for (const name of ["a.txt", ".env", ".upload-note.txt", "draft.part", ".upload-active.part"]) {
      Fs.writeFileSync(Path.join(uploads, name), "x")
    }
    Fs.mkdirSync(Path.join(uploads, "subdir"))
    Fs.utimesSync(Path.join(uploads, "a.txt"), 1_700_000_000.5, 1_700_000_000.5)
    const listed = await alice(`/api/threads/${chat}/uploads/list`)
    assert.strictEqual(listed.status, 200)
    assert.deepStrictEqual(listed.body.files.map((f: { filename: string }) => f.filename), [
      ".env",
      ".upload-note.txt",
      "a.txt",
      "b.txt",
      "draft.part"
    ])
    assert.strictEqual(listed.body.count, 5)
    assert.strictEqual(listed.body.files[2].modified, 1_700_000_000.5)
    assert.isTrue(listed.body.files.every((f: { modified: unknown }) => typeof f.modified === "number"))
    const folder = await alice(`/api/threads/${chat}/uploads/subdir`, { method: "DELETE" })
    assert.strictEqual(folder.status, 404, folder.text)
    assert.isTrue(Fs.statSync(Path.join(uploads, "subdir")).isDirectory())
  })

  it("makes no thread from a refused upload: a new chat's failed first upload leaves nothing behind", async () => {
    const send = (chat: string, body: string | FormData, type?: string) =>
      fetch(`${gateway.url}/api/threads/${chat}/uploads`, {
        method: "POST",
        headers: { authorization: `Bearer ${ALICE}`, ...(type === undefined ? {} : { "content-type": type }) },
        body
      })
    const tooBig = new FormData()
    tooBig.append("files", new Blob(["x".repeat(2000)], { type: "text/plain" }), "big.txt")
    const noFiles = new FormData()
    noFiles.append("note", "no file here")
    const refusals: Array<[string, () => Promise<Response>]> = [
      ["a file over uploads.max_file_size", () => send(Crypto.randomUUID(), tooBig)],
      ["a form without files", () => send(Crypto.randomUUID(), noFiles)],
      ["a body that is not a form", () => send(Crypto.randomUUID(), "{}", "multipart/form-data; boundary=x")]
    ]
    for (const [what, refused] of refusals) {
      const answer = await refused()
      assert.isAtLeast(answer.status, 400, what)
      const chat = new URL(answer.url).pathname.split("/")[3]!
      assert.strictEqual((await alice(`/api/threads/${chat}`)).status, 404, what)
      const listed = await alice("/api/threads/search", { body: { limit: 100 } })
      assert.notInclude(listed.body.map((thread: { thread_id: string }) => thread.thread_id), chat, what)
    }
  })

  it("replaces an output file's text when it is unchanged since it was opened", async () => {
    const opened = sha("# Report\n\nfirst draft\n")
    const first = await fetch(`${gateway.url}/api/threads/work/artifacts/mnt/user-data/outputs/report.md`, {
      headers: { authorization: `Bearer ${ALICE}` }
    })
    // the revision the app names when it saves
    assert.strictEqual(first.headers.get("etag"), `"${opened}"`)
    assert.strictEqual((await put(bob, "report.md", "bob was here", opened)).status, 404)
    const stale = await put(alice, "report.md", "# Report\n\nedited\n", sha("something else"))
    assert.strictEqual(stale.status, 412)
    assert.strictEqual(stale.body.title, "Precondition Failed")
    const saved = await put(alice, "report.md", "# Report\n\nedited ✓\n", opened)
    assert.strictEqual(saved.status, 200)
    const bytes = Buffer.from("# Report\n\nedited ✓\n", "utf8")
    assert.deepStrictEqual(saved.body, {
      path: "/mnt/user-data/outputs/report.md",
      sha256: sha(bytes),
      size: bytes.length
    })
    const read = await alice("/api/threads/work/artifacts/mnt/user-data/outputs/report.md")
    assert.strictEqual(read.text, "# Report\n\nedited ✓\n")
    // the old revision no longer names it
    assert.strictEqual((await put(alice, "report.md", "again", opened)).status, 412)
    assert.deepStrictEqual(Fs.readdirSync(outputs).filter((name) => name.startsWith(".")), [])
  })

  // DeerFlow's test_artifacts_router: its app previews a text artifact from its first MiB (`Range: bytes=0-...`),
  // and shows a preview cut short (206, Content-Range) with a button for the whole file
  it("answers a byte range of an artifact (206, Content-Range), and 416 for one outside it", async () => {
    const text = "0123456789".repeat(30)
    Fs.writeFileSync(Path.join(outputs, "long.txt"), text)
    const get = (range?: string, token = ALICE) =>
      fetch(`${gateway.url}/api/threads/work/artifacts/mnt/user-data/outputs/long.txt`, {
        headers: { authorization: `Bearer ${token}`, ...(range === undefined ? {} : { range }) }
      })
    const whole = await get()
    assert.strictEqual(whole.status, 200)
    assert.strictEqual(whole.headers.get("accept-ranges"), "bytes")
    assert.strictEqual(await whole.text(), text)
    const first = await get("bytes=0-99")
    assert.strictEqual(first.status, 206)
    assert.strictEqual(first.headers.get("content-range"), "bytes 0-99/300")
    // the etag stays the whole file's revision, which an edit names
    assert.strictEqual(first.headers.get("etag"), `"${sha(text)}"`)
    assert.strictEqual(await first.text(), text.slice(0, 100))
    const past = await get("bytes=0-1048575")
    assert.strictEqual(past.status, 206)
    assert.strictEqual(past.headers.get("content-range"), "bytes 0-299/300")
    const tail = await get("bytes=-5")
    assert.strictEqual(tail.headers.get("content-range"), "bytes 295-299/300")
    assert.strictEqual(await tail.text(), "56789")
    assert.strictEqual(await (await get("bytes=290-")).text(), "0123456789")
    const outside = await get("bytes=300-")
    assert.strictEqual(outside.status, 416)
    assert.strictEqual(outside.headers.get("content-range"), "bytes */300")
    assert.strictEqual((await get("bytes=0-99", BOB)).status, 404)
  })

  it("refuses files it must not edit", async () => {
    const current = sha(Fs.readFileSync(Path.join(outputs, "report.md")))
    const outside = await alice("/api/threads/work/artifacts/mnt/user-data/workspace/notes.md", {
      method: "PUT",
      body: { content: "x", expected_sha256: current }
    })
    assert.strictEqual(outside.status, 400)
    assert.strictEqual((await put(alice, "missing.md", "x", current)).status, 404)
    Fs.symlinkSync(Path.join(outputs, "report.md"), Path.join(outputs, "link.md"))
    assert.strictEqual((await put(alice, "link.md", "through the link", current)).status, 415)
    Fs.writeFileSync(Path.join(outputs, "data.bin"), Buffer.from([0x50, 0x00, 0x01]))
    assert.strictEqual((await put(alice, "data.bin", "text", sha(Buffer.from([0x50, 0x00, 0x01])))).status, 415)
    assert.strictEqual((await put(alice, "report.md", "x".repeat(2 * 1024 * 1024 + 1), current)).status, 413)
    assert.strictEqual((await put(alice, "report.md", "x", "not-a-sha")).status, 422)
    assert.strictEqual(sha(Fs.readFileSync(Path.join(outputs, "report.md"))), current)
  })

  it("refuses an edit while a run of the thread is in flight", async () => {
    const current = sha(Fs.readFileSync(Path.join(outputs, "report.md")))
    const run = await alice("/api/threads/work/runs", {
      body: { assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "hang please" }] } }
    })
    assert.strictEqual(run.status, 200)
    for (let i = 0; i < 200 && gateway.runs.activeOf(`work${ThreadIds.tagOf("alice")}`) === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const busy = await put(alice, "report.md", "during the run", current)
    assert.strictEqual(busy.status, 409)
    await alice(`/api/threads/work/runs/${run.body.run_id}/cancel?wait=1`, { method: "POST" })
  })
})
