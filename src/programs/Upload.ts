/**
 * Uploading files into a thread (DeerFlow's gateway upload endpoint, SPEC §10), for `antler upload` and the
 * gateway: the files are checked (names reduced to safe base names, a name repeated in one upload numbered,
 * `uploads.max_files`, `max_file_size`, `max_total_size`) before anything is written, staged as `.upload-*.part`
 * files and renamed into the thread's uploads directory, and documents (PDF, DOCX, XLSX, PPTX, HTML) get a
 * `{stem}.md` sibling when `uploads.auto_convert_documents` is on (unset: the CLI's uploads, not the gateway's;
 * DeerFlow's default). The Uploads middleware (SPEC §5.5) then describes them to the model, with the sibling's
 * headings as the outline, once they are attached to the next human message (`messageFiles`).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import * as Path from "node:path"
import * as FileErrors from "../internal/FileErrors.js"
import * as DocumentConverter from "../layers/DocumentConverter.js"
import { isBareFilename, isStagingFile, markdownSiblingOf } from "../middleware/Uploads.js"
import { AppConfigService, type UploadsConfig } from "../services/AppConfig.js"
import { isSafeId, threadPaths, UPLOADS } from "../services/Sandbox.js"

/** A file to upload: a host path (its base name is kept), or a name with its bytes (the gateway). */
export type UploadInput = string | { readonly name: string; readonly bytes: Uint8Array }

/** Options of `upload`. */
export interface UploadOptions {
  /** The thread's owner (default `default`, as runs use). */
  readonly userId?: string
  /** Write the Markdown siblings; default `uploads.auto_convert_documents` (unset: no). */
  readonly convert?: boolean
}

/** One uploaded file, as the gateway answers and the CLI prints it. Paths are virtual. */
export const UploadResult = Schema.Struct({
  filename: Schema.String,
  size: Schema.Number,
  /** `/mnt/user-data/uploads/{filename}` */
  path: Schema.String,
  /** The name the file was given, when another file of the upload had it and this one was renamed. */
  original_filename: Schema.optional(Schema.String),
  /** The converted Markdown sibling, when one was written. */
  markdown_path: Schema.optional(Schema.String),
  /** Why the document has no Markdown sibling; the upload itself succeeded. */
  conversion_error: Schema.optional(Schema.String)
})
export type UploadResult = typeof UploadResult.Type

/** An entry of the next human message's `additional_kwargs.files`, which the Uploads middleware reads. */
export interface MessageFile {
  readonly filename: string
  readonly size: number
  readonly path: string
  readonly status: "uploaded"
}

