/**
 * What a run changed in its thread's files, in DeerFlow's shape (`.../runs/{run_id}/workspace-changes`): the files
 * of `workspace` and `outputs` compared before and after the run, with unified diffs as Python's difflib makes them;
 * a file that looks like a secret listed without content, hash or diff. Through HTTP: a run writing a file and the
 * next one editing it, a run that changed nothing (`available: false`), and bob not reading alice's. The endpoint
 * answered `available: false` for every run.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as WorkspaceChanges from "../../../src/programs/gateway/WorkspaceChanges.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

describe("comparing a thread's files", () => {
  it("makes difflib's unified diff, with its added and deleted lines", () => {
    assert.deepStrictEqual(WorkspaceChanges.unifiedDiff("/p", "a\nb\nc\n", "a\nB\nc\nd\n"), {
      diff: ["--- a/p", "+++ b/p", "@@ -1,3 +1,4 @@", " a", "-b", "+B", " c", "+d"].join("\n"),
      additions: 2,
      deletions: 1
    })
    const before = Array.from({ length: 20 }, (_, i) => `line ${i}`).join("\n")
    const after = before.replace("line 2\n", "line two\n").replace("line 17\n", "")
    assert.deepStrictEqual(WorkspaceChanges.unifiedDiff("/q", before, after).diff.split("\n"), [
      "--- a/q",
      "+++ b/q",
      "@@ -1,6 +1,6 @@",
      " line 0",
      " line 1",
      "-line 2",
      "+line two",
      " line 3",
      " line 4",
      " line 5",
      "@@ -15,6 +15,5 @@",
      " line 14",
      " line 15",
      " line 16",
      "-line 17",
      " line 18",
      " line 19"
    ])
    assert.deepStrictEqual(WorkspaceChanges.unifiedDiff("/new", "", "x\n"), {
      diff: ["--- a/new", "+++ b/new", "@@ -0,0 +1 @@", "+x"].join("\n"),
      additions: 1,
      deletions: 0
    })
  })

  it("lists created, modified and deleted files; a secret-looking one without content or hash", async () => {
    const home = Support.tempDir("antler-wc-")
    const root = Path.join(home, "users/alice/threads/t1/user-data")
    Fs.mkdirSync(Path.join(root, "workspace/node_modules"), { recursive: true })
    Fs.mkdirSync(Path.join(root, "outputs"), { recursive: true })
    Fs.writeFileSync(Path.join(root, "workspace/keep.txt"), "same\n")
    Fs.writeFileSync(Path.join(root, "workspace/gone.txt"), "bye\n")
    Fs.writeFileSync(Path.join(root, "workspace/.env"), "API_KEY=one\n")
    const before = await Effect.runPromise(WorkspaceChanges.snapshot(home, "alice", "t1"))
    Fs.rmSync(Path.join(root, "workspace/gone.txt"))
    Fs.writeFileSync(Path.join(root, "workspace/.env"), "API_KEY=two\n")
    Fs.writeFileSync(Path.join(root, "outputs/report.md"), "# Deer\n")
    Fs.writeFileSync(Path.join(root, "workspace/node_modules/skip.js"), "x")
    const after = await Effect.runPromise(WorkspaceChanges.snapshot(home, "alice", "t1"))
    const result = WorkspaceChanges.compare(before, after)
    assert.deepStrictEqual(result.summary, {
      created: 1,
      modified: 1,
      deleted: 1,
      symlink_created: 0,
      additions: 1,
      deletions: 1,
      truncated: false
    })
    const byPath = Object.fromEntries(result.files.map((f: any) => [f.path, f]))
    assert.deepStrictEqual(Object.keys(byPath), [
      "/mnt/user-data/outputs/report.md",
      "/mnt/user-data/workspace/.env",
      "/mnt/user-data/workspace/gone.txt"
    ])
    assert.deepInclude(byPath["/mnt/user-data/outputs/report.md"], {
      root: "outputs",
      status: "created",
      size_after: 7
    })
    assert.deepInclude(byPath["/mnt/user-data/workspace/.env"], {
      status: "modified",
      sensitive: true,
      diff: "",
      diff_unavailable_reason: "sensitive",
      sha256_before: null,
      sha256_after: null
    })
    assert.deepInclude(byPath["/mnt/user-data/workspace/gone.txt"], { status: "deleted", deletions: 1 })
    assert.notInclude(JSON.stringify(result), "API_KEY")
  })

  it("reads a run's comparison from its event's metadata, or from its content as recorded before", () => {
    const none = { files: new Map(), truncated: false }
    const changes = WorkspaceChanges.compare(none, { ...none, truncated: true })
    const metadata = { workspace_changes: changes }
    assert.strictEqual(WorkspaceChanges.recorded({ content: "0 files changed +0 -0", metadata }), changes)
    assert.strictEqual(WorkspaceChanges.recorded({ content: changes, metadata: {} }), changes)
    assert.isUndefined(WorkspaceChanges.recorded({ content: "0 files changed +0 -0", metadata: {} }))
  })

  it("reads UTF-16 and BOM-marked UTF-8 text as text, and other bytes as binary (DeerFlow's decoding)", async () => {
    const home = Support.tempDir("antler-wc-")
    const workspace = Path.join(home, "users/alice/threads/t1/user-data/workspace")
    Fs.mkdirSync(workspace, { recursive: true })
    const before = await Effect.runPromise(WorkspaceChanges.snapshot(home, "alice", "t1"))
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("# 标题\n\nhello\n", "utf16le")])
    Fs.writeFileSync(Path.join(workspace, "utf16.md"), utf16)
    const bom = Buffer.from([0xef, 0xbb, 0xbf])
    Fs.writeFileSync(Path.join(workspace, "bom.md"), Buffer.concat([bom, Buffer.from("# 标题\n")]))
    // a character cut by the 4096-byte sample is still UTF-8
    Fs.writeFileSync(Path.join(workspace, "long.md"), `${"a".repeat(4095)}你\nrest\n`)
    Fs.writeFileSync(Path.join(workspace, "latin1.txt"), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]))
    const after = await Effect.runPromise(WorkspaceChanges.snapshot(home, "alice", "t1"))
    const byPath = Object.fromEntries(WorkspaceChanges.compare(before, after).files.map((f: any) => [f.path, f]))
    const W = "/mnt/user-data/workspace"
    assert.deepInclude(byPath[`${W}/utf16.md`], { binary: false, diff_unavailable_reason: null })
    assert.include(byPath[`${W}/utf16.md`].diff, "+# 标题")
    assert.include(byPath[`${W}/bom.md`].diff, "+# 标题")
    assert.notInclude(byPath[`${W}/bom.md`].diff, "\ufeff")
    assert.include(byPath[`${W}/long.md`].diff, "你")
    assert.include(byPath[`${W}/long.md`].diff, "+rest")
    assert.deepInclude(byPath[`${W}/latin1.txt`], { binary: true, diff: "", diff_unavailable_reason: "binary" })
  })

  it("a link replacing a file is symlink_created; the harness's folders (saved outputs) are no change", async () => {
    const home = Support.tempDir("antler-wc-")
    const root = Path.join(home, "users/alice/threads/t1/user-data")
    Fs.mkdirSync(Path.join(root, "workspace"), { recursive: true })
    Fs.mkdirSync(Path.join(root, "outputs"), { recursive: true })
    Fs.writeFileSync(Path.join(root, "workspace/config.txt"), "safe\n")
    Fs.writeFileSync(Path.join(root, "workspace/image.png"), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0]))
    const scan = () => Effect.runPromise(WorkspaceChanges.snapshot(home, "alice", "t1", ["saved-results"]))
    const before = await scan()
    for (const file of ["config.txt", "image.png"]) {
      Fs.rmSync(Path.join(root, "workspace", file))
      Fs.symlinkSync("/etc/passwd", Path.join(root, "workspace", file))
    }
    for (const dir of [".tool-results", ".browser-frames", ".mcp/tmp", "saved-results"]) {
      Fs.mkdirSync(Path.join(root, "outputs", dir), { recursive: true })
      Fs.writeFileSync(Path.join(root, "outputs", dir, "bash-abcdef123456.log"), "internal\n")
    }
    Fs.writeFileSync(Path.join(root, "outputs/report.md"), "deliverable\n")
    const result = WorkspaceChanges.compare(before, await scan())
    assert.deepInclude(result.summary, { created: 1, modified: 0, deleted: 0, symlink_created: 2 })
    const byPath = Object.fromEntries(result.files.map((f: any) => [f.path, f]))
    assert.deepStrictEqual(Object.keys(byPath), [
      "/mnt/user-data/outputs/report.md",
      "/mnt/user-data/workspace/config.txt",
      "/mnt/user-data/workspace/image.png"
    ])
    for (const file of ["config.txt", "image.png"]) {
      assert.deepInclude(byPath[`/mnt/user-data/workspace/${file}`], {
        status: "symlink_created",
        symlink: true,
        symlink_target_after: "/etc/passwd",
        diff: "",
        diff_unavailable_reason: "symlink"
      })
    }
  })
})

const ALICE = "alice-token-workspace-00000"
const BOB = "bob-token-workspace-0000000"
const NOTES = "/mnt/user-data/outputs/notes.md"
let gateway: TestGateway

const lastText = (body: any) => JSON.stringify(body.messages.findLast((m: any) => m.role === "user")?.content ?? "")

beforeAll(async () => {
  gateway = await Support.start({
    script: (body) => {
      const text = lastText(body)
      const turn = body.messages.slice(body.messages.findLastIndex((m: any) => m.role === "user"))
      const results = turn.filter((m: any) => m.role === "tool").length
      if (text.includes("write")) {
        if (results > 0) return "Done."
        const content = "Deer eat grass.\n"
        return { toolCalls: [{ name: "write_file", arguments: { description: "Notes", path: NOTES, content } }] }
      }
      if (text.includes("edit")) {
        // read before writing over it, as the agent must
        if (results === 0) {
          return { toolCalls: [{ name: "read_file", arguments: { description: "Notes", path: NOTES } }] }
        }
        if (results > 1) return "Done."
        return {
          toolCalls: [{
            name: "write_file",
            arguments: { description: "Notes", path: NOTES, content: "Deer eat grass.\nFawns drink milk.\n" }
          }]
        }
      }
      return "Nothing to change."
    },
    config: { gateway: { auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bob" }] } } }
  })
})
afterAll(() => gateway?.stop())

const alice = Requests.as(() => gateway, ALICE)
const bob = Requests.as(() => gateway, BOB)

const runOnce = async (text: string) => {
  const input = { messages: [{ type: "human", content: text }] }
  const ran = await alice("POST", "/api/threads/files/runs/wait", { input })
  assert.strictEqual(ran.status, 200, ran.text)
  return (await alice("GET", "/api/threads/files/runs")).json()[0].run_id as string
}
const changes = async (runId: string, query = "") => {
  const answer = await alice("GET", `/api/threads/files/runs/${runId}/workspace-changes${query}`)
  assert.strictEqual(answer.status, 200, answer.text)
  return answer.json()
}

describe("a run's workspace changes through HTTP", () => {
  it("reports a run's new file, the next run's edit with its diff, nothing for a run changing nothing", async () => {
    assert.strictEqual((await alice("POST", "/api/threads", { thread_id: "files" })).status, 200)
    const wrote = await changes(await runOnce("Please write the notes"))
    assert.strictEqual(wrote.available, true)
    assert.deepInclude(wrote.summary, { created: 1, modified: 0, deleted: 0, additions: 1, deletions: 0 })
    assert.deepInclude(wrote.files[0], { path: NOTES, root: "outputs", status: "created" })

    const editRun = await runOnce("Please edit the notes")
    const edited = await changes(editRun)
    assert.deepInclude(edited.summary, { created: 0, modified: 1, additions: 1, deletions: 0 })
    assert.include(edited.files[0].diff, "+Fawns drink milk.")
    assert.strictEqual((await changes(editRun, "?include_diff=false")).files[0].diff, "")
    assert.deepStrictEqual((await changes(editRun, "?include_files=false")).files, [])
    // as DeerFlow's gateway (FastAPI) reads a boolean
    assert.strictEqual((await changes(editRun, "?include_diff=0")).files[0].diff, "")
    assert.deepStrictEqual((await changes(editRun, "?include_files=no")).files, [])
    assert.include((await changes(editRun, "?include_diff=1")).files[0].diff, "+Fawns drink milk.")
    const wrong = await alice("GET", `/api/threads/files/runs/${editRun}/workspace-changes?include_diff=nope`)
    assert.strictEqual(wrong.status, 422, wrong.text)
    // the run's event, as DeerFlow's recorder writes it: a line as its content, the comparison in its metadata
    const events = await alice("GET", `/api/threads/files/runs/${editRun}/events?event_types=workspace_changes`)
    assert.strictEqual(events.status, 200, events.text)
    const [event] = events.json()
    assert.deepInclude(event, { event_type: "workspace_changes", category: "workspace" })
    assert.strictEqual(event.content, "1 file changed +1 -0")
    assert.deepInclude(event.metadata.workspace_changes.summary, { modified: 1, additions: 1 })

    const idle = await changes(await runOnce("Just say hello"))
    assert.strictEqual(idle.available, false)

    const stolen = await bob("GET", `/api/threads/files/runs/${editRun}/workspace-changes`)
    assert.strictEqual(stolen.status, 404)
    assert.notInclude(stolen.text, "Fawns")
  })
})
