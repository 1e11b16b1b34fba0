/**
 * What a run changed in its thread's files, as DeerFlow reports it (`GET .../runs/{run_id}/workspace-changes`):
 * the thread's `workspace` and `outputs` directories are scanned before and after the run, and the files created,
 * modified or deleted are listed with their sizes, SHA-256 and, for text files, a unified diff with its added and
 * deleted line counts. Bounded as DeerFlow's: at most 2000 files scanned, 200 listed, diffs of files up to 256 KB
 * and 1 MB of diffs in all (past a bound, `truncated`); a file over 16 MB is not read (compared by size and time).
 * Files whose names look like secrets (`.env`, `*.pem`, `*token*`...) are listed without their content or hash;
 * text is UTF-8 (a byte order mark dropped) or UTF-16 after its mark, anything else is binary and has no diff;
 * symbolic links are not followed (listed with their target; one where there was none is `symlink_created`), and
 * tool caches (`.git`, `node_modules`, ...) and the harness's own folders (saved tool outputs) are skipped.
 */
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { threadPaths } from "../../services/Sandbox.js"

/** DeerFlow's limits (reported with each answer). */
export const LIMITS = {
  max_files: 200,
  max_scanned_files: 2000,
  max_file_bytes_for_diff: 256 * 1024,
  max_total_diff_bytes: 1024 * 1024
} as const

/** A file larger than this is not read: it is compared by size and modification time, listed without a hash. */
export const MAX_HASHED_BYTES = 16 * 1024 * 1024

/** The run event that holds a run's changes. */
export const EVENT_TYPE = "workspace_changes"

// (DeerFlow's: tool caches, and what the harness keeps in the thread's folders besides the model's work: saved tool
// outputs, browser frames, an MCP server's scratch files)
const EXCLUDED: ReadonlySet<string> = new Set([
  ".git", ".hg", ".svn", ".cache", ".mcp", ".next", ".venv", ".browser-frames", ".tool-results", "__pycache__", "build",
  "dist", "node_modules"
])
const BINARY: ReadonlySet<string> = new Set([
  ".7z", ".avif", ".bmp", ".class", ".db", ".dll", ".dmg", ".doc", ".docx", ".exe", ".gif", ".gz", ".ico", ".jar",
  ".jpeg", ".jpg", ".mov", ".mp3", ".mp4", ".o", ".pdf", ".png", ".pyc", ".so", ".tar", ".webp", ".xls", ".xlsx",
  ".zip"
])
const SENSITIVE = [
  /^\.env$/,
  /^\.env\./,
  /api_key/,
  /apikey/,
  /\.key$/,
  /\.pem$/,
  /credential/,
  /password/,
  /private_key/,
  /secret/,
  /token/
]

/** Whether a path looks like it holds a secret (any of its parts). */
export const sensitive = (path: string): boolean =>
  path.toLowerCase().split("/").some((part) => part !== "" && SENSITIVE.some((p) => p.test(part)))

interface FileState {
  readonly path: string
  readonly root: string
  readonly size: number
  readonly mtime: number
  readonly sha256: string | null
  readonly binary: boolean
  readonly sensitive: boolean
  /** The text, for a text file small enough to diff (never for a sensitive one). */
  readonly text: string | undefined
  readonly unavailable: "binary" | "large" | "sensitive" | "symlink" | undefined
  readonly symlink: boolean
  readonly target: string | null
}

/** The scanned files of a thread, by virtual path. */
export interface Snapshot {
  readonly files: ReadonlyMap<string, FileState>
  readonly truncated: boolean
}

/** How much of a file's start tells text from binary, as DeerFlow samples it. */
const SAMPLE_BYTES = 4096

const utf16Of = (data: Uint8Array): "utf-16le" | "utf-16be" | undefined =>
  data[0] === 0xff && data[1] === 0xfe ? "utf-16le" : data[0] === 0xfe && data[1] === 0xff ? "utf-16be" : undefined

// (a sample may end inside a character: `stream` leaves that last one undecoded rather than failing)
const decodes = (data: Uint8Array, encoding: string, stream: boolean): string | undefined => {
  try {
    return new TextDecoder(encoding, { fatal: true }).decode(data, { stream })
  } catch {
    return undefined
  }
}

