/**
 * DeerFlow's test_view_image_middleware.py, where the model reads the words: each viewed image is a description
 * block `\n- **<path>** (<mime>)`; one whose file is gone or changed since it was viewed is followed by DeerFlow's
 * `  (file unavailable or changed on disk: ...)` block instead of pixels (test_omits_image_url_when_read_raises_
 * oserror, test_omits_image_url_when_size_changes_between_view_and_inject). Antler names the image's
 * /mnt/user-data path there, never its path on the host (which DeerFlow shows the model).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ViewImage from "../../src/middleware/ViewImage.js"
import type { ContentBlock } from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64"
)

const blocksOf = (content: unknown) => content as ReadonlyArray<ContentBlock & { text?: string }>

describe("ViewImage (DeerFlow's blocks)", () => {
  it.effect("a changed or unreadable image: its description block, then the unavailable block, no pixels", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-view26-")
      const ok = Path.join(dir, "ok.png")
      const grown = Path.join(dir, "grown.png")
      Fs.writeFileSync(ok, PNG)
      Fs.writeFileSync(grown, Buffer.concat([PNG, PNG]))
      const message = yield* ViewImage.imageMessage({
        "/mnt/user-data/workspace/ok.png": { mime_type: "image/png", size: PNG.length, actual_path: ok },
        "/mnt/user-data/workspace/grown.png": { mime_type: "image/png", size: PNG.length, actual_path: grown },
        "/mnt/user-data/workspace/gone.png": { mime_type: "image/png", size: 10, actual_path: Path.join(dir, "x") }
      })
      const blocks = blocksOf(message.content)
      assert.deepStrictEqual(blocks.map((b) => b.type === "text" ? b.text : b.type), [
        "Here are the images you've viewed:",
        "\n- **/mnt/user-data/workspace/ok.png** (image/png)",
        "image_url",
        "\n- **/mnt/user-data/workspace/grown.png** (image/png)",
        "  (file unavailable or changed on disk: /mnt/user-data/workspace/grown.png)",
        "\n- **/mnt/user-data/workspace/gone.png** (image/png)",
        "  (file unavailable or changed on disk: /mnt/user-data/workspace/gone.png)"
      ])
      for (const block of blocks) if (block.type === "text") assert.notInclude(block.text!, dir)
    }))
})
