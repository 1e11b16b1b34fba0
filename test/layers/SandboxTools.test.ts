import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import type { SandboxConfig } from "../../src/services/AppConfig.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import type { RunServices } from "../../src/services/RunContext.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import { ToolService } from "../../src/services/ToolService.js"
import type { JsonObject } from "../../src/state/Message.js"
import * as ReadMark from "../../src/state/ReadMark.js"
import * as Bwrap from "../support/bwrap.js"
import { inRun, tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"

// ---------------------------------------------------------------------------------------------------------
// The real tools over a temp data directory.

const tempDir = tempDirs()
const bwrapInstalled = await Bwrap.installed()


const setup = (
  options: {
    sandbox?: Partial<SandboxConfig>
    vision?: boolean
    skills?: string
    readBeforeWrite?: boolean
    bwrap?: "auto" | "off"
  } = {}
) => {
  const home = tempDir("antler-tools-")
  const base = defaults()
  const app = AppConfigService.of({
    config: {
      ...base,
      sandbox: { ...base.sandbox, ...options.sandbox },
      skills: options.skills === undefined ? base.skills : { ...base.skills, path: options.skills },
      read_before_write: { enabled: options.readBeforeWrite ?? true }
    },
    source: undefined,
    home,
    ignored: []
  })
  const provider = LocalSandbox.make(app, { bwrap: options.bwrap ?? "off" })
  type Needs = SandboxProvider | AppConfigService | RunServices
  const provide = <A, E>(effect: Effect.Effect<A, E, Needs>, threadId = "t1") =>
    effect.pipe(
      Effect.provideService(SandboxProvider, provider),
      Effect.provideService(AppConfigService, app),
      Effect.provide(inRun({ threadId, userId: "u1" }).context)
    )
  const call = (name: string, args: JsonObject, threadId = "t1") =>
    provide(
      Effect.flatMap(SandboxTools.tools({ vision: options.vision ?? true }), (tools) =>
        Toolkit.make(tools).call({ id: `call-${name}`, name, args })),
      threadId
    ).pipe(
      Effect.map((result) => ({
        text: String(result.message.content),
        status: result.message.status,
        update: result.update,
        mark: result.message.additional_kwargs?.[ReadMark.READ_MARK_KEY]
      }))
    )
  const paths = threadPaths(home, "u1", "t1")
  const write = (relative: string, content: string | Uint8Array, root = paths.workspace) => {
    const file = Path.join(root, relative)
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, content)
    return file
  }
  return { home, app, provider, call, provide, paths, write }
}

/** A sandbox whose directories exist (the first call acquires it). */
const ready = (options: Parameters<typeof setup>[0] = {}) =>
  Effect.gen(function*() {
    const env = setup(options)
    yield* env.call("ls", { description: "init", path: "/mnt/user-data/workspace" })
    return env
  })

const W = "/mnt/user-data/workspace"
const O = "/mnt/user-data/outputs"

type Call = ReturnType<typeof setup>["call"]
const replace = (call: Call, file: string, old_str: string, new_str: string, extra: JsonObject = {}) =>
  call("str_replace", { description: "x", path: `${W}/${file}`, old_str, new_str, ...extra })

// ---------------------------------------------------------------------------------------------------------

describe("tool list and schemas", () => {
  it.effect("offers view_image only for vision models, bash unless switched off, in a stable order", () =>
    Effect.gen(function*() {
      const { provide } = setup()
      const names = (options: SandboxTools.Options) =>
        provide(Effect.map(SandboxTools.tools(options), (tools) => tools.map((t) => t.name)))
      assert.deepStrictEqual(yield* names({ vision: false }), [
        "bash",
        "ls",
        "read_file",
        "write_file",
        "str_replace",
        "glob",
        "grep",
        "present_files"
      ])
      assert.deepStrictEqual((yield* names({ vision: true })).slice(-1), ["view_image"])
      assert.notInclude(yield* names({ vision: false, bash: false }), "bash")
      assert.deepStrictEqual(yield* names({ vision: true }), [...SandboxTools.toolNames({ vision: true })])
    }))

  it.effect("every argument is described, and the sandbox tools take `description` first", () =>
    Effect.gen(function*() {
      const { provide } = setup()
      const service = yield* provide(
        Effect.map(SandboxTools.tools({ vision: true }), Toolkit.make)
      )
      for (const definition of service.definitions) {
        const properties = definition.parameters.properties as Record<string, { description?: string }>
        for (const [field, schema] of Object.entries(properties)) {
          assert.isString(schema.description, `${definition.name}.${field} has no description`)
        }
        if (!["present_files", "view_image"].includes(definition.name)) {
          assert.strictEqual(Object.keys(properties)[0], "description", definition.name)
          assert.include(definition.parameters.required as Array<string>, "description")
        }
      }
    }))

  it.effect("the layer is a ToolService that answers unknown tools and bad arguments readably", () =>
    Effect.gen(function*() {
      const { provider, app } = setup()
      const result = yield* Effect.gen(function*() {
        const tools = yield* ToolService
        const unknown = yield* tools.call({ id: "c1", name: "rm_rf", args: {} })
        const bad = yield* tools.call({ id: "c2", name: "read_file", args: { description: "x", path: 42 } })
        return { unknown: String(unknown.message.content), bad: String(bad.message.content) }
      }).pipe(
        Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context),
        Effect.provide(SandboxTools.layer({ vision: false }).pipe(
          Layer.provide(Layer.succeed(SandboxProvider, provider)),
          Layer.provide(Layer.succeed(AppConfigService, app))
        ))
      )
      assert.isTrue(result.unknown.startsWith("Error: Tool 'rm_rf' does not exist"))
      assert.isTrue(result.bad.startsWith("Error: Invalid arguments for tool 'read_file'"))
      assert.include(result.bad, "path")
    }))

  it.effect("acquires the run's thread sandbox lazily: the first call creates the thread's directories", () =>
    Effect.gen(function*() {
      const { call, paths } = setup()
      assert.isFalse(Fs.existsSync(paths.workspace))
      const result = yield* call("write_file", { description: "x", path: `${O}/a.txt`, content: "A" })
      assert.strictEqual(result.text, "OK")
      for (const dir of [paths.workspace, paths.uploads, paths.outputs]) assert.isTrue(Fs.statSync(dir).isDirectory())
      assert.strictEqual(Fs.readFileSync(Path.join(paths.outputs, "a.txt"), "utf8"), "A")
    }))

  it.effect("refuses a run whose thread id is not a safe path segment", () =>
    Effect.gen(function*() {
      const { call } = setup()
      const result = yield* call("ls", { description: "x", path: W }, "../escape")
      assert.isTrue(result.text.startsWith("Error: Invalid thread id"))
    }))
})

