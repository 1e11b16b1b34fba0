/**
 * DeerFlow's sandbox tool tests, run against Antler's real tools over a temp data directory. Mirrors
 * `test_sandbox_search_tools.py`, `test_str_replace_empty_file.py`, `test_tool_output_truncation.py`,
 * `test_present_file_tool_core_logic.py`, `test_local_sandbox_virtual_path_contract.py`,
 * `test_local_sandbox_path_regex_cache.py` and `test_local_sandbox_encoding.py` (the parts that are behaviour a
 * model or user sees; the rest is already in SandboxTools.test, LocalSandbox.test, PathEscape.test and
 * sandbox/Bash.test). Where Antler answers otherwise on purpose (docs/deerflow.md), the test pins Antler's answer
 * and says so.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as Bash from "../../src/layers/sandbox/Bash.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import type { JsonObject } from "../../src/state/Message.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const W = "/mnt/user-data/workspace"
const U = "/mnt/user-data/uploads"
const O = "/mnt/user-data/outputs"

/** The real tools of thread t1 (user u1) over a fresh data directory; bash on the host only with `hostBash`. */
const setup = (options: { skills?: string; maxCached?: number; hostBash?: boolean } = {}) =>
  Effect.gen(function*() {
    const home = tempDir("antler-df-tools-")
    const base = defaults()
    const app = AppConfigService.of({
      config: {
        ...base,
        sandbox: { ...base.sandbox, allow_host_bash: options.hostBash ?? false },
        skills: options.skills === undefined ? base.skills : { ...base.skills, path: options.skills }
      },
      source: undefined,
      home,
      ignored: []
    })
    const provider = LocalSandbox.make(app, {
      bwrap: "off",
      ...(options.maxCached === undefined ? {} : { maxCached: options.maxCached })
    })
    const call = (name: string, args: JsonObject) =>
      Effect.flatMap(SandboxTools.tools({ vision: false }), (tools) =>
        Toolkit.make(tools).call({ id: `call-${name}`, name, args })).pipe(
          Effect.provideService(SandboxProvider, provider),
          Effect.provideService(AppConfigService, app),
          Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context),
          Effect.map((result) => ({
            text: String(result.message.content),
            status: result.message.status,
            update: result.update
          }))
        )
    const text = (name: string, args: JsonObject) =>
      Effect.map(call(name, { description: "x", ...args }), (r) => r.text)
    const paths = threadPaths(home, "u1", "t1")
    yield* text("ls", { path: W }) // acquires the sandbox: the thread's directories exist from here on
    const write = (relative: string, content: string | Uint8Array, root = paths.workspace) => {
      const file = Path.join(root, relative)
      Fs.mkdirSync(Path.dirname(file), { recursive: true })
      Fs.writeFileSync(file, content)
      return file
    }
    return { home, provider, call, text, paths, write }
  })

