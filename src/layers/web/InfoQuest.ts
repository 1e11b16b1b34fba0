/**
 * BytePlus InfoQuest search (`https://search.infoquest.bytepluses.com`), as DeerFlow's `community/infoquest`
 * client asks it: `POST /` with `{format: "JSON", query}` (`time_range` when set; for images `search_type:
 * "Images"` and `image_size`) and `Authorization: Bearer <key>`. Pages (`organic`) and news (`top_stories`) are
 * the web results, `images_results` the images; a URL seen once is not repeated. Its `web_fetch` asks the reader
 * (`https://reader.infoquest.bytepluses.com`) `{url, format: "HTML"}` and converts the page's main part to Markdown.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ImageResult, SearchResult, Service } from "../../services/WebSearch.js"
import { SearchError } from "../../services/WebSearch.js"
import { bearerJson, call, type Connection, decodeJson, image, masked, result, Str } from "../SearchProviders.js"
import { article, type Reader } from "./ProviderFetch.js"

/** InfoQuest's search address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://search.infoquest.bytepluses.com"
/** InfoQuest's reader address, unless a `web_fetch` entry's `base_url` says otherwise. */
export const READER_BASE_URL = "https://reader.infoquest.bytepluses.com"
/** The environment variable DeerFlow reads the key from. */
export const KEY_ENV = "INFOQUEST_API_KEY"

/** DeerFlow's InfoQuest keys. */
export interface Options {
  /** Days back the web search looks (`search_time_range`); unset: any time. */
  readonly searchTimeRange?: number | undefined
  /** Days back the image search looks (`image_search_time_range`, 1–365); unset: any time. */
  readonly imageTimeRange?: number | undefined
  /** `image_size`: `l`, `m` or `i` (DeerFlow's default `i`). */
  readonly imageSize?: "l" | "m" | "i" | undefined
}

const Content = Schema.Struct({
  content: Schema.Struct({
    results: Schema.Struct({
      organic: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ title: Str, desc: Str, url: Str })))),
      top_stories: Schema.optional(Schema.NullOr(Schema.Struct({
        items: Schema.optionalWith(Schema.Array(Schema.Struct({ title: Str, url: Str })), { default: () => [] })
      }))),
      images_results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ original: Str, title: Str }))))
    })
  })
})

const Answer = Schema.Struct({
  search_result: Schema.optional(Schema.Struct({ results: Schema.Array(Content) })),
  content: Schema.optional(Schema.Unknown)
})

/** InfoQuest as a search provider (web and images). */
export const make = (connection: Connection, options: Options = {}): Service => {
  const base = connection.baseUrl ?? DEFAULT_BASE_URL
  const post = (what: "Web-Search" | "Image Search", body: Record<string, unknown>) =>
    call("InfoQuest", connection, {
      url: base,
      method: "POST",
      headers: bearerJson(connection),
      body: JSON.stringify({ format: "JSON", ...body })
    }, (status) => `InfoQuest ${what} - Search tool execution failed | HTTP ${status}`).pipe(
      Effect.flatMap((response) => decodeJson("InfoQuest", Answer, response.body)),
      Effect.flatMap((answer) =>
        answer.search_result !== undefined
          ? Effect.succeed(answer.search_result.results)
          : Effect.fail(
            new SearchError({
              provider: "InfoQuest",
              reason: "invalid_response",
              message: `${what === "Web-Search" ? "web" : "image"} search API return wrong format`
            })
          )
      )
    )
  const unique = <A extends { readonly url: string }>(items: ReadonlyArray<A | undefined>, max: number) => {
    const seen = new Set<string>()
    const out: Array<A> = []
    for (const item of items) {
      if (item === undefined || seen.has(item.url)) continue
      seen.add(item.url)
      out.push(item)
      if (out.length >= max) break
    }
    return out
  }
  return {
    name: "InfoQuest",
    search: (query, max) =>
      Effect.map(
        post("Web-Search", {
          query,
          ...(options.searchTimeRange !== undefined ? { time_range: options.searchTimeRange } : {})
        }),
        (contents) =>
          masked(
            connection,
            unique<SearchResult>(
              contents.flatMap(({ content: { results } }) => [
                ...(results.organic ?? []).map((r) => result(r.title, r.url, r.desc)),
                // a news item without a title is left out, as DeerFlow does
                ...(results.top_stories?.items ?? []).map((r) => r.title ? result(r.title, r.url, "") : undefined)
              ]),
              max
            )
          )
      ),
    images: (query, max) =>
      Effect.map(
        post("Image Search", {
          query,
          search_type: "Images",
          ...(options.imageTimeRange !== undefined ? { time_range: options.imageTimeRange } : {}),
          image_size: options.imageSize ?? "i"
        }),
        (contents) =>
          masked(
            connection,
            unique(
              contents.flatMap(({ content: { results } }) =>
                (results.images_results ?? []).map((r): (ImageResult & { url: string }) | undefined => {
                  const entry = image(r.title, r.original)
                  return entry === undefined ? undefined : { ...entry, url: entry.image_url }
                })
              ),
              max
            ).map(({ url: _url, ...entry }) => entry)
          )
      )
  }
}

/** DeerFlow's InfoQuest reader keys (seconds; unset: InfoQuest's own). */
export interface ReaderOptions {
  readonly fetchTime?: number | undefined
  readonly timeout?: number | undefined
  readonly navigationTimeout?: number | undefined
}

const ReaderAnswer = Schema.Struct({ reader_result: Str, content: Str })

const failure = (message: string) => new SearchError({ provider: "InfoQuest", reason: "invalid_response", message })

/** InfoQuest's reader as the reader of `web_fetch`. */
export const reader = (connection: Connection, options: ReaderOptions = {}): Reader => {
  const base = connection.baseUrl ?? READER_BASE_URL
  return {
    name: "InfoQuest",
    read: (url) =>
      call("InfoQuest", connection, {
        url: base,
        method: "POST",
        headers: bearerJson(connection),
        body: JSON.stringify({
          url,
          format: "HTML",
          ...(options.fetchTime !== undefined ? { fetch_time: options.fetchTime } : {}),
          ...(options.timeout !== undefined ? { timeout: options.timeout } : {}),
          ...(options.navigationTimeout !== undefined ? { navi_timeout: options.navigationTimeout } : {})
        })
      }, (status) => `fetch API returned status ${status}`).pipe(
        Effect.flatMap((response) => {
          const body = new TextDecoder().decode(response.body)
          if (body.trim() === "") return Effect.fail(failure("no result found"))
          // a JSON answer carries the page in reader_result (else content); anything else is the page itself
          const html = Effect.orElseSucceed(
            Effect.map(
              decodeJson("InfoQuest", ReaderAnswer, response.body),
              (answer) => answer.reader_result ?? answer.content ?? body
            ),
            () => body
          )
          return Effect.flatMap(html, (page) => article("InfoQuest", page))
        }),
        Effect.map((page) => masked(connection, [page])[0]!)
      )
  }
}
