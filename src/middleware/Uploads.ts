/**
 * Uploads (SPEC §5.5), before the run: the files the user attached to the last message
 * (`additional_kwargs.files`) are checked against the thread's uploads directory, recorded in
 * `uploaded_files`, and described to the model in a `<current_uploads>` block prepended to that message
 * (same id). Earlier uploads are not repeated: the lead agent lists them with `list_uploaded_files`
 * (`programs/UploadedFilesTool.ts`), which leaves out the files recorded here.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { AppConfigService } from "../services/AppConfig.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext, RunState } from "../services/RunContext.js"
import { UPLOADS } from "../services/Sandbox.js"
import type { ContentBlock, HumanMessage } from "../state/Message.js"
import { escapeText } from "../state/Markup.js"
import * as M from "../state/Message.js"
import type { Redactor } from "../state/Redact.js"
import type { UploadedFile } from "../state/ThreadState.js"
import { neutralizeBoundaries, ORIGINAL_USER_CONTENT } from "./InputSanitization.js"
import * as Middleware from "./Middleware.js"
import { resolveThreadPaths } from "./ThreadData.js"
import * as Chain from "./Chain.js"
import { headChars } from "../state/Chars.js"

/** How many files the block describes; the rest are only counted. */
export const MAX_FILES_IN_BLOCK = 10
/** How many headings an outline lists. */
export const MAX_OUTLINE_ENTRIES = 50
const PREVIEW_LINES = 5
const PREVIEW_MAX_CHARS = 2000
const TITLE_MAX_CHARS = 200
/** Larger Markdown siblings are not read for an outline (the model can still grep them). */
const OUTLINE_MAX_BYTES = 16 * 1024 * 1024

export const OPEN_TAG = "<current_uploads>"
export const CLOSE_TAG = "</current_uploads>"

/** One entry of `additional_kwargs.files` as the client sends it. Only `filename` is used: it is untrusted. */
export const FileEntry = Schema.Struct({ filename: Schema.String })

const decodeEntries = Schema.decodeUnknownEither(Schema.Array(Schema.Unknown))
const decodeEntry = Schema.decodeUnknownEither(FileEntry)

/** A bare file name: one path segment, no separators, not `.`/`..`, no NUL. */
export const isBareFilename = (name: string): boolean =>
  name !== "" && name !== "." && name !== ".." && !/[/\\\0]/.test(name)

/** An upload still being written by the gateway (`.upload-*.part`). */
export const isStagingFile = (name: string): boolean => /^\.upload-.*\.part$/.test(name)

/**
 * The filenames a message claims to carry, in order, without duplicates: entries that do not decode, are
 * not bare names, or are staging files are skipped (existence is checked separately, on disk).
 */
export const claimedFilenames = (files: unknown): ReadonlyArray<string> => {
  if (files === undefined) return [] // the common case: no uploads, and no decoding error to build
  const entries = decodeEntries(files)
  if (entries._tag === "Left") return []
  const out: Array<string> = []
  for (const raw of entries.right) {
    const entry = decodeEntry(raw)
    if (entry._tag === "Left") continue
    const name = entry.right.filename
    if (!isBareFilename(name) || isStagingFile(name) || out.includes(name)) continue
    out.push(name)
  }
  return out
}

/** `{filename, size, path, extension}` for an accepted upload. */
export const uploadedFile = (filename: string, size: number): UploadedFile => ({
  filename,
  size,
  path: `${UPLOADS}/${filename}`,
  extension: path.extname(filename)
})

/** One heading of a document outline. */
export interface OutlineEntry {
  readonly line: number
  readonly title: string
}

/** A document outline: headings, or the first lines when there are none. */
export interface Outline {
  readonly headings: ReadonlyArray<OutlineEntry>
  /** More headings exist than listed. */
  readonly truncated: boolean
  /** The first non-empty lines, when there are no headings. */
  readonly preview: ReadonlyArray<string>
}