/** Whether a file's first bytes look binary (DeerFlow's test): not UTF-16 after its BOM, and a NUL or not UTF-8. */
const looksBinary = (sample: Uint8Array): boolean => {
  const utf16 = utf16Of(sample)
  if (utf16 !== undefined && decodes(sample, utf16, true) !== undefined) return false
  return sample.includes(0) || decodes(sample, "utf-8", true) === undefined
}

/**
 * The text of a file as DeerFlow reads it: UTF-8 without its byte order mark, or UTF-16 after its mark (a Markdown
 * file saved by a Windows editor); undefined when it is neither.
 */
export const decodeText = (data: Uint8Array): string | undefined => {
  const utf16 = utf16Of(data)
  return decodes(data, "utf-8", false) ?? (utf16 === undefined ? undefined : decodes(data, utf16, false))
}

const readState = async (host: string, path: string, root: string): Promise<FileState | undefined> => {
  const stat = await Fs.lstat(host)
  const secret = sensitive(path)
  if (stat.isSymbolicLink()) {
    const target = secret ? null : await Fs.readlink(host).catch(() => null)
    return {
      path, root, size: stat.size, mtime: stat.mtimeMs, sha256: null, binary: false, sensitive: secret, text: undefined,
      unavailable: "symlink", symlink: true, target
    }
  }
  if (!stat.isFile()) return undefined
  if (stat.size > MAX_HASHED_BYTES) {
    return {
      path, root, size: stat.size, mtime: stat.mtimeMs, sha256: null,
      binary: BINARY.has(Path.extname(path).toLowerCase()), sensitive: secret, text: undefined,
      unavailable: secret ? "sensitive" : "large", symlink: false, target: null
    }
  }
  const data = await Fs.readFile(host)
  const sha256 = Crypto.createHash("sha256").update(data).digest("hex")
  let binary = BINARY.has(Path.extname(path).toLowerCase()) || looksBinary(data.subarray(0, SAMPLE_BYTES))
  const large = data.length > LIMITS.max_file_bytes_for_diff
  const text = secret || binary || large ? undefined : decodeText(data)
  if (!secret && !large && text === undefined) binary = true
  const unavailable = secret ? "sensitive" : binary ? "binary" : large ? "large" : undefined
  return {
    path, root, size: stat.size, mtime: stat.mtimeMs, sha256, binary, sensitive: secret, text, unavailable,
    symlink: false, target: null
  }
}

/**
 * Scans the thread's `workspace` and `outputs` (none: empty), skipping the folders named `skip` too (the configured
 * `tool_output.storage_subdir`). Never fails: what cannot be read is not listed.
 */
export const snapshot = (
  home: string,
  userId: string,
  threadId: string,
  skip: ReadonlyArray<string> = []
): Effect.Effect<Snapshot> =>
  Effect.promise(async () => {
    const paths = threadPaths(home, userId, threadId)
    const files = new Map<string, FileState>()
    let truncated = false
    let scanned = 0
    const walk = async (dir: string, virtual: string, root: string): Promise<void> => {
      const entries = await Fs.readdir(dir, { withFileTypes: true }).catch(() => [])
      entries.sort((a, b) => a.name.localeCompare(b.name))
      for (const entry of entries) {
        if (scanned >= LIMITS.max_scanned_files) {
          truncated = true
          return
        }
        const host = Path.join(dir, entry.name)
        const path = `${virtual}/${entry.name}`
        if (entry.isDirectory()) {
          if (!EXCLUDED.has(entry.name) && !skip.includes(entry.name)) await walk(host, path, root)
          continue
        }
        scanned++
        const state = await readState(host, path, root).catch(() => undefined)
        if (state !== undefined) files.set(path, state)
      }
    }
    await walk(paths.workspace, "/mnt/user-data/workspace", "workspace")
    await walk(paths.outputs, "/mnt/user-data/outputs", "outputs")
    return { files, truncated }
  }).pipe(
    Effect.catchAllDefect((defect) =>
      Effect.as(Effect.logWarning(`cannot scan the files of thread ${threadId}: ${String(defect)}`), {
        files: new Map<string, FileState>(),
        truncated: true
      })
    )
  )