describe("read_file", () => {
  it.effect("reads a whole file, or a 1-based inclusive line range with line endings stripped", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("f.txt", "one\r\ntwo\nthree\nfour\n")
      const read = (args: JsonObject) =>
        Effect.map(call("read_file", { description: "x", path: `${W}/f.txt`, ...args }), (r) => r.text)
      // line ends read as `\n`, as DeerFlow's read_file (Python's universal newlines) shows them
      assert.strictEqual(yield* read({}), "one\ntwo\nthree\nfour\n")
      assert.strictEqual(yield* read({ start_line: 2, end_line: 3 }), "two\nthree")
      assert.strictEqual(yield* read({ start_line: 3 }), "three\nfour")
      assert.strictEqual(yield* read({ end_line: 1 }), "one")
      assert.strictEqual(yield* read({ start_line: 4, end_line: 99 }), "four")
      assert.strictEqual(yield* read({ start_line: 2, end_line: null }), "two\nthree\nfour")
    }))

  it.effect("explains bad ranges in DeerFlow's parenthesised notes, before reading the file where it can", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("f.txt", "a\nb\nc\n")
      const read = (args: JsonObject) => call("read_file", { description: "x", path: `${W}/f.txt`, ...args })
      const cases: Array<[JsonObject, string]> = [
        [{ start_line: 0 }, "(start_line must be >= 1)"],
        [{ end_line: 0 }, "(end_line must be >= 1)"],
        // DeerFlow's notes (test_read_file_line_range), word for word
        [{ start_line: 3, end_line: 2 }, "(start_line > end_line — no lines in range)"],
        [{ start_line: 4 }, "(start_line exceeds file length)"],
        [{ start_line: -1 }, "(start_line must be >= 1)"],
        [{ end_line: -1 }, "(end_line must be >= 1)"]
      ]
      for (const [args, expected] of cases) {
        const result = yield* read(args)
        assert.strictEqual(result.text, expected, JSON.stringify(args))
      }
      // a range wrong whatever the file holds is answered without reading it, so even for a missing file
      const missing = yield* call("read_file", { description: "x", path: `${W}/none.txt`, start_line: 0 })
      assert.strictEqual(missing.text, "(start_line must be >= 1)")
      const decimal = yield* read({ start_line: 1.5 })
      assert.isTrue(decimal.text.startsWith("Error: Invalid arguments for tool 'read_file'"))
    }))

  it.effect("stamps its result with the read mark of the whole file as read (ReadBeforeWrite reads it there)", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("notes/f.txt", "one\ntwo\n")
      const ranged = yield* call("read_file", { description: "x", path: "notes//f.txt", start_line: 2 })
      assert.strictEqual(ranged.text, "two")
      // the path as ReadBeforeWrite compares it (absolute, normalised), the hash of all of the file
      assert.deepStrictEqual(ranged.mark, { path: `${W}/notes/f.txt`, hash: ReadMark.contentHash("one\ntwo\n") })
      // a failed read is not a read
      assert.isUndefined((yield* call("read_file", { description: "x", path: `${W}/missing.txt` })).mark)
      assert.isUndefined((yield* call("read_file", { description: "x", path: `${W}/notes/f.txt`, start_line: 9 })).mark)
      // with read_before_write off, results carry no marks
      const off = yield* ready({ readBeforeWrite: false })
      off.write("f.txt", "x")
      assert.isUndefined((yield* off.call("read_file", { description: "x", path: `${W}/f.txt` })).mark)
    }))

  it.effect("says (empty) for an empty file", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("empty.txt", "")
      assert.strictEqual((yield* call("read_file", { description: "x", path: `${W}/empty.txt` })).text, "(empty)")
      assert.strictEqual(
        (yield* call("read_file", { description: "x", path: `${W}/empty.txt`, start_line: 1 })).text,
        "(empty)"
      )
    }))

  it.effect("head-truncates output over read_file_output_max_chars with the range hint", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready({ sandbox: { read_file_output_max_chars: 500 } })
      const content = Array.from({ length: 400 }, (_, i) => `row ${i}`).join("\n")
      write("big.txt", content)
      const { text } = yield* call("read_file", { description: "x", path: `${W}/big.txt` })
      assert.isAtMost(text.length, 500)
      const marker = String.raw`\n\.\.\. \[truncated: showing first (\d+) of (\d+) chars\. ` +
        String.raw`Use start_line/end_line to read a specific range\] \.\.\.$`
      const match = new RegExp(marker).exec(text)
      assert.isNotNull(match)
      assert.strictEqual(Number(match![2]), content.length)
      assert.strictEqual(text.slice(0, Number(match![1])), content.slice(0, Number(match![1])))
    }))

  it.effect("read_file counts characters as DeerFlow does: emoji count once and are never cut in half", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready({ sandbox: { read_file_output_max_chars: 500 } })
      const fits = "😀".repeat(400) // 800 code units, 400 characters
      write("fits.txt", fits)
      assert.strictEqual((yield* call("read_file", { description: "x", path: `${W}/fits.txt` })).text, fits)
      const long = "a" + "😀".repeat(600)
      write("long.txt", long)
      const { text } = yield* call("read_file", { description: "x", path: `${W}/long.txt` })
      assert.isAtMost(Array.from(text).length, 500)
      assert.notMatch(text, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/)
      const match = /\n\.\.\. \[truncated: showing first (\d+) of (\d+) chars\. /.exec(text)
      assert.isNotNull(match)
      assert.strictEqual(Number(match![2]), 601)
      assert.strictEqual(text.slice(0, match!.index), Array.from(long).slice(0, Number(match![1])).join(""))
    }))

  it.effect("reports missing files, directories and binary files readably", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* ready()
      write("bin.dat", new Uint8Array([0x89, 0x00, 0xff, 0x10]))
      write("latin1.txt", new Uint8Array([0x63, 0x61, 0x66, 0xe9]))
      Fs.mkdirSync(Path.join(paths.workspace, "dir"), { recursive: true })
      const read = (path: string) => Effect.map(call("read_file", { description: "x", path }), (r) => r.text)
      assert.strictEqual(yield* read(`${W}/nope.txt`), `Error: File not found: ${W}/nope.txt`)
      assert.strictEqual(yield* read(`${W}/dir`), `Error: Path is a directory, not a file: ${W}/dir`)
      for (const file of ["bin.dat", "latin1.txt"]) {
        const text = yield* read(`${W}/${file}`)
        assert.isTrue(text.startsWith(`Error: cannot read '${W}/${file}' as text`), text)
        assert.include(text, "view_image")
        // steered to bash and a library, not to another read_file (DeerFlow's test_read_file_tool_binary)
        assert.include(text, "binary")
        assert.include(text, "Use bash with a suitable library")
        assert.include(text, "pandas/openpyxl for spreadsheets")
      }
    }))
})

