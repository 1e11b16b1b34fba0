/**
 * Installing a skill from a `.skill` file (DeerFlow's: a ZIP archive of one skill folder, `SKILL.md` at its top
 * or inside one top folder) into the skills directory's `custom/` category.
 *
 * The archive is untrusted (a model wrote it): it is read only as a regular file of at most `MAX_ARCHIVE_BYTES`,
 * with at most `MAX_ENTRIES` entries unpacking to at most `MAX_UNPACKED_BYTES` (declared sizes checked before
 * anything is unpacked, actual sizes as it is), every entry a plain relative path (no `..`, no absolute path, no
 * backslash, no control character, no colon), none a link, none an executable program (ELF, PE, Mach-O), and no
 * second SKILL.md inside the skill; what a ZIP tool puts beside the skill's folder (`__MACOSX/`, `.DS_Store`) is
 * left out, as in DeerFlow. Its `SKILL.md` must declare a skill as the skills directory
 * reads one (`SkillsDirectory.parseSkill`) and pass DeerFlow's stricter check of what is installed
 * (`SkillsDirectory.installProblem`: its keys only, a hyphen-case name, a description without `<` or `>`), and
 * no skill of that name may exist. The skill is unpacked into a staging folder inside `custom/` that is renamed
 * into place, so a skill appears whole or not at all.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as OptionalPackage from "../internal/OptionalPackage.js"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import * as TextFile from "../layers/TextFile.js"
import * as ZipDirectory from "../state/ZipDirectory.js"
import * as SkillScan from "./SkillScan.js"

/** The largest `.skill` file read: 16 MiB. */
export const MAX_ARCHIVE_BYTES = 16 * 1024 * 1024

/** The most entries an archive may hold. */
export const MAX_ENTRIES = 1000

/** The most an archive may unpack to: 64 MiB. */
export const MAX_UNPACKED_BYTES = 64 * 1024 * 1024

/** Names of installed skills (they become folder names). */
export const SKILL_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

/** A skill that cannot be installed. */
export class SkillInstallError extends Schema.TaggedError<SkillInstallError>()("SkillInstallError", {
  /** `not_found`: no file at the path; `missing_package`: jszip (an optional package) is not installed. */
  reason: Schema.Literal("invalid", "not_found", "exists", "io", "missing_package"),
  message: Schema.String,
  /** SkillScan's blocking findings and the skill's name, when they refused it (DeerFlow's `SkillSecurityScanError`). */
  findings: Schema.optional(Schema.Array(Schema.Unknown)),
  skill_name: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {}

const invalid = (message: string) => new SkillInstallError({ reason: "invalid", message })

/** Why an entry's name is not a plain relative path, if it is not. */
export const entryProblem = (name: string): string | undefined => {
  if (name.includes("\\")) return "has a backslash"
  // (control characters, NUL included)
  if (/[\u0000-\u001f\u007f]/.test(name)) return "has a control character"
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) return "is an absolute path"
  const parts = name.replace(/\/$/, "").split("/")
  if (parts.some((part) => part === ".." || part === "." || part === "")) return "is not a plain relative path"
  // (as DeerFlow: on NTFS, `run.sh:x` writes a hidden stream of run.sh rather than a file of its own)
  if (name.includes(":")) return "has a colon"
  return undefined
}

/** Top-level entries a ZIP tool adds beside the skill (macOS's `__MACOSX/`, `.DS_Store`), never the skill. */
const isPackagingLitter = (top: string): boolean => top === "__MACOSX" || top.startsWith(".")

/** Whether `data` starts as an executable program does (a skill's scripts are text; a binary cannot be read). */
export const isExecutableBinary = (data: Uint8Array): boolean => SkillScan.executableKind(data) !== undefined

const S_IFMT = 0o170000
const S_IFLNK = 0o120000

/** An entry of an archive, as its header declares it; its bytes are read on demand. */
export interface Entry {
  /** The name as written (leading `../` kept). */
  readonly name: string
  readonly dir: boolean
  readonly unixPermissions: number | null | undefined
  /** The unpacked size its header declares (which an archive may lie about). */
  readonly declared: number
  readonly read: () => Promise<Uint8Array>
  /**
   * Its bytes, unpacking no more than `max + 1` of them whatever the header declares: `size` is the bytes unpacked
   * (at most `max + 1`), `exceeded` whether there were more than `max` (then `data` holds the first ones only).
   */
  readonly readBounded: (max: number) => Promise<Bounded>
}

/** What `Entry.readBounded` read. */
export interface Bounded {
  readonly data: Uint8Array
  readonly size: number
  readonly exceeded: boolean
}

interface StreamHelper {
  on(event: "data", listener: (chunk: Uint8Array) => void): StreamHelper
  on(event: "end", listener: () => void): StreamHelper
  on(event: "error", listener: (error: Error) => void): StreamHelper
  resume(): StreamHelper
  pause(): StreamHelper
}

const readBounded = (stream: StreamHelper, max: number): Promise<Bounded> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    let done = false
    const finish = (exceeded: boolean) => {
      done = true
      resolve({ data: Buffer.concat(chunks), size: exceeded ? max + 1 : size, exceeded })
    }
    stream
      .on("data", (chunk) => {
        if (done) return
        if (size + chunk.length > max) {
          chunks.push(chunk.subarray(0, max - size))
          stream.pause()
          finish(true)
          return
        }
        size += chunk.length
        chunks.push(chunk)
      })
      .on("error", (error) => {
        if (!done) {
          done = true
          reject(error)
        }
      })
      .on("end", () => {
        if (!done) finish(false)
      })
      .resume()
  })

