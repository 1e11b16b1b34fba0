/**
 * The files endpoints (declared in `api/Files.ts`): uploads (a multipart form read within `uploads.*`'s limits as
 * `config.yaml` is at the request, its files written by `Upload.upload`), their list and deletion, and artifacts:
 * files under `/mnt/user-data`, resolved by the thread's sandbox (which refuses any path out of it), served typed by
 * their extension (else as text when they hold no NUL byte) in a sandbox of their own (`Content-Security-Policy:
 * sandbox`: a model-written page runs no script here).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Multipart from "@effect/platform/Multipart"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as DocumentConverter from "../../../layers/DocumentConverter.js"
import { isStagingFile, markdownSiblingOf } from "../../../middleware/Uploads.js"
import { AppConfigService } from "../../../services/AppConfig.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import { SandboxProvider, threadPaths, UPLOADS, USER_DATA } from "../../../services/Sandbox.js"
import * as App from "../../App.js"
import * as Upload from "../../Upload.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import * as FilesApi from "../api/Files.js"
import { fail, GatewayError, notFound, problem, serverFault } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import * as SkillArchiveMember from "../SkillArchiveMember.js"
import * as ThreadFile from "../../ThreadFile.js"
import * as Access from "./Access.js"
import { MAX_EDITABLE_BYTES } from "./FileEdits.js"
import { json, queryFlag } from "./Http.js"
import * as Live from "./Live.js"

const CONTENT_TYPES: Record<string, string> = {
  ".md": "text/markdown; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".json": "application/json",
  ".csv": "text/csv; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".htm": "text/html; charset=utf-8",
  ".xhtml": "application/xhtml+xml",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".bmp": "image/bmp",
  ".ico": "image/vnd.microsoft.icon",
  ".pdf": "application/pdf",
  ".mp3": "audio/mpeg",
  ".wav": "audio/x-wav",
  ".ogg": "audio/ogg",
  ".oga": "audio/ogg",
  ".m4a": "audio/mp4",
  ".flac": "audio/flac",
  ".aac": "audio/aac",
  ".mp4": "video/mp4",
  ".m4v": "video/mp4",
  ".webm": "video/webm",
  ".mov": "video/quicktime",
  ".ogv": "video/ogg",
  ".zip": "application/zip",
  ".py": "text/x-python; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".xml": "text/xml; charset=utf-8",
  ".tsv": "text/tab-separated-values; charset=utf-8",
  ".log": "text/plain; charset=utf-8",
  ".yaml": "text/plain; charset=utf-8",
  ".yml": "text/plain; charset=utf-8"
}

/** The content type of an artifact by its extension (unknown ones are bytes). */
export const contentTypeOf = (name: string): string =>
  CONTENT_TYPES[Path.extname(name).toLowerCase()] ?? "application/octet-stream"

/**
 * The content type an artifact is served with: by its extension, else text when its first 8 KiB hold no NUL byte
 * (a script, `Makefile`, `notes`), as DeerFlow's gateway sniffs it, so the browser shows it rather than saving it.
 */
export const artifactTypeOf = (name: string, bytes: Uint8Array): string => {
  const known = CONTENT_TYPES[Path.extname(name).toLowerCase()]
  if (known !== undefined) return known
  return bytes.subarray(0, 8192).includes(0) ? "application/octet-stream" : "text/plain; charset=utf-8"
}

/**
 * The most of an artifact read whole to be served (and given its SHA-256 as `etag`): an edit takes no larger file
 * (`MAX_EDITABLE_BYTES`). A larger one is streamed from the disk, the range asked for only, with no `etag`.
 */
export const MAX_BUFFERED_BYTES = MAX_EDITABLE_BYTES

const artifactHeaders = (name: string, download: boolean): Record<string, string> => ({
  // a model-written page must not run scripts in the gateway's origin (where the API token lives)
  "content-security-policy": "sandbox",
  "x-content-type-options": "nosniff",
  "accept-ranges": "bytes",
  "content-disposition": `${download ? "attachment" : "inline"}; filename*=UTF-8''${encodeURIComponent(name)}`
})