describe("write_file", () => {
  it.effect("writes, creates parent directories, overwrites and appends", () =>
    Effect.gen(function*() {
      const { call, paths } = yield* ready()
      const file = Path.join(paths.workspace, "deep/er/f.md")
      const first = yield* call("write_file", { description: "x", path: `${W}/deep/er/f.md`, content: "first\n" })
      assert.strictEqual(first.text, "OK")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "first\n")
      yield* call("write_file", { description: "x", path: `${W}/deep/er/f.md`, content: "second\n", append: true })
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "first\nsecond\n")
      yield* call("write_file", { description: "x", path: `${W}/deep/er/f.md`, content: "new" })
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "new")
    }))

  it.effect("refuses a single write over write_file_max_bytes with guidance, but allows appends in chunks", () =>
    Effect.gen(function*() {
      const { call, paths } = yield* ready({ sandbox: { write_file_max_bytes: 1000 } })
      const big = "é".repeat(600) // 1200 bytes in UTF-8, 600 chars
      const refused = yield* call("write_file", { description: "x", path: `${W}/big.txt`, content: big })
      assert.isTrue(refused.text.startsWith("Error: write_file content (1200 bytes) exceeds the 1000-byte single-call"))
      assert.include(refused.text, "append=True")
      assert.include(refused.text, "str_replace")
      assert.isFalse(Fs.existsSync(Path.join(paths.workspace, "big.txt")))
      const half = big.slice(0, 300) // 600 bytes
      for (const append of [false, true]) {
        const written = yield* call("write_file", { description: "x", path: `${W}/big.txt`, content: half, append })
        assert.strictEqual(written.text, "OK")
      }
      assert.strictEqual(Fs.readFileSync(Path.join(paths.workspace, "big.txt"), "utf8"), half + half)
    }))

  it.effect("an append over write_file_max_bytes is refused too (it once let 10 MB through)", () =>
    Effect.gen(function*() {
      const { call, paths } = yield* ready()
      const file = Path.join(paths.workspace, "log.txt")
      const started = yield* call("write_file", { description: "x", path: `${W}/log.txt`, content: "start\n" })
      assert.strictEqual(started.text, "OK")
      const huge = "x".repeat(10 * 1024 * 1024)
      const refused = yield* call("write_file", { description: "x", path: `${W}/log.txt`, content: huge, append: true })
      assert.strictEqual(
        refused.text,
        "Error: write_file content (10485760 bytes) exceeds the 81920-byte single-call limit. Split the content " +
          "into smaller pieces: call write_file with append=True once for each piece, each under 81920 bytes."
      )
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "start\n")
    }))

  it.effect("appends stop at sandbox.max_file_size_mb: the append that would pass it is refused", () =>
    Effect.gen(function*() {
      const { call, paths } = yield* ready({ sandbox: { max_file_size_mb: 1 } })
      const chunk = "y".repeat(80 * 1024)
      const grow = (content: string, append: boolean) =>
        Effect.map(call("write_file", { description: "x", path: `${W}/grow.txt`, content, append }), (r) => r.text)
      assert.strictEqual(yield* grow("MARK\n", false), "OK")
      const texts: Array<string> = []
      for (let i = 0; i < 14; i++) texts.push(yield* grow(chunk, true))
      // 12 chunks (960 KB) fit; the 13th would make 1040 KB.
      assert.deepStrictEqual(texts.slice(0, 12), Array(12).fill("OK"))
      assert.strictEqual(
        texts[12],
        `Error: ${W}/grow.txt would be 1.0 MB, over the limit of 1 MB for one file (sandbox.max_file_size_mb).`
      )
      assert.strictEqual(texts[13], texts[12])
      assert.strictEqual(Fs.statSync(Path.join(paths.workspace, "grow.txt")).size, 5 + 12 * 80 * 1024)
      // str_replace cannot grow it past the limit either.
      const edited = yield* call("str_replace", {
        description: "x",
        path: `${W}/grow.txt`,
        old_str: "MARK",
        new_str: "z".repeat(70 * 1024),
        replace_all: false
      })
      assert.isTrue(edited.text.startsWith(`Error: ${W}/grow.txt would be 1.0 MB, over the limit of 1 MB`), edited.text)
    }))

  it.effect("the file tools refuse writes that would take the thread's files past sandbox.disk_quota_mb", () =>
    Effect.gen(function*() {
      const { call, paths, write } = yield* ready({ sandbox: { disk_quota_mb: 1, write_file_max_bytes: 0 } })
      write("existing.bin", new Uint8Array(600 * 1024), paths.outputs) // counted too
      const content = "q".repeat(500 * 1024)
      const refused = yield* call("write_file", { description: "x", path: `${W}/more.txt`, content })
      assert.isTrue(
        refused.text.startsWith(`Error: Writing ${W}/more.txt would take the thread's files to 1.`),
        refused.text
      )
      assert.include(refused.text, "MB, over the disk quota of 1 MB (sandbox.disk_quota_mb). Delete files")
      assert.isFalse(Fs.existsSync(Path.join(paths.workspace, "more.txt")))
      Fs.rmSync(Path.join(paths.outputs, "existing.bin"))
      assert.strictEqual((yield* call("write_file", { description: "x", path: `${W}/more.txt`, content })).text, "OK")
      // Rewriting a file with content of the same size does not grow the thread.
      assert.strictEqual((yield* call("write_file", { description: "x", path: `${W}/more.txt`, content })).text, "OK")
    }))

  it.effect("a cap of 0 disables the limit; the default limit is 80 KB", () =>
    Effect.gen(function*() {
      const unlimited = yield* ready({ sandbox: { write_file_max_bytes: 0 } })
      const huge = "x".repeat(200 * 1024)
      const written = yield* unlimited.call("write_file", { description: "x", path: `${W}/h.txt`, content: huge })
      assert.strictEqual(written.text, "OK")
      const standard = yield* ready()
      const write = (path: string, bytes: number) =>
        standard.call("write_file", { description: "x", path: `${W}/${path}`, content: "x".repeat(bytes) })
      assert.strictEqual((yield* write("ok.txt", 80 * 1024)).text, "OK")
      const over = yield* write("no.txt", 80 * 1024 + 1)
      assert.isTrue(over.text.startsWith("Error: write_file content (81921 bytes) exceeds the 81920-byte single-call"))
    }))

  it.effect("refuses to write a directory", () =>
    Effect.gen(function*() {
      const { call } = yield* ready()
      yield* call("write_file", { description: "x", path: `${W}/d/f`, content: "x" })
      const write = (path: string) =>
        Effect.map(call("write_file", { description: "x", path, content: "x" }), (r) => r.text)
      assert.strictEqual(yield* write(`${W}/d`), `Error: Path is a directory, not a file: ${W}/d`)
      assert.isTrue((yield* write(W)).startsWith("Error: Path is a directory"))
    }))

  it.effect("concurrent appends to one file are serialised (none lost or interleaved)", () =>
    Effect.gen(function*() {
      const { call, paths } = yield* ready()
      const lines = Array.from({ length: 40 }, (_, i) => `line-${i}-${"z".repeat(2000)}\n`)
      yield* Effect.forEach(
        lines,
        (content) => call("write_file", { description: "x", path: `${W}/log.txt`, content, append: true }),
        { concurrency: "unbounded" }
      )
      const written = Fs.readFileSync(Path.join(paths.workspace, "log.txt"), "utf8").split("\n").filter((l) => l !== "")
      assert.strictEqual(written.length, 40)
      assert.deepStrictEqual([...written].sort(), lines.map((l) => l.trimEnd()).sort())
    }))
})