describe("test_sandbox_search_tools.py", () => {
  it.effect("glob **/*.py: virtual paths at any depth (the root's too), junk directories and host paths left out", () =>
    Effect.gen(function*() {
      const { text, write, paths } = yield* setup()
      write("app.py", "print('hi')\n")
      write("pkg/util.py", "print('util')\n")
      write("node_modules/skip.py", "ignored\n")
      const result = yield* text("glob", { pattern: "**/*.py", path: W })
      assert.strictEqual(result, [`Found 2 paths under ${W}`, `1. ${W}/app.py`, `2. ${W}/pkg/util.py`].join("\n"))
      assert.notInclude(result, paths.workspace)
    }))

  it.effect("glob ** with include_dirs lists directories, not an ignored one nor what is inside it", () =>
    Effect.gen(function*() {
      const { text, write } = yield* setup()
      write("src/main.py", "x\n")
      write("node_modules/lib/index.js", "x\n")
      const result = yield* text("glob", { pattern: "**", path: W, include_dirs: true })
      assert.strictEqual(result, [`Found 2 paths under ${W}`, `1. ${W}/src/`, `2. ${W}/src/main.py`].join("\n"))
    }))

  it.effect("glob over a file answers DeerFlow's `Path is not a directory`; grep searches that one file", () =>
    Effect.gen(function*() {
      const { text, write, paths } = yield* setup()
      write("report.md", "Revenue grew 20%\n", paths.uploads)
      assert.strictEqual(
        yield* text("glob", { pattern: "**/*.py", path: `${U}/report.md` }),
        `Error: Path is not a directory: ${U}/report.md`
      )
      const grep = yield* text("grep", { pattern: "Revenue", path: `${U}/report.md` })
      assert.strictEqual(
        grep,
        [`Found 1 matches under ${U}/report.md`, `${U}/report.md:1: Revenue grew 20%`].join("\n")
      )
      assert.notInclude(grep, paths.uploads)
    }))

  it.effect("grep honours glob, skips binary files, and reads literal and case_sensitive as DeerFlow does", () =>
    Effect.gen(function*() {
      const { text, write } = yield* setup()
      write("main.py", "TODO = 'ship it'\nprint(TODO)\n")
      write("notes.txt", "TODO in txt should be filtered\n")
      write("image.bin", new Uint8Array([0, ...Buffer.from("binary TODO")]))
      write("file.py", "price = (a+b)\nresult = a+b\ntodo: also fix\n")
      const filtered = yield* text("grep", { pattern: "TODO", path: W, glob: "**/*.py" })
      assert.include(filtered, `${W}/main.py:1: TODO = 'ship it'`)
      assert.notInclude(filtered, "notes.txt")
      assert.notInclude(filtered, "image.bin")
      const literal = yield* text("grep", { pattern: "(a+b)", path: W, literal: true })
      assert.include(literal, "price = (a+b)")
      assert.notInclude(literal, "result = a+b")
      const cased = yield* text("grep", { pattern: "TODO", path: `${W}/file.py`, case_sensitive: true })
      assert.strictEqual(cased, `No matches found under ${W}/file.py`)
      assert.include(yield* text("grep", { pattern: "TODO", path: `${W}/file.py` }), "todo: also fix")
      assert.isTrue((yield* text("grep", { pattern: "[invalid", path: W })).startsWith("Error: Invalid regex pattern:"))
    }))

  it.effect("a long matching line is shown as DeerFlow's summary: at most 200 characters, 197 and `...`", () =>
    Effect.gen(function*() {
      const { text, write } = yield* setup()
      write("long.txt", `${"x".repeat(120)}NEEDLE${"😀".repeat(150)}\nshort NEEDLE\n${"y".repeat(194)}NEEDLE\n`)
      const lines = (yield* text("grep", { pattern: "NEEDLE", path: `${W}/long.txt` })).split("\n")
      const prefix = `${W}/long.txt:1: `
      assert.strictEqual(lines[1], `${prefix}${"x".repeat(120)}NEEDLE${"😀".repeat(71)}...`)
      assert.strictEqual(lines[2], `${W}/long.txt:2: short NEEDLE`)
      // exactly 200 characters: whole
      assert.strictEqual(lines[3], `${W}/long.txt:3: ${"y".repeat(194)}NEEDLE`)
    }))

  // DeerFlow counts the matches it shows ("Found 2 matches ... (showing first 2)"); Antler counts all it found, on
  // purpose (docs/deerflow.md, "The file tools' results are sentences of Antler's").
  it.effect("a smaller max_results caps the list, says how many there were, and that the results were truncated", () =>
    Effect.gen(function*() {
      const { text, write } = yield* setup()
      write("main.py", "TODO one\nTODO two\nTODO three\n")
      write("a.py", "")
      write("b.py", "")
      const grep = (yield* text("grep", { pattern: "TODO", path: W, max_results: 2 })).split("\n")
      assert.deepStrictEqual(grep.slice(0, 3), [
        `Found 3 matches under ${W} (showing first 2)`,
        `${W}/main.py:1: TODO one`,
        `${W}/main.py:2: TODO two`
      ])
      assert.isTrue(grep[3]!.startsWith("Results truncated."))
      assert.strictEqual(grep.length, 4)
      const glob = (yield* text("glob", { pattern: "**/*.py", path: W, max_results: 2 })).split("\n")
      assert.strictEqual(glob[0], `Found 3 paths under ${W} (showing first 2)`)
      assert.isTrue(glob[3]!.startsWith("Results truncated."))
    }))

  it.effect("ls leaves out staging files (.upload-*.part), not other dot files; an empty folder is (empty)", () =>
    Effect.gen(function*() {
      const { text, write, paths } = yield* setup()
      assert.strictEqual(yield* text("ls", { path: W }), "(empty)")
      write("report.txt", "ready\n", paths.uploads)
      write(".upload-active.part", "partial\n", paths.uploads)
      write(".upload-note.txt", "intentional\n", paths.uploads)
      assert.strictEqual(yield* text("ls", { path: U }), [`${U}/.upload-note.txt`, `${U}/report.txt`].join("\n"))
    }))

  it.effect("ls of the skills root keeps the category folders (public/) and shows no host path", () =>
    Effect.gen(function*() {
      const skills = tempDir("antler-df-skills-")
      Fs.mkdirSync(Path.join(skills, "public/demo"), { recursive: true })
      Fs.writeFileSync(Path.join(skills, "public/demo/SKILL.md"), "---\nname: demo\ndescription: Demo.\n---\n# Demo\n")
      const { text } = yield* setup({ skills })
      const listing = yield* text("ls", { path: "/mnt/skills" })
      assert.deepStrictEqual(listing.split("\n"), ["/mnt/skills/public/", "/mnt/skills/public/demo/"])
      assert.notInclude(listing, skills)
      assert.strictEqual(
        yield* text("glob", { pattern: "**/SKILL.md", path: "/mnt/skills" }),
        ["Found 1 paths under /mnt/skills", "1. /mnt/skills/public/demo/SKILL.md"].join("\n")
      )
    }))
})