/** How the gateway refuses a file of a `.skill` archive it does not serve (DeerFlow's codes). */
const MEMBER_REFUSALS: Record<SkillArchiveMember.MemberError["reason"], GatewayError["reason"]> = {
  not_a_file: "bad_request",
  too_large: "too_large",
  not_found: "not_found"
}

const unsatisfiable = (header: string | undefined, size: number) =>
  problem(416, `The range ${JSON.stringify(header)} is outside the file.`, {
    "accept-ranges": "bytes",
    "content-range": `bytes */${size}`
  })

/** An artifact held in memory, whole or the one byte range asked for (DeerFlow's app previews its first MiB). */
const bytesResponse = (
  bytes: Uint8Array,
  name: string,
  download: boolean,
  rangeHeader: string | undefined,
  extra: Record<string, string>
) => {
  const range = byteRange(rangeHeader, bytes.byteLength)
  if (range === "unsatisfiable") return unsatisfiable(rangeHeader, bytes.byteLength)
  const headers = { ...artifactHeaders(name, download), ...extra }
  const contentType = artifactTypeOf(name, bytes)
  if (range === undefined) return HttpServerResponse.uint8Array(new Uint8Array(bytes), { contentType, headers })
  return HttpServerResponse.uint8Array(new Uint8Array(bytes.subarray(range.start, range.end + 1)), {
    status: 206,
    contentType,
    headers: { ...headers, "content-range": `bytes ${range.start}-${range.end}/${bytes.byteLength}` }
  })
}

/**
 * An artifact too large to hold: typed by its first 8 KiB, and streamed from its open file (the range asked for),
 * which the stream closes (or this, when no stream is made).
 */
const streamedResponse = (
  opened: ThreadFile.Opened,
  name: string,
  download: boolean,
  rangeHeader: string | undefined
) =>
  Effect.tryPromise(async () => {
    const { handle, size } = opened
    let streaming = false
    try {
      const range = byteRange(rangeHeader, size)
      if (range === "unsatisfiable") return unsatisfiable(rangeHeader, size)
      const head = new Uint8Array(8192)
      const { bytesRead } = await handle.read(head, 0, head.byteLength, 0)
      const { start, end } = range ?? { start: 0, end: size - 1 }
      const stream = handle.createReadStream({ start, end, autoClose: true })
      streaming = true
      return HttpServerResponse.raw(stream, {
        status: range === undefined ? 200 : 206,
        contentType: artifactTypeOf(name, head.subarray(0, bytesRead)),
        headers: {
          ...artifactHeaders(name, download),
          "content-length": String(end - start + 1),
          ...(range === undefined ? {} : { "content-range": `bytes ${start}-${end}/${size}` })
        }
      })
    } finally {
      if (!streaming) await handle.close()
    }
  })

const artifactUrl = (threadId: string, virtualPath: string) =>
  `/api/threads/${threadId}/artifacts${virtualPath.split("/").map(encodeURIComponent).join("/")}`

/** The files endpoints of `api` (DeerFlow's, under `/api`). */
/**
 * The one byte range a `Range` header asks of a file of `size` bytes (RFC 9110: `bytes=START-`, `bytes=START-END`,
 * `bytes=-SUFFIX`); undefined (the whole file) without one, or for one this does not read (another unit, several
 * ranges); "unsatisfiable" for a range outside the file (an empty file has none).
 */