describe("str_replace", () => {
  it.effect("replaces a unique occurrence literally ($ patterns are not special)", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      const file = write("code.ts", "const a = 1\nconst b = 2\n")
      const result = yield* replace(call, "code.ts", "const b = 2", "const b = '$&$1'")
      assert.strictEqual(result.text, "OK")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "const a = 1\nconst b = '$&$1'\n")
    }))

  it.effect("fails when the text is absent, naming the file", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("code.ts", "abc")
      const result = yield* replace(call, "code.ts", "xyz", "q")
      assert.strictEqual(result.text, `Error: String to replace not found in file: ${W}/code.ts`)
      assert.strictEqual(result.status, "error")
    }))

  it.effect("fails when the text is not unique, says how many matches, and changes nothing", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      const file = write("dup.txt", "x = 1\nx = 1\nx = 1\n")
      const result = yield* replace(call, "dup.txt", "x = 1", "x = 2")
      assert.isTrue(result.text.startsWith(`Error: old_str occurs 3 times in ${W}/dup.txt`))
      assert.include(result.text, "replace_all=true")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "x = 1\nx = 1\nx = 1\n")
      const all = yield* replace(call, "dup.txt", "x = 1", "x = 2", { replace_all: true })
      assert.strictEqual(all.text, "OK (replaced 3 occurrences)")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), "x = 2\nx = 2\nx = 2\n")
    }))

  it.effect("refuses an empty old_str and a missing file", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("a.txt", "abc")
      assert.isTrue((yield* replace(call, "a.txt", "", "q")).text.startsWith("Error: old_str is empty"))
      assert.strictEqual((yield* replace(call, "none.txt", "a", "b")).text, `Error: File not found: ${W}/none.txt`)
    }))

  it.effect("concurrent edits of one file are serialised: no edit is lost", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      const markers = Array.from({ length: 30 }, (_, i) => `<slot-${i}>`)
      const file = write("many.txt", markers.join("\n") + "\n" + "padding ".repeat(20_000))
      const results = yield* Effect.forEach(
        markers,
        (marker, i) => replace(call, "many.txt", marker, `done-${i}`),
        { concurrency: "unbounded" }
      )
      assert.isTrue(results.every((r) => r.text === "OK"))
      const content = Fs.readFileSync(file, "utf8")
      for (let i = 0; i < markers.length; i++) assert.include(content, `done-${i}\n`)
      assert.notInclude(content, "<slot-")
    }))
})

describe("ls", () => {
  it.effect("lists two levels, directories with a trailing slash, sorted, junk left out", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("b.txt", "")
      write("a/one.md", "")
      write("a/deeper/hidden.md", "")
      write("node_modules/pkg/index.js", "")
      write(".git/HEAD", "")
      write("run.log", "")
      write("src/__pycache__/m.pyc", "")
      write("src/main.py", "")
      write("env/bin/python", "")
      write("logs/today.txt", "")
      write("notes.md.bak", "")
      const { text } = yield* call("ls", { description: "x", path: W })
      assert.strictEqual(
        text,
        [`${W}/a/`, `${W}/a/deeper/`, `${W}/a/one.md`, `${W}/b.txt`, `${W}/src/`, `${W}/src/main.py`].join("\n")
      )
    }))

  it("leaves out what DeerFlow's IGNORE_PATTERNS do (test_should_ignore_name), not names that look alike", () => {
    const ignored = [".git", "node_modules", "__pycache__", ".venv", "env", ".env", "logs", "coverage",
      ".pytest_cache", ".DS_Store", "Thumbs.db", "desktop.ini", "thing.egg-info", "x.swp", "y.swo", "z.log",
      "a.tmp", "b.temp", "c.bak", "d.cache", "core~", "shortcut.lnk", "site-packages", "target", "out", ".output",
      ".project", ".classpath", ".settings", ".coverage", ".upload-1.part"]
    const kept = ["foo.py", "README.md", "src", "myenv", "node_modules_x", "x.git", "log", "main.c", "output",
      "environment", "bak", "cache.json"]
    for (const name of ignored) assert.isTrue(SandboxTools.isJunk(name), name)
    for (const name of kept) assert.isFalse(SandboxTools.isJunk(name), name)
  })

  it.effect("says (empty) for an empty directory and reports missing ones", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("f.txt", "x")
      assert.strictEqual((yield* call("ls", { description: "x", path: O })).text, "(empty)")
      const ls = (path: string) => Effect.map(call("ls", { description: "x", path }), (r) => r.text)
      assert.strictEqual(yield* ls(`${W}/nope`), `Error: Directory not found: ${W}/nope`)
      assert.strictEqual(yield* ls(`${W}/f.txt`), `Error: Path is not a directory: ${W}/f.txt`)
    }))

  it.effect("head-truncates long listings over ls_output_max_chars", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready({ sandbox: { ls_output_max_chars: 400 } })
      for (let i = 0; i < 50; i++) write(`file-${String(i).padStart(2, "0")}.txt`, "")
      const { text } = yield* call("ls", { description: "x", path: W })
      assert.isAtMost(text.length, 400)
      assert.isTrue(text.startsWith(`${W}/file-00.txt\n${W}/file-01.txt`))
      assert.match(
        text,
        /\n\.\.\. \[truncated: showing first \d+ of \d+ chars\. Use a more specific path to see fewer results\] \.\.\.$/
      )
    }))

  it.effect("shows symlinks that stay inside and skips those that leave", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* ready()
      const outside = tempDir("antler-outside-")
      write("real.txt", "x")
      Fs.symlinkSync(Path.join(paths.workspace, "real.txt"), Path.join(paths.workspace, "inside-link"))
      Fs.symlinkSync(outside, Path.join(paths.workspace, "outside-link"))
      const { text } = yield* call("ls", { description: "x", path: W })
      assert.strictEqual(text, `${W}/inside-link\n${W}/real.txt`)
    }))
})