describe("test_str_replace_empty_file.py", () => {
  it.effect("an empty file and a non-empty old_str: not found, naming the file; the file stays empty", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* setup()
      const file = write("empty.txt", "", paths.outputs)
      const result = yield* call("str_replace", {
        description: "x",
        path: `${O}/empty.txt`,
        old_str: "something",
        new_str: "x"
      })
      assert.strictEqual(result.text, `Error: String to replace not found in file: ${O}/empty.txt`)
      assert.strictEqual(result.status, "error")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "")
    }))

  // DeerFlow answers `OK` to an empty old_str and changes nothing; Antler refuses it and changes nothing, on purpose
  // (docs/deerflow.md, "`str_replace` edits only what it was asked to"). Either way the file is never rewritten.
  it.effect("an empty old_str never rewrites the file, empty or not, with or without replace_all", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* setup()
      const source = "def main():\n    return 1\n"
      for (const [content, replaceAll] of [["", false], [source, false], [source, true]] as const) {
        const file = write("target.py", content, paths.outputs)
        const result = yield* call("str_replace", {
          description: "x",
          path: `${O}/target.py`,
          old_str: "",
          new_str: "# header\n",
          replace_all: replaceAll
        })
        assert.isTrue(result.text.startsWith("Error: old_str is empty"), result.text)
        assert.strictEqual(Fs.readFileSync(file, "utf8"), content)
      }
    }))
})

describe("test_present_file_tool_core_logic.py", () => {
  it.effect("a host path in the thread's outputs is presented by its virtual path", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* setup()
      const host = write("report.md", "ok", paths.outputs)
      const result = yield* call("present_files", { filepaths: [host] })
      assert.deepStrictEqual(result.update, { artifacts: [`${O}/report.md`] })
      assert.notInclude(result.text, paths.outputs)
    }))

  // DeerFlow's error repeats the host path it was given; Antler names the file by its virtual path only.
  it.effect("a host path outside outputs is refused, the whole call, naming it by its virtual path", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* setup()
      const leaked = write("notes.txt", "leak")
      const result = yield* call("present_files", { filepaths: [leaked] })
      assert.strictEqual(result.text, `Error: Only files in ${O} can be presented: ${W}/notes.txt`)
      assert.isUndefined(result.update)
      assert.notInclude(result.text, paths.workspace)
    }))
})

