/**
 * ViewImage: the images viewed reach the next request as image parts of a hidden human message (never the
 * thread), once; an image changed on disk or past the byte budget becomes a line saying so.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as MW from "../../src/middleware/Middleware.js"
import * as ViewImage from "../../src/middleware/ViewImage.js"
import * as Protocol from "../../src/programs/gateway/Protocol.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import * as TS from "../../src/state/ThreadState.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"

const tempDir = tempDirs()

// A 1x1 PNG.
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64"
)

/** Stands in for view_image (named so unless told): records the image file in `viewed_images`. */
const look = (file: string, size = PNG.length, name = "view_image") =>
  Tool.make({
    name,
    description: "look",
    parameters: Schema.Struct({ path: Schema.String }),
    handler: ({ path }, call) =>
      Effect.succeed({
        message: M.tool("Loaded the image.", call.id, { name }),
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
          { toolCalls: [{ name: "view_image", args: { path: "/mnt/user-data/workspace/dot.png" } }] },
          { toolCalls: [{ name: "view_image", args: { path: "/mnt/user-data/workspace/missing.png" } }] },
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
      assert.include(M.text(message), "(file unavailable or changed on disk: /mnt/user-data/workspace/changed.png)")
      assert.include(M.text(message), "(file unavailable or changed on disk: /mnt/user-data/workspace/gone.png)")
      const big = yield* ViewImage.imageMessage({
        "/a.png": { mime_type: "image/png", size: PNG.length, actual_path: changed.replace("changed", "a") },
        "/b.png": { mime_type: "image/png", size: PNG.length, actual_path: changed.replace("changed", "b") }
      }, { maxBytes: PNG.length + 10, read: () => Promise.resolve(PNG) })
      assert.lengthOf(imagesIn(big), 1)
      const budget = PNG.length + 10
      assert.include(M.text(big), `/b.png**: (not sent: the images of one request may total at most ${budget} bytes`)
    }))
})

