/**
 * DeerFlow's uploads limits and artifact edits, declared: the `uploads` limits a thread's uploads are held to
 * (DeerFlow's shape), and replacing an output file's text from the artifact panel, named by the SHA-256 of the
 * text it was opened with. Implemented in `handlers/FileEdits.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ThreadPath } from "./Ids.js"
import { QuotaRefusal, refusal } from "./Problem.js"
import { Authentication } from "./Security.js"
import { BodyRefusals, ThreadNotFound } from "./Threads.js"

/** DeerFlow's `UploadLimits`. */
export const UploadLimits = Schema.Struct({
  max_files: Schema.Int,
  max_file_size: Schema.Int,
  max_total_size: Schema.Int
}).annotations({ identifier: "UploadLimits" })

/** `PUT /api/threads/{id}/artifacts/{path}` */
export const ArtifactUpdate = Schema.Struct({
  content: Schema.String,
  expected_sha256: Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/, {
    message: () => "the SHA-256 (64 lower-case hex digits) of the text the file was opened with"
  }))
}).annotations({ identifier: "ArtifactUpdate" })

/** The file as saved. */
export const ArtifactUpdated = Schema.Struct({
  path: Schema.String,
  sha256: Schema.String,
  size: Schema.Int
}).annotations({ identifier: "ArtifactUpdated" })

const ArtifactPath = Schema.Struct({
  ...ThreadPath.fields,
  "*": Schema.String.annotations({ description: "The file's path under /mnt/user-data/outputs" })
})

/** The file edits group (served under `/api`). */
export const group = HttpApiGroup.make("fileEdits")
  .add(
    HttpApiEndpoint.get("uploadLimits", "/threads/:thread_id/uploads/limits")
      .setPath(ThreadPath)
      .addSuccess(UploadLimits)
      .addError(ThreadNotFound)
      .annotate(OpenApi.Summary, "The limits of a thread's uploads (uploads.*)")
  )
  .add(
    HttpApiEndpoint.put("updateArtifact", "/threads/:thread_id/artifacts/*")
      .setPath(ArtifactPath)
      .setPayload(ArtifactUpdate)
      .addSuccess(ArtifactUpdated)
      .addError(BodyRefusals)
      .addError(refusal(400, "Not a file under /mnt/user-data/outputs"))
      .addError(refusal(404, "No such thread (of this user), or no such file"))
      .addError(refusal(409, "A run of the thread is in flight"))
      .addError(refusal(412, "The file changed since it was opened (expected_sha256)"))
      .addError(refusal(413, "The file, or the new text, is larger than 2 MiB"))
      .addError(QuotaRefusal)
      .addError(refusal(415, "Not UTF-8 text (a binary file, a link, a skill archive)"))
      .annotate(OpenApi.Summary, "Replaces the text of an output file (the artifact panel's edit)")
  )
  .middlewareEndpoints(Authentication)
