/**
 * Exa (`https://api.exa.ai`), as DeerFlow's `community/exa` search asks it through the `exa_py` SDK: `POST /search`
 * with `{query, type, numResults, contents: {highlights: {maxCharacters}}}` and the key in `x-api-key`; a result's
 * snippet is its highlights, one after another. Its `web_fetch` asks `POST /contents` with `{urls: [url], text:
 * {maxCharacters}}`.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type { Service } from "../../services/WebSearch.js"
import { SearchError } from "../../services/WebSearch.js"
import { call, clean, type Connection, decodeJson, defined, join, masked, result, Str } from "../SearchProviders.js"
import type { Reader } from "./ProviderFetch.js"

/** Exa's address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://api.exa.ai"
/** The environment variable the Exa SDK reads the key from. */
export const KEY_ENV = "EXA_API_KEY"

/** DeerFlow's Exa keys: `search_type` (default `auto`) and `contents_max_characters` (default 1000). */
export interface Options {
  readonly searchType?: string | undefined
  readonly contentsMaxCharacters?: number | undefined
}

const Answer = Schema.Struct({
  results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    title: Str,
    url: Str,
    highlights: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
  }))))
})

/** A JSON `POST` to Exa's `path`, the key in `x-api-key`, its failure worded as DeerFlow's `exa_py` words it. */
const post = <A, I>(connection: Connection, path: string, body: unknown, schema: Schema.Schema<A, I>) =>
  call("Exa", connection, {
    url: join(connection.baseUrl ?? DEFAULT_BASE_URL, path),
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(connection.apiKey !== undefined ? { "x-api-key": Redacted.value(connection.apiKey) } : {})
    },
    body: JSON.stringify(body)
  }, (status) => `Exa request failed with status code ${status}`).pipe(
    Effect.flatMap((response) => decodeJson("Exa", schema, response.body))
  )

/** Exa as a search provider (web only). */
export const make = (connection: Connection, options: Options = {}): Service => ({
  name: "Exa",
  search: (query, max) =>
    post(connection, "/search", {
      query,
      type: options.searchType ?? "auto",
      numResults: max,
      contents: { highlights: { maxCharacters: options.contentsMaxCharacters ?? 1000 } }
    }, Answer).pipe(
      Effect.map((answer) =>
        masked(
          connection,
          defined((answer.results ?? []).map((r) => result(r.title, r.url, (r.highlights ?? []).join("\n"))), max)
        )
      )
    )
})

const Contents = Schema.Struct({
  results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ title: Str, text: Str }))))
})

/** Exa as the reader of `web_fetch`. */
export const reader = (connection: Connection): Reader => ({
  name: "Exa",
  read: (url, maxChars) =>
    post(connection, "/contents", { urls: [url], text: { maxCharacters: maxChars } }, Contents).pipe(
      Effect.flatMap((answer) => {
        const first = answer.results?.[0]
        if (first === undefined) {
          const message = "No results found"
          return Effect.fail(new SearchError({ provider: "Exa", reason: "invalid_response", message }))
        }
        const [page] = masked(connection, [{ title: clean(first.title || "Untitled", 300), text: first.text ?? "" }])
        return Effect.succeed(page!)
      })
    )
})
