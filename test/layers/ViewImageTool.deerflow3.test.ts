/**
 * DeerFlow test_view_image_tool.py: what the `view_image` tool answers the model, over a real local sandbox in a
 * temp data directory. Its refusals carry DeerFlow's sentences (the phrases its tests look for) and name the
 * image by its virtual path, never the host path; nothing refused reaches `viewed_images`.
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
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52])
const JPEG = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46])
const GIF = new TextEncoder().encode("GIF89a\x01\x00\x01\x00\x80\x00\x00")

const sandbox = Effect.gen(function*() {
  const home = tempDir("antler-view-image-")
  const app = AppConfigService.of({ config: defaults(), source: undefined, home, ignored: [] })
  const provider = LocalSandbox.make(app, { bwrap: "off" })
  const view = (image_path: string) =>
    Effect.flatMap(SandboxTools.tools({ vision: true }), (tools) =>
      Toolkit.make(tools).call({ id: "tc-1", name: "view_image", args: { image_path } })).pipe(
        Effect.provideService(SandboxProvider, provider),
        Effect.provideService(AppConfigService, app),
        Effect.provide(inRun({ threadId: "t1", userId: "u1" }).context),
        Effect.map((result) => ({ text: String(result.message.content), update: result.update }))
      )
  yield* view(`${U}/warm-up.png`) // acquires the sandbox: the thread's directories exist from here on
  const paths = threadPaths(home, "u1", "t1")
  const put = (name: string, bytes: Uint8Array) => {
    const file = Path.join(paths.uploads, name)
    Fs.writeFileSync(file, bytes)
    return file
  }
  return { view, put, home, paths }
})

describe("view_image (DeerFlow test_view_image_tool.py)", () => {
  it.effect("rejects an absolute path outside /mnt/user-data, naming the roots it allows", () =>
    Effect.gen(function*() {
      const { view } = yield* sandbox
      const result = yield* view("/etc/passwd.png")
      assert.include(result.text, "Only image paths under /mnt/user-data")
      assert.include(result.text, `/mnt/user-data/workspace, ${U}, /mnt/user-data/outputs`)
      assert.notProperty(result.update ?? {}, "viewed_images")
    }))

  it.effect("reads a PNG or a GIF from the uploads' virtual path into viewed_images", () =>
    Effect.gen(function*() {
      const { view, put } = yield* sandbox
      for (const [name, bytes, mime] of [["sample.png", PNG, "image/png"], ["anim.gif", GIF, "image/gif"]] as const) {
        const file = put(name, bytes)
        const result = yield* view(`${U}/${name}`)
        const entry = { mime_type: mime, size: bytes.length, actual_path: Fs.realpathSync(file) }
        assert.deepStrictEqual(result.update, { viewed_images: { [`${U}/${name}`]: entry } })
      }
    }))

  it.effect("a spoofed extension: text named .png does not match a supported image format", () =>
    Effect.gen(function*() {
      const { view, put, home } = yield* sandbox
      put("fake.png", new TextEncoder().encode("not really an image"))
      const result = yield* view(`${U}/fake.png`)
      assert.strictEqual(result.text, `Error: File contents do not match a supported image format: ${U}/fake.png`)
      assert.notInclude(result.text, home)
      assert.notProperty(result.update ?? {}, "viewed_images")
    }))

  it.effect("mismatched magic bytes: a JPEG named .png says what the extension indicates", () =>
    Effect.gen(function*() {
      const { view, put } = yield* sandbox
      put("photo.png", JPEG)
      const result = yield* view(`${U}/photo.png`)
      assert.strictEqual(
        result.text,
        `Error: Image contents are image/jpeg, but file extension indicates image/png: ${U}/photo.png`
      )
      assert.notProperty(result.update ?? {}, "viewed_images")
    }))

  it.effect("an oversized image: Image file is too large, with its size and the maximum", () =>
    Effect.gen(function*() {
      const { view, put } = yield* sandbox
      const file = put("huge.png", PNG)
      Fs.truncateSync(file, 20 * 1024 * 1024 + 1)
      const result = yield* view(`${U}/huge.png`)
      assert.strictEqual(
        result.text,
        `Error: Image file is too large: ${U}/huge.png is 20971521 bytes. Maximum supported size is 20971520 bytes`
      )
      assert.notProperty(result.update ?? {}, "viewed_images")
    }))

  it.effect("an unsupported format and a folder are refused in DeerFlow's words", () =>
    Effect.gen(function*() {
      const { view, put, paths } = yield* sandbox
      put("pic.bmp", PNG)
      assert.strictEqual(
        (yield* view(`${U}/pic.bmp`)).text,
        `Error: Unsupported image format: .bmp (${U}/pic.bmp). Supported formats: .jpg, .jpeg, .png, .webp, .gif`
      )
      Fs.mkdirSync(Path.join(paths.uploads, "dir.png"))
      assert.strictEqual((yield* view(`${U}/dir.png`)).text, `Error: Path is not a file: ${U}/dir.png`)
    }))

  it.effect("an uploads link to an image outside the thread is refused, and no host path is shown", () =>
    Effect.gen(function*() {
      const { view, home, paths } = yield* sandbox
      const outside = Path.join(tempDir("antler-view-outside-"), "outside-target.png")
      Fs.writeFileSync(outside, PNG)
      Fs.symlinkSync(outside, Path.join(paths.uploads, "escape.png"))
      const result = yield* view(`${U}/escape.png`)
      // DeerFlow says "path traversal"; Antler's sandbox names the link (docs/deerflow.md)
      assert.strictEqual(
        result.text,
        `Error: Access denied: ${U}/escape.png leads (through a symbolic link) outside the sandbox`
      )
      assert.notInclude(result.text, home)
      assert.notInclude(result.text, outside)
      assert.notProperty(result.update ?? {}, "viewed_images")
    }))
})
