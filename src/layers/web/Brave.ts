/**
 * Brave Search (`https://api.search.brave.com`), as DeerFlow's `community/brave` tools ask it: `GET
 * /res/v1/web/search` or `/res/v1/images/search` with `q`, `count` (and `text_decorations=false` for the web) and
 * the key in `X-Subscription-Token`; an image search also sends the entry's `country`, `search_lang`, `safesearch`
 * and `spellcheck`, as DeerFlow's does. A query of at most 400 characters; an image URL naming a private address is
 * dropped.
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

/** Brave's address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://api.search.brave.com"
/** The environment variable DeerFlow reads the key from. */
export const KEY_ENV = "BRAVE_SEARCH_API_KEY"

const MAX_QUERY = 400

const Size = Schema.optional(Schema.NullOr(Schema.Number))

const WebAnswer = Schema.Struct({
  web: Schema.optional(Schema.NullOr(Schema.Struct({
    results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ title: Str, url: Str, description: Str }))))
  })))
})

const ImageAnswer = Schema.Struct({
  results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    title: Str,
    url: Str,
    source: Str,
    thumbnail: Schema.optional(Schema.NullOr(Schema.Struct({ src: Str, width: Size, height: Size }))),
    properties: Schema.optional(Schema.NullOr(Schema.Struct({ url: Str, width: Size, height: Size })))
  }))))
})

type Sized = { readonly width?: number | null | undefined; readonly height?: number | null | undefined }

const present = (value: Text) => typeof value === "string" && value.trim() !== ""

/** What a configured `image_search` entry adds to Brave's image requests (DeerFlow's keys, sent as they are). */
export interface ImageOptions {
  readonly country?: string | undefined
  readonly search_lang?: string | undefined
  readonly safesearch?: string | undefined
  readonly spellcheck?: boolean | undefined
}

/** Brave as a search provider (web and images). */
export const make = (connection: Connection, imageOptions: ImageOptions = {}): Service => {
  const imageParams: Record<string, string> = {}
  for (const [key, value] of Object.entries(imageOptions)) if (value !== undefined) imageParams[key] = String(value)
  const base = connection.baseUrl ?? DEFAULT_BASE_URL
  const get = <A, I>(path: string, service: string, params: Record<string, string>, schema: Schema.Schema<A, I>) =>
    Effect.flatMap(
      call("Brave Search", connection, {
        url: join(base, `${path}?${new URLSearchParams(params)}`),
        headers: {
          accept: "application/json",
          ...(connection.apiKey !== undefined ? { "x-subscription-token": Redacted.value(connection.apiKey) } : {})
        }
      }, (status) => `${service} API error: HTTP ${status}`),
      (response) => decodeJson(service, schema, response.body)
    )
  return {
    name: "Brave Search",
    search: (query, max) =>
      Effect.map(
        get("/res/v1/web/search", "Brave Search", {
          q: clippedQuery(query, MAX_QUERY),
          count: String(max),
          text_decorations: "false"
        }, WebAnswer),
        (answer) => {
          const results = (answer.web?.results ?? []).map((r) => result(r.title, r.url, r.description))
          return masked(connection, defined(results, max))
        }
      ),
    images: (query, max) =>
      Effect.map(
        get("/res/v1/images/search", "Brave Image Search", {
          q: clippedQuery(query, MAX_QUERY),
          count: String(max),
          ...imageParams
        },
          ImageAnswer),
        (answer) => {
          const out: Array<ImageResult> = []
          for (const item of answer.results ?? []) {
            const thumbnail = item.thumbnail ?? {}
            const properties = item.properties ?? {}
            const safeImage = publicUrl(properties.url)
            const safeThumb = publicUrl(thumbnail.src)
            // each URL public or dropped; one absent takes the other's; the size is the shown URL's
            const [imageUrl, dims]: [string | undefined, Sized] = safeImage !== undefined
              ? [safeImage, properties]
              : present(properties.url)
              ? [undefined, {}]
              : [safeThumb, thumbnail]
            const thumbnailUrl = safeThumb ?? (present(thumbnail.src) ? undefined : safeImage)
            const shown = imageUrl ?? thumbnailUrl
            if (shown === undefined) continue
            const size = imageUrl !== undefined ? dims : thumbnail
            out.push({
              title: clean(item.title ?? "", 300),
              image_url: shown,
              thumbnail_url: thumbnailUrl,
              source_url: publicUrl(item.url),
              width: size.width ?? undefined,
              height: size.height ?? undefined
            })
            if (out.length >= max) break
          }
          return masked(connection, out)
        }
      )
  }
}
