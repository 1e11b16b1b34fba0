/**
 * Serper (Google Search and Google Images, `https://google.serper.dev`), as DeerFlow's `community/serper` tools
 * ask it: `POST /search` or `/images` with `{q, num}` and the key in `X-API-KEY`. At most 10 results (Serper's
 * cap), a query of at most 500 characters; an image URL naming a private address is dropped.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type { ImageResult, Service } from "../../services/WebSearch.js"
import {
  call,
  clean,
  clippedQuery,
  type Connection,
  decodeJson,
  defined,
  join,
  masked,
  publicUrl,
  result,
  Str,
  type Text
} from "../SearchProviders.js"

/** Serper's address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://google.serper.dev"
/** The environment variable DeerFlow reads the key from. */
export const KEY_ENV = "SERPER_API_KEY"

const MAX_RESULTS = 10
const MAX_QUERY = 500

const Answer = Schema.Struct({
  organic: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ title: Str, link: Str, snippet: Str })))),
  images: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    title: Str,
    imageUrl: Str,
    thumbnailUrl: Str,
    link: Str
  }))))
})

/** A Serper image as DeerFlow keeps it: each URL public or dropped; one absent takes the other's value. */
const serperImage = (title: Text, raw: Text, thumb: Text) => {
  const safeImage = publicUrl(raw)
  const safeThumb = publicUrl(thumb)
  const present = (value: Text) => typeof value === "string" && value.trim() !== ""
  const imageUrl = safeImage ?? (present(raw) ? undefined : safeThumb)
  const thumbnailUrl = safeThumb ?? (present(thumb) ? undefined : safeImage)
  return { title: clean(title ?? "", 300), imageUrl, thumbnailUrl }
}

/** Serper as a search provider (web and images). */
export const make = (connection: Connection): Service => {
  const base = connection.baseUrl ?? DEFAULT_BASE_URL
  const post = (path: string, query: string, max: number) =>
    Effect.flatMap(
      call("Serper", connection, {
        url: join(base, path),
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(connection.apiKey !== undefined ? { "x-api-key": Redacted.value(connection.apiKey) } : {})
        },
        body: JSON.stringify({ q: clippedQuery(query, MAX_QUERY), num: Math.min(max, MAX_RESULTS) })
      }, (status) => `Serper API error: HTTP ${status}`),
      (response) => decodeJson("Serper", Answer, response.body)
    )
  return {
    name: "Serper",
    search: (query, max) =>
      Effect.map(post("/search", query, max), (answer) =>
        masked(connection, defined((answer.organic ?? []).map((r) => result(r.title, r.link, r.snippet)), max))),
    images: (query, max) =>
      Effect.map(post("/images", query, max), (answer) => {
        const out: Array<ImageResult> = []
        for (const r of answer.images ?? []) {
          const { title, imageUrl, thumbnailUrl } = serperImage(r.title, r.imageUrl, r.thumbnailUrl)
          const shown = imageUrl ?? thumbnailUrl
          if (shown === undefined) continue
          out.push({ title, image_url: shown, thumbnail_url: thumbnailUrl })
          if (out.length >= Math.min(max, MAX_RESULTS)) break
        }
        return masked(connection, out)
      })
  }
}