const clipTitle = (text: string, max: number) => text.length <= max ? text : `${headChars(text, max - 1).trimEnd()}…`

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/
const ATX = /^ {0,3}#{1,6}(?:[ \t]+(.*))?$/
const BOLD_SECTION = /^\*\*((?:ITEM|PART|SECTION|SCHEDULE|EXHIBIT|APPENDIX|ANNEX|CHAPTER)\b[A-Z0-9 .,-]*)\*\*\s*$/
const SPLIT_BOLD = /^\*\*[\dA-Z][\d.]*\*\*\s+\*\*(?!\d[\d\s.,\-–—/:()%]*\*\*)[^*]+\*\*(?:\s+\*\*[^*]+\*\*){0,2}\s*$/

const cleanTitle = (raw: string) => {
  let title = raw.replace(/\s+#+\s*$/, "").replace(/^#+\s*$/, "").trim()
  title = title.replace(/\*\*\s*\*\*/g, " ").trim()
  const bold = /^\*\*(.+?)\*\*$/s.exec(title)
  return bold !== null ? bold[1]!.trim() : title
}

/**
 * The outline of a Markdown text: ATX headings (outside code fences and indented code), bold section
 * headings (`**PART II**`) and split bold headings (`**3.2** **Attention**`), as converters of PDFs and
 * Office files produce them; at most `MAX_OUTLINE_ENTRIES`. Without headings: the first 5 non-empty lines.
 */
export const extractOutline = (markdown: string): Outline => {
  const lines = markdown.replace(/^\uFEFF/, "").split(/\r?\n/)
  const headings: Array<OutlineEntry> = []
  let truncated = false
  let fence = ""
  let fenceLength = 0
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const f = FENCE.exec(line)
    if (fence !== "") {
      if (f !== null && f[1]![0] === fence && f[1]!.length >= fenceLength && f[2]!.trim() === "") fence = ""
      continue
    }
    if (f !== null && (f[1]![0] === "~" || !f[2]!.includes("`"))) {
      fence = f[1]![0]!
      fenceLength = f[1]!.length
      continue
    }
    if (/^(?: {4}| {0,3}\t)/.test(line)) continue
    const stripped = line.trim()
    if (stripped === "") continue
    let title: string | undefined
    const atx = ATX.exec(line)
    if (atx !== null) title = cleanTitle(atx[1] ?? "")
    else {
      const bold = BOLD_SECTION.exec(stripped)
      if (bold !== null) title = bold[1]!.trim()
      else if (SPLIT_BOLD.test(stripped)) {
        title = Array.from(stripped.matchAll(/\*\*([^*]+)\*\*/g), (m) => m[1]!.trim()).join(" ")
      }
    }
    if (title === undefined || title === "") continue
    if (headings.length === MAX_OUTLINE_ENTRIES) {
      truncated = true
      break
    }
    headings.push({ line: i + 1, title: clipTitle(title, TITLE_MAX_CHARS) })
  }
  if (headings.length > 0) return { headings, truncated, preview: [] }
  const preview: Array<string> = []
  let budget = PREVIEW_MAX_CHARS
  for (const line of lines) {
    const stripped = line.trim()
    if (stripped === "") continue
    const text = clipTitle(stripped, budget)
    preview.push(text)
    budget -= text.length
    if (preview.length >= PREVIEW_LINES || budget <= 0 || text.length < stripped.length) break
  }
  return { headings: [], truncated: false, preview }
}

/** `12.3 KB` below 1024 KB, else `4.5 MB`. */
export const formatSize = (bytes: number): string => {
  const kb = bytes / 1024
  return kb < 1024 ? `${kb.toFixed(1)} KB` : `${(kb / 1024).toFixed(1)} MB`
}

/** The Markdown file an outline is read from: the upload itself when it is Markdown, else `{stem}.md`. */
export const markdownSiblingOf = (filename: string): string => {
  const ext = path.extname(filename)
  return ext.toLowerCase() === ".md" ? filename : `${filename.slice(0, filename.length - ext.length)}.md`
}

/** A file the block describes: the upload, and the outline of its Markdown, if one exists. */
export interface DescribedFile {
  readonly file: UploadedFile
  /** The Markdown file the outline line numbers refer to, when it is not the upload itself. */
  readonly markdownPath?: string | undefined
  readonly outline?: Outline | undefined
}

