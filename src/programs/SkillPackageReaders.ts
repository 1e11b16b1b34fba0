/**
 * Reading a skill package for review (SPEC §7.18) into a snapshot (`SkillPackage`), as DeerFlow's readers do,
 * without running, installing or unpacking anything to disk: pasted SKILL.md text, a folder read through the
 * run's sandbox (virtual paths only), or the bytes of a `.skill` archive (`SkillArchive`'s reader). The package
 * is untrusted: it is read within `LIMITS` (files, bytes per file, bytes in all), an archive entry is unpacked
 * no further than they allow whatever its header declares, links are recorded and not followed (a folder's as
 * the sandbox shows them: those leading out of its directories not at all), and what is left out is reported
 * (`truncated`, `reader_errors`) instead of failing the review.
 */
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import type { Sandbox } from "../services/Sandbox.js"
import * as SkillArchive from "./SkillArchive.js"
import type { FileEntry, Limits, ReaderError, Snapshot, Subject } from "./SkillPackage.js"
import { compare, normalizeRelativePath, PACKAGE_SNAPSHOT_SCHEMA_VERSION } from "./SkillPackage.js"

/** The bounds of a package read: DeerFlow's are larger; these are Antler's `.skill` archive bounds. */
export const LIMITS: Limits = {
  max_files: SkillArchive.MAX_ENTRIES,
  max_file_bytes: 8 * 1024 * 1024,
  max_total_bytes: SkillArchive.MAX_UNPACKED_BYTES
}


const sha256 = (data: Uint8Array) => Crypto.createHash("sha256").update(data).digest("hex")

const TEXT_EXTENSIONS: ReadonlySet<string> = new Set([
  ".css", ".csv", ".html", ".js", ".json", ".md", ".py", ".sh", ".svg", ".toml", ".ts", ".txt", ".yaml", ".yml"
])

const extension = (path: string) => {
  const name = path.split("/").at(-1) ?? ""
  const dot = name.lastIndexOf(".")
  return dot <= 0 ? "" : name.slice(dot).toLowerCase()
}

/** The text of a file's bytes, unless they are binary (a NUL outside the text extensions, or not UTF-8). */
const decodeText = (data: Uint8Array, path: string): string | undefined => {
  if (!TEXT_EXTENSIONS.has(extension(path)) && data.includes(0)) return undefined
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(data)
  } catch {
    return undefined
  }
}

const fileEntry = (path: string, data: Uint8Array): FileEntry => {
  const text = decodeText(data, path)
  return text === undefined
    ? { path, kind: "binary", size: data.length, sha256: sha256(data) }
    : { path, kind: "text", size: data.length, sha256: sha256(data), content: text }
}

/** A snapshot being filled by a reader. */
export const collector = (subject: Subject) => {
  const files: Array<FileEntry> = []
  const errors: Array<ReaderError> = []
  let truncated = false
  return {
    file: (entry: FileEntry) => void files.push(entry),
    error: (code: string, path: string | null, message: string, cut = false) => {
      errors.push({ code, path, message })
      if (cut) truncated = true
    },
    tooLarge: (path: string, size: number, what: string) => {
      files.push({ path, kind: "binary", size, sha256: "", content: null })
      errors.push({ code: "file_too_large", path, message: `${what} exceeds the per-file review limit` })
      truncated = true
    },
    done: (): Snapshot => ({
      schema_version: PACKAGE_SNAPSHOT_SCHEMA_VERSION,
      subject,
      limits: LIMITS,
      files: files.sort((a, b) => compare(a.path, b.path)),
      truncated,
      reader_errors: errors.sort((a, b) => compare(a.path ?? "", b.path ?? "") || compare(a.code, b.code))
    })
  }
}

export const subjectOf = (
  source: Subject["source"],
  display_ref: string,
  name_hint: string | null,
  category: string | null = null
): Subject => ({ source, category, name_hint, display_ref })

/** The snapshot of pasted SKILL.md text (cut, on a character, to the per-file limit). */
export const inlineSnapshot = (content: string, nameHint: string): Snapshot => {
  const snapshot = collector(subjectOf("inline", nameHint, nameHint))
  let data: Uint8Array = new TextEncoder().encode(content)
  let text = content
  if (data.length > LIMITS.max_file_bytes) {
    snapshot.error("file_too_large", "SKILL.md", "Inline SKILL.md exceeds the per-file review limit", true)
    text = new TextDecoder().decode(data.subarray(0, LIMITS.max_file_bytes)).replace(/\uFFFD+$/, "")
    data = new TextEncoder().encode(text)
  }
  snapshot.file({ path: "SKILL.md", kind: "text", size: data.length, sha256: sha256(data), content: text })
  return snapshot.done()
}