// ---------------------------------------------------------------------------------------------------------
// Line diffs

type Op = { readonly t: " " | "-" | "+"; readonly line: string }

/** The most cells of the line table an edit is computed with; past it, the changed middle is all removed then added. */
const MAX_CELLS = 4_000_000

const edits = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<Op> => {
  let start = 0
  while (start < a.length && start < b.length && a[start] === b[start]) start++
  let endA = a.length
  let endB = b.length
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) (endA--, endB--)
  const x = a.slice(start, endA)
  const y = b.slice(start, endB)
  const middle: Array<Op> = []
  if ((x.length + 1) * (y.length + 1) > MAX_CELLS) {
    for (const line of x) middle.push({ t: "-", line })
    for (const line of y) middle.push({ t: "+", line })
  } else {
    // the longest common subsequence, from the end (row i: x[i..], column j: y[j..])
    const w = y.length + 1
    const table = new Uint32Array((x.length + 1) * w)
    for (let i = x.length - 1; i >= 0; i--) {
      for (let j = y.length - 1; j >= 0; j--) {
        table[i * w + j] = x[i] === y[j]
          ? table[(i + 1) * w + j + 1]! + 1
          : Math.max(table[(i + 1) * w + j]!, table[i * w + j + 1]!)
      }
    }
    let i = 0
    let j = 0
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) (middle.push({ t: " ", line: x[i]! }), i++, j++)
      // (a deletion first when both keep as much, as difflib does)
      else if (j < y.length && (i === x.length || table[i * w + j + 1]! > table[(i + 1) * w + j]!)) {
        middle.push({ t: "+", line: y[j++]! })
      } else middle.push({ t: "-", line: x[i++]! })
    }
  }
  return [
    ...a.slice(0, start).map((line) => ({ t: " " as const, line })),
    ...middle,
    ...a.slice(endA).map((line) => ({ t: " " as const, line }))
  ]
}

const range = (start: number, length: number) =>
  length === 1 ? `${start + 1}` : `${length === 0 ? start : start + 1},${length}`

// (a last line break ends the last line; it starts no empty one)
const lines = (text: string) =>
  text === "" ? [] : text.split(/\r?\n/).filter((_, i, all) => i < all.length - 1 || all[i] !== "")

/** A unified diff (3 lines of context, as Python's `difflib.unified_diff`), with its added and deleted lines. */
export const unifiedDiff = (path: string, before: string, after: string) => {
  const ops = edits(lines(before), lines(after))
  const changed = ops.flatMap((op, i) => (op.t === " " ? [] : [i]))
  if (changed.length === 0) return { diff: "", additions: 0, deletions: 0 }
  const out = [`--- a${path}`, `+++ b${path}`]
  let additions = 0
  let deletions = 0
  let k = 0
  while (k < changed.length) {
    let last = k
    while (last + 1 < changed.length && changed[last + 1]! - changed[last]! <= 6) last++
    const from = Math.max(0, changed[k]! - 3)
    const to = Math.min(ops.length, changed[last]! + 4)
    const oldStart = ops.slice(0, from).filter((op) => op.t !== "+").length
    const newStart = ops.slice(0, from).filter((op) => op.t !== "-").length
    const hunk = ops.slice(from, to)
    const oldLength = hunk.filter((op) => op.t !== "+").length
    const newLength = hunk.filter((op) => op.t !== "-").length
    out.push(`@@ -${range(oldStart, oldLength)} +${range(newStart, newLength)} @@`)
    for (const op of hunk) {
      out.push(`${op.t}${op.line}`)
      if (op.t === "+") additions++
      if (op.t === "-") deletions++
    }
    k = last + 1
  }
  return { diff: out.join("\n"), additions, deletions }
}

// ---------------------------------------------------------------------------------------------------------
// The comparison

// (a file not read, by its modification time)
const same = (a: FileState, b: FileState) =>
  a.symlink === b.symlink && a.size === b.size && a.sha256 === b.sha256 && a.target === b.target &&
  (a.sha256 !== null || a.mtime === b.mtime)

