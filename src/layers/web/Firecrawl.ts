/**
 * Firecrawl (`https://api.firecrawl.dev`) and fastCRW (its API, `https://fastcrw.com/api` or self-hosted), as
 * DeerFlow's `community/firecrawl` and `community/fastcrw` searches ask them through the Firecrawl SDK: `POST
 * /v2/search` with `{query, limit}` and `Authorization: Bearer <key>`; the answer's `data.web` are the results.
 * Their `web_fetch` asks `POST /v2/scrape` with `{url, formats: ["markdown"]}`. As the Firecrawl SDKs do, an answer
 * without `success: true` is a failure (its `error` is not repeated), and a result given as a bare URL is read as
 * `{url}`. fastCRW, and Firecrawl at a `base_url` (self-hosted), run inside the deployment's network, so a URL's host
 * is resolved and checked before it is sent (`resolvesHost`; DeerFlow does so for fastCRW).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { Service } from "../../services/WebSearch.js"
import { SearchError } from "../../services/WebSearch.js"
import {
  bearerJson,
  call,
  clean,
  type Connection,
  decodeJson,
  defined,
  join,
  masked,
  result,
  Str
} from "../SearchProviders.js"
import type { Reader } from "./ProviderFetch.js"

/** Firecrawl's address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://api.firecrawl.dev"
/** The environment variable the Firecrawl SDK reads the key from. */
export const KEY_ENV = "FIRECRAWL_API_KEY"
/** fastCRW's managed service, unless `base_url` or `CRW_API_URL` says otherwise (DeerFlow's default). */
export const FASTCRW_BASE_URL = "https://fastcrw.com/api"
/** The environment variables DeerFlow's fastCRW tool reads its key and its address from. */
export const FASTCRW_KEY_ENV = "CRW_API_KEY"
export const FASTCRW_URL_ENV = "CRW_API_URL"

const WebResult = Schema.Struct({ title: Str, url: Str, description: Str })

const Answer = Schema.Struct({
  success: Schema.optional(Schema.NullOr(Schema.Boolean)),
  data: Schema.optional(Schema.NullOr(Schema.Struct({
    web: Schema.optional(Schema.NullOr(Schema.Array(Schema.Union(Schema.String, WebResult))))
  })))
})

/** The SDKs' check: an answer is only good with `success: true` (Firecrawl's SDK: "Request failed (200)..."). */
const succeeded = <A extends { readonly success?: boolean | null | undefined }>(name: string, action: string) =>
(answer: A) =>
  answer.success === true
    ? Effect.succeed(answer)
    : Effect.fail(
      new SearchError({
        provider: name,
        reason: "invalid_response",
        message: `${name} could not ${action} (success: false)`
      })
    )

const make = (name: string, defaultBase: string) => (connection: Connection): Service => {
  const base = connection.baseUrl ?? defaultBase
  return {
    name,
    search: (query, max) =>
      call(name, connection, {
        url: join(base, "/v2/search"),
        method: "POST",
        headers: bearerJson(connection),
        body: JSON.stringify({ query, limit: max })
      }, (status) => `${name} API error: HTTP ${status}`).pipe(
        Effect.flatMap((response) => decodeJson(name, Answer, response.body)),
        Effect.flatMap(succeeded(name, "search")),
        Effect.map((answer) =>
          masked(
            connection,
            defined(
              (answer.data?.web ?? []).map((r) =>
                typeof r === "string" ? result(undefined, r, undefined) : result(r.title, r.url, r.description)
              ),
              max
            )
          )
        )
      )
  }
}

/** Firecrawl as a search provider (web only). */
export const firecrawl = make("Firecrawl", DEFAULT_BASE_URL)

/** fastCRW (Firecrawl's API) as a search provider (web only). */
export const fastcrw = make("fastCRW", FASTCRW_BASE_URL)

const Scrape = Schema.Struct({
  success: Schema.optional(Schema.NullOr(Schema.Boolean)),
  data: Schema.optional(Schema.NullOr(Schema.Struct({
    markdown: Str,
    metadata: Schema.optional(Schema.NullOr(Schema.Struct({ title: Str })))
  })))
})

const makeReader = (name: string, defaultBase: string, selfHosted: (connection: Connection) => boolean) =>
(connection: Connection): Reader => {
  const base = connection.baseUrl ?? defaultBase
  return {
    name,
    resolvesHost: selfHosted(connection),
    read: (url) =>
      call(name, connection, {
        url: join(base, "/v2/scrape"),
        method: "POST",
        headers: bearerJson(connection),
        body: JSON.stringify({ url, formats: ["markdown"] })
      }, (status) => `${name} API error: HTTP ${status}`).pipe(
        Effect.flatMap((response) => decodeJson(name, Scrape, response.body)),
        Effect.flatMap(succeeded(name, "scrape")),
        Effect.flatMap((answer) => {
          const markdown = answer.data?.markdown ?? ""
          if (markdown === "") {
            const message = "No content found"
            return Effect.fail(new SearchError({ provider: name, reason: "invalid_response", message }))
          }
          const title = clean(answer.data?.metadata?.title || "Untitled", 300)
          return Effect.succeed(masked(connection, [{ title, text: markdown }])[0]!)
        })
      )
  }
}

/** Firecrawl as the reader of `web_fetch`. */
export const firecrawlReader = makeReader("Firecrawl", DEFAULT_BASE_URL, (connection) => connection.baseUrl != null)

/** fastCRW as the reader of `web_fetch`. */
export const fastcrwReader = makeReader("fastCRW", FASTCRW_BASE_URL, () => true)
