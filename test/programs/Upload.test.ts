import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as docx from "docx"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as ThreadData from "../../src/middleware/ThreadData.js"
import * as Uploads from "../../src/middleware/Uploads.js"
import * as Upload from "../../src/programs/Upload.js"
import { AppConfigService, defaults, type UploadsConfig } from "../../src/services/AppConfig.js"
import * as M from "../../src/state/Message.js"
import * as H from "../support/harness.js"

/** A fresh ANTLER_HOME, and the uploads directory of thread `t1` in it. */
const freshHome = () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "antler-upload-"))
  return { home, uploads: path.join(home, "users/default/threads/t1/user-data/uploads") }
}

// (conversion on unless a test says otherwise: unset, the gateway's uploads are not converted)
const withConfig = (home: string, uploads: Partial<UploadsConfig> = { auto_convert_documents: true }) => {
  const config = defaults()
  return Effect.provide(Layer.merge(
    Layer.succeed(AppConfigService, {
      config: { ...config, uploads: { ...config.uploads, ...uploads } },
      source: undefined,
      ignored: [],
      home
    }),
    NodeFileSystem.layer
  ))
}

const makeDocx = () =>
  docx.Packer.toBuffer(
    new docx.Document({
      sections: [{
        children: [
          new docx.Paragraph({ text: "Quarterly Report", heading: docx.HeadingLevel.HEADING_1 }),
          new docx.Paragraph({ text: "Revenue grew." }),
          new docx.Paragraph({ text: "Costs", heading: docx.HeadingLevel.HEADING_2 }),
          new docx.Paragraph({ text: "Costs fell." })
        ]
      }]
    })
  )

const MiB = 1024 * 1024

/** Bytes that are not text in any encoding. */
const binary = (size: number) => Uint8Array.from({ length: size }, (_, i) => (i * 131 + 7) % 256)

const listDir = (dir: string) => fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []

describe("Upload", () => {
  it.effect("copies files byte-exact into the thread and writes the Markdown sibling of a document", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const source = fs.mkdtempSync(path.join(os.tmpdir(), "antler-upload-src-"))
      const docxBytes = yield* Effect.promise(makeDocx)
      fs.writeFileSync(path.join(source, "report.docx"), docxBytes)
      const blob = binary(5000)

      const results = yield* Upload.upload("t1", [path.join(source, "report.docx"), { name: "data.bin", bytes: blob }])
        .pipe(withConfig(home))

      assert.deepStrictEqual(results, [
        {
          filename: "report.docx",
          size: docxBytes.byteLength,
          path: "/mnt/user-data/uploads/report.docx",
          markdown_path: "/mnt/user-data/uploads/report.md"
        },
        { filename: "data.bin", size: 5000, path: "/mnt/user-data/uploads/data.bin" }
      ])
      assert.isTrue(fs.readFileSync(path.join(uploads, "report.docx")).equals(docxBytes))
      assert.isTrue(fs.readFileSync(path.join(uploads, "data.bin")).equals(Buffer.from(blob)))
      const markdown = fs.readFileSync(path.join(uploads, "report.md"), "utf8")
      assert.strictEqual(markdown.split("\n")[0], "# Quarterly Report")
      assert.include(markdown, "\n## Costs\n")
      // No staging files are left behind.
      assert.deepStrictEqual(listDir(uploads), ["data.bin", "report.docx", "report.md"])
      assert.deepStrictEqual(Upload.messageFiles(results), [
        {
          filename: "report.docx",
          size: docxBytes.byteLength,
          path: "/mnt/user-data/uploads/report.docx",
          status: "uploaded"
        },
        { filename: "data.bin", size: 5000, path: "/mnt/user-data/uploads/data.bin", status: "uploaded" }
      ])
    }))

  it.effect("the next message's files are described to the model with the converted outline", () =>
    Effect.gen(function*() {
      const { home } = freshHome()
      const results = yield* Upload.upload("t1", [{ name: "report.docx", bytes: yield* Effect.promise(makeDocx) }])
        .pipe(withConfig(home))
      const outcome = yield* H.run({
        script: ["ok"],
        threadId: "t1",
        input: [M.human("summarise it", { additional_kwargs: { files: Upload.messageFiles(results) } })],
        middlewares: () => [ThreadData.layer(), Uploads.layer()]
      }).pipe(withConfig(home), H.withStore)
      const seen = M.contentText(outcome.requests[0]!.messages[0]!.content)
      assert.include(seen, "- report.docx (")
      assert.include(seen, "Converted to Markdown: /mnt/user-data/uploads/report.md")
      assert.include(seen, "    L1: Quarterly Report\n    L5: Costs")
      assert.deepStrictEqual(outcome.state.uploaded_files?.map((f) => f.filename), ["report.docx"])
    }))

  it.effect("a document that cannot be converted is still uploaded, with the reason", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const bytes = new TextEncoder().encode("not really a PDF")
      const [result] = yield* Upload.upload("t1", [{ name: "scan.pdf", bytes }]).pipe(withConfig(home))
      assert.strictEqual(result!.filename, "scan.pdf")
      assert.isUndefined(result!.markdown_path)
      assert.include(result!.conversion_error, "scan.pdf could not be converted to Markdown (pdf)")
      assert.deepStrictEqual(listDir(uploads), ["scan.pdf"])
      assert.isTrue(fs.readFileSync(path.join(uploads, "scan.pdf")).equals(Buffer.from(bytes)))
      assert.include(
        Upload.describeResult(result!),
        "scan.pdf (16 bytes) -> /mnt/user-data/uploads/scan.pdf, not converted:"
      )
    }))

  it.effect("conversion follows uploads.auto_convert_documents unless the call says otherwise", () =>
    Effect.gen(function*() {
      const html = { name: "page.html", bytes: new TextEncoder().encode("<h1>Title</h1><p>Body</p>") }
      const off = freshHome()
      const [plain] = yield* Upload.upload("t1", [html]).pipe(withConfig(off.home, { auto_convert_documents: false }))
      assert.isUndefined(plain!.markdown_path)
      assert.deepStrictEqual(listDir(off.uploads), ["page.html"])
      const forced = freshHome()
      const [converted] = yield* Upload.upload("t1", [html], { convert: true })
        .pipe(withConfig(forced.home, { auto_convert_documents: false }))
      assert.strictEqual(converted!.markdown_path, "/mnt/user-data/uploads/page.md")
      assert.strictEqual(fs.readFileSync(path.join(forced.uploads, "page.md"), "utf8"), "# Title\n\nBody\n")
      // unset (DeerFlow's default): a document is not parsed on the host
      const unset = freshHome()
      const [kept] = yield* Upload.upload("t1", [html]).pipe(withConfig(unset.home, {}))
      assert.isUndefined(kept!.markdown_path)
      assert.deepStrictEqual(listDir(unset.uploads), ["page.html"])
    }))

  it.effect("a user's own file is never overwritten by a conversion sibling", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const results = yield* Upload.upload("t1", [
        { name: "notes.html", bytes: new TextEncoder().encode("<h1>From HTML</h1>") },
        { name: "notes.md", bytes: new TextEncoder().encode("# My own notes\n") },
        { name: "plan.html", bytes: new TextEncoder().encode("<h1>Plan A</h1>") },
        { name: "plan.htm", bytes: new TextEncoder().encode("<h1>Plan B</h1>") }
      ]).pipe(withConfig(home))
      assert.strictEqual(fs.readFileSync(path.join(uploads, "notes.md"), "utf8"), "# My own notes\n")
      assert.include(results[0]!.conversion_error, "notes.md is one of the uploaded files")
      assert.strictEqual(results[2]!.markdown_path, "/mnt/user-data/uploads/plan.md")
      assert.include(results[3]!.conversion_error, "plan.md already holds the conversion of plan.html")
      assert.strictEqual(fs.readFileSync(path.join(uploads, "plan.md"), "utf8"), "# Plan A\n")
    }))

  // DeerFlow test_client.py::test_upload_files_failed_conversion_releases_the_claimed_markdown_name: a document whose
  // conversion wrote nothing holds no name; the next of its stem was refused as if plan.md held the first's
  it.effect("a document whose conversion wrote nothing leaves its Markdown name to the next one of its stem", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const results = yield* Upload.upload("t1", [
        { name: "plan.html", bytes: new TextEncoder().encode("<p>   </p>") },
        { name: "plan.htm", bytes: new TextEncoder().encode("<h1>Plan B</h1>") }
      ]).pipe(withConfig(home))
      assert.strictEqual(results[0]!.conversion_error, "no text was found in the document")
      assert.isUndefined(results[0]!.markdown_path)
      assert.strictEqual(results[1]!.markdown_path, "/mnt/user-data/uploads/plan.md")
      assert.isUndefined(results[1]!.conversion_error)
      assert.strictEqual(fs.readFileSync(path.join(uploads, "plan.md"), "utf8"), "# Plan B\n")
    }))

  it.effect("limits: too many files, a file too large, too much in all; a refused upload writes nothing", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const limits = { max_files: 2, max_file_size: 100, max_total_size: 150 }
      const file = (name: string, size: number) => ({ name, bytes: binary(size) })

      const many = yield* Effect.flip(
        Upload.upload("t1", [file("a", 1), file("b", 1), file("c", 1)]).pipe(withConfig(home, limits))
      )
      assert.strictEqual(many.reason, "too_many_files")
      assert.strictEqual(many.message, "Too many files: 3 given, at most 2 per upload (uploads.max_files).")

      const refused = (files: ReadonlyArray<Upload.UploadInput>) =>
        Effect.flip(Upload.upload("t1", files).pipe(withConfig(home, limits)))
      const big = yield* refused([file("ok.bin", 10), file("big.bin", 101)])
      assert.strictEqual(big.reason, "file_too_large")
      assert.strictEqual(big.filename, "big.bin")
      assert.strictEqual(
        big.message,
        "big.bin is 101 bytes; each file may be at most 100 bytes (uploads.max_file_size)."
      )

      const total = yield* refused([file("x.bin", 80), file("y.bin", 80)])
      assert.strictEqual(total.reason, "total_too_large")
      assert.strictEqual(
        total.message,
        "The 2 files add up to 160 bytes; one upload may be at most 150 bytes in all (uploads.max_total_size)."
      )
      assert.deepStrictEqual(listDir(uploads), [])

      // The defaults are DeerFlow's: 10 files, 50 MiB each, 100 MiB in all.
      const eleven = Array.from({ length: 11 }, (_, i) => file(`f${i}.txt`, 1))
      const tooMany = yield* Effect.flip(Upload.upload("t1", eleven).pipe(withConfig(home)))
      assert.strictEqual(tooMany.reason, "too_many_files")
      assert.strictEqual(
        Upload.limitProblem([{ filename: "huge.iso", size: 50 * MiB + 1 }], defaults().uploads)?.message,
        "huge.iso is 50.0 MB; each file may be at most 50.0 MB (uploads.max_file_size)."
      )
      assert.strictEqual(
        Upload.limitProblem(
          [{ filename: "a", size: 50 * MiB }, { filename: "b", size: 50 * MiB }, { filename: "c", size: 1 }],
          defaults().uploads
        )?.reason,
        "total_too_large"
      )
      // A host file is measured before it is read.
      const source = fs.mkdtempSync(path.join(os.tmpdir(), "antler-upload-src-"))
      fs.writeFileSync(path.join(source, "large.log"), Buffer.alloc(101))
      const host = yield* refused([path.join(source, "large.log")])
      assert.strictEqual(host.reason, "file_too_large")
      assert.deepStrictEqual(listDir(uploads), [])
    }))

  it.effect("names with nothing safe left, missing files and unsafe thread ids are refused clearly", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const refuse = (name: string) =>
        Effect.flip(Upload.upload("t1", [{ name, bytes: binary(3) }]).pipe(withConfig(home)))
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["../..", "not a file name"],
        ["a/..", "not a file name"],
        ["..", "not a file name"],
        [".", "not a file name"],
        ["", "empty"],
        ["a\0b.txt", "NUL"],
        ["line\nbreak.txt", "control characters"],
        [".upload-1234.part", "reserved for uploads in progress"],
        ["x".repeat(256), "longer than 255 bytes"]
      ]
      for (const [name, why] of cases) {
        const error = yield* refuse(name)
        assert.strictEqual(error.reason, "invalid_name", name)
        assert.include(error.message, why)
        assert.include(error.message, `Cannot upload ${JSON.stringify(name)}`)
      }
      assert.isUndefined(Upload.filenameProblem(".env"))
      assert.isUndefined(Upload.filenameProblem("Résumé (final).pdf"))

      const missing = yield* Effect.flip(Upload.upload("t1", [path.join(home, "nope.txt")]).pipe(withConfig(home)))
      assert.strictEqual(missing.reason, "not_found")
      assert.include(missing.message, "nope.txt: no such file")
      const directory = yield* Effect.flip(Upload.upload("t1", [home]).pipe(withConfig(home)))
      assert.strictEqual(directory.reason, "not_a_file")
      const thread = yield* Effect.flip(
        Upload.upload("../t1", [{ name: "a.txt", bytes: binary(1) }]).pipe(withConfig(home))
      )
      assert.strictEqual(thread.reason, "invalid_thread")
      const none = yield* Effect.flip(Upload.upload("t1", []).pipe(withConfig(home)))
      assert.strictEqual(none.reason, "no_files")
      assert.deepStrictEqual(listDir(uploads), [])
    }))

  it.effect("names are reduced to safe base names, as DeerFlow's; the same name twice in one upload gets _1, _2", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const results = yield* Upload.upload("t1", [
        { name: "../../etc/passwd", bytes: binary(1) },
        { name: "a/b.txt", bytes: binary(2) },
        { name: "C:\\Users\\me\\b.txt", bytes: binary(3) },
        { name: "b.txt", bytes: binary(4) },
        { name: "notes", bytes: binary(5) },
        { name: "x/notes", bytes: binary(6) }
      ]).pipe(withConfig(home))
      assert.deepStrictEqual(results.map((r) => [r.filename, r.size, r.path]), [
        ["passwd", 1, "/mnt/user-data/uploads/passwd"],
        ["b.txt", 2, "/mnt/user-data/uploads/b.txt"],
        ["b_1.txt", 3, "/mnt/user-data/uploads/b_1.txt"],
        ["b_2.txt", 4, "/mnt/user-data/uploads/b_2.txt"],
        ["notes", 5, "/mnt/user-data/uploads/notes"],
        ["notes_1", 6, "/mnt/user-data/uploads/notes_1"]
      ])
      assert.deepStrictEqual(listDir(uploads), ["b.txt", "b_1.txt", "b_2.txt", "notes", "notes_1", "passwd"])
      assert.strictEqual(Upload.safeBaseName("a/b/../c.txt"), "c.txt")
      assert.isFalse(fs.existsSync(path.join(home, "etc")))
    }))

  it.effect("a host file that reads unlike its reported size (/proc, /sys) is refused; nothing is written", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const regular = path.join(home, "regular.txt")
      fs.writeFileSync(regular, "fine")
      // The kernel's copy used to store /proc files as 0 bytes, and never returned for /sys files.
      const sysfs = ["/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/uevent_seqnum", "/sys/power/state"]
        .find((file) => fs.existsSync(file) && fs.statSync(file).size !== fs.readFileSync(file).length)
      for (const file of ["/proc/self/status", ...(sysfs === undefined ? [] : [sysfs])]) {
        const error = yield* Effect.flip(Upload.upload("t1", [regular, file]).pipe(withConfig(home)))
        assert.strictEqual(error.reason, "not_a_file", file)
        assert.strictEqual(error.filename, path.basename(file))
        assert.include(error.message, `Cannot upload ${file}: the system reports `)
        assert.include(error.message, `copy it into a regular file first (cat ${file} > ${path.basename(file)})`)
        assert.deepStrictEqual(listDir(uploads), [])
      }
      assert.strictEqual(
        Upload.sizeMismatch("/proc/self/status", "status", 0, 1),
        "Cannot upload /proc/self/status: the system reports 0 bytes for it, but reading it gives more. It is " +
          "generated as it is read (as files under /proc and /sys are) or it changed during the upload; copy it " +
          "into a regular file first (cat /proc/self/status > status) and upload that."
      )
      const empty = path.join(home, "empty.txt")
      fs.writeFileSync(empty, "")
      const [uploaded] = yield* Upload.upload("t1", [empty]).pipe(withConfig(home))
      assert.strictEqual(uploaded!.size, 0)
    }))

  it.effect("re-uploading replaces the file; a symlink in its place is replaced, never followed", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      yield* Upload.upload("t1", [{ name: "a.txt", bytes: new TextEncoder().encode("first") }]).pipe(withConfig(home))
      yield* Upload.upload("t1", [{ name: "a.txt", bytes: new TextEncoder().encode("second") }]).pipe(withConfig(home))
      assert.strictEqual(fs.readFileSync(path.join(uploads, "a.txt"), "utf8"), "second")

      const outside = path.join(home, "outside.txt")
      fs.writeFileSync(outside, "keep me")
      fs.symlinkSync(outside, path.join(uploads, "b.txt"))
      yield* Upload.upload("t1", [{ name: "b.txt", bytes: new TextEncoder().encode("uploaded") }])
        .pipe(withConfig(home))
      assert.strictEqual(fs.readFileSync(outside, "utf8"), "keep me")
      assert.isFalse(fs.lstatSync(path.join(uploads, "b.txt")).isSymbolicLink())
      assert.strictEqual(fs.readFileSync(path.join(uploads, "b.txt"), "utf8"), "uploaded")
    }))

  it.effect("an uploads directory that is a symbolic link is refused: nothing is written where it points", () =>
    Effect.gen(function*() {
      const { home, uploads } = freshHome()
      const elsewhere = path.join(home, "elsewhere")
      fs.mkdirSync(elsewhere)
      fs.mkdirSync(path.dirname(uploads), { recursive: true })
      fs.symlinkSync(elsewhere, uploads)
      const error = yield* Effect.flip(
        Upload.upload("t1", [{ name: "a.txt", bytes: binary(4) }]).pipe(withConfig(home))
      )
      assert.strictEqual(error.reason, "io")
      assert.strictEqual(
        error.message,
        "Cannot prepare the thread's uploads directory: the uploads directory is a symbolic link"
      )
      assert.deepStrictEqual(listDir(elsewhere), [])
    }))

  it.effect("uploads go under the given user", () =>
    Effect.gen(function*() {
      const { home } = freshHome()
      const [result] = yield* Upload.upload("t1", [{ name: "a.txt", bytes: binary(4) }], { userId: "alice" })
        .pipe(withConfig(home))
      assert.strictEqual(result!.path, "/mnt/user-data/uploads/a.txt")
      assert.isTrue(fs.existsSync(path.join(home, "users/alice/threads/t1/user-data/uploads/a.txt")))
    }))
})
