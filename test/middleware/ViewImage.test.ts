/**
 * ViewImage: the images viewed reach the next request as image parts of a hidden human message (never the
 * thread), once; an image changed on disk or past the byte budget becomes a line saying so.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ViewImage from "../../src/middleware/ViewImage.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"

const tempDir = tempDirs()

// A 1x1 PNG.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64"
)

/** Stands in for view_image: records the image file in `viewed_images`. */
const look = (file: string, size = PNG.length) =>
  Tool.make({
    name: "look",
    description: "look",
    parameters: Schema.Struct({ path: Schema.String }),
    handler: ({ path }, call) =>
      Effect.succeed({
        message: M.tool("Loaded the image.", call.id, { name: "look" }),
        update: { viewed_images: { [path]: { mime_type: "image/png", size, actual_path: file } } }
      })
  })

const imagesIn = (message: M.Message) =>
  typeof message.content === "string" ? [] : message.content.filter((b) => b.type === "image_url")

describe("ViewImage", () => {
  it.effect("viewed images go to the next request as image parts, once; the thread never stores them", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-view-"), "dot.png")
      Fs.writeFileSync(file, PNG)
      const o = yield* H.run({
        input: "look at the dot",
        tools: [look(file)],
        script: [
          { toolCalls: [{ name: "look", args: { path: "/mnt/user-data/workspace/dot.png" } }] },
          { toolCalls: [{ name: "look", args: { path: "/mnt/user-data/workspace/missing.png" } }] },
          "I saw a dot."
        ],
        middlewares: () => [ViewImage.layer()]
      })
      assert.lengthOf(o.requests, 3)
      assert.strictEqual(o.requests[0]!.messages.filter((m) => imagesIn(m).length > 0).length, 0)
      const carrier = o.requests[1]!.messages.at(-1)!
      assert.strictEqual(carrier.type, "human")
      assert.isTrue(M.isHidden(carrier))
      assert.strictEqual(o.requests[1]!.messages.at(-2)!.type, "tool")
      assert.deepStrictEqual(imagesIn(carrier), [
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` } }
      ])
      assert.include(M.text(carrier), "- **/mnt/user-data/workspace/dot.png** (image/png)")
      // the next request has the second image only (the first was cleared after it was sent)
      const second = o.requests[2]!.messages.at(-1)!
      assert.notInclude(M.text(second), "dot.png")
      assert.deepStrictEqual(o.state.viewed_images, {})
      assert.isFalse(o.state.messages.some((m) => imagesIn(m).length > 0))
    }).pipe(H.withStore))

  it.effect("images a tool returned (an MCP tool's image content) reach the request that reads the result, once", () =>
    Effect.gen(function*() {
      const url = `data:image/png;base64,${PNG.toString("base64")}`
      const screenshot = Tool.make({
        name: "screenshot",
        description: "screenshot",
        parameters: Schema.Struct({}),
        handler: (_, call) =>
          Effect.succeed({
            message: M.tool([
              { type: "text", text: "[image: image/png, 68 B]" },
              { type: "image_url", image_url: { url } }
            ], call.id, { name: "screenshot" })
          })
      })
      const o = yield* H.run({
        input: "what is on screen?",
        tools: [screenshot],
        script: [{ toolCalls: [{ name: "screenshot", args: {} }] }, { toolCalls: [{ name: "screenshot", args: {} }] }, "A dot."],
        middlewares: () => [ViewImage.layer()]
      })
      assert.lengthOf(o.requests, 3)
      const carrier = o.requests[1]!.messages.at(-1)!
      assert.strictEqual(carrier.type, "human")
      assert.isTrue(M.isHidden(carrier))
      assert.include(M.text(carrier), "from screenshot")
      assert.deepStrictEqual(imagesIn(carrier), [{ type: "image_url", image_url: { url } }])
      // the third request carries the second result's image only: the first one was read already
      const third = o.requests[2]!.messages
      assert.strictEqual(third.filter((m) => m.type === "human" && M.isHidden(m) && imagesIn(m).length > 0).length, 1)
      assert.strictEqual(third.at(-1)!.type, "human")
      // nothing of the carriers is stored
      assert.isFalse(o.state.messages.some((m) => m.type === "human" && M.isHidden(m) && imagesIn(m).length > 0))
    }).pipe(H.withStore))

  it.effect("an image changed on disk, or past the request's byte budget, is a line instead of pixels", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-view-")
      const changed = Path.join(dir, "changed.png")
      Fs.writeFileSync(changed, PNG)
      const message = yield* ViewImage.imageMessage({
        "/mnt/user-data/workspace/changed.png": { mime_type: "image/png", size: PNG.length + 5, actual_path: changed },
        "/mnt/user-data/workspace/gone.png": { mime_type: "image/png", size: 10, actual_path: Path.join(dir, "gone") }
      })
      assert.deepStrictEqual(imagesIn(message), [])
      assert.include(M.text(message), "changed.png**: (file unavailable or changed on disk since it was viewed")
      assert.include(M.text(message), "gone.png**: (file unavailable")
      const big = yield* ViewImage.imageMessage({
        "/a.png": { mime_type: "image/png", size: PNG.length, actual_path: changed.replace("changed", "a") },
        "/b.png": { mime_type: "image/png", size: PNG.length, actual_path: changed.replace("changed", "b") }
      }, { maxBytes: PNG.length + 10, read: () => Promise.resolve(PNG) })
      assert.lengthOf(imagesIn(big), 1)
      const budget = PNG.length + 10
      assert.include(M.text(big), `/b.png**: (not sent: the images of one request may total at most ${budget} bytes`)
    }))
})
