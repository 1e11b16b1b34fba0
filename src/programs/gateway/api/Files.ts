/**
 * DeerFlow's files of a thread, declared: uploads (a multipart form of files, converted to Markdown where they
 * can be; listed; deleted) and artifacts (any file under `/mnt/user-data`, served typed by its extension, never
 * run in the gateway's origin). Implemented in `handlers/Files.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Multipart from "@effect/platform/Multipart"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ThreadPath } from "./Ids.js"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { QueryValue, ThreadNotFound } from "./Threads.js"

/**
 * An uploaded file, where the agent reads it and where it is downloaded: DeerFlow's `UploadedFileInfo`, every field
 * sent, `null` where it has no value (as FastAPI sends the model).
 */
export const UploadedFile = Schema.Struct({
  filename: Schema.String,
  size: Schema.Int,
  path: Schema.String,
  virtual_path: Schema.String,
  artifact_url: Schema.String,
  /** The name's extension (`.csv`); in an upload's answer `null`, as DeerFlow's. */
  extension: Schema.NullOr(Schema.String),
  /** Seconds since the epoch (DeerFlow's float); in an upload's answer `null`, as DeerFlow's. */
  modified: Schema.NullOr(Schema.Number),
  /** The name the file was given, when another file of the upload had it and this one was renamed. */
  original_filename: Schema.NullOr(Schema.String),
  markdown_file: Schema.NullOr(Schema.String),
  markdown_path: Schema.NullOr(Schema.String),
  markdown_virtual_path: Schema.NullOr(Schema.String),
  markdown_artifact_url: Schema.NullOr(Schema.String),
  /** Why a document has no Markdown sibling (Antler's; only in an upload's answer, only when so). */
  conversion_error: Schema.optional(Schema.String)
}).annotations({ identifier: "UploadedFile" })

/** The answer to an upload. */
export const Uploaded = Schema.Struct({
  success: Schema.Boolean,
  files: Schema.Array(UploadedFile),
  message: Schema.String,
  /** DeerFlow's files it left out as unsafe destinations; Antler writes every file or none, so always empty. */
  skipped_files: Schema.Array(Schema.String)
}).annotations({ identifier: "Uploaded" })

/** A thread's uploads (a Markdown sibling is a file of its own: `markdown_*` are always `null`, as DeerFlow's). */
export const UploadList = Schema.Struct({
  files: Schema.Array(UploadedFile),
  count: Schema.Int
}).annotations({ identifier: "UploadList" })

/** The answer to a deletion. */
export const Deleted = Schema.Struct({ success: Schema.Boolean, message: Schema.String }).annotations({
  identifier: "Deleted"
})

/** An artifact's bytes. */
export const ArtifactBytes = HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }).annotations({
  description: "The file, typed by its extension (text, HTML, images, audio, video, PDF, ...), else text if no NUL"
})

/** The upload form: the files in `files`. */
export const UploadForm = HttpApiSchema.Multipart(Schema.Struct({ files: Multipart.FilesSchema }))

const UploadPath = Schema.Struct({ ...ThreadPath.fields, filename: Schema.String })

const ArtifactPath = Schema.Struct({
  ...ThreadPath.fields,
  "*": Schema.String.annotations({ description: "The file's path under /mnt/user-data" })
})

/** The files group (served under `/api`). */
export const group = HttpApiGroup.make("files")
  .add(
    HttpApiEndpoint.post("uploadFiles", "/threads/:thread_id/uploads")
      .setPath(ThreadPath)
      .setPayload(UploadForm)
      .addSuccess(Uploaded)
      .addError(ThreadNotFound)
      .addError(refusal(400, "Not a multipart form with files, or one cut short"))
      .addError(refusal(415, "Not multipart/form-data"))
      .addError(refusal(409, "A file's name is a folder in the thread's uploads: the detail names it"))
      .addError(refusal(413, "Too many files, or too large (uploads.*)"))
      .addError(refusal(422, "A bad file name"))
      .addError(QuotaRefusal)
      .annotate(OpenApi.Summary, "Upload files to a thread")
  )
  .add(
    HttpApiEndpoint.get("listUploads", "/threads/:thread_id/uploads/list")
      .setPath(ThreadPath)
      .addSuccess(UploadList)
      .addError(ThreadNotFound)
      .annotate(OpenApi.Summary, "List a thread's uploads")
  )
  .add(
    HttpApiEndpoint.del("deleteUpload", "/threads/:thread_id/uploads/:filename")
      .setPath(UploadPath)
      .addSuccess(Deleted)
      .addError(refusal(404, "No such thread (of this user), or no such upload"))
      .addError(refusal(400, "A file name that is not one"))
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Delete an upload")
  )
  .add(
    HttpApiEndpoint.get("getArtifact", "/threads/:thread_id/artifacts/*")
      .setPath(ArtifactPath)
      .setUrlParams(Schema.Struct({
        download: Schema.optional(QueryValue.annotations({ description: "true: as an attachment" }))
      }))
      .setHeaders(Schema.Struct({
        range: Schema.optional(Schema.String.annotations({
          description: "One byte range (`bytes=0-1048575`, `bytes=500-`, `bytes=-100`): a 206 with that part"
        }))
      }))
      .addSuccess(ArtifactBytes)
      .addSuccess(
        ArtifactBytes.annotations({ description: "The range asked for (Content-Range: bytes START-END/SIZE)" }),
        { status: 206 }
      )
      .addError(refusal(400, "A folder, not a file"))
      .addError(refusal(404, "No such thread (of this user), or no such file under /mnt/user-data"))
      .addError(refusal(413, "A file inside a .skill archive (x.skill/SKILL.md) past 16 MiB unpacked"))
      .addError(refusal(416, "A range outside the file (Content-Range: bytes */SIZE)"))
      .annotate(OpenApi.Summary, "Download a file of a thread (sandboxed: it runs no script here)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "A thread's uploads and artifacts (DeerFlow)")
