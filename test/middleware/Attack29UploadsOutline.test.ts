/**
 * Attack round 29 on the uploads block's outline and one of the process's own secrets (a configured key:
 * `ProcessSecrets`) in a file the user uploaded: the block shows the model an upload's headings (each cut at 200
 * characters) or its first lines (cut at 2,000 in all), and they were cut unmasked, the masks after it finding whole
 * values only. A key where a cut fell had its beginning read by the model and kept in the thread's message. So did
 * `list_uploaded_files`'s outlines of earlier uploads.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Uploads from "../../src/middleware/Uploads.js"
import * as UploadedFilesTool from "../../src/programs/UploadedFilesTool.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"

const KEY = "sk-proc-a29-upload-0123456789abcdef"
const START = KEY.slice(0, 8)

/** A data directory whose thread `test-thread` has `files` uploaded. */
const homeWith = (files: Record<string, string>) => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "antler-a29-uploads-"))
  const dir = path.join(home, "users/default/threads/test-thread/user-data/uploads")
  fs.mkdirSync(dir, { recursive: true })
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), content)
  return home
}

const FILES = {
  // (a heading with the key 190 characters in: its cut at 200 keeps 9 of it)
  "report.md": `# ${"h".repeat(190)}${KEY} heading\n\nbody\n`,
  // (no heading: its first line with the key 1,990 characters in, cut at 2,000)
  "notes.md": `${"x".repeat(1990)}${KEY} line\nmore\n`
}

const inProcess = <A, E, R>(home: string, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.provide(Layer.succeed(AppConfigService, { config: defaults(), source: undefined, ignored: [], home })),
    Effect.provideService(ProcessSecrets, Redact.make([KEY]))
  )

const upload = (filename: string) =>
  ({ filename, size: 1, path: `/mnt/user-data/uploads/${filename}`, status: "uploaded" })

describe("Attack29: an upload's outline cut inside one of the process's own secrets", () => {
  it.effect("a heading and a first line: the model reads the outline, none of the key", () =>
    Effect.gen(function*() {
      const home = homeWith(FILES)
      const o = yield* inProcess(home, H.run({
        script: ["ok"],
        input: [M.human("see the files", { additional_kwargs: { files: [upload("report.md"), upload("notes.md")] } })],
        middlewares: () => [Uploads.layer()]
      }))
      const block = M.text(o.requests[0]!.messages[0]!)
      assert.include(block, "h[redact", "the heading: masked, then cut")
      assert.include(block, "x[redact", "the first line: masked, then cut")
      assert.notInclude(JSON.stringify(o.requests), START, "what the model read")
      assert.notInclude(JSON.stringify([o.events, o.state]), START, "what is streamed and kept")
    }).pipe(H.withStore))

  it.effect("list_uploaded_files's outlines: the model reads them, none of the key", () =>
    Effect.gen(function*() {
      const home = homeWith(FILES)
      const o = yield* inProcess(home, H.run({
        tools: [UploadedFilesTool.tool(home)],
        script: [{ toolCalls: [{ name: UploadedFilesTool.NAME, args: { include_outline: true } }] }, "ok"],
        input: "what did I upload before?"
      }))
      const [listed] = o.state.messages.filter((m) => m.type === "tool").map(M.text)
      assert.include(listed, "h[redact", "the heading: masked, then cut")
      assert.include(listed, "x[redact", "the first line: masked, then cut")
      assert.notInclude(JSON.stringify(o.requests), START, "what the model read")
      assert.notInclude(JSON.stringify([o.events, o.state]), START, "what is streamed and kept")
    }).pipe(H.withStore))
})
