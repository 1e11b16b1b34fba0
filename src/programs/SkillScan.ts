/**
 * SkillScan, DeerFlow's native deterministic skill scanner (SPEC §7.18: what an install, a custom skill edit or
 * `skill_manage` writes is scanned before it is written): the package's files (nested SKILL.md, executables,
 * nested archives, hidden credential files, `.git`), and each text file's words and code (`SkillScanContent`,
 * `SkillScanPython`). A `CRITICAL` finding blocks; the rest are warnings. Offline and bounded: nothing is run,
 * and a nested ZIP is only peeked at (its first 256 members' first bytes).
 */
import * as Zlib from "node:zlib"
import { isEvalFixtureSkillMd } from "./SkillPackage.js"
import { scanText } from "./SkillScanContent.js"
import type { SecurityFinding } from "./SkillScanRules.js"
import { dedupe, finding, format } from "./SkillScanRules.js"

export type { SecurityFinding } from "./SkillScanRules.js"

/** The largest file SkillScan reads (DeerFlow's). */
export const MAX_FILE_BYTES = 64 * 1024 * 1024

/** The first bytes of an executable program (ELF, PE/DOS, Mach-O and its fat forms). */
const EXECUTABLE_MAGIC: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
  ["ELF", [0x7f, 0x45, 0x4c, 0x46]],
  ["PE", [0x4d, 0x5a]],
  ["Mach-O", [0xfe, 0xed, 0xfa, 0xce]],
  ["Mach-O", [0xfe, 0xed, 0xfa, 0xcf]],
  ["Mach-O", [0xce, 0xfa, 0xed, 0xfe]],
  ["Mach-O", [0xcf, 0xfa, 0xed, 0xfe]],
  ["Mach-O", [0xca, 0xfe, 0xba, 0xbe]],
  ["Mach-O", [0xbe, 0xba, 0xfe, 0xca]],
  ["Mach-O", [0xca, 0xfe, 0xba, 0xbf]],
  ["Mach-O", [0xbf, 0xba, 0xfe, 0xca]]
]

/** What kind of executable `data` starts as (undefined: none). */
export const executableKind = (data: Uint8Array): string | undefined =>
  EXECUTABLE_MAGIC.find(([, magic]) => magic.length <= data.length && magic.every((byte, i) => data[i] === byte))?.[0]

const startsWith = (data: Uint8Array, magic: ReadonlyArray<number>) =>
  magic.length <= data.length && magic.every((byte, i) => data[i] === byte)
const ZIP = [0x50, 0x4b, 0x03, 0x04]
const ARCHIVE_MAGIC = [ZIP, [0x1f, 0x8b], [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c]]
const ARCHIVE_SUFFIXES = [
  ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".7z", ".rar", ".whl"
]
const HIDDEN_SENSITIVE: ReadonlySet<string> = new Set([".env", ".npmrc", ".pypirc", ".netrc", "credentials", "config"])

const isHiddenSensitive = (parts: ReadonlyArray<string>) => {
  const last = parts.at(-1) ?? ""
  if (parts.includes(".aws") && last === "credentials") return true
  if (parts.includes(".git") && last === "config") return true
  return HIDDEN_SENSITIVE.has(last) &&
    (last.startsWith(".") || ["credential", "npmrc", "pypirc", "netrc"].some((t) => last.toLowerCase().includes(t)))
}

/** Whether a ZIP's first members hold an executable (read from its central directory, never unpacked whole). */
const zipHoldsExecutable = (data: Uint8Array): boolean => {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  let end = -1
  for (let at = data.length - 22; at >= Math.max(0, data.length - 65_557); at--) {
    if (view.getUint32(at, true) === 0x06054b50) {
      end = at
      break
    }
  }
  if (end < 0) return false
  let at = view.getUint32(end + 16, true)
  for (let n = Math.min(view.getUint16(end + 10, true), 256); n > 0; n--) {
    if (at + 46 > data.length || view.getUint32(at, true) !== 0x02014b50) return false
    const method = view.getUint16(at + 10, true)
    const size = view.getUint32(at + 20, true)
    const nameLength = view.getUint16(at + 28, true)
    const local = view.getUint32(at + 42, true)
    at += 46 + nameLength + view.getUint16(at + 30, true) + view.getUint16(at + 32, true)
    if (local + 30 > data.length || view.getUint32(local, true) !== 0x04034b50) continue
    const from = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true)
    const body = data.subarray(from, Math.min(data.length, from + Math.min(size, 1024)))
    try {
      const head = method === 0
        ? body
        : method === 8
        ? Zlib.inflateRawSync(body, { finishFlush: Zlib.constants.Z_SYNC_FLUSH })
        : new Uint8Array()
      if (executableKind(head.subarray(0, 8)) !== undefined) return true
    } catch {
      // a broken member is no executable that could run
    }
  }
  return false
}

