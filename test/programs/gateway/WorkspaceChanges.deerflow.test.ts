/**
 * DeerFlow's `test_workspace_changes.py`, the cases WorkspaceChanges.test does not already hold: the added and
 * deleted line counts of lines that start with `--` or `++`, the outputs a run created or modified (what delivery
 * checks), secret-looking names, a NUL byte in a Markdown file, a file too large to diff, a link removed with nothing
 * in its place. Real files in a temp data directory.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as WorkspaceChanges from "../../../src/programs/gateway/WorkspaceChanges.js"
import * as Support from "./support.js"

const W = "/mnt/user-data/workspace"
const O = "/mnt/user-data/outputs"

/** A thread's workspace and outputs, and a scan of them. */
const thread = () => {
  const home = Support.tempDir("antler-wc-df-")
  const root = Path.join(home, "users/alice/threads/t1/user-data")
  const workspace = Path.join(root, "workspace")
  const outputs = Path.join(root, "outputs")
  Fs.mkdirSync(workspace, { recursive: true })
  Fs.mkdirSync(outputs, { recursive: true })
  const scan = () => Effect.runPromise(WorkspaceChanges.snapshot(home, "alice", "t1"))
  return { workspace, outputs, scan }
}

const byPath = (result: WorkspaceChanges.Changes) =>
  Object.fromEntries(result.files.map((f) => [f.path as string, f as Record<string, unknown>]))

describe("test_workspace_changes.py", () => {
  it("a content line starting with -- or ++ is counted as a line, not taken for a file header", () => {
    const sql = WorkspaceChanges.unifiedDiff("/x.sql", "SELECT 1\n-- get users\n", "SELECT 1\nSELECT 2\n")
    assert.deepStrictEqual([sql.additions, sql.deletions], [1, 1])
    assert.include(sql.diff.split("\n"), "--- get users")
    const plus = WorkspaceChanges.unifiedDiff("/f.txt", "old\nremoved\n", "new\n++added\n")
    assert.deepStrictEqual([plus.additions, plus.deletions], [2, 2])
  })

  it("changed outputs: outputs created or modified, sorted; no workspace file, deletion or saved result", async () => {
    const { workspace, outputs, scan } = thread()
    Fs.writeFileSync(Path.join(workspace, "draft.md"), "before")
    Fs.writeFileSync(Path.join(outputs, "existing.md"), "before")
    Fs.writeFileSync(Path.join(outputs, "deleted.md"), "before")
    const before = await scan()
    Fs.writeFileSync(Path.join(workspace, "draft.md"), "after")
    Fs.writeFileSync(Path.join(outputs, "existing.md"), "after")
    Fs.writeFileSync(Path.join(outputs, "created.md"), "new")
    Fs.rmSync(Path.join(outputs, "deleted.md"))
    Fs.mkdirSync(Path.join(outputs, ".tool-results"))
    Fs.writeFileSync(Path.join(outputs, ".tool-results/web_fetch-abcdef123456.log"), "x".repeat(20_000))
    const after = await scan()
    assert.deepStrictEqual(WorkspaceChanges.changedOutputs(before, after), [`${O}/created.md`, `${O}/existing.md`])
  })

  it("names that look like secrets are sensitive; ordinary names are not", () => {
    for (const name of ["password.txt", "api_key.txt", "apikey", "private_key.json", ".env", ".env.local", "id.pem"]) {
      assert.isTrue(WorkspaceChanges.sensitive(`${W}/${name}`), name)
    }
    for (const name of ["report.md", "keys.md", "environment.txt"]) {
      assert.isFalse(WorkspaceChanges.sensitive(`${W}/${name}`), name)
    }
  })

  it("a NUL byte makes a Markdown file binary: no diff", async () => {
    const { workspace, scan } = thread()
    const before = await scan()
    Fs.writeFileSync(Path.join(workspace, "guide.md"), Buffer.from("\x00\x01\x02binary\n", "latin1"))
    const change = byPath(WorkspaceChanges.compare(before, await scan()))[`${W}/guide.md`]!
    assert.deepInclude(change, { binary: true, diff: "", diff_unavailable_reason: "binary" })
  })

  // DeerFlow gives a file past the diff limit no hash; Antler hashes files up to 16 MB, on purpose (docs/deerflow.md,
  // "Workspace changes hash files up to 16 MB"), so the hash is there and the rest is DeerFlow's.
  it("a text file over the diff limit is listed without a diff, as `large`; the comparison is truncated", async () => {
    const { workspace, scan } = thread()
    const before = await scan()
    const text = "0123456789\n".repeat(Math.ceil((WorkspaceChanges.LIMITS.max_file_bytes_for_diff + 1) / 11))
    Fs.writeFileSync(Path.join(workspace, "large.txt"), text)
    const result = WorkspaceChanges.compare(before, await scan())
    const change = byPath(result)[`${W}/large.txt`]!
    assert.deepInclude(change, { status: "created", diff: "", diff_unavailable_reason: "large", binary: false })
    assert.match(String(change.sha256_after), /^[0-9a-f]{64}$/)
    assert.isTrue(result.summary.truncated)
  })

  it("a link removed with nothing in its place is deleted, not symlink_created", async () => {
    const { workspace, scan } = thread()
    const outside = Support.tempDir("antler-wc-df-outside-")
    Fs.writeFileSync(Path.join(outside, "target.txt"), "outside content\n")
    Fs.symlinkSync(Path.join(outside, "target.txt"), Path.join(workspace, "link.txt"))
    const before = await scan()
    Fs.rmSync(Path.join(workspace, "link.txt"))
    const result = WorkspaceChanges.compare(before, await scan())
    assert.strictEqual(byPath(result)[`${W}/link.txt`]!.status, "deleted")
    assert.deepInclude(result.summary, { deleted: 1, symlink_created: 0 })
  })
})