/** A user-derived string made inert inside the block: tags escaped, boundary markers neutralised. */
const inert = (text: string): string => neutralizeBoundaries(escapeText(text))

const describeFile = (entry: DescribedFile, lines: Array<string>) => {
  const { file, outline } = entry
  const markdown = entry.markdownPath === undefined ? undefined : inert(entry.markdownPath)
  lines.push(`- ${inert(file.filename)} (${formatSize(file.size)})`)
  lines.push(`  Path: ${inert(file.path)}`)
  if (markdown !== undefined) lines.push(`  Converted to Markdown: ${markdown}`)
  const target = markdown ?? inert(file.path)
  if (outline !== undefined && outline.headings.length > 0) {
    lines.push(`  Document outline (line numbers in ${target}; use \`read_file\` with line ranges to read sections):`)
    for (const heading of outline.headings) {
      lines.push(`    L${heading.line}: ${inert(heading.title)}`)
    }
    if (outline.truncated) {
      lines.push(`    ... (showing first ${outline.headings.length} headings; use \`read_file\` to explore further)`)
    }
  } else {
    if (outline !== undefined && outline.preview.length > 0) {
      lines.push("  No structural headings detected. Document begins with:")
      for (const text of outline.preview) lines.push(`    > ${inert(text)}`)
    }
    lines.push(`  Use \`grep\` to search for keywords (e.g. \`grep(pattern='keyword', path='${UPLOADS}/')\`).`)
  }
  lines.push("")
}

const omittedTypes = (files: ReadonlyArray<UploadedFile>) => {
  const counts = new Map<string, number>()
  for (const file of files) {
    const ext = inert(file.extension.toLowerCase()) || "(no extension)"
    counts.set(ext, (counts.get(ext) ?? 0) + 1)
  }
  return [...counts].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([ext, n]) => `${n} ${ext}`).join(", ")
}

/**
 * The `<current_uploads>` block: each described file with its size, virtual path and outline (or first
 * lines), a count of the files not described, and how to work with them. Every user-derived string
 * (names, headings, lines) is escaped (`Markup.escapeText`) so it cannot close or forge the block.
 */
export const renderUploadsBlock = (
  described: ReadonlyArray<DescribedFile>,
  omitted: ReadonlyArray<UploadedFile>
): string => {
  const lines = [OPEN_TAG, "The following files were uploaded in this message:", ""]
  for (const entry of described) describeFile(entry, lines)
  if (described.length === 0) lines.push("(empty)", "")
  if (omitted.length > 0) {
    lines.push(`... (${omitted.length} more file(s) from this message omitted from this context.)`)
    lines.push(`  Omitted file types: ${omittedTypes(omitted)}`)
    lines.push(`  Use \`glob(pattern='**/*', path='${UPLOADS}/')\` to list all uploads.`)
    lines.push(`  Use \`grep(pattern='keyword', path='${UPLOADS}/')\` to search across uploads.`)
    lines.push("")
  }
  lines.push(
    "To work with these files:",
    "- Read from the file first — use the outline line numbers and `read_file` to locate relevant sections.",
    "- Use `grep` to search for keywords when you are not sure which section to look at",
    `  (e.g. \`grep(pattern='revenue', path='${UPLOADS}/')\`).`,
    "- Use `glob` to find files by name pattern",
    `  (e.g. \`glob(pattern='**/*.md', path='${UPLOADS}/')\`).`,
    "- Only fall back to web search if the file content is clearly insufficient to answer the question.",
    CLOSE_TAG
  )
  return lines.join("\n")
}

/**
 * Whether the message already starts with the uploads block this middleware put there (a run over the same
 * message adds none): it starts with the tag, and `original_user_content` holds the user's own text, which
 * only the server sets (the gateway removes it from a client's message). A user's text that merely begins with
 * the tag gets the block too, as in DeerFlow.
 */
export const hasUploadsBlock = (message: HumanMessage): boolean => {
  if (typeof message.additional_kwargs?.[ORIGINAL_USER_CONTENT] !== "string") return false
  const content = message.content
  if (typeof content === "string") return content.startsWith(OPEN_TAG)
  const first = content[0]
  return first !== undefined && first.type === "text" && typeof first.text === "string" &&
    first.text.startsWith(OPEN_TAG)
}

