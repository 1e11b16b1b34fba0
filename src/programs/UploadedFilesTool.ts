/**
 * `list_uploaded_files` (SPEC §7.16), the lead agent's tool for the files of earlier turns: the thread's uploads
 * directory without this run's uploads (`uploaded_files`, already described in `<current_uploads>`), upload
 * staging files, symlinks and the `.md` conversions of other uploads; newest first, at most `max_results`
 * (1-100), with the document outline of the files asked for. Names, paths and outlines are uploaded text: their
 * tags and markers are neutralised. Subagents do not get it (their state has no `uploaded_files`).
 */
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { neutralizeUntrustedTags } from "../middleware/InputSanitization.js"
import { resolveThreadPaths } from "../middleware/ThreadData.js"
import { isStagingFile, markdownSiblingOf, readOutline } from "../middleware/Uploads.js"
import { withDefault } from "../services/AppConfig.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext, RunState } from "../services/RunContext.js"
import { UPLOADS } from "../services/Sandbox.js"
import * as Tool from "../services/Tool.js"
import type { Redactor } from "../state/Redact.js"

export const NAME = "list_uploaded_files"
const DEFAULT_MAX_RESULTS = 20
const MAX_MAX_RESULTS = 100

const Args = Schema.Struct({
  include_outline: withDefault(
    Schema.Union(Schema.Boolean, Schema.Array(Schema.String)).annotations({
      description: "Control which files get their document outline (headings/preview) returned. False (default): " +
        "no outline for any file — just filename, size, and path. True: include outline/preview for every " +
        ".md-convertible file. list of filenames: include outline/preview only for those specific files (e.g. " +
        "[\"report.md\", \"data.csv\"])."
    }),
    () => false
  ),
  max_results: withDefault(
    Schema.Int.annotations({ description: "Maximum number of files to return (default 20, max 100)." }),
    () => DEFAULT_MAX_RESULTS
  )
})

/**
 * The tool's description, DeerFlow's docstring as LangChain's `@tool` hands it to the model (the indentation of the
 * lines after the first kept, as Python 3.12 leaves it).
 */
export const DESCRIPTION = [
  "Discover historical uploaded files available in this thread.",
  "",
  "    Returns files that were uploaded in PREVIOUS turns — files uploaded in the",
  "    current run are excluded (they are already listed in <current_uploads>).",
  "",
  "    Use this tool when:",
  "    - The user refers to previously uploaded files without naming them (e.g. \"analyze those PDFs I uploaded " +
  "before\")",
  "    - You need to check what files are available in this thread",
  "    - You are starting work on a thread and want an overview of available data",
  "",
  "    Skip this tool when:",
  "    - The user names a specific file — use read_file or grep directly with the path",
  "    - The file was uploaded in the current run — it's already in <current_uploads>"
].join("\n")

/** A file of the listing, as the model reads it. */
interface Listed {
  filename: string
  size: number
  path: string
  extension: string
  outline?: ReadonlyArray<{ readonly title: string; readonly line: number } | { readonly truncated: true }>
  outline_preview?: ReadonlyArray<string>
}

const extensionLabel = (name: string) => neutralizeUntrustedTags(Path.extname(name).toLowerCase()) || "(no extension)"

/** `"2 .pdf, 1 .txt"`: the files left out, counted by extension. */
export const omittedSummary = (names: ReadonlyArray<string>): string => {
  const counts = new Map<string, number>()
  for (const name of names) {
    const label = extensionLabel(name)
    counts.set(label, (counts.get(label) ?? 0) + 1)
  }
  return neutralizeUntrustedTags([...counts].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
    .map(([label, count]) => `${count} ${label}`).join(", "))
}

/**
 * The test whether a name is the `.md` conversion of another of `names` (`report.md` beside `report.pdf`): another
 * name has its stem. The stems are counted once, not searched for each `.md`.
 */
const conversions = (names: ReadonlyArray<string>): ((name: string) => boolean) => {
  const stems = new Map<string, number>()
  for (const name of names) {
    const stem = Path.parse(name).name
    stems.set(stem, (stems.get(stem) ?? 0) + 1)
  }
  return (name) => {
    if (!name.endsWith(".md")) return false
    const stem = name.slice(0, -3)
    // (the name's own stem counts once when it is this one: `.md` alone has the stem `.md`)
    return (stems.get(stem) ?? 0) > (Path.parse(name).name === stem ? 1 : 0)
  }
}

