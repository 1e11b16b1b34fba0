/**
 * What a skill package review works on (SPEC §7.18), in DeerFlow's protocol (field names as DeerFlow's review core
 * writes them): the package snapshot a reader makes (every file's path, kind, size and SHA-256, and the text of
 * the text files, with what was left out), findings and their order, package-relative paths (refusing any that
 * leave the package), and the package digest, which does not depend on where the package lies.
 */
import * as Crypto from "node:crypto"

export const PACKAGE_SNAPSHOT_SCHEMA_VERSION = "deerflow.skill-package-snapshot.v1"

export type Profile = "deerflow" | "agentskills"
export type Severity = "blocker" | "error" | "warning" | "info"

/** One file of a snapshot: text (with its content), binary, or a link (with its target). */
export interface FileEntry {
  readonly path: string
  readonly kind: "text" | "binary" | "symlink"
  readonly size: number
  /** Hex SHA-256 of the bytes (empty for a file too large to read). */
  readonly sha256: string
  readonly content?: string | null | undefined
  readonly target?: string | undefined
}

export interface ReaderError {
  readonly code: string
  readonly path: string | null
  readonly message: string
}

export interface Limits {
  readonly max_files: number
  readonly max_file_bytes: number
  readonly max_total_bytes: number
}

export interface Subject {
  readonly source: "inline" | "local_directory" | "archive" | "installed"
  readonly category: string | null
  readonly name_hint: string | null
  readonly display_ref: string
}

/** What a reader saw of a package. */
export interface Snapshot {
  readonly schema_version: string
  readonly subject: Subject
  readonly limits: Limits
  readonly files: ReadonlyArray<FileEntry>
  readonly truncated: boolean
  readonly reader_errors: ReadonlyArray<ReaderError>
}

export interface Finding {
  readonly rule_id: string
  readonly source: string
  readonly profile: string
  readonly severity: Severity
  readonly path: string | null
  readonly line: number | null
  readonly message: string
  readonly remediation: string
  readonly evidence: unknown
  /** SkillScan's own severity (`CRITICAL`, `HIGH`, `MEDIUM`), on its findings. */
  readonly skillscan_severity?: string
}

export const finding = (
  rule_id: string,
  severity: Severity,
  message: string,
  remediation: string,
  extra: { path?: string; line?: number; evidence?: unknown; profile?: string } = {}
): Finding => ({
  rule_id,
  source: "review-core",
  profile: extra.profile ?? "deerflow",
  severity,
  path: extra.path ?? null,
  line: extra.line ?? null,
  message,
  remediation,
  evidence: extra.evidence ?? null
})

const RANK: Readonly<Record<string, number>> = { blocker: 0, error: 1, warning: 2, info: 3 }
export const compare = (a: string, b: string) => a < b ? -1 : a > b ? 1 : 0

/** Findings ordered by severity, path, line, rule and message (DeerFlow's order). */
export const sortFindings = (findings: ReadonlyArray<Finding>): Array<Finding> =>
  [...findings].sort((a, b) =>
    (RANK[a.severity] ?? 99) - (RANK[b.severity] ?? 99) ||
    compare(a.path ?? "", b.path ?? "") ||
    (a.line ?? 1e9) - (b.line ?? 1e9) ||
    compare(a.rule_id, b.rule_id) ||
    compare(a.message, b.message)
  )

// ---------------------------------------------------------------------------------------------------------
// Paths

/** A package-relative path normalised (`a/./b/../c` is `a/c`); throws on an absolute path or one leaving. */
export const normalizeRelativePath = (path: string): string => {
  const raw = path.replaceAll("\\", "/").trim()
  if (raw === "") throw new Error("path must not be empty")
  if (raw.startsWith("/")) throw new Error("absolute paths are not allowed")
  const parts: Array<string> = []
  for (const part of raw.split("/")) {
    if (part === "" || part === ".") continue
    if (part === ".." && parts.length > 0 && parts[parts.length - 1] !== "..") parts.pop()
    else parts.push(part)
  }
  if (parts.length === 0) throw new Error("path must not resolve to package root")
  if (parts.includes("..")) throw new Error("path must not contain parent-directory traversal")
  return parts.join("/")
}

export const partsOf = (path: string) => path.replaceAll("\\", "/").split("/").filter((p) => p !== "" && p !== ".")

/** Whether a path lies in an eval fixture folder (`evals/fixtures/<case>/...`). */
export const isEvalFixturePath = (path: string): boolean => {
  const parts = partsOf(path)
  for (let i = 0; i < parts.length - 1; i++) {
    if (parts[i] === "evals" && parts.length > i + 2) return parts[i + 1] === "fixtures"
  }
  return false
}

export const isEvalFixtureSkillMd = (path: string): boolean => {
  const parts = partsOf(path)
  return parts.at(-1) === "SKILL.md" && isEvalFixturePath(parts.slice(0, -1).join("/"))
}

export const baseName = (path: string) => partsOf(path).at(-1) ?? ""

// ---------------------------------------------------------------------------------------------------------
// Digest

/** The package's digest: `sha256:` over each file's kind, path, size and content digest, sorted. */
export const packageDigest = (snapshot: Snapshot): string => {
  const records = snapshot.files.map((file) =>
    Buffer.from([file.kind, normalizeRelativePath(file.path), String(file.size), file.sha256].join("\0"), "utf8")
  ).sort(Buffer.compare)
  const hash = Crypto.createHash("sha256")
  for (const record of records) {
    const length = Buffer.alloc(8)
    length.writeBigUInt64BE(BigInt(record.length))
    hash.update(length)
    hash.update(record)
  }
  return `sha256:${hash.digest("hex")}`
}
