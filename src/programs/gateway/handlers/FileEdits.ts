/**
 * The uploads limits and artifact edits (declared in `api/FileEdits.ts`), as DeerFlow's gateway answers them. An
 * edit replaces a UTF-8 text file under the thread's `/mnt/user-data/outputs` (not through a link, at most
 * `MAX_EDITABLE_BYTES` before and after, no NUL byte) when the text it was opened with is still there (its
 * SHA-256, else 412) and no run of the thread is in flight (409): written to a temporary file beside it, synced,
 * renamed over it, keeping its permissions. What it grows the file by counts against `gateway.quotas.max_user_bytes`
 * (403 past it), as an upload's bytes do.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { AppConfigService } from "../../../services/AppConfig.js"
import { OUTPUTS, SandboxProvider, threadPaths } from "../../../services/Sandbox.js"
import * as FileEditsApi from "../api/FileEdits.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, notFound, problem } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import * as Access from "./Access.js"
import { json } from "./Http.js"
import * as Live from "./Live.js"

/** The largest file the artifact panel edits (DeerFlow's). */
export const MAX_EDITABLE_BYTES = 2 * 1024 * 1024

const sha256 = (bytes: Uint8Array) => Crypto.createHash("sha256").update(bytes).digest("hex")

/** Writes `bytes` over `file` atomically, with the permissions of `mode`. */
const replace = (file: string, bytes: Uint8Array, mode: number) =>
  Effect.tryPromise({
    try: async () => {
      const temp = Path.join(Path.dirname(file), `.artifact-edit-${Crypto.randomBytes(8).toString("hex")}.tmp`)
      try {
        const handle = await Fs.promises.open(temp, "wx", (mode & 0o777) | 0o600)
        try {
          await handle.writeFile(bytes)
          await handle.sync()
        } finally {
          await handle.close()
        }
        await Fs.promises.rename(temp, file)
      } finally {
        await Fs.promises.rm(temp, { force: true })
      }
    },
    catch: (cause) => fail("internal", `Failed to update the artifact: ${(cause as Error).message}`)
  })

/** The file edits endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "fileEdits", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const app = yield* AppConfigService
      const sandboxes = yield* SandboxProvider
      const current = yield* Live.config

      return handlers
        .handleRaw("uploadLimits", ({ path }) =>
          Effect.gen(function*() {
            // the server's limits, the same for every thread: a new chat asks before its thread exists (as
            // DeerFlow's gateway, no thread is looked up); `config.yaml`'s as it is now (an edit the gateway took)
            const { uploads } = (yield* current).config
            return json(FileEditsApi.UploadLimits, {
              max_files: uploads.max_files,
              max_file_size: uploads.max_file_size,
              max_total_size: uploads.max_total_size
            })
          }))
        .handleRaw("updateArtifact", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const { stored } = yield* access.threadRef(user, path.thread_id)
            const request = yield* Body.json(FileEditsApi.ArtifactUpdate)
            // (decoded once, by the router)
            const virtual = `/${path["*"]}`.replace(/^\/+/, "/")
            if (!virtual.startsWith(`${OUTPUTS}/`) || virtual.split("/").includes("..")) {
              return yield* fail("bad_request", `Only files in ${OUTPUTS} can be edited.`)
            }
            if (virtual.includes(".skill/") || virtual.endsWith(".skill")) {
              return problem(415, "Skill archives cannot be edited in the artifacts panel.")
            }
            if (access.runs.activeOf(stored) !== undefined) {
              return yield* fail("conflict", "Thread has a run in flight. Save after the run finishes.")
            }
            const sandbox = yield* Effect.mapError(sandboxes.acquire(stored, user), (e) => fail("internal", e.message))
            const missing = () => notFound(`Artifact ${virtual}`)
            const host = yield* Effect.mapError(sandbox.resolve(virtual, "write"), missing)
            // the file itself, not through a link: its real path is the one its virtual path names
            const literal = Path.join(threadPaths(app.home, user, stored).outputs, virtual.slice(OUTPUTS.length))
            const stat = yield* Effect.try({ try: () => Fs.lstatSync(literal), catch: missing })
            if (stat.isSymbolicLink() || host !== Fs.realpathSync(literal)) {
              return problem(415, "Symlinked artifacts cannot be edited.")
            }
            if (!stat.isFile()) return yield* fail("bad_request", `Path is not a file: ${virtual}`)
            if (stat.size > MAX_EDITABLE_BYTES) return problem(413, "Artifact is too large to edit.")
            const current = yield* Effect.tryPromise({
              try: () => Fs.promises.readFile(literal),
              catch: missing
            })
            if (current.length > MAX_EDITABLE_BYTES) return problem(413, "Artifact is too large to edit.")
            if (current.includes(0)) return problem(415, "Binary artifacts cannot be edited.")
            if (!isUtf8(current)) return problem(415, "Only UTF-8 text artifacts can be edited.")
            if (sha256(current) !== request.expected_sha256) {
              return problem(412, "Artifact changed since it was opened.")
            }
            const updated = Buffer.from(request.content, "utf8")
            if (updated.length > MAX_EDITABLE_BYTES) return problem(413, "Artifact is too large to edit.")
            if (updated.includes(0)) return problem(415, "Binary content cannot be saved as an artifact.")
            // (what it grows the file by is admitted as an upload's bytes are: an edit may make an empty file 2 MiB)
            const growth = Math.max(0, updated.length - current.length)
            yield* access.withBytes(user, growth, replace(literal, updated, stat.mode))
            return json(FileEditsApi.ArtifactUpdated, {
              path: virtual,
              sha256: sha256(updated),
              size: updated.length
            })
          }))
    }))

const isUtf8 = (bytes: Buffer) => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes)
    return true
  } catch {
    return false
  }
}
