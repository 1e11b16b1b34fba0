/**
 * DeerFlow's sandbox tool tests not mirrored before (`test_read_file_line_range.py`, `test_read_file_tool_binary.py`,
 * `test_write_file_tool_size_guard.py`, `test_local_sandbox_command_timeout.py`, the tool-level cases of
 * `test_sandbox_tools_security.py`), run against Antler's real tools over a temp data directory, bash under real
 * bubblewrap. The strings asserted are DeerFlow's: the model reads them.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as LocalSandbox from "../../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../../src/layers/SandboxTools.js"
import * as Toolkit from "../../../src/layers/Toolkit.js"
import type { SandboxConfig } from "../../../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths } from "../../../src/services/Sandbox.js"
import type { JsonObject } from "../../../src/state/Message.js"
import * as Bwrap from "../../support/bwrap.js"
import { inRun } from "../../support/fixtures.js"

const homes: Array<string> = []
afterAll(() => {
  for (const home of homes) Fs.rmSync(home, { recursive: true, force: true })
})

const bwrapInstalled = await Bwrap.installed()

const W = "/mnt/user-data/workspace"
const U = "/mnt/user-data/uploads"

/** The real tools of thread t1 (user u1) over a fresh data directory. */
const setup = (options: { sandbox?: Partial<SandboxConfig>; bwrap?: "auto" | "off" } = {}) => {
  const home = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-df25-"))
  homes.push(home)
  const base = defaults()
  const app = AppConfigService.of({
    config: { ...base, sandbox: { ...base.sandbox, ...options.sandbox } },
    source: undefined,
    home,
    ignored: []
  })
  const provider = LocalSandbox.make(app, { bwrap: options.bwrap ?? "off", cgroup: "off" })
  const call = (name: string, args: JsonObject) =>
    SandboxTools.tools({ vision: false }).pipe(
      Effect.flatMap((tools) => Toolkit.make(tools).call({ id: "call-1", name, args: { description: "x", ...args } })),
      Effect.map((result) => ({ text: String(result.message.content), status: result.message.status })),
      Effect.provideService(SandboxProvider, provider),
      Effect.provideService(AppConfigService, app),
      Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context)
    )
  const text = (name: string, args: JsonObject) => Effect.map(call(name, args), (r) => r.text)
  const paths = threadPaths(home, "u1", "t1")
  const write = (root: string, relative: string, content: string | Uint8Array) => {
    const file = Path.join(root, relative)
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, content)
    return file
  }
  return { call, text, paths, write, home }
}

const FIVE = "line1\nline2\nline3\nline4\nline5"

describe("test_read_file_line_range.py", () => {
  const read = (args: JsonObject) =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      t.write(t.paths.uploads, "five.txt", FIVE)
      return yield* t.text("read_file", { path: `${U}/five.txt`, ...args })
    })

  it.effect("one-sided and two-sided ranges slice inclusively; end_line past the end is clamped", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* read({ start_line: 3 }), "line3\nline4\nline5")
      assert.strictEqual(yield* read({ end_line: 2 }), "line1\nline2")
      assert.strictEqual(yield* read({ start_line: 2, end_line: 4 }), "line2\nline3\nline4")
      assert.strictEqual(yield* read({ end_line: 99 }), FIVE)
    }))

  it.effect("a bad range reads DeerFlow's parenthesised notes, with no line of the file", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* read({ start_line: 0 }), "(start_line must be >= 1)")
      assert.strictEqual(yield* read({ start_line: -1 }), "(start_line must be >= 1)")
      assert.strictEqual(yield* read({ end_line: 0 }), "(end_line must be >= 1)")
      assert.strictEqual(yield* read({ end_line: -1 }), "(end_line must be >= 1)")
      assert.strictEqual(yield* read({ start_line: 4, end_line: 2 }), "(start_line > end_line — no lines in range)")
      assert.strictEqual(yield* read({ start_line: 99 }), "(start_line exceeds file length)")
    }))
})

describe("test_local_sandbox_provider_mounts.py (read_file opens text with Python's universal newlines)", () => {
  it.effect("a CRLF or CR file reads with `\\n` line ends, whole or by range", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      t.write(t.paths.workspace, "dos.txt", "one\r\ntwo\r\nthree\r\n")
      t.write(t.paths.workspace, "mac.txt", "a\rb\rc")
      assert.strictEqual(yield* t.text("read_file", { path: `${W}/dos.txt` }), "one\ntwo\nthree\n")
      assert.strictEqual(yield* t.text("read_file", { path: `${W}/dos.txt`, start_line: 2 }), "two\nthree")
      assert.strictEqual(yield* t.text("read_file", { path: `${W}/mac.txt`, start_line: 2 }), "b\nc")
    }))

  it.effect("str_replace takes back what read_file showed of a CRLF file, and the file keeps its CRLF", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      const file = t.write(t.paths.workspace, "dos.txt", "one\r\ntwo\r\nthree\r\n")
      const shown = yield* t.text("read_file", { path: `${W}/dos.txt` })
      const edited = yield* t.text("str_replace", { path: `${W}/dos.txt`, old_str: shown.slice(0, 7), new_str: "1\n2" })
      assert.strictEqual(edited, "OK")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "1\r\n2\r\nthree\r\n")
    }))
})

