/**
 * Escape attempts through the REAL tools: every one must come back as an `Error:` result, change nothing
 * outside the workspace (nothing at all, in fact), and show no host path.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import type { JsonObject } from "../../src/state/Message.js"
import * as Bwrap from "../support/bwrap.js"
import { inRun } from "../support/fixtures.js"

// ---------------------------------------------------------------------------------------------------------
// Fixture: thread t1 (the model's), thread t2 (someone else's), a directory outside the data directory,
// a skills directory, and symlinks planted in t1's workspace and outputs.

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-escape-"))
afterAll(() => {
  Fs.rmSync(root, { recursive: true, force: true })
  Fs.rmSync("/etc/antler-escape-probe", { force: true }) // only there if a regression let a write through
})
const home = Path.join(root, "home")
const outside = Path.join(root, "outside")
const skills = Path.join(root, "skills")
const t1 = threadPaths(home, "u1", "t1")
const t2 = threadPaths(home, "u2", "t2")

const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52])
const fixtureDirs = [outside, Path.join(skills, "demo"), t1.workspace, t1.uploads, t1.outputs, t2.workspace, t2.outputs]
for (const dir of fixtureDirs) {
  Fs.mkdirSync(dir, { recursive: true })
}
Fs.writeFileSync(Path.join(outside, "secret.txt"), "TOPSECRET\n")
Fs.writeFileSync(Path.join(outside, "img.png"), png)
Fs.writeFileSync(Path.join(skills, "demo", "SKILL.md"), "# demo skill\n")
Fs.writeFileSync(Path.join(t2.workspace, "theirs.txt"), "THEIRS\n")
Fs.writeFileSync(Path.join(t2.outputs, "their-report.md"), "THEIRS\n")
Fs.writeFileSync(Path.join(t1.workspace, "inside.txt"), "inside\n")
Fs.mkdirSync(Path.join(t1.workspace, "sub"))

const ws = (name: string) => Path.join(t1.workspace, name)
const relativeTo = (from: string, to: string) => Path.relative(Path.dirname(from), to)
Fs.symlinkSync(Path.join(outside, "secret.txt"), ws("link-file-abs"))
Fs.symlinkSync(relativeTo(ws("link-file-rel"), Path.join(outside, "secret.txt")), ws("link-file-rel"))
Fs.symlinkSync(outside, ws("link-dir-abs"))
Fs.symlinkSync(relativeTo(ws("link-dir-rel"), outside), ws("link-dir-rel"))
Fs.symlinkSync("chain2", ws("chain1"))
Fs.symlinkSync("chain3", ws("chain2"))
Fs.symlinkSync(Path.join(outside, "secret.txt"), ws("chain3"))
Fs.symlinkSync(t2.workspace, ws("link-other-thread"))
Fs.symlinkSync(Path.join(outside, "created-by-escape.txt"), ws("dangling"))
Fs.symlinkSync(Path.join(outside, "new-dir"), ws("dangling-dir"))
Fs.symlinkSync("/etc", ws("link-etc"))
Fs.symlinkSync("/", ws("link-root"))
Fs.symlinkSync(Path.join(outside, "img.png"), ws("link-img.png"))
Fs.symlinkSync(Path.join(t1.workspace, "inside.txt"), Path.join(t1.outputs, "leak.txt"))
Fs.symlinkSync(Path.join(outside, "secret.txt"), Path.join(t1.outputs, "leak-outside.txt"))

const base = defaults()
const app = AppConfigService.of({
  config: { ...base, skills: { ...base.skills, path: skills } },
  source: undefined,
  home,
  ignored: []
})
const provider = LocalSandbox.make(app, { bwrap: "auto" })

const call = (name: string, args: JsonObject) =>
  SandboxTools.tools({ vision: true }).pipe(
    Effect.flatMap((tools) => Toolkit.make(tools).call({ id: `call-${name}`, name, args })),
    Effect.map((result) => ({
      text: String(result.message.content),
      status: result.message.status,
      update: result.update
    })),
    Effect.provideService(SandboxProvider, provider),
    Effect.provideService(AppConfigService, app),
    Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context)
  )

/** Everything under a directory: kind, content or link target (symlinks are not followed). */
const snapshot = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const visit = (current: string) => {
    for (const name of Fs.readdirSync(current)) {
      const full = Path.join(current, name)
      const stat = Fs.lstatSync(full)
      if (stat.isSymbolicLink()) out[full] = `link:${Fs.readlinkSync(full)}`
      else if (stat.isDirectory()) {
        out[full] = "dir"
        visit(full)
      } else out[full] = `file:${Fs.readFileSync(full, "base64")}`
    }
  }
  visit(dir)
  return out
}