describe("glob", () => {
  const tree = (write: (p: string, c: string) => string) => {
    write("main.py", "")
    write("src/app.py", "")
    write("src/util/helpers.py", "")
    write("src/readme.md", "")
    write("docs/guide.md", "")
    write("node_modules/x/skip.py", "")
  }

  it.effect("matches names at any depth without '/', paths relative to the root with '/', and skips junk", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      tree(write)
      const glob = (pattern: string, extra: JsonObject = {}) =>
        Effect.map(call("glob", { description: "x", pattern, path: W, ...extra }), (r) => r.text)
      assert.strictEqual(
        yield* glob("*.py"),
        [`Found 3 paths under ${W}`, `1. ${W}/main.py`, `2. ${W}/src/app.py`, `3. ${W}/src/util/helpers.py`].join("\n")
      )
      assert.strictEqual(yield* glob("src/*.py"), [`Found 1 paths under ${W}`, `1. ${W}/src/app.py`].join("\n"))
      assert.strictEqual(
        yield* glob("**/*.{md,txt}"),
        [`Found 2 paths under ${W}`, `1. ${W}/docs/guide.md`, `2. ${W}/src/readme.md`].join("\n")
      )
      assert.strictEqual(
        yield* glob("src/util", { include_dirs: true }),
        [`Found 1 paths under ${W}`, `1. ${W}/src/util/`].join("\n")
      )
      assert.strictEqual(yield* glob("*.rs"), `No files matched under ${W}`)
    }))

  it.effect("caps results (min of requested and 1000) and says the list was truncated", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      for (let i = 0; i < 12; i++) write(`f${String(i).padStart(2, "0")}.txt`, "")
      const { text } = yield* call("glob", { description: "x", pattern: "*.txt", path: W, max_results: 5 })
      const lines = text.split("\n")
      assert.strictEqual(lines[0], `Found 12 paths under ${W} (showing first 5)`)
      assert.strictEqual(lines.length, 7)
      assert.strictEqual(lines[5], `5. ${W}/f04.txt`)
      assert.isTrue(lines[6]!.startsWith("Results truncated."))
      const zero = yield* call("glob", { description: "x", pattern: "*.txt", path: W, max_results: 0 })
      assert.strictEqual(zero.text.split("\n")[0], `Found 12 paths under ${W}`)
    }))

  it("clampMax follows SPEC: <=0 means default, then clamp to [1, upper]", () => {
    assert.strictEqual(SandboxTools.clampMax(undefined, 200, 1000), 200)
    assert.strictEqual(SandboxTools.clampMax(0, 200, 1000), 200)
    assert.strictEqual(SandboxTools.clampMax(-3, 100, 500), 100)
    assert.strictEqual(SandboxTools.clampMax(5000, 200, 1000), 1000)
    assert.strictEqual(SandboxTools.clampMax(7, 200, 1000), 7)
  })
})

describe("grep", () => {
  it.effect("prints path:line: text, case-insensitive by default, and honours glob and case_sensitive", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("a.py", "import os\nTODO: fix\nprint(1)\n")
      write("notes/b.md", "nothing\ntodo later\n")
      write("node_modules/c.js", "TODO junk\n")
      const grep = (args: JsonObject) => Effect.map(call("grep", { description: "x", path: W, ...args }), (r) => r.text)
      assert.strictEqual(
        yield* grep({ pattern: "todo" }),
        [`Found 2 matches under ${W}`, `${W}/a.py:2: TODO: fix`, `${W}/notes/b.md:2: todo later`].join("\n")
      )
      const one = (line: string) => [`Found 1 matches under ${W}`, line].join("\n")
      assert.strictEqual(yield* grep({ pattern: "TODO", case_sensitive: true }), one(`${W}/a.py:2: TODO: fix`))
      assert.strictEqual(yield* grep({ pattern: "todo", glob: "*.md" }), one(`${W}/notes/b.md:2: todo later`))
      assert.strictEqual(yield* grep({ pattern: "print(1)", literal: true }), one(`${W}/a.py:3: print(1)`))
      assert.strictEqual(yield* grep({ pattern: "^import \\w+$" }), one(`${W}/a.py:1: import os`))
      assert.strictEqual(yield* grep({ pattern: "absent" }), `No matches found under ${W}`)
      assert.strictEqual(
        yield* grep({ pattern: "todo", path: `${W}/notes/b.md` }),
        [`Found 1 matches under ${W}/notes/b.md`, `${W}/notes/b.md:2: todo later`].join("\n")
      )
    }))

  it.effect("rejects an invalid regex, skips binary files, and caps results", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("bin.dat", new Uint8Array([0x68, 0x69, 0x00, 0x68, 0x69]))
      write("many.txt", Array.from({ length: 30 }, (_, i) => `hit ${i}`).join("\n"))
      const invalid = yield* call("grep", { description: "x", path: W, pattern: "(unclosed" })
      assert.isTrue(invalid.text.startsWith("Error: Invalid regex pattern:"))
      const { text } = yield* call("grep", { description: "x", path: W, pattern: "hi", max_results: 10 })
      const lines = text.split("\n")
      assert.strictEqual(lines[0], `Found 30 matches under ${W} (showing first 10)`)
      assert.strictEqual(lines.length, 12)
      assert.isTrue(lines.slice(1, 11).every((l) => l.startsWith(`${W}/many.txt:`)))
      assert.isTrue(lines[11]!.startsWith("Results truncated."))
    }))
})

