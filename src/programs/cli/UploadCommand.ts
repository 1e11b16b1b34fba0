/**
 * `antler upload THREAD FILE...`: copies files into a saved thread's uploads (documents also get a Markdown
 * copy). `uploadFiles` is shared with `antler run --file`.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { AppConfigService } from "../../services/AppConfig.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as App from "../App.js"
import * as CliCommand from "./CliCommand.js"
import { ExitCode, fail } from "./CliCommand.js"
import * as Render from "./Render.js"
import * as Upload from "../Upload.js"

/**
 * Uploads `files` into the thread, printing one line per file (none with `json`), made safe; a refusal is a usage
 * error.
 */
export const uploadFiles = (
  app: AppConfigService["Type"],
  threadId: string,
  files: ReadonlyArray<string>,
  json: boolean
) =>
  Effect.gen(function*() {
    // (the operator's own files: converted unless `uploads.auto_convert_documents` says no)
    const convert = app.config.uploads.auto_convert_documents ?? true
    const results = yield* Upload.upload(threadId, files, { convert }).pipe(
      Effect.provideService(AppConfigService, app),
      Effect.catchTag("UploadError", (error) =>
        fail(
          error.reason === "io" ? ExitCode.runFailed : ExitCode.usage,
          `upload refused: ${Render.safeText(error.message)}`
        ))
    )
    // (a file's name may hold a bidirectional override or C1 controls: only C0 ones are refused)
    if (!json) for (const result of results) yield* Render.write(`${Render.safeText(Upload.describeResult(result))}\n`)
    return results
  })

/** Fails (exit 1) unless the thread is saved in the store: an upload never starts a thread by itself. */
const requireThread = (home: string, threadId: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const saved = (yield* Effect.orElseSucceed(fs.exists(App.storeLocation(home)), () => false)) &&
      Option.isSome(yield* Effect.flatMap(ThreadStore, (store) => store.load(threadId)).pipe(
        Effect.provide(App.storeLayer(home))
      ))
    if (!saved) {
      const antler = CliCommand.invocation()
      return yield* fail(
        ExitCode.runFailed,
        `No thread "${threadId}" in ${home}; nothing was uploaded. Start it with: ${antler} run --thread ${threadId} ` +
          `--file FILE "<prompt>", or list the saved threads with: ${antler} threads list`
      )
    }
  })

const command = Command.make(
  "upload",
  {
    thread: Args.text({ name: "thread" }),
    files: Args.file({ name: "file", exists: "yes" }).pipe(Args.atLeast(1)),
    config: CliCommand.config,
    json: CliCommand.json
  },
  (args) =>
    Effect.gen(function*() {
      const app = yield* CliCommand.loadConfig(Option.getOrUndefined(args.config))
      const threadId = yield* CliCommand.threadIdFrom(args.thread)
      yield* requireThread(app.home, threadId)
      const results = yield* uploadFiles(app, threadId, args.files, args.json)
      if (args.json) for (const result of results) yield* Render.writeJson(result)
    }).pipe(Effect.catchAll(CliCommand.reportFailure("upload failed")))
)

/** `antler upload`. */
export const entry: CliCommand.Entry = {
  name: "upload",
  command,
  help: {
    summary: "Copy files into a saved thread's uploads, where the agent can read them",
    usage: ["upload [options] <thread> <file>..."],
    description: "The files go to /mnt/user-data/uploads of the thread (checked: names, at most 10 files, 50 MiB " +
      "each, 100 MiB in all by default). PDF, DOCX, XLSX, PPTX and HTML files also get a Markdown copy next to " +
      "them (report.pdf → report.md) unless uploads.auto_convert_documents is false. The thread must exist; to " +
      "start a thread with files, use run --file.",
    arguments: [
      ["<thread>", "The id of a saved thread (see threads list)"],
      ["<file>...", "One or more files to copy"]
    ],
    options: [
      CliCommand.CONFIG_HELP,
      ["--json", "Print one JSON object per file (its name, virtual path, size and Markdown copy)"]
    ],
    examples: [
      ["upload 7f3c… report.pdf data.xlsx", "Give the agent two documents, then ask about them with run --thread"]
    ]
  }
}