const bwrapInstalled = await Bwrap.installed()

const hostMarkers = [...new Set([root, Fs.realpathSync(root), home, outside, skills, "/tmp/antler-"])]
const etcProbe = "/etc/antler-escape-probe"

// ---------------------------------------------------------------------------------------------------------

const W = "/mnt/user-data/workspace"
const O = "/mnt/user-data/outputs"
const d = "escape test"

type Attempt = readonly [label: string, tool: string, args: JsonObject]
const read = (label: string, path: string): Attempt => [label, "read_file", { description: d, path }]
const write = (label: string, path: string, append = false): Attempt =>
  [label, "write_file", { description: d, path, content: "pwned", append }]
const edit = (label: string, path: string, old_str: string): Attempt =>
  [label, "str_replace", { description: d, path, old_str, new_str: "pwned" }]
const ls = (label: string, path: string): Attempt => [label, "ls", { description: d, path }]
const glob = (label: string, path: string, pattern: string): Attempt =>
  [label, "glob", { description: d, path, pattern }]
const grep = (label: string, path: string, pattern: string): Attempt =>
  [label, "grep", { description: d, path, pattern }]
const present = (label: string, path: string): Attempt => [label, "present_files", { filepaths: [path] }]
const view = (label: string, path: string): Attempt => [label, "view_image", { image_path: path }]