describe("disabled skills' files (SPEC §7.1)", () => {
  const skill = (name: string) => `---\nname: ${name}\ndescription: The ${name} skill.\n---\n# ${name}\nSECRET-${name}\n`
  const S = "/mnt/skills/public"
  const refused = (name: string) =>
    `Error: Skill '${name}' is disabled. Access to its files is blocked. Enable the skill in settings before using it.`

  /** A skills directory with `alpha` (enabled) and `beta` (disabled in the home's extensions_config.json). */
  const withSkills = (bwrap: "auto" | "off" = "off", sandbox: Partial<SandboxConfig> = {}) => Effect.gen(function*() {
    const skills = tempDir("antler-tools-skills-")
    const env = yield* ready({ skills, bwrap, sandbox })
    env.write("public/alpha/SKILL.md", skill("alpha"), skills)
    env.write("public/beta/SKILL.md", skill("beta"), skills)
    env.write("public/beta/notes/ref.md", "SECRET-beta-notes\n", skills)
    const states = (beta: boolean) =>
      Fs.writeFileSync(
        Path.join(env.home, "extensions_config.json"),
        JSON.stringify({ mcpServers: {}, skills: { beta: { enabled: beta } } })
      )
    states(false)
    return { ...env, states, skills }
  })

  it.effect("read_file, ls, glob and grep refuse a path inside a disabled skill; an enabled one reads as before", () =>
    Effect.gen(function*() {
      const { call } = yield* withSkills()
      const text = (name: string, args: JsonObject) => Effect.map(call(name, { description: "x", ...args }), (r) => r.text)
      assert.include(yield* text("read_file", { path: `${S}/alpha/SKILL.md` }), "SECRET-alpha")
      assert.strictEqual(yield* text("read_file", { path: `${S}/beta/SKILL.md` }), refused("beta"))
      assert.strictEqual(yield* text("read_file", { path: `${S}/beta/notes/ref.md` }), refused("beta"))
      assert.strictEqual(yield* text("ls", { path: `${S}/beta` }), refused("beta"))
      assert.strictEqual(yield* text("ls", { path: `${S}/beta/notes/` }), refused("beta"))
      assert.strictEqual(yield* text("glob", { path: `${S}/beta`, pattern: "**" }), refused("beta"))
      assert.strictEqual(yield* text("grep", { path: `${S}/beta/SKILL.md`, pattern: "SECRET" }), refused("beta"))
      // a way round through `..` or `.` segments is not one
      for (const path of [`${S}/alpha/../beta/SKILL.md`, `${S}/./beta/SKILL.md`, `/mnt/skills//public/beta/SKILL.md`]) {
        assert.notInclude(yield* text("read_file", { path }), "SECRET-beta", path)
      }
    }))

  it.effect("a listing or search from above a disabled skill leaves its files out", () =>
    Effect.gen(function*() {
      const { call } = yield* withSkills()
      const text = (name: string, args: JsonObject) => Effect.map(call(name, { description: "x", ...args }), (r) => r.text)
      assert.strictEqual(
        yield* text("ls", { path: "/mnt/skills" }),
        ["/mnt/skills/public/", `${S}/alpha/`].join("\n")
      )
      assert.strictEqual(
        yield* text("glob", { path: "/mnt/skills", pattern: "**/*.md" }),
        ["Found 1 paths under /mnt/skills", `1. ${S}/alpha/SKILL.md`].join("\n")
      )
      assert.strictEqual(
        yield* text("grep", { path: "/mnt/skills", pattern: "SECRET" }),
        ["Found 1 matches under /mnt/skills", `${S}/alpha/SKILL.md:6: SECRET-alpha`].join("\n")
      )
      assert.strictEqual(yield* text("grep", { path: "/mnt/skills", pattern: "beta-notes" }), "No matches found under /mnt/skills")
    }))

  // DeerFlow mounts a copy of the enabled skills only: its shell does not see a disabled one either
  it.live.skipIf(!bwrapInstalled)("under bubblewrap, bash sees a disabled skill's folder empty and read-only", () =>
    Effect.gen(function*() {
      const { call, states } = yield* withSkills("auto")
      const bash = (command: string) => Effect.map(call("bash", { description: "x", command }), (r) => r.text)
      const seen = yield* bash(
        `cat ${S}/alpha/SKILL.md; cat ${S}/beta/SKILL.md; ls -A ${S}/beta | wc -l; grep -r SECRET-beta /mnt/skills; ` +
          `touch ${S}/beta/x 2>&1 | grep -o 'Read-only file system'`
      )
      assert.include(seen, "SECRET-alpha")
      assert.notInclude(seen, "SECRET-beta")
      assert.include(seen, `cat: ${S}/beta/SKILL.md: No such file or directory`)
      assert.match(seen, /^0$/m)
      assert.include(seen, "Read-only file system")
      states(true)
      assert.include(yield* bash(`cat ${S}/beta/notes/ref.md`), "SECRET-beta-notes")
    }))

  // DeerFlow's local sandbox maps the skills to a copy of the enabled ones only: its host bash does not see the others
  it.live("bash on the host does not see a disabled skill's folder: not through a glob, a cd, or a search", () =>
    Effect.gen(function*() {
      const { call, home, paths, skills, states } = yield* withSkills("off", { allow_host_bash: true })
      const bash = (command: string) => Effect.map(call("bash", { description: "x", command }), (r) => r.text)
      const seen = yield* bash(
        "cat /mnt/skills/*/*/SKILL.md /mnt/skills/*/*/*/*; ls /mnt/skills/public; grep -r SECRET /mnt/skills; " +
          "cd /mnt/skills/public && cat beta/SKILL.md; pwd; find . -name '*.md' | sort"
      )
      assert.include(seen, "SECRET-alpha")
      assert.notInclude(seen, "SECRET-beta")
      assert.include(seen, "/mnt/skills/public/alpha/SKILL.md:SECRET-alpha")
      assert.include(seen, "cat: beta/SKILL.md: No such file or directory")
      assert.match(seen, /^alpha$/m)
      assert.notMatch(seen, /^beta$/m)
      assert.include(seen, "\n/mnt/skills/public\n./alpha/SKILL.md")
      assert.notInclude(seen, home)
      // the command's view of the skills is gone with it; the skills are as they were
      const work = Path.join(Path.dirname(paths.root), LocalSandbox.WORK_DIR)
      assert.deepStrictEqual(Fs.existsSync(work) ? Fs.readdirSync(work) : [], [])
      assert.include(Fs.readFileSync(Path.join(skills, "public/beta/notes/ref.md"), "utf8"), "SECRET-beta-notes")
      states(true)
      const enabled = yield* bash(`cat ${S}/beta/notes/ref.md; ls /mnt/skills/public`)
      assert.include(enabled, "SECRET-beta-notes")
      assert.match(enabled, /^beta$/m)
    }))

  it.live("bash on the host refuses a command naming a disabled skill's folder, by its path or its host path", () =>
    Effect.gen(function*() {
      const { call, skills } = yield* withSkills("off", { allow_host_bash: true })
      const bash = (command: string) => Effect.map(call("bash", { description: "x", command }), (r) => r.text)
      for (const path of [`${S}/beta`, `${S}/beta/SKILL.md`, `${S}//beta/notes/`, "/mnt/skills/./public/beta"]) {
        const text = yield* bash(`echo start; cat ${path}; ls "${path}"`)
        assert.strictEqual(
          text,
          `Error: Command refused: ${path} is in a disabled skill's folder (${S}/beta); access to its files is ` +
            "blocked. Enable the skill in settings before using it.",
          path
        )
      }
      const host = yield* bash(`cat ${skills}/public/beta/SKILL.md`)
      assert.isTrue(host.startsWith("Error: Command refused:"), host)
      assert.notInclude(host, "SECRET-beta")
      assert.include(yield* bash(`cat ${S}/alpha/SKILL.md`), "SECRET-alpha")
    }))

  it.effect("the skill's state is read at each call: enabled again, its files read at once", () =>
    Effect.gen(function*() {
      const { call, states } = yield* withSkills()
      const read = Effect.map(call("read_file", { description: "x", path: `${S}/beta/SKILL.md` }), (r) => r.text)
      assert.strictEqual(yield* read, refused("beta"))
      states(true)
      assert.include(yield* read, "SECRET-beta")
      const { text } = yield* call("ls", { description: "x", path: "/mnt/skills" })
      assert.include(text, `${S}/beta/`)
    }))
})