/**
 * The listing of `dir` without `current`, as JSON text. `hide` (the process's secrets and the run's) masks an outlined
 * file before its headings and lines are cut (`readOutline`).
 */
export const listing = (
  dir: string,
  current: ReadonlySet<string>,
  includeOutline: boolean | ReadonlyArray<string>,
  maxResults: number,
  hide?: Redactor
): Effect.Effect<string> =>
  Effect.gen(function*() {
    const entries = yield* Effect.either(Effect.tryPromise(() => Fs.readdir(dir, { withFileTypes: true })))
    if (entries._tag === "Left") {
      const missing = (entries.left.error as NodeJS.ErrnoException | undefined)?.code === "ENOENT"
      return JSON.stringify({
        files: [],
        message: missing ? "No uploads directory for this thread." : `Failed to read uploads directory: ${UPLOADS}`
      })
    }
    // (a Dirent from readdir is not followed: a symlink is not a file here)
    const files = entries.right.filter((e) => e.isFile() && !isStagingFile(e.name))
    const isConversion = conversions(files.map((e) => e.name))
    const kept = files.filter((e) => !current.has(e.name) && !isConversion(e.name))
    const stats = yield* Effect.forEach(kept, (e) =>
      Effect.promise(() =>
        Fs.lstat(Path.join(dir, e.name)).then(
          (s) => ({ name: e.name, mtime: s.mtimeMs, size: s.size }),
          () => undefined
        )), { concurrency: 8 })
    const candidates = stats.filter((s) => s !== undefined)
      .sort((a, b) => b.mtime - a.mtime || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    if (candidates.length === 0) {
      return JSON.stringify({ files: [], message: "No historical uploaded files in this thread." })
    }
    const max = Math.max(1, Math.min(Number.isFinite(maxResults) ? Math.trunc(maxResults) : DEFAULT_MAX_RESULTS,
      MAX_MAX_RESULTS))
    const visible = candidates.slice(0, max)
    const outlined = (name: string) =>
      includeOutline === true || (Array.isArray(includeOutline) && includeOutline.includes(name))
    const listed = yield* Effect.forEach(visible, ({ name, size }) =>
      Effect.gen(function*() {
        const file: Listed = {
          filename: neutralizeUntrustedTags(name),
          size,
          path: neutralizeUntrustedTags(`${UPLOADS}/${name}`),
          extension: neutralizeUntrustedTags(Path.extname(name))
        }
        if (!outlined(name)) return file
        const outline = yield* readOutline(Path.join(dir, markdownSiblingOf(name)), hide)
        if (outline === undefined) return file
        if (outline.headings.length > 0) {
          file.outline = [
            ...outline.headings.map((h) => ({ title: neutralizeUntrustedTags(h.title), line: h.line })),
            ...(outline.truncated ? [{ truncated: true as const }] : [])
          ]
        } else if (outline.preview.length > 0) {
          file.outline_preview = outline.preview.map(neutralizeUntrustedTags)
        }
        return file
      }), { concurrency: 8 })
    const truncated = candidates.length > max
    return JSON.stringify({
      files: listed,
      total_count: candidates.length,
      ...(truncated
        ? { truncated: true, omitted_summary: omittedSummary(candidates.slice(max).map((c) => c.name)) }
        : {}),
      message: `Found ${candidates.length} historical file(s).`
    })
  })

/** The tool, over the thread directories under `home` (the data directory). */
export const tool = (home: string): Tool.Tool =>
  Tool.make({
    name: NAME,
    readOnly: true,
    description: DESCRIPTION,
    parameters: Args,
    handler: (args) =>
      Effect.gen(function*() {
        const context = yield* RunContext
        const state = yield* (yield* RunState).get
        const paths = yield* Effect.either(resolveThreadPaths(home, context.userId, context.threadId))
        const dir = state.thread_data?.uploads_path ?? (paths._tag === "Right" ? paths.right.uploads : undefined)
        if (dir === undefined) return JSON.stringify({ files: [], message: "Thread not found." })
        const current = new Set((state.uploaded_files ?? []).map((f) => f.filename))
        const hide = yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)
        return yield* listing(dir, current, args.include_outline, args.max_results, hide)
      })
  })