const attempts: ReadonlyArray<Attempt> = [
  // `..` in many positions
  read("read: .. after the workspace", `${W}/../../../../etc/passwd`),
  read("read: .. in the middle (even landing inside)", `${W}/sub/../inside.txt`),
  read("read: .. right after the user-data root", "/mnt/user-data/../user-data/workspace/inside.txt"),
  read("read: .. after /mnt", "/mnt/../etc/passwd"),
  read("read: double slash and ./..", `//mnt/user-data/workspace/./../../../etc/passwd`),
  read("read: trailing ..", `${W}/..`),
  read("read: bare ..", ".."),
  read("read: relative path", "workspace/inside.txt"),
  read("read: home-relative path", "~/inside.txt"),
  read("read: file:// URL", "file:///etc/passwd"),
  // encoded forms and NUL bytes
  read("read: %2e%2e segments", `${W}/%2e%2e/%2e%2e/%2e%2e/etc/passwd`),
  read("read: ..%2f separators", `${W}/..%2f..%2f..%2fetc%2fpasswd`),
  read("read: upper-case %2E%2E%2F", `${W}/%2E%2E%2F%2E%2E%2Fsecret`),
  read("read: %00 suffix", `${W}/inside.txt%00.png`),
  read("read: NUL byte", `${W}/inside.txt\u0000/../../../etc/passwd`),
  // absolute host paths
  read("read: /etc/passwd", "/etc/passwd"),
  read("read: the real host workspace path", Path.join(t1.workspace, "inside.txt")),
  read("read: a host path outside the data directory", Path.join(outside, "secret.txt")),
  read("read: a look-alike of a virtual root", "/mnt/user-dataX/workspace/inside.txt"),
  // symlinks planted in the workspace
  read("read: symlink to a file, absolute target", `${W}/link-file-abs`),
  read("read: symlink to a file, relative target", `${W}/link-file-rel`),
  read("read: through a symlinked directory, absolute", `${W}/link-dir-abs/secret.txt`),
  read("read: through a symlinked directory, relative", `${W}/link-dir-rel/secret.txt`),
  read("read: a symlink chain", `${W}/chain1`),
  read("read: symlink to /etc", `${W}/link-etc/passwd`),
  read("read: symlink to /", `${W}/link-root/etc/passwd`),
  // another thread
  read("read: another thread through a symlink", `${W}/link-other-thread/theirs.txt`),
  read("read: another thread by host path", Path.join(t2.workspace, "theirs.txt")),
  // writes
  write("write: over a file symlinked outside", `${W}/link-file-abs`),
  write("write: append through a relative symlink", `${W}/link-file-rel`, true),
  write("write: into a symlinked directory", `${W}/link-dir-abs/new.txt`),
  write("write: new directories under a symlinked directory", `${W}/link-dir-rel/a/b/new.txt`),
  write("write: through a dangling symlink", `${W}/dangling`),
  write("write: under a dangling directory symlink", `${W}/dangling-dir/x.txt`),
  write("write: through a symlink chain", `${W}/chain1`),
  write("write: into another thread", `${W}/link-other-thread/planted.txt`),
  write("write: a new file under /mnt/skills", "/mnt/skills/evil.md"),
  write("write: over a skill", "/mnt/skills/demo/SKILL.md"),
  write("write: the user-data root", "/mnt/user-data/evil.txt"),
  write("write: /etc", etcProbe),
  write("write: a host path", Path.join(outside, "new.txt")),
  write("write: .. chain into /tmp", `${W}/../outputs/../../../../tmp/evil`),
  write("write: symlink to /etc", `${W}/link-etc/antler-escape-probe`),
  // str_replace
  edit("edit: a file symlinked outside", `${W}/link-file-abs`, "TOPSECRET"),
  edit("edit: through a symlink chain", `${W}/chain1`, "TOPSECRET"),
  edit("edit: a skill", "/mnt/skills/demo/SKILL.md", "demo"),
  edit("edit: another thread by host path", Path.join(t2.workspace, "theirs.txt"), "THEIRS"),
  // listings and searches
  ls("ls: a symlinked directory, absolute", `${W}/link-dir-abs`),
  ls("ls: a symlinked directory, relative", `${W}/link-dir-rel`),
  ls("ls: /etc", "/etc"),
  ls("ls: /", "/"),
  ls("ls: /mnt", "/mnt"),
  ls("ls: symlink to /etc", `${W}/link-etc`),
  ls("ls: workspace/..", `${W}/..`),
  glob("glob: a symlinked directory", `${W}/link-dir-abs`, "*"),
  glob("glob: /etc", "/etc", "passwd"),
  glob("glob: an absolute pattern", W, "/etc/*"),
  grep("grep: a symlinked directory", `${W}/link-dir-abs`, "TOPSECRET"),
  grep("grep: a file symlinked outside", `${W}/link-file-abs`, "TOPSECRET"),
  grep("grep: /etc", "/etc", "root"),
  // present_files and view_image
  present("present: a symlink in outputs to the workspace", `${O}/leak.txt`),
  present("present: a symlink in outputs to outside", `${O}/leak-outside.txt`),
  present("present: a workspace file", `${W}/inside.txt`),
  present("present: .. out of outputs", `${O}/../workspace/inside.txt`),
  present("present: another thread's output by host path", Path.join(t2.outputs, "their-report.md")),
  present("present: a host file", Path.join(outside, "secret.txt")),
  view("view: an image symlinked outside", `${W}/link-img.png`),
  view("view: an image by host path", Path.join(outside, "img.png"))
]