describe("patterns from the model (RE2: linear time)", () => {
  const A48 = "a".repeat(48)
  const GLOB_ATTACK = `${"*a".repeat(14)}*b`

  it.effect("^(a+)+$ through grep and a 14-star glob through glob answer, while another run completes first", () =>
    Effect.gen(function*() {
      const { home, provide, write } = yield* ready()
      // The tools work in the sandbox of the run that calls them: thread "hostile" of the default user.
      const workspace = threadPaths(home, "default", "hostile").workspace
      // About 3.4 MB of lines on which V8's backtracking engine takes minutes each, and one line that matches.
      write("hostile.txt", `${Array.from({ length: 70_000 }, () => `${A48}!`).join("\n")}\n${A48}\n`, workspace)
      write(A48, "", workspace)
      write(`${"a".repeat(14)}b`, "", workspace)
      const tools = yield* provide(SandboxTools.tools({ vision: false }))
      const finished: Array<string> = []
      const hostile = H.run({
        threadId: "hostile",
        tools,
        script: [
          {
            toolCalls: [
              { name: "grep", args: { description: "x", path: W, pattern: "^(a+)+$" } },
              { name: "glob", args: { description: "x", path: W, pattern: GLOB_ATTACK } }
            ]
          },
          "searched"
        ]
      }).pipe(Effect.tap(() => finished.push("hostile")))
      const other = H.run({ threadId: "other", script: ["hello"] }).pipe(Effect.tap(() => finished.push("other")))
      const [searched, answered] = yield* H.withStore(Effect.all([hostile, other], { concurrency: "unbounded" }))
      assert.deepStrictEqual(finished, ["other", "hostile"])
      assert.strictEqual(answered.end.status, "success")
      assert.strictEqual(searched.end.status, "success")
      const results = searched.state.messages.filter((m) => m.type === "tool").map((m) => String(m.content))
      assert.deepStrictEqual(results, [
        [`Found 1 matches under ${W}`, `${W}/hostile.txt:70001: ${A48}`].join("\n"),
        [`Found 1 paths under ${W}`, `1. ${W}/${"a".repeat(14)}b`].join("\n")
      ])
    }))

  it.effect("a search past the time limit stops and answers with what it has, saying so", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      for (let i = 0; i < 3; i++) write(`big${i}.txt`, Array.from({ length: 20_000 }, (_, j) => `line ${j}`).join("\n"))
      const fiber = yield* Effect.fork(call("grep", { description: "x", path: W, pattern: "needle" }))
      // The test clock moves only here: each turn of this loop is another SEARCH_TIME_LIMIT.
      while (Option.isNone(yield* Fiber.poll(fiber))) {
        yield* TestClock.adjust(SandboxTools.SEARCH_TIME_LIMIT)
        yield* Effect.yieldNow()
      }
      const { text } = yield* Fiber.join(fiber)
      assert.strictEqual(
        text,
        `No matches found under ${W}\n(The search stopped after 20 s, so not every file was searched; narrow the ` +
          "path, the pattern or the glob.)"
      )
    }))

  it("grep patterns: JavaScript syntax with look-behinds and named groups; literal and case options", () => {
    const test = (pattern: string, text: string, options = { literal: false, caseSensitive: false }) => {
      const compiled = SandboxTools.compileSearch(pattern, options)
      if ("error" in compiled) throw new Error(compiled.error)
      return compiled.regex.test(text)
    }
    assert.isTrue(test("^(a+)+$", A48))
    assert.isFalse(test("^(a+)+$", `${A48}!`))
    assert.isTrue(test("(?<=price: )\\d+", "price: 42"))
    assert.isFalse(test("(?<!price: )\\b42", "price: 42"))
    assert.isTrue(test("(?<word>\\w+) \\u0041", "hello A"))
    assert.isTrue(test("todo", "TODO: x"))
    assert.isFalse(test("todo", "TODO: x", { literal: false, caseSensitive: true }))
    assert.isTrue(test("print(1)", "print(1)", { literal: true, caseSensitive: false }))
    assert.isFalse(test("a.b", "axb", { literal: true, caseSensitive: false }))
    assert.isTrue(test("(a)\\1", "x(a)\\1", { literal: true, caseSensitive: true }))
  })

  it("grep patterns RE2 cannot run are refused with a reason the model can act on", () => {
    const error = (pattern: string) => {
      const compiled = SandboxTools.compileSearch(pattern, { literal: false, caseSensitive: false })
      return "error" in compiled ? compiled.error : undefined
    }
    assert.match(error("foo(?=bar)")!, /^look-aheads \(\(\?=\.\.\.\), \(\?!\.\.\.\)\) are not supported: /)
    assert.match(error("foo(?!bar)")!, /^look-aheads/)
    assert.match(error("(a)\\1")!, /^backreferences \(\\1, \\k<name>\) are not supported: /)
    assert.match(error("(?<q>['\"]).*\\k<q>")!, /^backreferences/)
    assert.strictEqual(error("(unclosed"), "missing closing ): `(unclosed`")
  })

  it.effect("the tools answer an unusable pattern or glob with an Error result", () =>
    Effect.gen(function*() {
      const { call, write } = yield* ready()
      write("a.txt", "foobar\n")
      const grep = (args: JsonObject) => Effect.map(call("grep", { description: "x", path: W, ...args }), (r) => r.text)
      assert.match(yield* grep({ pattern: "foo(?=bar)" }), /^Error: Invalid regex pattern: look-aheads /)
      assert.match(yield* grep({ pattern: "(o)\\1" }), /^Error: Invalid regex pattern: backreferences /)
      assert.strictEqual(
        yield* grep({ pattern: "foo", glob: "[z-a].txt" }),
        "Error: Invalid glob pattern: invalid character class range: `z-a`"
      )
      const glob = yield* call("glob", { description: "x", path: W, pattern: "[z-a]" })
      assert.strictEqual(glob.text, "Error: Invalid glob pattern: invalid character class range: `z-a`")
    }))

  it("globs become RE2 patterns without look-arounds, with the documented meaning", () => {
    const matches = (glob: string, path: string) => {
      const compiled = SandboxTools.compileGlob(glob)
      if ("error" in compiled) throw new Error(compiled.error)
      return compiled.regex.test(path)
    }
    assert.notInclude(SandboxTools.globSource("**/*.{ts,md}"), "(?=")
    assert.isTrue(matches("*.py", "src/util/helpers.py"))
    assert.isFalse(matches("src/*.py", "src/util/helpers.py"))
    assert.isTrue(matches("src/**/*.py", "src/util/helpers.py"))
    assert.isTrue(matches("**/*.{md,txt}", "docs/guide.md"))
    assert.isTrue(matches("file?.[!a-c]x", "file1.dx"))
    assert.isFalse(matches("file?.[!a-c]x", "file1.bx"))
    assert.isTrue(matches("[[:digit:]]*.log", "logs/2024.log"))
    assert.isTrue(matches("a+b(c).txt", "a+b(c).txt"))
    assert.isFalse(matches(GLOB_ATTACK, A48))
  })
})

