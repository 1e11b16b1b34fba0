/**
 * GroundRoute (`https://api.groundroute.ai`), a meta search in front of several engines, as DeerFlow's
 * `community/groundroute` search asks it: `POST /v1/search` with `{query, max_results}` and `Authorization: Bearer
 * <key>`; each result says which engine answered (`source_engine`). Its `web_fetch` asks the same endpoint
 * `{query: url, mode: "page", max_results: 1}` and reads the first result's `content` (else its `snippet`).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { SearchResult, Service } from "../../services/WebSearch.js"
import { SearchError } from "../../services/WebSearch.js"
import type { Reader } from "./ProviderFetch.js"
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

/** GroundRoute's address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://api.groundroute.ai"
/** The environment variable DeerFlow reads the key from. */
export const KEY_ENV = "GROUNDROUTE_API_KEY"

const Answer = Schema.Struct({
  results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    title: Str,
    url: Str,
    snippet: Str,
    content: Str,
    source_engine: Str
  }))))
})

const post = (connection: Connection, body: Record<string, unknown>) =>
  call("GroundRoute", connection, {
    url: join(connection.baseUrl ?? DEFAULT_BASE_URL, "/v1/search"),
    method: "POST",
    headers: bearerJson(connection),
    body: JSON.stringify(body)
  }, (status) => `GroundRoute API error: HTTP ${status}`).pipe(
    Effect.flatMap((response) => decodeJson("GroundRoute", Answer, response.body))
  )

/** GroundRoute as a search provider (web only). */
export const make = (connection: Connection): Service => {
  return {
    name: "GroundRoute",
    search: (query, max) =>
      post(connection, { query, max_results: max }).pipe(
        Effect.map((answer) =>
          masked(
            connection,
            defined(
              (answer.results ?? []).map((r): SearchResult | undefined => {
                const entry = result(r.title, r.url, r.snippet)
                return entry === undefined ? undefined : { ...entry, source_engine: clean(r.source_engine ?? "", 100) }
              }),
              max
            )
          )
        )
      )
  }
}

/** GroundRoute as the reader of `web_fetch`. */
export const reader = (connection: Connection): Reader => ({
  name: "GroundRoute",
  read: (url) =>
    Effect.flatMap(post(connection, { query: url, mode: "page", max_results: 1 }), (answer) => {
      const first = answer.results?.[0]
      if (first === undefined) {
        return Effect.fail(
          new SearchError({ provider: "GroundRoute", reason: "invalid_response", message: "No results found" })
        )
      }
      const text = first.content || first.snippet || ""
      return Effect.succeed(masked(connection, [{ title: clean(first.title ?? "", 300), text }])[0]!)
    })
})