describe("test_read_file_tool_binary.py", () => {
  it.effect("a binary upload reads DeerFlow's actionable hint; a text file is read as it is", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      t.write(t.paths.uploads, "data.xlsx", Buffer.from("PK\x03\x04\x14\x00\x00\x00\x08\x00\x82\x6a\xb1\x55", "latin1"))
      t.write(t.paths.uploads, "notes.txt", "hello 你好\nsecond line")
      assert.strictEqual(
        yield* t.text("read_file", { path: `${U}/data.xlsx` }),
        `Error: cannot read '${U}/data.xlsx' as text — it appears to be a binary file (e.g. .xlsx, .pdf, or an ` +
          "image). read_file only supports UTF-8 text. Use bash with a suitable library instead (pandas/openpyxl " +
          "for spreadsheets), or view_image for images."
      )
      assert.strictEqual(yield* t.text("read_file", { path: `${U}/notes.txt` }), "hello 你好\nsecond line")
    }))
})

describe("test_write_file_tool_size_guard.py", () => {
  it.effect("a write over the cap names the size and the cap and points to str_replace and append=True", () =>
    Effect.gen(function*() {
      const t = setup()
      const ok = yield* t.text("write_file", { path: `${W}/a.txt`, content: "a".repeat(79 * 1024) })
      assert.strictEqual(ok, "OK")
      const big = yield* t.text("write_file", { path: `${W}/b.txt`, content: "a".repeat(81 * 1024) })
      assert.strictEqual(
        big,
        "Error: write_file content (82944 bytes) exceeds the 81920-byte single-call limit. Split the content into " +
          "smaller pieces: either (a) write the first section now, then use `str_replace` for further edits, or (b) " +
          "call write_file again with append=True carrying the next section."
      )
      assert.isFalse(Fs.existsSync(Path.join(t.paths.workspace, "b.txt")))
    }))

  it.effect("write_file_max_bytes: 0 turns the guard off; a larger cap lets a larger write through", () =>
    Effect.gen(function*() {
      const off = setup({ sandbox: { write_file_max_bytes: 0 } })
      assert.strictEqual(yield* off.text("write_file", { path: `${W}/a.txt`, content: "a".repeat(500 * 1024) }), "OK")
      const raised = setup({ sandbox: { write_file_max_bytes: 300 * 1024 } })
      assert.strictEqual(
        yield* raised.text("write_file", { path: `${W}/a.txt`, content: "a".repeat(150 * 1024) }),
        "OK"
      )
    }))
})

describe("test_sandbox_tools_security.py (what the tools answer)", () => {
  it.effect("write_file and str_replace failures name the virtual path in DeerFlow's sentences", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      Fs.mkdirSync(Path.join(t.paths.workspace, "dir"))
      const dir = yield* t.text("write_file", { path: `${W}/dir`, content: "x" })
      assert.strictEqual(dir, `Error: Path is a directory, not a file: ${W}/dir`)
      const missing = yield* t.text("str_replace", { path: `${W}/none.txt`, old_str: "a", new_str: "b" })
      assert.strictEqual(missing, `Error: File not found: ${W}/none.txt`)
      const readMissing = yield* t.text("read_file", { path: `${W}/none.txt` })
      assert.strictEqual(readMissing, `Error: File not found: ${W}/none.txt`)
      const readDir = yield* t.text("read_file", { path: `${W}/dir` })
      assert.strictEqual(readDir, `Error: Path is a directory, not a file: ${W}/dir`)
      const lsMissing = yield* t.text("ls", { path: `${W}/nope` })
      assert.strictEqual(lsMissing, `Error: Directory not found: ${W}/nope`)
      const globMissing = yield* t.text("glob", { path: `${W}/nope`, pattern: "*" })
      assert.strictEqual(globMissing, `Error: Directory not found: ${W}/nope`)
      const grepMissing = yield* t.text("grep", { path: `${W}/nope`, pattern: "x" })
      assert.strictEqual(grepMissing, `Error: Directory not found: ${W}/nope`)
    }))

  it.effect("a write that fails on the file system reads `Failed to write file '<virtual path>': ...`", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      t.write(t.paths.workspace, "f.txt", "a file")
      const under = yield* t.text("write_file", { path: `${W}/f.txt/x.txt`, content: "x" })
      assert.strictEqual(
        under,
        `Error: Failed to write file '${W}/f.txt/x.txt': A part of the path is a file, not a directory: ` +
          `${W}/f.txt/x.txt`
      )

    }))
})

