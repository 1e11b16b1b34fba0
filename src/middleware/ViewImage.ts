/**
 * ViewImage (SPEC §5.23, lead chain slot #24), for models that accept images only (the agent of a model
 * without vision has neither this middleware nor `view_image`): the images the model looked at with
 * `view_image` (kept in `viewed_images`) reach it with the request after a completed `view_image` turn (the
 * latest AI message called `view_image` and every call of it has its result), as image parts of a hidden human
 * message after the tool results (a turn that viewed nothing gets DeerFlow's "No images have been viewed." there
 * instead); once that request succeeded, `viewed_images` is cleared, so each image is sent once (DeerFlow re-sends
 * every image of the thread with every later `view_image` turn). A type that is not an image type Antler knows is
 * shown as `unknown`, without pixels.
 *
 * Images a tool returned in its result (an MCP tool's image content) reach the model the same way: Chat
 * Completions tool messages carry text only, so the images of the latest tool results go in a hidden human
 * message after them, in the request that reads those results (once: the next request has a newer answer).
 *
 * Request-only: the thread never stores the pixels of viewed images. An image that changed on disk since it was viewed,
 * is gone, or would take the request past `maxRequestBytes` is replaced by a line saying so.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import { withUpdate } from "../services/ModelService.js"
import type { ModelRequest } from "../services/ModelService.js"
import { RunState } from "../services/RunContext.js"
import type { ContentBlock, Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { ViewedImages } from "../state/ThreadState.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"

/** `additional_kwargs` key marking the image message. */
export const CONTEXT_KEY = "deerflow_view_image_context"

/** The most image bytes one request carries (20 MB, view_image's limit for one image). */
export const MAX_REQUEST_BYTES = 20 * 1024 * 1024

/** The image types `view_image` hands out; anything else stored in `viewed_images` is shown as unknown. */
export const IMAGE_MIME_TYPES: ReadonlySet<string> = new Set(["image/png", "image/jpeg", "image/webp", "image/gif"])

/** The `view_image` tool's name. */
export const TOOL_NAME = "view_image"

/** The id prefix of the image message (DeerFlow's); with `CONTEXT_KEY`, what marks a message as Antler's own. */
export const ID_PREFIX = "view-image-context:"

// Texts that mark a human message as images already given (DeerFlow's current and legacy headers).
const ALREADY_GIVEN = ["Here are the images you've viewed", "Here are the details of the images you've viewed"]

// The image message, or one from before this marker existed (by its header, as DeerFlow reads it). A client's
// message can carry neither the key (the gateway removes it) nor, with it, the id: it does not pass for one.
const isImageContext = (message: Message) =>
  message.type === "human" &&
  ((message.id?.startsWith(ID_PREFIX) === true && message.additional_kwargs?.[CONTEXT_KEY] === true) ||
    ALREADY_GIVEN.some((text) => M.text(message).includes(text)))

/**
 * Whether the messages end with a completed `view_image` turn: the latest AI message calls `view_image`, every
 * call of it has its result after it, and no image message follows it yet (DeerFlow's rule for injecting).
 */
export const afterViewTurn = (messages: ReadonlyArray<Message>): boolean => {
  const at = messages.findLastIndex((m) => m.type === "ai")
  if (at < 0) return false
  const calls = M.toolCalls(messages[at]!)
  if (!calls.some((c) => c.name === TOOL_NAME)) return false
  const answered = new Set<string>()
  for (let i = at + 1; i < messages.length; i++) {
    const message = messages[i]!
    if (isImageContext(message)) return false
    if (message.type === "tool") answered.add(message.tool_call_id)
  }
  return calls.every((c) => answered.has(c.id))
}

/** Reads an image's bytes (injectable for tests). */
export type Reader = (path: string) => Promise<Uint8Array>

const readFile: Reader = (path) => Fs.readFile(path)

/** DeerFlow's whole text of the image message when `viewed_images` is empty (every view of the turn failed). */
export const NO_IMAGES = "No images have been viewed."

/**
 * The hidden message carrying the viewed images, read from disk (`NO_IMAGES` alone when there are none). An image
 * whose size changed, that cannot be read, or that would pass the byte budget becomes a text line instead.
 */
