/**
 * GroundRoute (`https://api.groundroute.ai`), a meta search in front of several engines, as DeerFlow's
 * `community/groundroute` search asks it: `POST /v1/search` with `{query, max_results}` and `Authorization: Bearer
 * <key>`; each result says which engine answered (`source_engine`).
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type { SearchResult, Service } from "../../services/WebSearch.js"
import { call, clean, type Connection, decodeJson, defined, join, masked, result, Str } from "../SearchProviders.js"

/** GroundRoute's address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://api.groundroute.ai"
/** The environment variable DeerFlow reads the key from. */
export const KEY_ENV = "GROUNDROUTE_API_KEY"

const Answer = Schema.Struct({
  results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    title: Str,
    url: Str,
    snippet: Str,
    source_engine: Str
  }))))
})

/** GroundRoute as a search provider (web only). */
export const make = (connection: Connection): Service => {
  const base = connection.baseUrl ?? DEFAULT_BASE_URL
  return {
    name: "GroundRoute",
    search: (query, max) =>
      call("GroundRoute", connection, {
        url: join(base, "/v1/search"),
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(connection.apiKey !== undefined ? { authorization: `Bearer ${Redacted.value(connection.apiKey)}` } : {})
        },
        body: JSON.stringify({ query, max_results: max })
      }, (status) => `GroundRoute API error: HTTP ${status}`).pipe(
        Effect.flatMap((response) => decodeJson("GroundRoute", Answer, response.body)),
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