describe("test_local_sandbox_virtual_path_contract.py", () => {
  it.effect("ls /mnt/user-data lists workspace, uploads and outputs once each", () =>
    Effect.gen(function*() {
      const { text, write, paths } = yield* setup()
      for (const root of [paths.workspace, paths.uploads, paths.outputs]) write(".keep", "", root)
      const lines = (yield* text("ls", { path: "/mnt/user-data" })).split("\n")
      for (const sub of ["workspace", "uploads", "outputs"]) {
        assert.strictEqual(lines.filter((l) => l.replace(/\/$/, "") === `/mnt/user-data/${sub}`).length, 1, sub)
      }
    }))

  it.live("bash (on the host) lists /mnt/user-data as its three folders, and an upload by its virtual path", () =>
    Effect.gen(function*() {
      const { text, write, paths } = yield* setup({ hostBash: true })
      write("note.txt", "payload", paths.uploads)
      assert.strictEqual(
        yield* text("bash", { command: "ls /mnt/user-data; ls /mnt/user-data/uploads" }),
        "outputs\nuploads\nworkspace\nnote.txt\n"
      )
    }))

  it.effect("one thread of two users: what one writes the other cannot read", () =>
    Effect.gen(function*() {
      const { provider } = yield* setup()
      const alice = yield* provider.acquire("alpha", "alice")
      const bob = yield* provider.acquire("alpha", "bob")
      assert.notStrictEqual(alice.id, bob.id)
      yield* alice.writeText(`${O}/report.md`, "alice-only")
      const error = yield* Effect.flip(bob.readText(`${O}/report.md`))
      assert.strictEqual(error.reason, "not_found")
      assert.strictEqual(yield* alice.readText(`${O}/report.md`), "alice-only")
    }))

  it.effect("the cache is least recently used: a get keeps a thread's sandbox, the next acquire drops the oldest", () =>
    Effect.gen(function*() {
      const { provider } = yield* setup({ maxCached: 3 })
      // (setup's own thread t1 is the oldest: a, b and c push it out)
      for (const name of ["a", "b", "c"]) yield* provider.acquire(name, "default")
      assert.isTrue(Option.isSome(yield* provider.get("local:default:a")))
      yield* provider.acquire("d", "default")
      const cached = (name: string) => Effect.map(provider.get(`local:default:${name}`), Option.isSome)
      assert.deepStrictEqual(
        [yield* cached("a"), yield* cached("b"), yield* cached("c"), yield* cached("d")],
        [true, false, true, true]
      )
    }))
})

describe("test_tool_output_truncation.py (read_file and ls: head truncation)", () => {
  const MARKER = /\n\.\.\. \[truncated: showing first (\d+) of (\d+) chars\. ([^\]]+)\] \.\.\.$/
  const hint = "Use start_line/end_line to read a specific range"

  it.prop(
    "never over max_chars; a head of the text, then the marker with what was kept of the total; 0 is unlimited",
    [FastCheck.string({ maxLength: 3000 }), FastCheck.integer({ min: 1, max: 3000 })],
    ([text, max]) => {
      const out = SandboxTools.headTruncate(text, max, hint)
      if (SandboxTools.headTruncate(text, 0, hint) !== text) return false
      if (text.length <= max) return out === text
      if (out.length > max) return false
      const match = MARKER.exec(out)
      // a cap smaller than the marker itself: the first max characters
      if (match === null) return out === text.slice(0, max)
      const head = out.slice(0, match.index)
      return text.startsWith(head) && Number(match[1]) === head.length && Number(match[2]) === text.length &&
        match[3] === hint
    }
  )

  it("the tail is not kept: what was cut does not appear", () => {
    const out = SandboxTools.headTruncate(`${"H".repeat(50_000)}TAIL_SHOULD_NOT_APPEAR`, 50_000, hint)
    assert.notInclude(out, "TAIL_SHOULD_NOT_APPEAR")
    assert.include(out, "of 50022 chars")
    assert.isAtMost(out.length, 50_000)
  })
})

describe("test_local_sandbox_path_regex_cache.py (host bash: the command's paths)", () => {
  it("a virtual root is rewritten as a whole path segment only: /mnt/skills-extra is not /mnt/skills", () => {
    const roots: ReadonlyArray<readonly [string, string]> = [
      ["/mnt/user-data/workspace", "/host/ws"],
      ["/mnt/skills", "/host/skills"]
    ]
    assert.strictEqual(Bash.rewriteHostCommand("ls /mnt/skills-extra/data", roots), "ls /mnt/skills-extra/data")
    assert.strictEqual(
      Bash.rewriteHostCommand("cat /mnt/user-data/workspace/foo.txt /mnt/skills", roots),
      "cat /host/ws/foo.txt /host/skills"
    )
  })
})

describe("test_local_sandbox_encoding.py", () => {
  it.effect("write_file and read_file keep UTF-8 text as written: curly quotes, CJK, emoji", () =>
    Effect.gen(function*() {
      const { text, paths } = yield* setup()
      const content = "\u201cutf8\u201d 文档 emoji \u{1F600}\n"
      assert.strictEqual(yield* text("write_file", { path: `${W}/utf8.txt`, content }), "OK")
      assert.strictEqual(Fs.readFileSync(Path.join(paths.workspace, "utf8.txt"), "utf8"), content)
      assert.strictEqual(yield* text("read_file", { path: `${W}/utf8.txt` }), content)
    }))
})
