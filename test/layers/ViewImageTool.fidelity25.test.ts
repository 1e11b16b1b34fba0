/**
 * `view_image` on a file that is not there answers DeerFlow's `Error: Image file not found: <path>` (its
 * view_image_tool.py), checked before the format, as DeerFlow checks it: a missing `.txt` is not found too, a
 * directory is not a file. Over a real local sandbox in a temp data directory, through the toolkit the agent uses;
 * the path named is the virtual one, never the host's, and nothing reaches `viewed_images`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as SandboxTools from "../../src/layers/SandboxTools.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import { SandboxProvider, threadPaths } from "../../src/services/Sandbox.js"
import { inRun, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const U = "/mnt/user-data/uploads"
const W = "/mnt/user-data/workspace"

const sandbox = Effect.gen(function*() {
  const home = tempDir("antler-fid25-view-")
  const app = AppConfigService.of({ config: defaults(), source: undefined, home, ignored: [] })
  const provider = LocalSandbox.make(app, { bwrap: "off" })
  const view = (image_path: string) =>
    Effect.flatMap(SandboxTools.tools({ vision: true }), (tools) =>
      Toolkit.make(tools).call({ id: "tc-1", name: "view_image", args: { image_path } })).pipe(
        Effect.provideService(SandboxProvider, provider),
        Effect.provideService(AppConfigService, app),
        Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context),
        Effect.map((result) => ({
          text: String(result.message.content),
          status: result.message.type === "tool" ? result.message.status : undefined,
          update: result.update
        }))
      )
  return { view, home, paths: threadPaths(home, "u1", "t1") }
})

describe("view_image on a missing file (DeerFlow view_image_tool.py)", () => {
  it.effect("a missing image: DeerFlow's sentence with the virtual path, nothing viewed", () =>
    Effect.gen(function*() {
      const { view, home } = yield* sandbox
      for (const path of [`${U}/missing.png`, `${W}/charts/gone.jpg`]) {
        const result = yield* view(path)
        assert.strictEqual(result.text, `Error: Image file not found: ${path}`)
        assert.strictEqual(result.status, "error")
        assert.notInclude(result.text, home)
        assert.notProperty(result.update ?? {}, "viewed_images")
      }
    }))

  it.effect("existence is checked before the format: a missing .txt is not found; an existing one is refused", () =>
    Effect.gen(function*() {
      const { view, paths } = yield* sandbox
      assert.strictEqual((yield* view(`${U}/notes.txt`)).text, `Error: Image file not found: ${U}/notes.txt`)
      Fs.writeFileSync(Path.join(paths.uploads, "notes.txt"), "hello")
      assert.match((yield* view(`${U}/notes.txt`)).text, /^Error: Unsupported image format: \.txt/)
    }))

  it.effect("a directory is not a file", () =>
    Effect.gen(function*() {
      const { view, paths } = yield* sandbox
      yield* view(`${U}/warm-up.png`) // the thread's directories exist from here on
      Fs.mkdirSync(Path.join(paths.uploads, "album.png"))
      assert.strictEqual((yield* view(`${U}/album.png`)).text, `Error: Path is not a file: ${U}/album.png`)
    }))
})
