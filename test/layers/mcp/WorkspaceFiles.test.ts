/**
 * A thread's files named by an MCP result, on real files in a temp dir (DeerFlow's TestWorkspaceSnapshots,
 * TestLocalUriToVirtualPath and TestRewriteLocalPathsInText): snapshots see created and changed files, follow no
 * symlink and stop at their bound; a relative path or bare name is given as `/mnt/user-data/...` only for a file
 * inside the thread's folder.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as FileNames from "../../../src/layers/mcp/FileNames.js"
import * as WorkspaceFiles from "../../../src/layers/mcp/WorkspaceFiles.js"
import type { McpResult } from "../../../src/services/Mcp.js"
import { tempDirs } from "../../support/fixtures.js"

const tempDir = tempDirs()

/** A thread's folder (`user-data`, its `workspace`) under a new temp dir, and a file writer in it. */
const thread = () => {
  const home = tempDir("antler-mcp-files-")
  const root = Path.join(home, "user-data")
  const workspace = Path.join(root, "workspace")
  Fs.mkdirSync(workspace, { recursive: true })
  const write = (relative: string, text = "data") => {
    const file = Path.join(workspace, relative)
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, text)
    return file
  }
  const place: WorkspaceFiles.Place = { root, virtual: "/mnt/user-data", workspace }
  const hostPaths = (text: string) => text.replaceAll(`${root}/`, "/mnt/user-data/")
  return { home, root, workspace, write, place, hostPaths }
}

const said = (text: string): McpResult => ({ content: [{ type: "text", text }], isError: false })
const textOf = (result: McpResult) => result.content[0]?.type === "text" ? result.content[0].text : ""

describe("WorkspaceFiles.snapshot", () => {
  it.effect("a file created or changed between two snapshots counts; one left alone or deleted does not", () =>
    Effect.gen(function*() {
      const t = thread()
      t.write("existing.txt", "old")
      t.write("stable.txt")
      t.write("victim.txt")
      const before = yield* WorkspaceFiles.snapshot(t.workspace)
      assert.deepStrictEqual([...before.files.keys()], ["existing.txt", "stable.txt", "victim.txt"])
      t.write("existing.txt", "new content")
      t.write("deep/er/created.txt")
      Fs.unlinkSync(Path.join(t.workspace, "victim.txt"))
      const after = yield* WorkspaceFiles.snapshot(t.workspace)
      assert.deepStrictEqual(FileNames.changed(before, after), ["existing.txt", "deep/er/created.txt"])
      assert.deepStrictEqual(FileNames.changed(after, yield* WorkspaceFiles.snapshot(t.workspace)), [])
      assert.deepStrictEqual(yield* WorkspaceFiles.snapshot(Path.join(t.home, "missing")), { files: new Map() })
    }))

  it.effect("follows no symlink: a link to a file or folder outside is neither listed nor entered", () =>
    Effect.gen(function*() {
      const t = thread()
      const outside = tempDir("antler-mcp-outside-")
      Fs.writeFileSync(Path.join(outside, "secret.txt"), "secret")
      Fs.symlinkSync(Path.join(outside, "secret.txt"), Path.join(t.workspace, "link.txt"))
      Fs.symlinkSync(outside, Path.join(t.workspace, "dir"))
      t.write("mine.txt")
      assert.deepStrictEqual([...(yield* WorkspaceFiles.snapshot(t.workspace)).files.keys()], ["mine.txt"])
    }))

  it.effect("stops at its bound (entries, levels), breadth first, and says where it stopped", () =>
    Effect.gen(function*() {
      const t = thread()
      for (const file of ["a.txt", "b.txt", "m/x.txt", "m/y.txt", "m/n/deep.txt"]) t.write(file)
      const cut = yield* WorkspaceFiles.snapshot(t.workspace, { entries: 4, depth: 12 })
      // (a.txt, b.txt, m, then m/n: m's entries sorted)
      assert.deepStrictEqual([...cut.files.keys()], ["a.txt", "b.txt"])
      assert.strictEqual(cut.cut, "m/n")
      const shallow = yield* WorkspaceFiles.snapshot(t.workspace, { entries: 100, depth: 2 })
      assert.deepStrictEqual([...shallow.files.keys()], ["a.txt", "b.txt", "m/x.txt", "m/y.txt"])
      assert.isUndefined(shallow.cut)
      // a file the call wrote past the cut is not found by its bare name; one before it is
      t.write("c.txt")
      t.write("m/z.txt")
      const result = yield* WorkspaceFiles.rewrite(said("Saved c.txt and z.txt"), {
        hostPaths: t.hostPaths,
        place: t.place,
        before: cut,
        limits: { entries: 4, depth: 12 }
      })
      assert.strictEqual(textOf(result), "Saved /mnt/user-data/workspace/c.txt and z.txt")
    }))
})