/** The package rules on one file (its path in the skill, its bytes). */
const packageFindings = (path: string, data: Uint8Array): Array<SecurityFinding> => {
  const out: Array<SecurityFinding> = []
  const parts = path.split("/")
  const name = parts.at(-1) ?? ""
  if (name === "SKILL.md" && parts.length > 1 && !isEvalFixtureSkillMd(path)) {
    out.push(finding("package-nested-skill-md", path, null, path))
  }
  if (data.length > MAX_FILE_BYTES) out.push(finding("package-oversized-file", path, null, `${data.length} bytes`))
  if (isHiddenSensitive(parts)) out.push(finding("package-hidden-sensitive-file", path, null, name))
  if (parts.includes(".git")) out.push(finding("package-git-directory", path, null, ".git"))
  const lower = path.toLowerCase()
  if (ARCHIVE_SUFFIXES.some((suffix) => lower.endsWith(suffix)) || ARCHIVE_MAGIC.some((m) => startsWith(data, m))) {
    out.push(
      startsWith(data, ZIP) && zipHoldsExecutable(data)
        ? finding("package-nested-archive", path, null, `${name}: contains an executable binary member`, "CRITICAL")
        : finding("package-nested-archive", path, null, name)
    )
  }
  const kind = executableKind(data.subarray(0, 8))
  if (kind !== undefined) out.push(finding("package-executable-binary", path, null, kind))
  return out
}

/** A file's text as SkillScan reads it: none for a NUL in its first 4 KiB or bytes that are not UTF-8. */
const textOf = (data: Uint8Array): string | undefined => {
  if (data.subarray(0, 4096).includes(0)) return undefined
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(data)
  } catch {
    return undefined
  }
}

/** A file of a skill: its path in the skill's folder (`/`-separated) and its bytes. */
export interface File {
  readonly path: string
  readonly data: Uint8Array
}

/** What a scan found (DeerFlow's `ScanResult`). */
export interface Result {
  readonly findings: ReadonlyArray<SecurityFinding>
  /** Whether a finding is `CRITICAL`. */
  readonly blocked: boolean
  readonly scanner_errors: ReadonlyArray<string>
}

/** Scans a skill's files (sorted by path, as DeerFlow walks the folder). */
export const scan = (files: ReadonlyArray<File>): Result => {
  const findings: Array<SecurityFinding> = []
  const errors: Array<string> = []
  for (const file of [...files].sort((a, b) => a.path < b.path ? -1 : a.path > b.path ? 1 : 0)) {
    findings.push(...packageFindings(file.path, file.data))
    const text = file.data.length > MAX_FILE_BYTES ? undefined : textOf(file.data)
    if (text === undefined) continue
    findings.push(...scanText(file.path, text, errors))
  }
  const deduped = dedupe(findings)
  return { findings: deduped, blocked: deduped.some((f) => f.severity === "CRITICAL"), scanner_errors: errors }
}

/** Scans text files given as strings. */
export const scanTexts = (files: ReadonlyArray<{ readonly path: string; readonly text: string }>): Result =>
  scan(files.map((f) => ({ path: f.path, data: new TextEncoder().encode(f.text) })))

/**
 * Why skill `name`'s files may not be written (DeerFlow's message: each blocking finding, its rule, file, line and
 * remedy; a secret never repeated), or undefined when nothing blocks.
 */
export const blockedMessage = (name: string, result: Result): string | undefined => {
  const critical = result.findings.filter((f) => f.severity === "CRITICAL")
  return critical.length === 0 ? undefined : `Static security scan blocked skill '${name}': ${format(critical)}`
}