describe("escape attempts through the real tools", () => {
  it("has a table of at least 30 attempts", () => assert.isAtLeast(attempts.length, 30))

  for (const [label, tool, args] of attempts) {
    it.effect(label, () =>
      Effect.gen(function*() {
        const before = { home: snapshot(home), outside: snapshot(outside), skills: snapshot(skills) }
        const result = yield* call(tool, args)
        assert.isTrue(result.text.startsWith("Error:"), `${tool} was not refused: ${result.text}`)
        assert.strictEqual(result.status, "error")
        assert.isUndefined(result.update)
        for (const marker of hostMarkers) assert.notInclude(result.text, marker, "a host path leaked")
        assert.notInclude(result.text, "TOPSECRET")
        assert.notInclude(result.text, "THEIRS")
        assert.notInclude(result.text, "root:x:0:0")
        assert.deepStrictEqual({ home: snapshot(home), outside: snapshot(outside), skills: snapshot(skills) }, before)
        assert.isFalse(Fs.existsSync(etcProbe))
        assert.isFalse(Fs.existsSync("/tmp/evil"))
      }))
  }
})

describe("walks never follow links out", () => {
  it.effect("ls, glob and grep over the workspace skip the planted links", () =>
    Effect.gen(function*() {
      const listing = yield* call("ls", { description: d, path: W })
      assert.strictEqual(listing.text, [`${W}/inside.txt`, `${W}/sub/`].join("\n"))
      const globbed = yield* call("glob", { description: d, pattern: "**/*", path: W, include_dirs: true })
      assert.strictEqual(globbed.text, [`Found 2 paths under ${W}`, `1. ${W}/inside.txt`, `2. ${W}/sub/`].join("\n"))
      for (const secret of ["TOPSECRET", "THEIRS", "root:x"]) {
        const grepped = yield* call("grep", { description: d, pattern: secret, path: "/mnt/user-data" })
        assert.strictEqual(grepped.text, "No matches found under /mnt/user-data")
      }
    }))

  it.effect("the skills directory is readable at /mnt/skills", () =>
    Effect.gen(function*() {
      const read = yield* call("read_file", { description: d, path: "/mnt/skills/demo/SKILL.md" })
      assert.strictEqual(read.text, "# demo skill\n")
    }))
})

describe.skipIf(!bwrapInstalled)("output masking through the real bash tool", () => {
  it.live("rewrites the skills directory only as a whole path segment, not as the prefix of another name", () =>
    Effect.gen(function*() {
      const result = yield* call("bash", {
        description: d,
        command: `echo ${skills}-extra/x ${skills}/demo/SKILL.md ${skills}2 at ${skills}.`
      })
      assert.strictEqual(
        result.text,
        `${skills}-extra/x /mnt/skills/demo/SKILL.md ${skills}2 at /mnt/skills.\n`
      )
    }))
})

describe.skipIf(!bwrapInstalled)("links made by bash inside the sandbox", () => {
  it.effect("a symlink created by a sandboxed command cannot be used to read or write host files", () =>
    Effect.gen(function*() {
      const made = yield* call("bash", {
        description: d,
        command: "ln -s /etc/passwd bash-link && ln -s /etc bash-etc && " +
          "ln -s /mnt/user-data/workspace/../../../ bash-up; ls"
      })
      assert.include(made.text, "bash-link")
      for (const [tool, args] of [
        ["read_file", { description: d, path: `${W}/bash-link` }],
        ["write_file", { description: d, path: `${W}/bash-etc/antler-escape-probe`, content: "x" }],
        ["ls", { description: d, path: `${W}/bash-up` }]
      ] as const) {
        const result = yield* call(tool, args)
        assert.isTrue(result.text.startsWith("Error:"), `${tool}: ${result.text}`)
        for (const marker of hostMarkers) assert.notInclude(result.text, marker)
      }
      assert.isFalse(Fs.existsSync(etcProbe))
      for (const name of ["bash-link", "bash-etc", "bash-up"]) Fs.rmSync(ws(name), { force: true })
    }))
})