/**
 * The entries of a ZIP archive's bytes (refused: not a ZIP archive, or one of more than `MAX_ENTRIES` entries;
 * jszip missing: `missing_package`).
 */
export const entriesOf = (bytes: Uint8Array) =>
  Effect.tryPromise({
    try: async () => {
      // counted before jszip builds an object for each (an archive of 150,000 empty entries is 13 MiB)
      const directory = ZipDirectory.read(bytes, MAX_ENTRIES)
      const invalid = (message: string) => new SkillInstallError({ reason: "invalid", message })
      if (directory === undefined) throw invalid("The file is not a ZIP archive.")
      if (directory.entries > MAX_ENTRIES) {
        throw invalid(`The archive has more than ${MAX_ENTRIES} entries; at most ${MAX_ENTRIES}.`)
      }
      const { default: JSZip } = await OptionalPackage.load(["jszip"], "install .skill archives", () => import("jszip"))
      const zip = await JSZip.loadAsync(bytes, { createFolders: false })
      const entries: Array<Entry> = []
      zip.forEach((name, file) => {
        const data = (file as unknown as { readonly _data?: { readonly uncompressedSize?: number } })._data
        // jszip's `name` has leading `../` taken off; the name as written is what is judged
        const original = (file as unknown as { readonly unsafeOriginalName?: string }).unsafeOriginalName
        entries.push({
          name: original ?? name,
          dir: file.dir,
          unixPermissions: typeof file.unixPermissions === "number" ? file.unixPermissions : null,
          declared: data?.uncompressedSize ?? 0,
          read: () => file.async("uint8array"),
          readBounded: (max) => {
            const streaming = file as unknown as { internalStream: (type: "uint8array") => StreamHelper }
            return readBounded(streaming.internalStream("uint8array"), max)
          }
        })
      })
      return entries
    },
    catch: (cause) =>
      cause instanceof SkillInstallError
        ? cause
        : cause instanceof OptionalPackage.MissingPackageError
        ? new SkillInstallError({
          reason: "missing_package",
          message: `Cannot open the archive: ${cause.message}.`,
          cause
        })
        : new SkillInstallError({ reason: "invalid", message: "The file is not a ZIP archive.", cause })
  })

/** What `install` made. */
export interface Installed {
  readonly name: string
  /** The skill's folder. */
  readonly dir: string
}

/**
 * Installs the skill of the `.skill` file `archive` into `{skillsDir}/custom/`, with the catalog's names
 * (`existing`) taken (see the module header).
 */
