/**
 * Custom skills that change over time (DeerFlow's `skill_manage` storage): the skills under `custom/` of the
 * skills directory, created, edited, patched and deleted by the agent (`SkillManage.ts`, with `skill_evolution`)
 * or by a person (the gateway's `/api/skills/custom/...`), with every change kept in the skill's history, in
 * DeerFlow's layout: `custom/<name>/SKILL.md` (and supporting files under `references/`, `templates/`,
 * `scripts/`, `assets/`), `custom/.history/<name>.jsonl`, one JSON record a line (`ts`, `action`, `author`,
 * `thread_id`, `file_path`, `prev_content`, `new_content`), oldest first. A deleted skill's history stays, so
 * that it can be rolled back into being.
 *
 * What is written is untrusted (a model wrote it): a name is hyphen-case (`[a-z0-9]` words joined by `-`, at most
 * 64), so it names one folder under `custom/` and nothing else; a file is at most `MAX_FILE_BYTES` and must
 * declare a skill as the skills directory reads one (front matter with this name and a description) and pass
 * DeerFlow's check of what is written (`SkillsDirectory.installProblem`); a supporting file's path is relative,
 * plain (no `..`, no backslash, no control character) and under one of the four folders; no link is followed or
 * replaced. Files are written whole (a temporary file renamed over them). A history larger than
 * `MAX_HISTORY_BYTES` loses its oldest records when a new one is added.
 *
 * Every operation is one synchronous step over the file system, so two of them (a run's tool call and a request
 * of the gateway) never interleave within the process.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import * as TextFile from "../layers/TextFile.js"
import type { AppConfigService } from "../services/AppConfig.js"
import * as Json from "../state/Json.js"
import * as SkillScan from "./SkillScan.js"

/** A custom skill's name: hyphen-case (DeerFlow's rule), at most 64 characters. */
export const NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/

/** The longest name. */
export const MAX_NAME_CHARS = 64

/** The file a skill is declared in. */
export const SKILL_FILE = "SKILL.md"

/** The folders supporting files may live in (DeerFlow's). */
export const SUPPORT_FOLDERS: ReadonlyArray<string> = ["assets", "references", "scripts", "templates"]

/**
 * The largest file written (a SKILL.md or a supporting file): 512 KiB, half of what the skills directory reads,
 * and less than the model's tool call arguments may hold, so that a model's oversized skill meets this limit
 * (with its size named) rather than a cut-off call.
 */
export const MAX_FILE_BYTES = 512 * 1024

/** The largest history kept per skill: 16 MiB (older records go when a new one would pass it). */
export const MAX_HISTORY_BYTES = 16 * 1024 * 1024

/** The longest supporting file path. */
const MAX_PATH_CHARS = 512

/** Why a custom skill could not be read or changed. */
export class CustomSkillError extends Schema.TaggedError<CustomSkillError>()("CustomSkillError", {
  reason: Schema.Literal("invalid", "not_found", "exists", "read_only", "io"),
  message: Schema.String,
  /** SkillScan's blocking findings, when they refused the write (DeerFlow's `StaticScanBlockedError.findings`). */
  findings: Schema.optional(Schema.Array(Schema.Unknown)),
  cause: Schema.optional(Schema.Defect)
}) {}

const invalid = (message: string) => new CustomSkillError({ reason: "invalid", message })

/** One change of a skill, as its history keeps it. */
export interface HistoryRecord {
  readonly ts: string
  readonly action: string
  /** `agent` (the `skill_manage` tool) or `human` (the gateway). */
  readonly author: "agent" | "human"
  readonly thread_id: string | null
  /** The file changed, relative to the skill's folder (`SKILL.md`, `scripts/run.py`). */
  readonly file_path: string
  readonly prev_content: string | null
  readonly new_content: string | null
  /** A rollback's source record (its `ts`). */
  readonly rollback_from_ts?: string | null | undefined
}

/** Who makes a change. */
export interface Author {
  readonly author: "agent" | "human"
  readonly threadId?: string | undefined
}

/** The skill name, trimmed, when it is one (else why not). */
export const checkName = (raw: string): Either.Either<string, CustomSkillError> => {
  const name = raw.trim()
  if (name.length > MAX_NAME_CHARS) {
    return Either.left(invalid(`Skill name must be ${MAX_NAME_CHARS} characters or fewer.`))
  }
  if (!NAME.test(name)) {
    return Either.left(invalid("Skill name must be hyphen-case using lowercase letters, digits, and hyphens only."))
  }
  return Either.right(name)
}