/**
 * The message with the block prepended (string: `block\n\ntext`; blocks: a new leading text block), same id,
 * and `original_user_content` holding the user's own text unless a string is already there.
 */
export const prependUploadsBlock = (message: HumanMessage, block: string): HumanMessage => {
  const content = message.content
  const kwargs = message.additional_kwargs ?? {}
  return {
    ...message,
    content: typeof content === "string"
      ? `${block}\n\n${content}`
      : [{ type: "text", text: `${block}\n\n` } as ContentBlock, ...content],
    additional_kwargs: typeof kwargs[ORIGINAL_USER_CONTENT] === "string"
      ? kwargs
      : { ...kwargs, [ORIGINAL_USER_CONTENT]: M.contentText(content) }
  }
}

/** The size of a regular file (not a symlink, not a directory), if there is one. */
const regularFileSize = (file: string): Effect.Effect<number | undefined> =>
  Effect.promise(() => fs.lstat(file).then((s) => s.isFile() ? s.size : undefined, () => undefined))

/**
 * The outline of a Markdown file on disk: none for a missing, non-regular or over-large file. `hide` (the process's
 * secrets and the run's) masks the text before its headings and lines are cut: a cut inside a key would keep its
 * beginning.
 */
export const readOutline = (file: string, hide?: Redactor): Effect.Effect<Outline | undefined> =>
  Effect.flatMap(regularFileSize(file), (size) =>
    size === undefined || size > OUTLINE_MAX_BYTES
      ? Effect.succeed(undefined)
      : Effect.promise(() =>
        fs.readFile(file, "utf8").then(
          (text) => extractOutline(hide === undefined ? text : hide.text(text)),
          () => undefined
        )
      ))

/**
 * Uploads. Needs `AppConfigService` (the data directory, when `thread_data` is not in state yet),
 * `RunContext` and `RunState`. Sizes are read from disk, not taken from the client.
 */
export const layer = () =>
  Middleware.make(Effect.gen(function*() {
    const { home } = yield* AppConfigService
    const context = yield* RunContext
    const state = yield* RunState
    const before = Effect.gen(function*() {
      const current = yield* state.get
      // clears a stale list from an earlier run (nothing to write when it is already empty)
      const none = current.uploaded_files?.length === 0 ? Effect.void : state.update({ uploaded_files: [] })
      const last = current.messages[current.messages.length - 1]
      if (last?.type !== "human") return yield* none
      const names = claimedFilenames(last.additional_kwargs?.files)
      if (names.length === 0) return yield* none
      const dir = current.thread_data?.uploads_path ??
        (yield* Effect.orDie(resolveThreadPaths(home, context.userId, context.threadId))).uploads
      const sizes = yield* Effect.forEach(names, (name) => regularFileSize(path.join(dir, name)), { concurrency: 8 })
      const files: Array<UploadedFile> = []
      names.forEach((name, i) => {
        const size = sizes[i]
        if (size !== undefined) files.push(uploadedFile(name, size))
      })
      if (files.length === 0) return yield* none
      if (hasUploadsBlock(last)) return yield* state.update({ uploaded_files: files })
      const hide = yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)
      const described = yield* Effect.forEach(files.slice(0, MAX_FILES_IN_BLOCK), (file) => {
        const markdown = markdownSiblingOf(file.filename)
        return Effect.map(readOutline(path.join(dir, markdown), hide), (outline): DescribedFile => ({
          file,
          markdownPath: outline !== undefined && markdown !== file.filename ? `${UPLOADS}/${markdown}` : undefined,
          outline
        }))
      }, { concurrency: 8 })
      const block = renderUploadsBlock(described, files.slice(MAX_FILES_IN_BLOCK))
      yield* state.update({ uploaded_files: files, messages: [prependUploadsBlock(last, block)] })
    })
    return { run: (loop) => Effect.zipRight(before, loop) }
  }))

/** Its chain entry: before_agent, after ThreadData (it needs the uploads directory). */
export const entry = () =>
  Chain.entry("Uploads", () => layer(), [
    { inside: "ThreadData", reason: "the uploads block needs the thread's directories ThreadData records" }
  ])