// An immutable file (chattr +i) refuses writes even to root: the one way to make a write fail on permission here.
const chattr = (flag: "+i" | "-i", file: string): boolean => {
  try {
    ChildProcess.execFileSync("chattr", [flag, file], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}
const canChattr = (() => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "antler-chattr-"))
  const file = Path.join(dir, "probe")
  Fs.writeFileSync(file, "")
  const ok = chattr("+i", file)
  if (ok) chattr("-i", file)
  Fs.rmSync(dir, { recursive: true, force: true })
  return ok
})()

describe.skipIf(!canChattr)("test_sandbox_tools_security.py (a file the tools may not change)", () => {
  it.effect("str_replace and write_file refuse it in DeerFlow's words, naming the virtual path", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      const file = t.write(t.paths.workspace, "locked.txt", "abc")
      assert.isTrue(chattr("+i", file))
      const edited = yield* Effect.ensuring(
        Effect.all([
          t.text("str_replace", { path: `${W}/locked.txt`, old_str: "a", new_str: "b" }),
          t.text("write_file", { path: `${W}/locked.txt`, content: "b" })
        ]),
        Effect.sync(() => chattr("-i", file))
      )
      assert.deepStrictEqual(edited, [
        `Error: Permission denied accessing file: ${W}/locked.txt`,
        `Error: Permission denied writing to file: ${W}/locked.txt`
      ])
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "abc")
    }))
})

describe("glob and grep truncation", () => {
  it.effect("the lines that end a capped result are DeerFlow's", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      for (const n of [1, 2, 3]) t.write(t.paths.workspace, `f${n}.txt`, "hit\n")
      const globbed = yield* t.text("glob", { path: W, pattern: "*.txt", max_results: 2 })
      assert.isTrue(globbed.endsWith("\nResults truncated. Narrow the path or pattern to see fewer matches."), globbed)
      const grepped = yield* t.text("grep", { path: W, pattern: "hit", max_results: 2 })
      assert.isTrue(grepped.endsWith("\nResults truncated. Narrow the path or add a glob filter."), grepped)
    }))
})

describe("test_sandbox_search_tools.py (find_grep_matches reads with errors=\"replace\")", () => {
  it.effect("grep finds a line of a text file not in UTF-8 (Latin-1), its odd byte shown as U+FFFD", () =>
    Effect.gen(function*() {
      const t = setup()
      yield* t.text("ls", { path: W })
      t.write(t.paths.workspace, "menu.csv", Buffer.from("id,name\n1,caf\xe9 au lait\n", "latin1"))
      t.write(t.paths.workspace, "blob.bin", Buffer.from("lait\u0000lait", "latin1"))
      assert.strictEqual(
        yield* t.text("grep", { path: W, pattern: "lait" }),
        `Found 1 matches under ${W}\n${W}/menu.csv:2: 1,caf\ufffd au lait`
      )
    }))
})

describe.skipIf(!bwrapInstalled)("test_local_sandbox_command_timeout.py (bash under bubblewrap)", () => {
  it.live("a failing command ends with DeerFlow's `Exit Code: N` line", () =>
    Effect.gen(function*() {
      const t = setup({ bwrap: "auto" })
      assert.strictEqual(yield* t.text("bash", { command: "echo hello" }), "hello\n")
      assert.strictEqual(yield* t.text("bash", { command: "exit 3" }), "Exit Code: 3")
      assert.strictEqual(yield* t.text("bash", { command: "echo out; exit 4" }), "out\nExit Code: 4")
      assert.strictEqual(yield* t.text("bash", { command: "printf out; exit 5" }), "out\nExit Code: 5")
      assert.strictEqual(yield* t.text("bash", { command: "true" }), "(no output)")
    }))

  it.live("a command past the timeout is stopped with DeerFlow's notice after its output", () =>
    Effect.gen(function*() {
      const t = setup({ bwrap: "auto", sandbox: { bash_command_timeout: 1 } })
      const result = yield* t.call("bash", { command: "echo started; while true; do sleep 0.2; done" })
      assert.strictEqual(
        result.text,
        "started\nCommand timed out after 1 second and was terminated, together with every process it started."
      )
      assert.strictEqual(result.status, "success")
      const quiet = yield* t.text("bash", { command: "sleep 30" })
      assert.strictEqual(
        quiet,
        "Command timed out after 1 second and was terminated, together with every process it started."
      )
      // stdin is empty: a command reading it gets end-of-file at once
      const read = yield* t.text("bash", { command: "read x; echo got" })
      assert.strictEqual(read, "got\n")
    }))
})