export const byteRange = (
  header: string | undefined,
  size: number
): { readonly start: number; readonly end: number } | "unsatisfiable" | undefined => {
  const match = header === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  if (match === null || (match[1] === "" && match[2] === "")) return undefined
  const [first, last] = [match[1]!, match[2]!]
  if (first === "") {
    const suffix = Number(last)
    return suffix === 0 || size === 0 ? "unsatisfiable" : { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(first)
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1)
  if (last !== "" && Number(last) < start) return undefined
  return start >= size ? "unsatisfiable" : { start, end }
}

/** Whether `file` (a name in uploads directory `dir`) is a link that leads out of it, dangling or not. */
const leadsOut = async (dir: string, file: string): Promise<boolean> => {
  const linked = await Fs.promises.lstat(file).catch(() => null)
  if (linked?.isSymbolicLink() !== true) return false
  const base = await Fs.promises.realpath(dir).catch(() => dir)
  const target = await Fs.promises.realpath(file).catch(() =>
    Fs.promises.readlink(file).then((to) => Path.resolve(base, to), () => base)
  )
  return target !== base && !target.startsWith(`${base}${Path.sep}`)
}

/** The `markdown_*` fields of a file without a Markdown sibling (DeerFlow's `None`s). */
const noMarkdown = {
  markdown_file: null,
  markdown_path: null,
  markdown_virtual_path: null,
  markdown_artifact_url: null
} as const

/**
 * The status of a refused upload: too many or too large files 413 (as DeerFlow), a name that is a folder in the
 * uploads 409, a write that failed 500.
 */
const uploadRefusal = (reason: Upload.UploadError["reason"]): GatewayError["reason"] =>
  reason === "too_many_files" || reason === "file_too_large" || reason === "total_too_large"
    ? "too_large"
    : reason === "folder_in_the_way"
    ? "conflict"
    : reason === "io"
    ? "internal"
    : "unprocessable"

export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "files", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const app = yield* AppConfigService
      const sandboxes = yield* SandboxProvider
      const store = yield* ThreadStore
      // `config.yaml` as it is at each request (an edit the gateway took: its `uploads` limits and conversion)
      const current = yield* Live.config

      return handlers
        .handleRaw("uploadFiles", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const now = yield* current
            const limits = now.config.uploads
            const form = yield* Body.multipart.pipe(
              // (no maxFileSize: the parser drops a file past it, and every part after it, without failing, which
              // answered "No files to upload"; the total bounds what is written, and `Upload` refuses a file too
              // large by its size, naming it)
              Multipart.withLimits({
                maxParts: Option.some(limits.max_files + 20),
                maxTotalSize: Option.some(limits.max_total_size + 1024 * 1024)
              }),
              Effect.mapError((error) =>
                error instanceof GatewayError ? error : fail(
                  error.reason === "FileTooLarge" || error.reason === "BodyTooLarge" ||
                    error.reason === "TooManyParts"
                    ? "too_large"
                    : "bad_request",
                  `The upload was refused: ${
                    error.reason === "FileTooLarge"
                      ? `a file is larger than ${Upload.formatBytes(limits.max_file_size)} (uploads.max_file_size)`
                      : error.reason === "BodyTooLarge"
                      ? `the files are larger than ${
                        Upload.formatBytes(limits.max_total_size)
                      } in all (uploads.max_total_size)`
                      : error.reason === "TooManyParts"
                      ? `more than ${limits.max_files} files (uploads.max_files)`
                      : "it is not a multipart form with files"
                  }.`
                ))
            )
            const inputs = yield* Effect.forEach(form, (file) =>
              Effect.map(
                Effect.tryPromise({
                  try: () => Fs.promises.readFile(file.path),
                  catch: () => fail("internal", "Cannot read an uploaded part.")
                }),
                (bytes) => ({ name: file.name, bytes: new Uint8Array(bytes) })
              ))
            // DeerFlow's app uploads a new chat's files before its first run: the upload makes the user's thread,
            // once the form was read, and takes it back when the files are refused (no thread from a failed upload);
            // files that would take the user past `gateway.quotas.max_user_bytes` are refused before any is written
            // or the thread made
            const adding = inputs.reduce((sum, input) => sum + input.bytes.byteLength, 0)
            const { threadId, results } = yield* access.withBytes(userId, adding, Effect.gen(function*() {
              const existing = yield* access.threadRef(userId, path.thread_id).pipe(
                Effect.map(Option.some),
                Effect.catchIf(
                  (error) => error instanceof GatewayError && error.reason === "not_found",
                  () => Effect.succeedNone
                )
              )
              const { stored, threadId } = Option.isSome(existing) ? existing.value : yield* access.newThread(
                userId,
                path.thread_id,
                {}
              ).pipe(
                Effect.map((made): Access.ThreadRef => ({ stored: made.thread_id, threadId: path.thread_id })),
                // made by another request meanwhile
                Effect.catchIf(
                  (error) => error instanceof GatewayError && error.reason === "conflict",
                  () => access.threadRef(userId, path.thread_id)
                )
              )
              const results = yield* Upload.upload(stored, inputs, { userId }).pipe(
                Effect.provideService(AppConfigService, now),
                // (too many or too large files are a 413, as DeerFlow answers them)
                // (a failed write is told in the server's log: its text names the host's paths)
                Effect.catchAll((error) =>
                  error.reason === "io"
                    ? serverFault("The uploaded files could not be written", `uploads endpoint: ${error.message}`)
                    : Effect.fail(fail(uploadRefusal(error.reason), error.message))
                ),
                Effect.tapError(() =>
                  Option.isSome(existing) ? Effect.void : Effect.ignore(
                    App.deleteThread(app.home, stored, userId).pipe(Effect.provideService(ThreadStore, store))
                  )
                )
              )
              return { threadId, results }
            }))
            return json(FilesApi.Uploaded, {
              success: true,
              files: results.map((result) => ({
                filename: result.filename,
                size: result.size,
                path: result.path,
                virtual_path: result.path,
                artifact_url: artifactUrl(threadId, result.path),
                extension: null,
                modified: null,
                original_filename: result.original_filename ?? null,
                ...(result.markdown_path !== undefined
                  ? {
                    markdown_file: Path.posix.basename(result.markdown_path),
                    markdown_path: result.markdown_path,
                    markdown_virtual_path: result.markdown_path,
                    markdown_artifact_url: artifactUrl(threadId, result.markdown_path)
                  }
                  : noMarkdown),
                ...(result.conversion_error !== undefined ? { conversion_error: result.conversion_error } : {})
              })),
              message: `Successfully uploaded ${results.length} file(s)`,
              skipped_files: []
            })
          }))
        .handleRaw("listUploads", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            // (a new chat's thread, before its first run or upload, has none; DeerFlow answers it so)
            const thread = yield* access.chatOf(userId, path.thread_id)
            if (thread === undefined) return json(FilesApi.UploadList, { files: [], count: 0 })
            const { stored, threadId } = thread
            const dir = threadPaths(app.home, userId, stored).uploads
            // (off the event loop; by name, as DeerFlow's `list_files_in_dir`; `modified` in seconds since the
            // epoch, as its float; a file deleted while listed is left out)
            const files = yield* Effect.promise(async () => {
              const entries = await Fs.promises.readdir(dir, { withFileTypes: true }).catch(() => [])
              const names = entries.filter((e) => e.isFile() && !isStagingFile(e.name)).map((e) => e.name).sort()
              const statOf = (name: string) => Fs.promises.stat(Path.join(dir, name)).catch(() => null)
              const stats = await Promise.all(names.map(statOf))
              return names.flatMap((name, i) => {
                const stat = stats[i]
                const path = `${UPLOADS}/${name}`
                return stat == null ? [] : [{
                  filename: name,
                  size: stat.size,
                  path,
                  virtual_path: path,
                  artifact_url: artifactUrl(threadId, path),
                  extension: Path.extname(name),
                  modified: stat.mtimeMs / 1000,
                  original_filename: null,
                  ...noMarkdown
                }]
              })
            })
            return json(FilesApi.UploadList, { files, count: files.length })
          }))
        .handleRaw("deleteUpload", ({ path }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const { stored } = yield* access.threadRef(userId, path.thread_id)
            // (the router has decoded the path once; a name is taken literally from there: `%2e` stays `%2e`)
            const filename = path.filename
            const problemText = Upload.filenameProblem(filename)
            if (problemText !== undefined) return yield* fail("bad_request", `Invalid file name: ${problemText}.`)
            const dir = threadPaths(app.home, userId, stored).uploads
            const file = Path.join(dir, filename)
            // a link leading out of the uploads is a traversal (DeerFlow's delete_file_safe resolves the name first)
            if (yield* Effect.promise(() => leadsOut(dir, file))) return yield* fail("bad_request", "Invalid path")
            // (a folder the sandbox made there is no upload: 404, as DeerFlow answers it)
            const stat = yield* Effect.promise(() => Fs.promises.stat(file).catch(() => null))
            if (stat === null || stat.isDirectory()) return yield* fail("not_found", `File not found: ${filename}`)
            yield* Effect.tryPromise({
              try: async () => {
                await Fs.promises.rm(file, { force: true })
                // a document's Markdown conversion goes with it, as in DeerFlow (the file the upload wrote beside it)
                if (Option.isSome(DocumentConverter.formatOf(filename))) {
                  const sibling = Path.join(Path.dirname(file), markdownSiblingOf(filename))
                  const linked = await Fs.promises.lstat(sibling).catch(() => null)
                  if (linked?.isFile() === true) await Fs.promises.rm(sibling, { force: true })
                }
              },
              catch: () => fail("internal", `Upload ${filename} could not be deleted.`)
            })
            return json(FilesApi.Deleted, { success: true, message: `Deleted ${filename}` })
          }))
        .handleRaw("getArtifact", ({ headers: requestHeaders, path, urlParams }) =>
          Effect.gen(function*() {
            const { user: userId } = yield* CurrentIdentity
            const { stored } = yield* access.threadRef(userId, path.thread_id)
            // (decoded once, by the router; decoding again would make `%252e%252e` a `..`)
            const virtual = `/${path["*"]}`.replace(/^\/+/, "/")
            if (!virtual.startsWith(`${USER_DATA}/`)) {
              return yield* fail("not_found", `Artifact not found: artifacts are files under ${USER_DATA}.`)
            }
            const sandbox = yield* Effect.mapError(
              sandboxes.acquire(stored, userId),
              (error) => fail("internal", error.message)
            )
            const download = queryFlag(urlParams.download)
            const skill = SkillArchiveMember.splitPath(virtual)
            if (skill !== undefined) {
              // a file inside a `.skill` archive (DeerFlow's app previews one by its `SKILL.md`)
              const archive = yield* Effect.mapError(
                sandbox.resolve(skill.archive, "read"),
                () => notFound(`Skill file ${skill.archive}`)
              )
              const member = yield* SkillArchiveMember.read(archive, skill.archive, skill.member).pipe(
                Effect.mapError((error) => fail(MEMBER_REFUSALS[error.reason], `${error.message}.`))
              )
              const name = Path.posix.basename(skill.member)
              const cached = { "cache-control": "private, max-age=300" }
              return bytesResponse(member, name, download, requestHeaders.range, cached)
            }
            const host = yield* Effect.mapError(sandbox.resolve(virtual, "read"), () => notFound(`Artifact ${virtual}`))
            // (read from the file opened at the path resolved: a link the model's bash swapped in since is not
            // followed; a folder is DeerFlow's 400)
            const opened = yield* Effect.mapError(ThreadFile.open(host), (error) =>
              error.reason === "not_a_file"
                ? fail("bad_request", `Path is not a file: ${virtual}`)
                : notFound(`Artifact ${virtual}`))
            const name = Path.basename(virtual)
            if (opened.size > MAX_BUFFERED_BYTES) {
              return yield* Effect.orElseFail(
                streamedResponse(opened, name, download, requestHeaders.range),
                () => notFound(`Artifact ${virtual}`)
              )
            }
            const bytes = yield* Effect.orElseFail(ThreadFile.readAll(opened), () => notFound(`Artifact ${virtual}`))
            // the revision an edit names (`expected_sha256`), as DeerFlow's app reads it: the whole file's
            const etag = `"${Crypto.createHash("sha256").update(bytes).digest("hex")}"`
            return bytesResponse(bytes, name, download, requestHeaders.range, { etag })
          }))
    }))