export const install = (
  archive: string,
  skillsDir: string,
  existing: ReadonlySet<string>,
  options: { readonly scan?: boolean } = {}
): Effect.Effect<Installed, SkillInstallError> =>
  Effect.gen(function*() {
    const stat = yield* Effect.try({
      try: () => Fs.lstatSync(archive),
      catch: () => new SkillInstallError({ reason: "not_found", message: "The .skill file does not exist." })
    })
    if (!stat.isFile()) return yield* invalid("The .skill path is not a regular file.")
    if (Path.extname(archive) !== ".skill") return yield* invalid("The file must have the .skill extension.")
    if (stat.size > MAX_ARCHIVE_BYTES) {
      return yield* invalid(
        `The .skill file is ${TextFile.formatBytes(stat.size)}; at most ${TextFile.formatBytes(MAX_ARCHIVE_BYTES)}.`
      )
    }
    const bytes = yield* Effect.try({
      try: () => Fs.readFileSync(archive),
      catch: (cause) => new SkillInstallError({ reason: "io", message: "The .skill file cannot be read.", cause })
    })
    const entries = yield* entriesOf(bytes)
    if (entries.length > MAX_ENTRIES) {
      return yield* invalid(`The archive has ${entries.length} entries; at most ${MAX_ENTRIES}.`)
    }
    let declared = 0
    for (const entry of entries) {
      const problem = entryProblem(entry.name)
      if (problem !== undefined) return yield* invalid(`The archive entry ${JSON.stringify(entry.name)} ${problem}.`)
      if (entry.unixPermissions != null && (entry.unixPermissions & S_IFMT) === S_IFLNK) {
        return yield* invalid(`The archive entry ${JSON.stringify(entry.name)} is a link; a skill holds files only.`)
      }
      declared += entry.declared
    }
    if (declared > MAX_UNPACKED_BYTES) {
      return yield* invalid(`The archive unpacks to more than ${TextFile.formatBytes(MAX_UNPACKED_BYTES)}.`)
    }
    const all = entries.filter((entry) => !entry.dir)
    // SKILL.md at the top, or every entry inside one top folder holding it (what a ZIP tool adds beside it aside)
    const tops = new Set(all.map((entry) => entry.name.split("/")[0]!).filter((top) => !isPackagingLitter(top)))
    if (tops.size === 0) return yield* invalid("The skill archive is empty.")
    const prefix = all.some((entry) => entry.name === "SKILL.md")
      ? ""
      : tops.size === 1 && all.some((entry) => entry.name === `${[...tops][0]}/SKILL.md`)
      ? `${[...tops][0]}/`
      : undefined
    if (prefix === undefined) {
      return yield* invalid("The archive has no SKILL.md at its top (or inside its one top folder).")
    }
    const files = all.filter((entry) => entry.name.startsWith(prefix))
    // a SKILL.md further down would be a second skill's instructions inside this one (DeerFlow refuses it too)
    const nested = files.find((entry) => entry.name !== `${prefix}SKILL.md` && /(^|\/)SKILL\.md$/.test(entry.name))
    if (nested !== undefined) {
      return yield* invalid(`The archive holds a nested SKILL.md (${JSON.stringify(nested.name)}); a skill has one.`)
    }
    const skillFile = files.find((entry) => entry.name === `${prefix}SKILL.md`)!
    const skillBytes = yield* Effect.promise(() => skillFile.read())
    if (skillBytes.length > SkillsDirectory.MAX_SKILL_BYTES) {
      return yield* invalid(`SKILL.md is larger than ${TextFile.formatBytes(SkillsDirectory.MAX_SKILL_BYTES)}.`)
    }
    const skillText = new TextDecoder().decode(skillBytes)
    const parsed = SkillsDirectory.parseSkill(skillText)
    // (DeerFlow's `Invalid skill: ...`, what its client and app match on, for every front matter problem)
    if (!parsed.ok) return yield* invalid(`Invalid skill: SKILL.md does not declare a skill: ${parsed.problem}.`)
    const problem = SkillsDirectory.installProblem(skillText)
    if (problem !== undefined) return yield* invalid(`Invalid skill: ${problem}`)
    const name = parsed.name
    if (!SKILL_NAME.test(name)) {
      return yield* invalid(
        `The skill's name ${JSON.stringify(name)} cannot name a folder (letters, digits, '-' and '_', at most 64).`
      )
    }
    const custom = Path.join(skillsDir, "custom")
    const target = Path.join(custom, name)
    if (existing.has(name) || Fs.existsSync(target)) {
      return yield* new SkillInstallError({ reason: "exists", message: `Skill '${name}' already exists.` })
    }
    const staging = Path.join(custom, `.install-${Crypto.randomUUID()}`)
    const unpack = Effect.tryPromise({
      try: async () => {
        Fs.mkdirSync(staging, { recursive: true })
        let unpacked = 0
        const read: Array<SkillScan.File> = []
        for (const entry of files) {
          const data = await entry.read()
          read.push({ path: entry.name.slice(prefix.length), data })
          if (isExecutableBinary(data)) {
            const named = JSON.stringify(entry.name)
            throw invalid(`The archive entry ${named} is an executable program; a skill holds none.`)
          }
          unpacked += data.length
          if (unpacked > MAX_UNPACKED_BYTES) {
            throw invalid(`The archive unpacks to more than ${TextFile.formatBytes(MAX_UNPACKED_BYTES)}.`)
          }
          const file = Path.join(staging, entry.name.slice(prefix.length))
          Fs.mkdirSync(Path.dirname(file), { recursive: true })
          Fs.writeFileSync(file, data, { flag: "wx", mode: 0o644 })
        }
        // SkillScan's rules on the whole skill before it is in place (DeerFlow's static scan of an install)
        const scanned = options.scan === false ? undefined : SkillScan.scan(read)
        const blocked = scanned === undefined ? undefined : SkillScan.blockedMessage(name, scanned)
        if (blocked !== undefined) {
          const findings = scanned!.findings.filter((finding) => finding.severity === "CRITICAL")
          throw new SkillInstallError({ reason: "invalid", message: blocked, findings, skill_name: name })
        }
        Fs.renameSync(staging, target)
      },
      catch: (cause) =>
        cause instanceof SkillInstallError
          ? cause
          : new SkillInstallError({ reason: "io", message: `The skill ${name} could not be written.`, cause })
    })
    yield* Effect.uninterruptible(unpack).pipe(
      Effect.tapError(() => Effect.sync(() => Fs.rmSync(staging, { recursive: true, force: true })))
    )
    return { name, dir: target }
  })
