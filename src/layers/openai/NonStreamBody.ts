/**
 * A non-stream body with status 2xx: read (bounded) and taken for what it is — a whole (non-streamed)
 * completion, turned into one chunk; an error the server put in a 200; or anything else (an HTML page from
 * a proxy, a JSON body that is no completion), described so the user can fix the base URL.
 */
import * as Either from "effect/Either"
import { ModelError } from "../../services/ModelService.js"
import * as Json from "../../state/Json.js"
import type { Chunk } from "./ChunkAccumulator.js"
import { decodeChunk, issuesText } from "./ChunkAccumulator.js"
import { statusReason } from "./ErrorClassification.js"

/** The largest non-stream body read to say what it was (or to take a non-streamed answer from it). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024

/** Reads at most `limit` bytes of a body (the rest is cancelled) as text. */
export const readBody = async (
  response: Response,
  limit: number
): Promise<{ readonly text: string; readonly cut: boolean }> => {
  const body = response.body
  if (body === null) return { text: "", cut: false }
  const reader = body.getReader()
  const parts: Array<Uint8Array> = []
  let size = 0
  let cut = false
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    parts.push(value)
    size += value.length
    if (size > limit) {
      cut = true
      await reader.cancel().catch(() => undefined)
      break
    }
  }
  return { text: new TextDecoder().decode(Buffer.concat(parts)).slice(0, limit), cut }
}

const ASSISTANT_FIELDS = ["content", "reasoning_content", "reasoning", "reasoning_details", "tool_calls"] as const

/**
 * What a non-stream body with status 2xx is: a whole (non-streamed) completion, turned into one chunk; an
 * error the server put in a 200; or anything else, described (content type, size, an HTML page's title).
 */
export const nonStreamBody = (
  contentType: string,
  text: string,
  cut: boolean,
  where: string,
  hide: (cutText: string) => string = (text) => text
): Either.Either<Chunk, ModelError> => {
  let json: unknown
  try {
    json = Json.parse(text)
  } catch {
    json = undefined
  }
  if (typeof json === "object" && json !== null && !Array.isArray(json)) {
    const body = json as Record<string, unknown>
    const choice = Array.isArray(body.choices) ? body.choices[0] as Record<string, unknown> | undefined : undefined
    const message = choice?.message as Record<string, unknown> | null | undefined
    if (typeof message === "object" && message !== null) {
      const delta: Record<string, unknown> = {}
      for (const field of ASSISTANT_FIELDS) if (message[field] != null) delta[field] = message[field]
      if (Array.isArray(delta.tool_calls)) {
        delta.tool_calls = delta.tool_calls.map((call, index) => ({ index, ...(call as object) }))
      }
      const chunk = { ...body, choices: [{ index: 0, delta, finish_reason: choice?.finish_reason }] }
      return Either.mapLeft(decodeChunk(chunk), (error) =>
        new ModelError({
          reason: "invalid_response",
          errorType: "InvalidResponseError",
          message: `The model server sent a malformed non-streamed answer (${where}): ${issuesText(error, 3, hide)}`
        }))
    }
    const error = body.error as Record<string, unknown> | string | undefined
    if (error !== undefined && error !== null) {
      const detail = typeof error === "string" ? error : String(error.message ?? JSON.stringify(error))
      const code = typeof error === "object" && error.code != null ? String(error.code) : undefined
      return Either.left(
        new ModelError({
          reason: statusReason(undefined, code ?? String((error as { type?: unknown }).type ?? ""), detail),
          errorType: "APIError",
          message: `The model server answered with status 200 but with an error (${where}): ${detail}`,
          ...(code !== undefined ? { code } : {})
        })
      )
    }
    const keys = Object.keys(body).slice(0, 8).join(", ")
    return Either.left(
      new ModelError({
        reason: "invalid_response",
        errorType: "InvalidResponseError",
        message: `The model server answered with a JSON body that is not a chat completion (${where}): ` +
          `keys ${keys === "" ? "(none)" : keys}.`
      })
    )
  }
  const size = `${cut ? "more than " : ""}${text.length} characters`
  // (the title's and the beginning's cuts may fall inside a secret: `hide` hides its beginning, which the quotes after
  // it would keep from any mask of the whole message)
  const found = /<title[^>]*>([^<]{0,200})/i.exec(text)?.[1]?.trim()
  const title = found === undefined ? undefined : hide(found)
  const html = /html/i.test(contentType) || /^\s*<(!doctype|html|head|body)/i.test(text)
  const what = html
    ? `an HTML page${title ? ` titled "${title}"` : ""} (${size})`
    : `a ${contentType || "body without content type"} (${size}) beginning ${JSON.stringify(hide(text.slice(0, 120)))}`
  return Either.left(
    new ModelError({
      reason: "invalid_response",
      errorType: "InvalidResponseError",
      message: `The model server answered with status 200 but sent ${what} instead of an event stream (${where}). ` +
        `Check that the base URL points at an OpenAI-compatible API (it usually ends in /v1).`
    })
  )
}