export const imageMessage = (
  images: ViewedImages,
  options: { readonly read?: Reader | undefined; readonly maxBytes?: number | undefined } = {}
): Effect.Effect<Message> =>
  Effect.gen(function*() {
    const read = options.read ?? readFile
    const budget = options.maxBytes ?? MAX_REQUEST_BYTES
    const blocks: Array<ContentBlock> = Object.keys(images).length === 0
      ? [{ type: "text", text: NO_IMAGES }]
      : [{ type: "text", text: "Here are the images you've viewed:" }]
    let spent = 0
    for (const [path, image] of Object.entries(images)) {
      if (!IMAGE_MIME_TYPES.has(image.mime_type)) {
        blocks.push({ type: "text", text: `\n- **${path}** (unknown): not an image type that can be shown` })
        continue
      }
      const bytes = yield* Effect.promise(() => read(image.actual_path).then((b) => b, () => undefined))
      if (bytes === undefined || bytes.length !== image.size) {
        // DeerFlow's two blocks, naming the /mnt/user-data path where DeerFlow shows the host's.
        blocks.push(
          { type: "text", text: `\n- **${path}** (${image.mime_type})` },
          { type: "text", text: `  (file unavailable or changed on disk: ${path})` }
        )
        continue
      }
      if (spent + bytes.length > budget) {
        blocks.push({
          type: "text",
          text: `\n- **${path}**: (not sent: the images of one request may total at most ${budget} bytes; ` +
            "view it again on its own)"
        })
        continue
      }
      spent += bytes.length
      blocks.push({ type: "text", text: `\n- **${path}** (${image.mime_type})` })
      blocks.push({
        type: "image_url",
        image_url: { url: `data:${image.mime_type};base64,${Buffer.from(bytes).toString("base64")}` }
      })
    }
    return M.human(blocks, {
      id: `${ID_PREFIX}${M.newId()}`,
      additional_kwargs: { hide_from_ui: true, [CONTEXT_KEY]: true }
    })
  })

/** The image blocks of the tool results that follow the latest AI message (the results the next call reads). */
export const latestToolImages = (
  messages: ReadonlyArray<Message>
): ReadonlyArray<{ readonly tool: string; readonly url: string }> => {
  const out: Array<{ tool: string; url: string }> = []
  const start = messages.findLastIndex((m) => m.type === "ai") + 1
  for (const message of messages.slice(start)) {
    if (message.type !== "tool" || typeof message.content === "string") continue
    for (const block of message.content) {
      const image = (block as { readonly image_url?: unknown }).image_url
      const url = block.type !== "image_url" ? undefined : typeof image === "string"
        ? image
        : (image as { readonly url?: unknown } | undefined)?.url
      if (typeof url === "string" && url.startsWith("data:image/")) out.push({ tool: message.name ?? "tool", url })
    }
  }
  return out
}

/** The hidden message carrying the images tool results returned, within the byte budget. */
export const toolImageMessage = (
  images: ReadonlyArray<{ readonly tool: string; readonly url: string }>,
  maxBytes: number = MAX_REQUEST_BYTES
): Message => {
  const blocks: Array<ContentBlock> = [{ type: "text", text: "Here are the images the tool results above returned:" }]
  let spent = 0
  for (const image of images) {
    const bytes = Math.floor((image.url.length - image.url.indexOf(",") - 1) * 3 / 4)
    if (spent + bytes > maxBytes) {
      blocks.push({ type: "text", text: `\n- an image from ${image.tool}: not sent (over the request's image budget)` })
      continue
    }
    spent += bytes
    blocks.push({ type: "text", text: `\n- from ${image.tool}:` })
    blocks.push({ type: "image_url", image_url: { url: image.url } })
  }
  return M.human(blocks, {
    id: `tool-image-context:${M.newId()}`,
    additional_kwargs: { hide_from_ui: true, [CONTEXT_KEY]: true }
  })
}

/** Options of `layer`. */
export interface Options {
  readonly read?: Reader | undefined
  readonly maxRequestBytes?: number | undefined
}

/** The ViewImage middleware. Requires `RunState`. */
export const layer = (options: Options = {}): Middleware =>
  MW.make(Effect.map(RunState, (state) => ({
    model: (request: ModelRequest, next) => {
      if (request.internal !== undefined) return next(request)
      const fromTools = latestToolImages(request.messages)
      const withToolImages = fromTools.length === 0
        ? request
        : { ...request, messages: [...request.messages, toolImageMessage(fromTools, options.maxRequestBytes)] }
      return Effect.flatMap(state.get, (current) => {
        if (!afterViewTurn(current.messages)) return next(withToolImages)
        // (a view_image turn that viewed nothing still gets DeerFlow's message, saying so: `NO_IMAGES`)
        const viewed = Object.keys(current.viewed_images).length > 0
        return imageMessage(current.viewed_images, { read: options.read, maxBytes: options.maxRequestBytes }).pipe(
          Effect.flatMap((message) => next({ ...withToolImages, messages: [...withToolImages.messages, message] })),
          // sent: the images are not sent again (a failed call leaves them for the next attempt)
          Effect.map((response) =>
            viewed && response.failure === undefined ? withUpdate(response, { viewed_images: {} }) : response
          )
        )
      })
    }
  }) satisfies MW.Wrappers))

/** Its chain entry (vision models): inside the retries, so every attempt carries the viewed images. */
export const entry = () =>
  Chain.entry("ViewImage", () => layer(), [
    { inside: "LLMErrorHandling", reason: "a retried call still carries the images" }
  ])