/** An upload that was refused (nothing of it was written) or that failed to write. */
export class UploadError extends Schema.TaggedError<UploadError>()("UploadError", {
  reason: Schema.Literal(
    "invalid_thread",
    "no_files",
    "invalid_name",
    "duplicate_name",
    "too_many_files",
    "file_too_large",
    "total_too_large",
    "not_found",
    "not_a_file",
    "folder_in_the_way",
    "io"
  ),
  message: Schema.String,
  filename: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {}

/** A byte count for people: `512 bytes`, `12.3 KB`, `50.0 MB`. */
export const formatBytes = (bytes: number): string =>
  bytes < 1024
    ? `${bytes} byte${bytes === 1 ? "" : "s"}`
    : bytes < 1024 * 1024
    ? `${(bytes / 1024).toFixed(1)} KB`
    : `${(bytes / (1024 * 1024)).toFixed(1)} MB`

const MAX_NAME_BYTES = 255

/**
 * The safe base name of an uploaded file's name, as DeerFlow's `normalize_filename` takes it: the last path
 * segment (separated by `/` or `\\`; a trailing separator ignored), so `../../etc/passwd` is `passwd` and
 * `a/b.txt` is `b.txt`. What remains is then checked with `filenameProblem` (`..` or nothing at all is refused).
 */
export const safeBaseName = (name: string): string => {
  const segments = name.split(/[/\\]/)
  while (segments.length > 1 && segments.at(-1) === "") segments.pop()
  return segments.at(-1)!
}

/**
 * The names of one upload made distinct as DeerFlow's `claim_unique_filename` does: a name given again gets
 * `_1`, `_2`... before its extension (`b.txt`, `b_1.txt`, `b_2.txt`).
 */
export const uniqueNames = (names: ReadonlyArray<string>): ReadonlyArray<string> => {
  const seen = new Set<string>()
  return names.map((name) => {
    let candidate = name
    if (seen.has(candidate)) {
      const dot = name.lastIndexOf(".")
      const [stem, extension] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""]
      for (let n = 1; seen.has(candidate); n++) candidate = `${stem}_${n}${extension}`
    }
    seen.add(candidate)
    return candidate
  })
}

/**
 * Why a file name cannot be used in the uploads directory, or undefined when it can: it must be one bare
 * name (no separators, not `.`/`..`), without control characters, not a staging name (`.upload-*.part`),
 * and at most 255 bytes. An upload's names are first reduced to their base names (`safeBaseName`), so only a
 * name with nothing safe left is refused.
 */
export const filenameProblem = (name: string): string | undefined => {
  if (name === "") return "the name is empty"
  if (name.includes("\0")) return "the name contains a NUL byte"
  if (/[/\\]/.test(name)) return "the name contains a path separator; give a bare file name"
  if (!isBareFilename(name)) return "the name is not a file name"
  if (/[\u0000-\u001f\u007f]/.test(name)) return "the name contains control characters (such as a line break)"
  if (isStagingFile(name)) return "names like .upload-*.part are reserved for uploads in progress"
  if (Buffer.byteLength(name, "utf8") > MAX_NAME_BYTES) return `the name is longer than ${MAX_NAME_BYTES} bytes`
  return undefined
}

/** A file about to be uploaded: its name in the uploads directory and its size. */
export interface Candidate {
  readonly filename: string
  readonly size: number
}

/**
 * The first limit a set of files breaks (`uploads.max_files`, `max_file_size`, `max_total_size`), or
 * undefined when they fit. Limits apply to one upload (one call), as DeerFlow's endpoint applies them.
 */
export const limitProblem = (
  files: ReadonlyArray<Candidate>,
  limits: Pick<UploadsConfig, "max_files" | "max_file_size" | "max_total_size">
): UploadError | undefined => {
  if (files.length > limits.max_files) {
    return new UploadError({
      reason: "too_many_files",
      message: `Too many files: ${files.length} given, at most ${limits.max_files} per upload (uploads.max_files).`
    })
  }
  for (const file of files) {
    if (file.size > limits.max_file_size) {
      return new UploadError({
        reason: "file_too_large",
        filename: file.filename,
        message: `${file.filename} is ${formatBytes(file.size)}; each file may be at most ` +
          `${formatBytes(limits.max_file_size)} (uploads.max_file_size).`
      })
    }
  }
  const total = files.reduce((sum, file) => sum + file.size, 0)
  if (total > limits.max_total_size) {
    return new UploadError({
      reason: "total_too_large",
      message: `The ${files.length} files add up to ${formatBytes(total)}; one upload may be at most ` +
        `${formatBytes(limits.max_total_size)} in all (uploads.max_total_size).`
    })
  }
  return undefined
}

/** The `additional_kwargs.files` entries announcing uploads on the next human message. */
export const messageFiles = (results: ReadonlyArray<UploadResult>): ReadonlyArray<MessageFile> =>
  results.map((result) => ({ filename: result.filename, size: result.size, path: result.path, status: "uploaded" }))

/** One line describing an uploaded file (for the CLI). */
export const describeResult = (result: UploadResult): string =>
  `${result.filename} (${formatBytes(result.size)}) -> ${result.path}` +
  (result.markdown_path !== undefined
    ? `, Markdown: ${result.markdown_path}`
    : result.conversion_error !== undefined
    ? `, not converted: ${result.conversion_error}`
    : "")

// ---------------------------------------------------------------------------------------------------------
// The upload

interface Source extends Candidate {
  /** The host file to copy, or the bytes to write. */
  readonly from: string | Uint8Array
}

const ioError = (message: string, cause: unknown, filename?: string) =>
  new UploadError({
    reason: "io",
    message: `${message}: ${FileErrors.message(cause)}`,
    ...(filename === undefined ? {} : { filename }),
    cause
  })

const invalidName = (name: string, problem: string) =>
  new UploadError({
    reason: "invalid_name",
    filename: name,
    message: `Cannot upload ${JSON.stringify(name)}: ${problem}.`
  })

const sourceOf = (fs: FileSystem.FileSystem, input: UploadInput): Effect.Effect<Source, UploadError> => {
  if (typeof input !== "string") {
    const filename = safeBaseName(input.name)
    const problem = filenameProblem(filename)
    return problem !== undefined
      ? Effect.fail(invalidName(input.name, problem))
      : Effect.succeed({ filename, size: input.bytes.byteLength, from: input.bytes })
  }
  const filename = Path.basename(input)
  const problem = filenameProblem(filename)
  if (problem !== undefined) return Effect.fail(invalidName(filename, problem))
  return fs.stat(input).pipe(
    Effect.mapError((cause) =>
      FileErrors.hasCode(cause, "ENOENT")
        ? new UploadError({ reason: "not_found", filename, message: `Cannot upload ${input}: no such file.`, cause })
        : ioError(`Cannot read ${input}`, cause, filename)
    ),
    Effect.flatMap((info) => {
      if (info.type === "File") return Effect.succeed({ filename, size: Number(info.size), from: input })
      const what = info.type === "Directory" ? "a directory" : "not a regular file"
      const message = `Cannot upload ${input}: it is ${what}.`
      return Effect.fail(new UploadError({ reason: "not_a_file", filename, message }))
    })
  )
}

const stagingName = () => `.upload-${randomUUID()}.part`

const COPY_CHUNK_BYTES = 1024 * 1024

/**
 * Copies at most `limit` bytes of a host file into a new file (never following or replacing an existing one)
 * and returns how many were copied. Read and written in chunks: `copyFile` hands the copy to the kernel,
 * which copies nothing from a /proc file (whose size reads as 0) and never returns for a /sys file whose
 * size reads as 4096.
 */
const copyAtMost = (
  fs: FileSystem.FileSystem,
  from: string,
  to: string,
  limit: number
): Effect.Effect<number, PlatformError> =>
  Effect.scoped(Effect.gen(function*() {
    const input = yield* fs.open(from, { flag: "r" })
    const output = yield* fs.open(to, { flag: "wx" })
    const buffer = new Uint8Array(Math.max(1, Math.min(COPY_CHUNK_BYTES, limit)))
    let copied = 0
    while (copied < limit) {
      const bytesRead = Number(yield* input.read(buffer.subarray(0, Math.min(buffer.length, limit - copied))))
      if (bytesRead === 0) break
      yield* output.writeAll(buffer.subarray(0, bytesRead))
      copied += bytesRead
    }
    return copied
  }))

/** Why a host file's content did not match the size the system reported for it. */
export const sizeMismatch = (path: string, filename: string, reported: number, read: number): string =>
  `Cannot upload ${path}: the system reports ${formatBytes(reported)} for it, but reading it gives ` +
  `${read > reported ? "more" : formatBytes(read)}. It is generated as it is read (as files under /proc and ` +
  `/sys are) or it changed during the upload; copy it into a regular file first (cat ${path} > ${filename}) ` +
  "and upload that."

/**
 * Writes (or copies) into a new staging file next to the target; never follows or replaces an existing file.
 * A host file must give exactly the size it reported: one byte more is read to tell.
 */
const stage = (
  fs: FileSystem.FileSystem,
  dir: string,
  source: Source
): Effect.Effect<{ readonly temp: string; readonly size: number }, UploadError | PlatformError> =>
  Effect.gen(function*() {
    const temp = Path.join(dir, stagingName())
    if (typeof source.from === "string") {
      const copied = yield* copyAtMost(fs, source.from, temp, source.size + 1)
      if (copied !== source.size) {
        yield* removeQuietly(fs, temp)
        return yield* new UploadError({
          reason: "not_a_file",
          filename: source.filename,
          message: sizeMismatch(source.from, source.filename, source.size, copied)
        })
      }
    } else yield* fs.writeFile(temp, source.from, { flag: "wx" })
    return { temp, size: Number((yield* fs.stat(temp)).size) }
  })

const removeQuietly = (fs: FileSystem.FileSystem, file: string) => Effect.ignore(fs.remove(file, { force: true }))

/** Writes a file atomically: a staging file in the same directory, then a rename over the target. */
const writeAtomically = (
  fs: FileSystem.FileSystem,
  dir: string,
  filename: string,
  content: string
): Effect.Effect<void, PlatformError> => {
  const temp = Path.join(dir, stagingName())
  return Effect.zipRight(fs.writeFileString(temp, content, { flag: "wx" }), fs.rename(temp, Path.join(dir, filename)))
    .pipe(Effect.tapError(() => removeQuietly(fs, temp)))
}

const ensureUploadsDir = (fs: FileSystem.FileSystem, dir: string) =>
  Effect.gen(function*() {
    yield* fs.makeDirectory(dir, { recursive: true })
    // Staging files are renamed into place: the directory itself must be the thread's, not a link elsewhere.
    // (FileSystem has no lstat: reading the directory as a link succeeds only for a link, fails with EINVAL else)
    const link = yield* fs.readLink(dir).pipe(
      Effect.as(true),
      Effect.catchIf((error) => FileErrors.hasCode(error, "EINVAL"), () => Effect.succeed(false))
    )
    if (link) return yield* Effect.fail(new Error("the uploads directory is a symbolic link"))
  }).pipe(Effect.mapError((cause) => ioError("Cannot prepare the thread's uploads directory", cause)))

/** The refusal of a file whose name is a folder in the uploads (one the agent made there): renamed onto, it fails. */
const folderInTheWay = (filename: string) =>
  new UploadError({
    reason: "folder_in_the_way",
    filename,
    message: `Cannot upload ${JSON.stringify(filename)}: the thread's uploads hold a folder of that name. Rename ` +
      "the file and upload it again; nothing of this upload was written."
  })

/** Whether `file` is a folder itself (a link to one is replaced by the upload, as a link to a file is). */
const isFolder = (fs: FileSystem.FileSystem, file: string): Effect.Effect<boolean, PlatformError> =>
  fs.stat(file).pipe(
    Effect.flatMap((info) =>
      info.type !== "Directory" ? Effect.succeed(false) : fs.readLink(file).pipe(
        Effect.as(false),
        Effect.catchIf((error) => FileErrors.hasCode(error, "EINVAL"), () => Effect.succeed(true))
      )
    ),
    Effect.catchIf((error) => FileErrors.hasCode(error, "ENOENT"), () => Effect.succeed(false))
  )

/**
 * Stages every file, then renames them all into place, and returns the sizes written. Nothing is renamed
 * until every file is staged (and once renaming starts, it is not interrupted), and a failure removes whatever
 * was staged.
 */
const commit = (fs: FileSystem.FileSystem, dir: string, sources: ReadonlyArray<Source>, limits: UploadsConfig) =>
  Effect.suspend(() => {
    const staged: Array<{ readonly temp: string; readonly size: number }> = []
    return Effect.gen(function*() {
      for (const source of sources) staged.push(yield* stage(fs, dir, source))
      // A host file can change between the check and the copy: check what was really copied.
      const problem = limitProblem(sources.map((source, i) => ({ ...source, size: staged[i]!.size })), limits)
      if (problem !== undefined) return yield* problem
      yield* Effect.uninterruptible(Effect.forEach(
        sources,
        (source, i) =>
          fs.rename(staged[i]!.temp, Path.join(dir, source.filename)).pipe(
            // (a folder made there since the check)
            Effect.mapError((cause) =>
              FileErrors.hasCode(cause, "EISDIR") || FileErrors.hasCode(cause, "ENOTEMPTY")
                ? folderInTheWay(source.filename)
                : cause
            )
          ),
        { discard: true }
      ))
      return staged.map((file) => file.size)
    }).pipe(
      Effect.ensuring(Effect.forEach(staged, (file) => removeQuietly(fs, file.temp), { concurrency: "unbounded" })),
      Effect.mapError((cause) =>
        cause instanceof UploadError ? cause : ioError("Cannot write the uploaded files", cause)
      )
    )
  })

/**
 * Why a document of an upload must not get its Markdown sibling, if it must not: the sibling's name is one of the
 * uploaded files, or an earlier document of the same upload was converted to it (`a.pdf`, `a.docx`). `written` has
 * each sibling written so far, with its document; one whose conversion wrote nothing holds no name (as DeerFlow
 * releases its claim).
 */
export const siblingConflict = (
  filename: string,
  uploaded: ReadonlySet<string>,
  written: ReadonlyMap<string, string>
): string | undefined => {
  if (Option.isNone(DocumentConverter.formatOf(filename))) return undefined
  const sibling = markdownSiblingOf(filename)
  if (uploaded.has(sibling)) return `${sibling} is one of the uploaded files, so the conversion did not replace it`
  const owner = written.get(sibling)
  return owner !== undefined ? `${sibling} already holds the conversion of ${owner}` : undefined
}

/** What converting a document gave: its result's fields, and the bytes of the Markdown written (0: none). */
type Conversion = readonly [Pick<UploadResult, "markdown_path" | "conversion_error">, number]

/**
 * The sibling Markdown of a document, written when it fits `room` bytes (what `uploads.max_total_size` leaves the
 * upload after its files and the Markdown written before): a document of a few KB may declare megabytes of text.
 */
const convert = (
  fs: FileSystem.FileSystem,
  dir: string,
  source: Source,
  conflict: string | undefined,
  room: { readonly left: number; readonly limit: number }
): Effect.Effect<Conversion> => {
  if (Option.isNone(DocumentConverter.formatOf(source.filename))) return Effect.succeed([{}, 0])
  if (conflict !== undefined) return Effect.succeed([{ conversion_error: conflict }, 0])
  const sibling = markdownSiblingOf(source.filename)
  return Effect.gen(function*() {
    const bytes = typeof source.from === "string" ? yield* fs.readFile(Path.join(dir, source.filename)) : source.from
    const markdown = yield* DocumentConverter.toMarkdown({ name: source.filename, bytes })
    if (Option.isNone(markdown)) return [{}, 0] as const
    if (markdown.value.trim() === "") return [{ conversion_error: "no text was found in the document" }, 0] as const
    const size = Buffer.byteLength(markdown.value)
    if (size > room.left) {
      const error = `its Markdown (${formatBytes(size)}) would take the upload past ${formatBytes(room.limit)} in ` +
        "all (uploads.max_total_size), so it was not written"
      return [{ conversion_error: error }, 0] as const
    }
    yield* writeAtomically(fs, dir, sibling, markdown.value)
    return [{ markdown_path: `${UPLOADS}/${sibling}` }, size] as const
  }).pipe(
    Effect.catchAll((error) =>
      Effect.succeed<Conversion>([{
        conversion_error: error._tag === "ConversionError"
          ? error.message
          : `the Markdown file could not be written (${FileErrors.message(error)})`
      }, 0])
    )
  )
}

/**
 * Uploads files into a thread's uploads directory (`{home}/users/{user}/threads/{thread}/user-data/uploads`).
 * Every file is checked before anything is written (names, count, sizes) and a refused upload writes
 * nothing; an existing file of the same name is replaced. Documents get a `{stem}.md` sibling when
 * conversion is on and it fits `uploads.max_total_size` with the upload's files; a document that cannot be
 * converted (or whose Markdown does not fit) is still uploaded, with `conversion_error` set.
 */
export const upload = Effect.fn("Upload.upload")(function*(
  threadId: string,
  files: ReadonlyArray<UploadInput>,
  options: UploadOptions = {}
) {
  const app = yield* AppConfigService
  const fs = yield* FileSystem.FileSystem
  const limits = app.config.uploads
  const userId = options.userId ?? "default"
  for (const [field, value] of [["thread", threadId], ["user", userId]] as const) {
    if (!isSafeId(value)) {
      return yield* new UploadError({
        reason: "invalid_thread",
        message: `Invalid ${field} id ${JSON.stringify(value)}: ids are 1-128 letters, digits, '.', '_' or '-', ` +
          "starting with a letter or digit."
      })
    }
  }
  if (files.length === 0) return yield* new UploadError({ reason: "no_files", message: "No files to upload." })
  const named = yield* Effect.forEach(files, (file) => sourceOf(fs, file))
  const unique = uniqueNames(named.map((source) => source.filename))
  const sources = named.map((source, i) => unique[i] === source.filename ? source : { ...source, filename: unique[i]! })
  for (const source of sources) {
    const problem = filenameProblem(source.filename)
    if (problem !== undefined) return yield* invalidName(source.filename, problem)
  }
  const problem = limitProblem(sources, limits)
  if (problem !== undefined) return yield* problem
  const dir = threadPaths(app.home, userId, threadId).uploads
  yield* ensureUploadsDir(fs, dir)
  for (const source of sources) {
    const folder = yield* isFolder(fs, Path.join(dir, source.filename)).pipe(
      Effect.mapError((cause) => ioError(`Cannot check ${source.filename} in the uploads`, cause, source.filename))
    )
    if (folder) return yield* folderInTheWay(source.filename)
  }
  const sizes = yield* commit(fs, dir, sources, limits)
  const converting = options.convert ?? limits.auto_convert_documents ?? false
  const uploaded = new Set(sources.map((source) => source.filename))
  // (the siblings written by this upload, one document after the other)
  const written = new Map<string, string>()
  // (the upload's files and their Markdown together within uploads.max_total_size)
  let left = limits.max_total_size - sizes.reduce((sum, size) => sum + size, 0)
  const converted = (source: Source) =>
    Effect.suspend(() =>
      convert(fs, dir, source, siblingConflict(source.filename, uploaded, written), {
        left,
        limit: limits.max_total_size
      })
    ).pipe(
      Effect.map(([conversion, size]) => {
        if (conversion.markdown_path !== undefined) written.set(markdownSiblingOf(source.filename), source.filename)
        left -= size
        return conversion
      })
    )
  return yield* Effect.forEach(sources, (source, i) =>
    Effect.map(
      converting ? converted(source) : Effect.succeed({}),
      (conversion): UploadResult => ({
        filename: source.filename,
        ...(source.filename === named[i]!.filename ? {} : { original_filename: named[i]!.filename }),
        size: sizes[i]!,
        path: `${UPLOADS}/${source.filename}`,
        ...conversion
      })
    ))
})