/** The snapshot of the folder at a virtual path, read through the sandbox. */
export const directorySnapshot = (
  sandbox: Sandbox,
  dir: string,
  subject: Subject
): Effect.Effect<Snapshot> =>
  Effect.gen(function*() {
    const snapshot = collector(subject)
    const info = yield* Effect.either(sandbox.stat(dir))
    if (info._tag === "Left" || info.right.kind !== "directory") {
      const missing = info._tag === "Left" && info.left.reason === "not_found"
      if (info._tag === "Right" || missing) {
        snapshot.error(missing ? "root_not_found" : "root_not_directory", null,
          missing ? "Package root does not exist" : "Package root is not a directory")
      } else snapshot.error("read_failed", null, info.left.message)
      return snapshot.done()
    }
    const walked = yield* Effect.either(sandbox.walk(dir, { maxEntries: LIMITS.max_files * 4 }))
    if (walked._tag === "Left") {
      snapshot.error("read_failed", null, walked.left.message)
      return snapshot.done()
    }
    const files = walked.right.entries.filter((entry) => entry.kind === "file")
    if (walked.right.truncated || files.length > LIMITS.max_files) {
      snapshot.error("too_many_files", null, "Package file count exceeds the review limit", true)
    }
    // A link is not followed: the walk shows one as what it points to (when that stays inside the thread's
    // directories; others it leaves out), so a file whose real path is not where it lies is recorded as a link,
    // its target named by virtual path.
    const rootReal = yield* Effect.option(sandbox.resolve(dir, "read"))
    let total = 0
    for (const entry of files.slice(0, LIMITS.max_files)) {
      // (a file name may hold a backslash, which a package path reads as a separator: `..\\x` would leave it)
      let path: string
      try {
        path = normalizeRelativePath(entry.relative)
      } catch {
        snapshot.error("path_escaped", null, "Package entry escapes the root")
        continue
      }
      const real = yield* Effect.option(sandbox.resolve(entry.path, "read"))
      if (rootReal._tag === "Some" && real._tag === "Some" && real.value !== `${rootReal.value}/${path}`) {
        const masked = sandbox.mask(real.value)
        const target = masked === real.value ? "(outside the sandbox)" : masked
        snapshot.file({ path, kind: "symlink", size: 0, sha256: sha256(new TextEncoder().encode(target)), target })
        continue
      }
      const stat = yield* Effect.either(sandbox.stat(entry.path))
      if (stat._tag === "Left") {
        snapshot.error("stat_failed", path, stat.left.message)
        continue
      }
      total += stat.right.size
      if (total > LIMITS.max_total_bytes) {
        snapshot.error("total_size_exceeded", path, "Package total size exceeds the review limit", true)
        break
      }
      if (stat.right.size > LIMITS.max_file_bytes) {
        snapshot.tooLarge(path, stat.right.size, "File")
        continue
      }
      const data = yield* Effect.either(sandbox.readBytes(entry.path, LIMITS.max_file_bytes))
      if (data._tag === "Left") snapshot.error("read_failed", path, data.left.message)
      else snapshot.file(fileEntry(path, data.right))
    }
    return snapshot.done()
  })

const S_IFMT = 0o170000
const S_IFLNK = 0o120000

/** The snapshot of a `.skill` archive's bytes (nothing unpacked to disk; entries unpacked within the limits). */
export const archiveSnapshot = (bytes: Uint8Array, subject: Subject): Effect.Effect<Snapshot> =>
  Effect.gen(function*() {
    const snapshot = collector(subject)
    const opened = yield* Effect.either(SkillArchive.entriesOf(bytes))
    if (opened._tag === "Left") {
      snapshot.error("archive_read_failed", null, opened.left.message)
      return snapshot.done()
    }
    let members = [...opened.right].sort((a, b) => compare(a.name, b.name))
    if (members.length > LIMITS.max_files) {
      snapshot.error("too_many_files", null, "Archive member count exceeds the review limit", true)
      members = members.slice(0, LIMITS.max_files)
    }
    let total = 0
    for (const member of members) {
      if (member.dir) continue
      let path: string
      try {
        path = normalizeRelativePath(member.name)
      } catch (error) {
        snapshot.error("invalid_archive_path", member.name, (error as Error).message)
        continue
      }
      if (member.declared > LIMITS.max_file_bytes) {
        snapshot.tooLarge(path, member.declared, "Archive member")
        continue
      }
      const remaining = LIMITS.max_total_bytes - total
      if (remaining <= 0) {
        snapshot.error("total_size_exceeded", path, "Archive total size exceeds the review limit", true)
        break
      }
      const budget = Math.min(LIMITS.max_file_bytes, remaining)
      const read = yield* Effect.either(Effect.tryPromise(() => member.readBounded(budget)))
      if (read._tag === "Left") {
        snapshot.error("archive_member_read_failed", path, "The archive member cannot be unpacked")
        continue
      }
      const { data, size, exceeded } = read.right
      if (exceeded && size > LIMITS.max_file_bytes) {
        snapshot.tooLarge(path, size, "Archive member")
        continue
      }
      if (exceeded) {
        snapshot.error("total_size_exceeded", path, "Archive total size exceeds the review limit", true)
        break
      }
      total += size
      if (member.unixPermissions != null && (member.unixPermissions & S_IFMT) === S_IFLNK) {
        const target = new TextDecoder().decode(data)
        snapshot.file({ path, kind: "symlink", size: 0, sha256: sha256(data), target })
      } else snapshot.file(fileEntry(path, data))
    }
    return snapshot.done()
  })