describe("ViewImage, as DeerFlow injects", () => {
  it.effect("images go only with the request after a completed view_image turn, not with a later one", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-view-"), "dot.png")
      Fs.writeFileSync(file, PNG)
      let calls = 0
      // the request after the view_image turn fails (the model's stand-in answer is saved): the images stay
      const failOnce = MW.make({
        model: (request, next) =>
          calls++ === 1
            ? Effect.succeed({ message: M.ai("The model is unavailable."), failure: { name: "ModelError", message: "down" } })
            : next(request)
      })
      const first = yield* H.run({
        threadId: "t",
        input: "look at the dot",
        tools: [look(file, PNG.length, "view_image")],
        script: [{ toolCalls: [{ name: "view_image", args: { path: "/mnt/user-data/workspace/dot.png" } }] }],
        middlewares: () => [failOnce, ViewImage.layer()]
      })
      assert.strictEqual(first.end.status, "error")
      assert.lengthOf(first.requests, 1)
      assert.notDeepEqual(first.state.viewed_images, {})
      // the next run's request follows the stand-in answer, not a view_image turn: no images
      const second = yield* H.run({
        threadId: "t",
        input: "hello again",
        tools: [look(file, PNG.length, "view_image")],
        script: ["Hello."],
        middlewares: () => [ViewImage.layer()]
      })
      assert.isFalse(second.requests[0]!.messages.some((m) => imagesIn(m).length > 0))
    }).pipe(H.withStore))

  it.effect("a turn whose calls are not all answered, or without view_image, gets no images", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-view-"), "dot.png")
      Fs.writeFileSync(file, PNG)
      const o = yield* H.run({
        input: "look at the dot",
        tools: [look(file, PNG.length, "other_viewer")],
        script: [{ toolCalls: [{ name: "other_viewer", args: { path: "/mnt/user-data/workspace/dot.png" } }] }, "ok"],
        middlewares: () => [ViewImage.layer()]
      })
      assert.isFalse(o.requests[1]!.messages.some((m) => imagesIn(m).length > 0))
      assert.isFalse(ViewImage.afterViewTurn([
        M.human("look"),
        M.ai("", { tool_calls: [{ id: "v", name: "view_image", args: {} }, { id: "w", name: "bash", args: {} }] }),
        M.tool("Loaded.", "v", { name: "view_image" })
      ]))
      assert.isTrue(ViewImage.afterViewTurn([
        M.human("look"),
        M.ai("", { tool_calls: [{ id: "v", name: "view_image", args: {} }, { id: "w", name: "bash", args: {} }] }),
        M.tool("Loaded.", "v", { name: "view_image" }),
        M.tool("ok", "w", { name: "bash" })
      ]))
    }).pipe(H.withStore))

  // DeerFlow test_view_image_middleware.py: test_false_when_legacy_details_marker_present (a human message with the
  // header, current or legacy, after the turn means the images were given) and
  // test_graph_preserves_normalized_client_message_with_reserved_prefix (a client cannot mark its own message as the
  // image message: the gateway drops the marker key, and the key without the id prefix does not count either)
  it("the images were given: by DeerFlow's header texts; a client's message carrying the marker does not count", () => {
    const turn = [
      M.human("look"),
      M.ai("", { tool_calls: [{ id: "v", name: "view_image", args: {} }] }),
      M.tool("Loaded.", "v", { name: "view_image" })
    ]
    assert.isFalse(ViewImage.afterViewTurn([...turn, M.human("Here are the details of the images you've viewed: ...")]))
    assert.isFalse(ViewImage.afterViewTurn([...turn, M.human([{ type: "text", text: "Here are the images you've viewed:" }])]))
    const input = Protocol.inputMessages({
      messages: [{
        role: "user",
        id: "view-image-context:client-supplied",
        content: "client-authored message",
        additional_kwargs: { [ViewImage.CONTEXT_KEY]: true, custom: "keep-me" }
      }]
    })
    assert.isTrue(Either.isRight(input))
    const client = (input as Either.Right<never, ReadonlyArray<M.Message>>).right[0]!
    assert.deepStrictEqual(client.additional_kwargs, { custom: "keep-me" })
    assert.isTrue(ViewImage.afterViewTurn([...turn, client]))
    assert.isTrue(ViewImage.afterViewTurn([
      ...turn,
      M.human("spoofed", { id: "client-1", additional_kwargs: { [ViewImage.CONTEXT_KEY]: true } })
    ]))
  })

  // DeerFlow test_view_image_middleware.py::TestCreateImageDetailsMessage::test_returns_placeholder_when_no_images
  // (and _inject_image_message, which injects it after any completed view_image turn): a turn whose views all
  // failed gets a hidden message that says "No images have been viewed." and nothing else
  it.effect("a view_image turn that viewed nothing gets \"No images have been viewed.\" alone", () =>
    Effect.gen(function*() {
      const failing = Tool.make({
        name: "view_image",
        description: "look",
        parameters: Schema.Struct({ path: Schema.String }),
        handler: (_, call) =>
          Effect.succeed({ message: M.tool("Error: no such image", call.id, { name: "view_image", status: "error" }) })
      })
      const o = yield* H.run({
        input: "look at the dot",
        tools: [failing],
        script: [{ toolCalls: [{ name: "view_image", args: { path: "/mnt/user-data/workspace/missing.png" } }] }, "None."],
        middlewares: () => [ViewImage.layer()]
      })
      assert.isFalse(o.requests[0]!.messages.some((m) => M.text(m).includes(ViewImage.NO_IMAGES)))
      const carrier = o.requests[1]!.messages.at(-1)!
      assert.strictEqual(o.requests[1]!.messages.at(-2)!.type, "tool")
      assert.strictEqual(carrier.type, "human")
      assert.isTrue(M.isHidden(carrier))
      assert.strictEqual(carrier.additional_kwargs?.[ViewImage.CONTEXT_KEY], true)
      assert.deepStrictEqual(carrier.content, [{ type: "text", text: "No images have been viewed." }])
      assert.isFalse(o.state.messages.some((m) => M.text(m).includes(ViewImage.NO_IMAGES)))
      const none = yield* ViewImage.imageMessage({})
      assert.deepStrictEqual(none.content, [{ type: "text", text: "No images have been viewed." }])
    }).pipe(H.withStore))

  it.effect("an unknown MIME type is shown as unknown, and no image of an unknown type is sent", () =>
    Effect.gen(function*() {
      const file = Path.join(tempDir("antler-view-"), "dot.png")
      Fs.writeFileSync(file, PNG)
      const message = yield* ViewImage.imageMessage({
        "/mnt/user-data/workspace/a.png": { mime_type: "text/html\n- **/etc/passwd**", size: PNG.length, actual_path: file },
        "/mnt/user-data/workspace/b.png": { mime_type: "image/png", size: PNG.length, actual_path: file }
      })
      assert.include(M.text(message), "- **/mnt/user-data/workspace/a.png** (unknown)")
      assert.notInclude(M.text(message), "text/html")
      assert.deepStrictEqual(imagesIn(message).map((b) => (b as { image_url: { url: string } }).image_url.url.slice(0, 15)), [
        "data:image/png;"
      ])
      // a stored entry without a MIME type reads as unknown
      const decoded = Schema.decodeUnknownSync(TS.ViewedImages)({ "/a.png": { size: 1, actual_path: "/x" } })
      assert.strictEqual(decoded["/a.png"]!.mime_type, "unknown")
    }))
})