describe("WorkspaceFiles.rewrite", () => {
  it.effect("relative paths from the server's cwd that lead to the thread's files; others stay", () =>
    Effect.gen(function*() {
      const t = thread()
      t.write("temp/page-2026-06-16T10-21-46-864Z.yml")
      Fs.mkdirSync(Path.join(t.root, "outputs"))
      Fs.writeFileSync(Path.join(t.root, "outputs", "report.pdf"), "pdf")
      Fs.writeFileSync(Path.join(t.home, "outside.txt"), "secret")
      const outside = tempDir("antler-mcp-outside-")
      Fs.writeFileSync(Path.join(outside, "secret.txt"), "secret")
      Fs.symlinkSync(Path.join(outside, "secret.txt"), Path.join(t.workspace, "temp", "link.txt"))
      const text = "Saved as temp/page-2026-06-16T10-21-46-864Z.yml. Also ../outputs/report.pdf, ../../outside.txt, " +
        "temp/link.txt, temp/never.png and temp/ itself"
      const call = { hostPaths: t.hostPaths, place: t.place }
      const result = yield* WorkspaceFiles.rewrite(said(text), { ...call, cwd: t.workspace })
      assert.strictEqual(
        textOf(result),
        "Saved as /mnt/user-data/workspace/temp/page-2026-06-16T10-21-46-864Z.yml. " +
          "Also /mnt/user-data/outputs/report.pdf, ../../outside.txt, temp/link.txt, temp/never.png and temp/ itself"
      )
      // a server with a cwd of its own outside the thread: its relative paths name nothing of the thread's
      Fs.mkdirSync(Path.join(t.home, "temp"))
      Fs.writeFileSync(Path.join(t.home, "temp", "page-2026-06-16T10-21-46-864Z.yml"), "not the thread's")
      const elsewhere = yield* WorkspaceFiles.rewrite(said(text), { ...call, cwd: t.home })
      assert.strictEqual(textOf(elsewhere), text)
    }))

  it.effect("a bare name is the one file of that name the call wrote; an old file, two of one name: left alone", () =>
    Effect.gen(function*() {
      const t = thread()
      t.write("old.txt")
      const before = yield* WorkspaceFiles.snapshot(t.workspace)
      t.write(".playwright-mcp/page-2026.yml")
      t.write("a/dup.png")
      t.write("b/dup.png")
      const result = yield* WorkspaceFiles.rewrite(
        { content: [{ type: "text", text: "Saved as page-2026.yml." }, {
          type: "resource",
          resource: { uri: `file://${t.workspace}/a/dup.png`, text: "dup.png, old.txt, page-2026.yml" }
        }], isError: false },
        { hostPaths: t.hostPaths, place: t.place, cwd: t.workspace, before }
      )
      assert.deepStrictEqual(result.content, [
        { type: "text", text: "Saved as /mnt/user-data/workspace/.playwright-mcp/page-2026.yml." },
        {
          type: "resource",
          resource: {
            uri: "file:///mnt/user-data/workspace/a/dup.png",
            text: "dup.png, old.txt, /mnt/user-data/workspace/.playwright-mcp/page-2026.yml"
          }
        }
      ])
      // without a before-snapshot (or a place), no bare name is taken for a file
      const none = yield* WorkspaceFiles.rewrite(said("Saved as page-2026.yml"), {
        hostPaths: t.hostPaths,
        place: t.place
      })
      assert.strictEqual(textOf(none), "Saved as page-2026.yml")
    }))

  it.effect("the host paths of the thread's files in texts and links; a result without text is left as it is", () =>
    Effect.gen(function*() {
      const t = thread()
      const file = t.write("shot.png")
      const result = yield* WorkspaceFiles.rewrite({
        content: [
          { type: "text", text: `Saved to ${file}` },
          { type: "resource_link", uri: `file://${file}`, name: "shot" },
          { type: "image", data: "QUJD", mimeType: "image/png" }
        ],
        isError: false
      }, { hostPaths: t.hostPaths })
      assert.deepStrictEqual(result.content, [
        { type: "text", text: "Saved to /mnt/user-data/workspace/shot.png" },
        { type: "resource_link", uri: "file:///mnt/user-data/workspace/shot.png", name: "shot" },
        { type: "image", data: "QUJD", mimeType: "image/png" }
      ])
    }))

  it.effect("a resource link naming a file of the thread is its plain path (file://, percent-encoded, relative)", () =>
    Effect.gen(function*() {
      const t = thread()
      const shot = t.write("shot one.png")
      t.write("temp/page.yml")
      const outside = Path.join(tempDir("antler-mcp-outside-"), "secret.png")
      Fs.writeFileSync(outside, "secret")
      const link = (uri: string) => ({ type: "resource_link" as const, uri, name: "file" })
      const result = yield* WorkspaceFiles.rewrite({
        content: [
          link(`file://${shot.replaceAll(" ", "%20")}`),
          link("temp/page.yml"),
          link(`file://${outside}`),
          link(`file://${Path.join(t.workspace, "missing.png")}`),
          link("https://example.com/a.png")
        ],
        isError: false
      }, { hostPaths: t.hostPaths, place: t.place, cwd: t.workspace })
      assert.deepStrictEqual(result.content.map((block) => block.type === "resource_link" ? block.uri : ""), [
        "/mnt/user-data/workspace/shot one.png",
        "/mnt/user-data/workspace/temp/page.yml",
        // not the thread's: as it was; a file that is not there: its host path hidden all the same
        `file://${outside}`,
        "file:///mnt/user-data/workspace/missing.png",
        "https://example.com/a.png"
      ])
      assert.strictEqual(WorkspaceFiles.localPathOf("file://localhost/tmp/a%2Fb"), "/tmp/a/b")
      assert.isUndefined(WorkspaceFiles.localPathOf("file://server/share/a"))
      assert.isUndefined(WorkspaceFiles.localPathOf("file:///tmp/%E0%A4%A"))
      assert.isUndefined(WorkspaceFiles.localPathOf("data:text/plain,hi"))
    }))
})