// Why a file's diff is not shown, the first that applies to either side first (DeerFlow's order).
const UNAVAILABLE = ["symlink", "sensitive", "binary", "large"] as const

/** What changed from `before` to `after`, in DeerFlow's shape (without `available`). */
export const compare = (before: Snapshot, after: Snapshot) => {
  const paths = [...new Set([...before.files.keys(), ...after.files.keys()])].sort()
  const summary = {
    created: 0,
    modified: 0,
    deleted: 0,
    symlink_created: 0,
    additions: 0,
    deletions: 0,
    truncated: before.truncated || after.truncated
  }
  const files: Array<Record<string, unknown>> = []
  let diffBytes = 0
  for (const path of paths) {
    const was = before.files.get(path)
    const now = after.files.get(path)
    if (was !== undefined && now !== undefined && same(was, now)) continue
    // (a link where there was none is told apart, also when it replaced a file: it may lead anywhere)
    const status = now?.symlink === true && was?.symlink !== true
      ? "symlink_created"
      : was === undefined
      ? "created"
      : now === undefined
      ? "deleted"
      : "modified"
    summary[status]++
    const reason = UNAVAILABLE.find((r) => was?.unavailable === r || now?.unavailable === r) ?? null
    let diff = ""
    let additions = 0
    let deletions = 0
    let diffTruncated = false
    let unavailable: string | null = reason
    if (reason === null) {
      const made = unifiedDiff(path, was?.text ?? "", now?.text ?? "")
      additions = made.additions
      deletions = made.deletions
      const bytes = Buffer.byteLength(made.diff)
      if (bytes > LIMITS.max_total_diff_bytes - diffBytes) {
        diffTruncated = true
        unavailable = "truncated"
      } else {
        diff = made.diff
        diffBytes += bytes
      }
    }
    if (reason === "large" || diffTruncated) summary.truncated = true
    summary.additions += additions
    summary.deletions += deletions
    if (files.length >= LIMITS.max_files) {
      summary.truncated = true
      continue
    }
    const sample = (now ?? was)!
    files.push({
      path,
      root: sample.root,
      status,
      binary: sample.binary,
      sensitive: sample.sensitive,
      size_before: was?.size ?? null,
      size_after: now?.size ?? null,
      // (a secret's hash is not told: it is compared, never shown)
      sha256_before: was === undefined || was.sensitive ? null : was.sha256,
      sha256_after: now === undefined || now.sensitive ? null : now.sha256,
      diff,
      diff_truncated: diffTruncated,
      diff_unavailable_reason: unavailable,
      additions,
      deletions,
      symlink: sample.symlink,
      symlink_target_before: was?.target ?? null,
      symlink_target_after: now?.target ?? null
    })
  }
  return { version: 1, summary, files, limits: LIMITS }
}

/**
 * The regular files under outputs a run created or modified (DeerFlow's `get_changed_output_paths`), sorted: no
 * link, nothing deleted, not bounded by what `compare` lists.
 */
export const changedOutputs = (before: Snapshot, after: Snapshot): Array<string> =>
  [...after.files.values()]
    .filter((now) => {
      const was = before.files.get(now.path)
      return now.root === "outputs" && !now.symlink && (was === undefined || !same(was, now))
    })
    .map((now) => now.path)
    .sort()

/** What a run changed, as `compare` answers it. */
export type Changes = ReturnType<typeof compare>

/**
 * The comparison a run's `workspace_changes` event holds: in its metadata (`workspace_changes`), as DeerFlow records
 * it, or, as recorded before, as its content.
 */
export const recorded = (event: { readonly content: unknown; readonly metadata: unknown }): Changes | undefined => {
  const metadata = event.metadata as { readonly workspace_changes?: unknown } | null | undefined
  const changes = typeof metadata === "object" && metadata !== null ? metadata.workspace_changes : undefined
  const held = changes ?? event.content
  return typeof held === "object" && held !== null && "summary" in held ? held as Changes : undefined
}

/** Whether a comparison found anything (DeerFlow records nothing for a run that changed nothing). */
export const changed = (result: Changes) =>
  result.summary.created + result.summary.modified + result.summary.deleted + result.summary.symlink_created > 0