/** Why a SKILL.md's text cannot be the SKILL.md of skill `name`, if it cannot. */
export const contentProblem = (name: string, content: string): string | undefined => {
  const bytes = Buffer.byteLength(content, "utf8")
  if (bytes > MAX_FILE_BYTES) {
    return `SKILL.md would be ${TextFile.formatBytes(bytes)}; at most ${TextFile.formatBytes(MAX_FILE_BYTES)}.`
  }
  const parsed = SkillsDirectory.parseSkill(content)
  if (!parsed.ok) return `SKILL.md does not declare a skill: ${parsed.problem}.`
  const problem = SkillsDirectory.installProblem(content)
  if (problem !== undefined) return `Invalid skill: ${problem}`
  if (parsed.name !== name) {
    return `Frontmatter name '${parsed.name}' must match requested skill name '${name}'.`
  }
  return undefined
}

/** Why a supporting file's path is not one a skill may hold, if it is not. */
export const supportPathProblem = (path: string): string | undefined => {
  if (path === "" || path.endsWith("/")) return "Supporting file path must include a filename."
  if (path.length > MAX_PATH_CHARS) return `Supporting file path must be at most ${MAX_PATH_CHARS} characters.`
  if (path.includes("\\")) return "Supporting file path must use '/' (no backslash)."
  if (/[\u0000-\u001f\u007f]/.test(path)) return "Supporting file path must not hold control characters."
  if (path.startsWith("/") || /^[A-Za-z]:/.test(path)) return "Supporting file path must be relative."
  const parts = path.split("/")
  if (parts.some((part) => part === ".." || part === "." || part === "")) {
    return "Supporting file path must not contain parent-directory traversal."
  }
  if (!SUPPORT_FOLDERS.includes(parts[0]!) || parts.length < 2) {
    return `Supporting files must live under one of: ${SUPPORT_FOLDERS.join(", ")}.`
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------
// The store

/** The custom skills of a skills directory (`root`: the directory, which need not exist yet). */
export interface Store {
  readonly root: string
  /** Whether skill `name` exists under `custom/`. */
  readonly exists: (name: string) => boolean
  /** The SKILL.md of custom skill `name`. */
  readonly read: (name: string) => Effect.Effect<string, CustomSkillError>
  /** The history of skill `name`, oldest first (none: empty). */
  readonly history: (name: string) => Effect.Effect<ReadonlyArray<HistoryRecord>, CustomSkillError>
  /** Whether skill `name` has a history file. */
  readonly hasHistory: (name: string) => boolean
  readonly create: (name: string, content: string, by: Author) => Effect.Effect<void, CustomSkillError>
  /** Replaces the SKILL.md (`action`: `edit`, `human_edit`). */
  readonly edit: (name: string, content: string, by: Author, action?: string) => Effect.Effect<void, CustomSkillError>
  /** Replaces `find` in the SKILL.md; the number of matches found and replaced. */
  readonly patch: (
    name: string,
    edit: { readonly find: string; readonly replace: string; readonly expectedCount?: number | undefined },
    by: Author
  ) => Effect.Effect<{ readonly found: number; readonly replaced: number }, CustomSkillError>
  readonly remove: (name: string, by: Author, action?: string) => Effect.Effect<void, CustomSkillError>
  readonly writeFile: (name: string, path: string, content: string, by: Author) => Effect.Effect<void, CustomSkillError>
  readonly removeFile: (name: string, path: string, by: Author) => Effect.Effect<void, CustomSkillError>
  /**
   * Restores the SKILL.md a history record replaced (`index`: its position, negative from the end, DeerFlow's
   * `history_index`); a deleted skill comes back. The new text is checked as any SKILL.md written.
   */
  readonly rollback: (name: string, index: number, by: Author) => Effect.Effect<void, CustomSkillError>
}

const isErrno = (cause: unknown, code: string) => (cause as { code?: unknown } | null)?.code === code

/** The store of an app's skills directory (`SkillsDirectory.location`). */
export const of = (app: AppConfigService["Type"]): Store =>
  make(SkillsDirectory.location(app).path, { scan: app.config.skill_scan.enabled })

/** The store of the skills directory `root`. */
export const make = (root: string, options: { readonly scan?: boolean } = {}): Store => {
  const custom = Path.join(root, "custom")
  const historyDir = Path.join(custom, ".history")
  const skillDir = (name: string) => Path.join(custom, name)
  const skillFile = (name: string) => Path.join(custom, name, SKILL_FILE)
  const historyFile = (name: string) => Path.join(historyDir, `${name}.jsonl`)

  /** A synchronous step, its failures typed: a thrown `CustomSkillError` as it is, anything else `io`. */
  const step = <A>(what: string, body: () => A): Effect.Effect<A, CustomSkillError> =>
    Effect.try({
      try: body,
      catch: (cause) =>
        cause instanceof CustomSkillError
          ? cause
          : new CustomSkillError({
            reason: "io",
            message: `${what}: ${(cause as Error).message ?? String(cause)}`,
            cause
          })
    })

  const nameOf = (raw: string): string => Either.getOrThrowWith(checkName(raw), (e) => e)

  /** The kind of what is at `path` without following a link (undefined: nothing). */
  const kind = (path: string): "file" | "dir" | "link" | "other" | undefined => {
    try {
      const stat = Fs.lstatSync(path)
      return stat.isSymbolicLink() ? "link" : stat.isFile() ? "file" : stat.isDirectory() ? "dir" : "other"
    } catch (cause) {
      if (isErrno(cause, "ENOENT") || isErrno(cause, "ENOTDIR")) return undefined
      throw cause
    }
  }

  /**
   * A folder made (with its parents), refusing one that is not a folder, or a link unless `follow` (the skills
   * directory and its `custom/` may be links the person who set them up made; nothing inside them may).
   */
  const ensureDir = (dir: string, follow = false) => {
    const found = kind(dir)
    if (found === "dir") return
    if (found === "link" && follow && Fs.statSync(dir).isDirectory()) return
    if (found !== undefined) throw invalid(`${Path.relative(root, dir)} is not a plain folder; nothing was written.`)
    Fs.mkdirSync(dir, { recursive: true })
  }

  /** Writes `file` whole: a temporary file beside it, renamed over it. */
  const writeWhole = (file: string, content: string) => {
    const found = kind(file)
    if (found !== undefined && found !== "file") {
      throw invalid(`${Path.relative(root, file)} is not a regular file; nothing was written.`)
    }
    const temp = Path.join(Path.dirname(file), `.${Path.basename(file)}.${Crypto.randomUUID()}.tmp`)
    try {
      Fs.writeFileSync(temp, content, { flag: "wx", mode: 0o644 })
      Fs.renameSync(temp, file)
    } catch (cause) {
      Fs.rmSync(temp, { force: true })
      throw cause
    }
  }

  const readText = (file: string, what: string): string | undefined => {
    const read = TextFile.read(file, MAX_FILE_BYTES)
    if (Either.isRight(read)) return read.right
    if (read.left.reason === "missing") return undefined
    throw new CustomSkillError({
      reason: "io",
      message: `${what} cannot be read: ${read.left.problem}`,
      cause: read.left
    })
  }

  const existsNow = (name: string) => kind(skillDir(name)) === "dir" && kind(skillFile(name)) === "file"

  const currentSkill = (name: string): string => {
    if (!existsNow(name)) {
      const isPublic = kind(Path.join(root, "public", name, SKILL_FILE)) !== undefined
      throw isPublic
        ? new CustomSkillError({
          reason: "read_only",
          message: `'${name}' is a built-in skill. To customise it, create a new skill with the same name under ` +
            "skills/custom/."
        })
        : new CustomSkillError({ reason: "not_found", message: `Custom skill '${name}' not found.` })
    }
    const text = readText(skillFile(name), `The SKILL.md of '${name}'`)
    if (text === undefined) {
      throw new CustomSkillError({ reason: "not_found", message: `Custom skill '${name}' not found.` })
    }
    return text
  }

  const readHistory = (name: string): Array<HistoryRecord> => {
    const file = historyFile(name)
    const read = TextFile.read(file, MAX_HISTORY_BYTES + 2 * MAX_FILE_BYTES + 64 * 1024)
    if (Either.isLeft(read)) {
      if (read.left.reason === "missing") return []
      throw new CustomSkillError({
        reason: "io",
        message: `The history of '${name}' cannot be read: ${read.left.problem}`,
        cause: read.left
      })
    }
    const records: Array<HistoryRecord> = []
    for (const line of read.right.split("\n")) {
      if (line.trim() === "") continue
      try {
        const record = Json.parse(line)
        if (typeof record === "object" && record !== null && !Array.isArray(record)) {
          records.push(record as HistoryRecord)
        }
      } catch {
        // a torn or hand-broken line is skipped, the rest of the history stays readable
      }
    }
    return records
  }

  const append = (
    name: string,
    by: Author,
    change: Omit<HistoryRecord, "ts" | "author" | "thread_id">
  ) => {
    ensureDir(historyDir)
    const record: HistoryRecord = {
      ts: new Date().toISOString(),
      ...change,
      author: by.author,
      thread_id: by.threadId ?? null
    }
    const line = `${JSON.stringify(record)}\n`
    const file = historyFile(name)
    const size = kind(file) === "file" ? Fs.statSync(file).size : 0
    if (size + Buffer.byteLength(line, "utf8") <= MAX_HISTORY_BYTES) {
      if (kind(file) === undefined || kind(file) === "file") Fs.appendFileSync(file, line, { mode: 0o644 })
      else throw invalid(`The history of '${name}' is not a regular file.`)
      return
    }
    // past the limit: the oldest records go, the file is written whole
    const kept = readHistory(name).map((r) => `${JSON.stringify(r)}\n`)
    let total = Buffer.byteLength(line, "utf8")
    const tail: Array<string> = []
    for (let i = kept.length - 1; i >= 0; i--) {
      const bytes = Buffer.byteLength(kept[i]!, "utf8")
      if (total + bytes > MAX_HISTORY_BYTES) break
      total += bytes
      tail.unshift(kept[i]!)
    }
    writeWhole(file, [...tail, line].join(""))
  }

  /** Refuses what SkillScan blocks in file `path` of skill `name` (DeerFlow's static scan before a write). */
  const scanned = (name: string, path: string, content: string) => {
    if (options.scan === false) return
    const result = SkillScan.scanTexts([{ path, text: content }])
    const blocked = SkillScan.blockedMessage(name, result)
    if (blocked === undefined) return
    const findings = result.findings.filter((finding) => finding.severity === "CRITICAL")
    throw new CustomSkillError({ reason: "invalid", message: blocked, findings })
  }

  const checked = (name: string, content: string) => {
    const problem = contentProblem(name, content)
    if (problem !== undefined) throw invalid(problem)
    scanned(name, SKILL_FILE, content)
  }

  /** The supporting file `path` of skill `name`, checked (see `supportPathProblem`), no link on its way. */
  const supportFile = (name: string, path: string): string => {
    const problem = supportPathProblem(path)
    if (problem !== undefined) throw invalid(problem)
    const parts = path.split("/")
    let at = skillDir(name)
    for (const part of parts.slice(0, -1)) {
      at = Path.join(at, part)
      const found = kind(at)
      if (found !== undefined && found !== "dir") {
        throw invalid(`Supporting file path must stay within the skill's folder (${parts[0]}/ holds a link or a file).`)
      }
    }
    return Path.join(skillDir(name), ...parts)
  }

  const writeSkill = (name: string, content: string) => {
    ensureDir(root, true)
    ensureDir(custom, true)
    ensureDir(skillDir(name))
    writeWhole(skillFile(name), content)
  }

  return {
    root,
    exists: (raw) => Either.isRight(checkName(raw)) && existsNow(raw.trim()),
    hasHistory: (raw) => Either.isRight(checkName(raw)) && kind(historyFile(raw.trim())) === "file",
    read: (raw) => step("read", () => currentSkill(nameOf(raw))),
    history: (raw) => step("history", () => readHistory(nameOf(raw))),
    create: (raw, content, by) =>
      step("create", () => {
        const name = nameOf(raw)
        if (kind(skillDir(name)) !== undefined) {
          throw new CustomSkillError({ reason: "exists", message: `Custom skill '${name}' already exists.` })
        }
        checked(name, content)
        writeSkill(name, content)
        append(name, by, { action: "create", file_path: SKILL_FILE, prev_content: null, new_content: content })
      }),
    edit: (raw, content, by, action = "edit") =>
      step("edit", () => {
        const name = nameOf(raw)
        const prev = currentSkill(name)
        checked(name, content)
        writeSkill(name, content)
        append(name, by, { action, file_path: SKILL_FILE, prev_content: prev, new_content: content })
      }),
    patch: (raw, edit, by) =>
      step("patch", () => {
        const name = nameOf(raw)
        const prev = currentSkill(name)
        if (edit.find === "") throw invalid("find must not be empty.")
        const found = prev.split(edit.find).length - 1
        if (found === 0) throw invalid("Patch target not found in SKILL.md.")
        if (edit.expectedCount !== undefined && found !== edit.expectedCount) {
          throw invalid(`Expected ${edit.expectedCount} replacements but found ${found}.`)
        }
        const replaced = edit.expectedCount ?? 1
        let next = prev
        let from = 0
        for (let i = 0; i < replaced; i++) {
          const at = next.indexOf(edit.find, from)
          next = next.slice(0, at) + edit.replace + next.slice(at + edit.find.length)
          from = at + edit.replace.length
        }
        checked(name, next)
        writeSkill(name, next)
        append(name, by, { action: "patch", file_path: SKILL_FILE, prev_content: prev, new_content: next })
        return { found, replaced }
      }),
    remove: (raw, by, action = "delete") =>
      step("delete", () => {
        const name = nameOf(raw)
        const prev = currentSkill(name)
        append(name, by, { action, file_path: SKILL_FILE, prev_content: prev, new_content: null })
        Fs.rmSync(skillDir(name), { recursive: true, force: true })
      }),
    writeFile: (raw, path, content, by) =>
      step("write_file", () => {
        const name = nameOf(raw)
        currentSkill(name)
        const file = supportFile(name, path)
        const bytes = Buffer.byteLength(content, "utf8")
        if (bytes > MAX_FILE_BYTES) {
          throw invalid(
            `'${path}' would be ${TextFile.formatBytes(bytes)}; at most ${TextFile.formatBytes(MAX_FILE_BYTES)}.`
          )
        }
        scanned(name, path, content)
        const prev = readText(file, `'${path}'`) ?? null
        let at = skillDir(name)
        for (const part of path.split("/").slice(0, -1)) ensureDir(at = Path.join(at, part))
        writeWhole(file, content)
        append(name, by, { action: "write_file", file_path: path, prev_content: prev, new_content: content })
      }),
    removeFile: (raw, path, by) =>
      step("remove_file", () => {
        const name = nameOf(raw)
        currentSkill(name)
        const file = supportFile(name, path)
        if (kind(file) !== "file") {
          throw new CustomSkillError({
            reason: "not_found",
            message: `Supporting file '${path}' not found for skill '${name}'.`
          })
        }
        const prev = readText(file, `'${path}'`) ?? null
        Fs.rmSync(file)
        append(name, by, { action: "remove_file", file_path: path, prev_content: prev, new_content: null })
      }),
    rollback: (raw, index, by) =>
      step("rollback", () => {
        const name = nameOf(raw)
        const records = readHistory(name)
        if (records.length === 0) {
          throw existsNow(name)
            ? invalid(`Custom skill '${name}' has no history`)
            : new CustomSkillError({ reason: "not_found", message: `Custom skill '${name}' not found` })
        }
        const at = index < 0 ? records.length + index : index
        const record = records[at]
        if (!Number.isInteger(index) || record === undefined) throw invalid("history_index is out of range")
        if (record.file_path !== SKILL_FILE) {
          throw invalid(`The selected history entry changed '${String(record.file_path)}', not ${SKILL_FILE}.`)
        }
        const target = record.prev_content
        if (typeof target !== "string") {
          throw invalid("Selected history entry has no previous content to roll back to")
        }
        checked(name, target)
        const current = existsNow(name) ? readText(skillFile(name), `The SKILL.md of '${name}'`) ?? null : null
        writeSkill(name, target)
        append(name, by, {
          action: "rollback",
          file_path: SKILL_FILE,
          prev_content: current,
          new_content: target,
          rollback_from_ts: typeof record.ts === "string" ? record.ts : null
        })
      })
  }
}