describe("present_files", () => {
  it.effect("presents files in outputs as artifacts (normalised, de-duplicated)", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* ready()
      write("report.md", "# r", paths.outputs)
      write("charts/c.png", "png", paths.outputs)
      const result = yield* call("present_files", {
        filepaths: [`${O}/report.md`, `${O}//charts/./c.png`, `${O}/report.md`, Path.join(paths.outputs, "report.md")]
      })
      assert.strictEqual(result.status, "success")
      assert.deepStrictEqual(result.update, { artifacts: [`${O}/report.md`, `${O}/charts/c.png`] })
      assert.notInclude(result.text, paths.outputs)
    }))

  it.effect("refuses the whole call when any file is outside outputs or missing", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* ready()
      write("ok.md", "x", paths.outputs)
      write("draft.md", "x")
      const outside = yield* call("present_files", { filepaths: [`${O}/ok.md`, `${W}/draft.md`] })
      assert.strictEqual(outside.text, `Error: Only files in ${O} can be presented: ${W}/draft.md`)
      assert.isUndefined(outside.update)
      const missing = yield* call("present_files", { filepaths: [`${O}/ok.md`, `${O}/gone.md`] })
      assert.strictEqual(missing.text, `Error: File not found: ${O}/gone.md`)
      assert.isUndefined(missing.update)
      const dir = yield* call("present_files", { filepaths: [O] })
      assert.isTrue(dir.text.startsWith("Error: Only files in"))
    }))
})

describe("view_image", () => {
  const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52])
  const jpeg = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46])

  it.effect("loads a real image and records it in viewed_images", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* ready()
      write("pic.png", png, paths.uploads)
      const result = yield* call("view_image", { image_path: "/mnt/user-data/uploads/pic.png" })
      assert.strictEqual(result.status, "success")
      assert.deepStrictEqual(result.update, {
        viewed_images: {
          "/mnt/user-data/uploads/pic.png": {
            mime_type: "image/png",
            size: png.length,
            actual_path: Fs.realpathSync(Path.join(paths.uploads, "pic.png"))
          }
        }
      })
      assert.notInclude(result.text, paths.uploads)
    }))

  it.effect("checks extension, magic bytes, size and location", () =>
    Effect.gen(function*() {
      const { call, write, paths } = yield* ready()
      write("fake.png", jpeg)
      write("text.jpg", "not an image")
      write("pic.bmp", png)
      const big = Path.join(paths.workspace, "huge.png")
      Fs.writeFileSync(big, png)
      Fs.truncateSync(big, 20 * 1024 * 1024 + 1)
      const view = (image_path: string) => Effect.map(call("view_image", { image_path }), (r) => r.text)
      assert.strictEqual(
        yield* view(`${W}/fake.png`),
        `Error: Image contents are image/jpeg, but file extension indicates image/png: ${W}/fake.png`
      )
      assert.isTrue((yield* view(`${W}/text.jpg`)).startsWith("Error: File contents do not match"))
      assert.isTrue((yield* view(`${W}/pic.bmp`)).startsWith("Error: Unsupported image format: .bmp"))
      const huge = yield* view(`${W}/huge.png`)
      assert.isTrue(huge.startsWith(`Error: Image file is too large: ${W}/huge.png is 20971521 bytes`))
      assert.isTrue((yield* view("/mnt/skills/x.png")).startsWith("Error: Only image paths under"))
      assert.strictEqual(yield* view(`${W}/none.png`), `Error: Image file not found: ${W}/none.png`)
    }))

  it("sniffs the four accepted formats", () => {
    assert.strictEqual(SandboxTools.sniffImage(png), "image/png")
    assert.strictEqual(SandboxTools.sniffImage(jpeg), "image/jpeg")
    assert.strictEqual(SandboxTools.sniffImage(new TextEncoder().encode("GIF89a....")), "image/gif")
    assert.strictEqual(SandboxTools.sniffImage(new TextEncoder().encode("RIFF\0\0\0\0WEBPVP8 ")), "image/webp")
    assert.isUndefined(SandboxTools.sniffImage(new TextEncoder().encode("<svg></svg>")))
  })
})

describe("bash output as it comes (tool_output events)", () => {
  const runBash = (command: string) =>
    Effect.gen(function*() {
      const env = setup({ sandbox: { allow_host_bash: true } })
      const run = inRun({ threadId: "t1", userId: "u1" })
      const result = yield* Effect.flatMap(SandboxTools.tools({ vision: false }), (tools) =>
        Toolkit.make(tools).call({ id: "c1", name: "bash", args: { description: "test", command } })).pipe(
          Effect.provideService(SandboxProvider, env.provider),
          Effect.provideService(AppConfigService, env.app),
          Effect.provide(run.context)
        )
      const outputs = run.events.flatMap((event) =>
        event.type === "custom" && event.name === SandboxTools.TOOL_OUTPUT_EVENT
          ? [event.data as { tool_call_id: string; tool_name: string; text: string; truncated?: boolean }]
          : []
      )
      return { result: String(result.message.content), outputs, env }
    })

  it.live("carry the command's output in order, host paths masked, before the result, which is as it was", () =>
    Effect.gen(function*() {
      const { env, outputs, result } = yield* runBash("echo one; echo two >&2; echo \"$PWD\"; printf three")
      assert.strictEqual(result, "one\ntwo\n/mnt/user-data/workspace\nthree")
      assert.strictEqual(outputs.map((o) => o.text).join(""), result)
      for (const output of outputs) assert.deepInclude(output, { tool_call_id: "c1", tool_name: "bash" })
      assert.notInclude(JSON.stringify(outputs), env.home)
    }))

  it.live("send at most TOOL_OUTPUT_MAX_CHARS of a call's output, then one event saying the rest was left out", () =>
    Effect.gen(function*() {
      const { outputs, result } = yield* runBash("yes 0123456789 | head -c 100000")
      const sent = outputs.map((o) => o.text).join("")
      assert.strictEqual(sent.length, SandboxTools.TOOL_OUTPUT_MAX_CHARS)
      assert.isTrue(sent.startsWith("0123456789\n0123456789\n"))
      assert.deepInclude(outputs.at(-1)!, { text: "", truncated: true })
      assert.strictEqual(outputs.filter((o) => o.truncated === true).length, 1)
      // the result keeps its own cap (start and end), as without events
      assert.include(result, "[middle truncated:")
    }))
})
