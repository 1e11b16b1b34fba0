/**
 * Tavily's extract API as the reader of `web_fetch`, as DeerFlow's `community/tavily` fetcher asks it through
 * `tavily-python`: `POST {base}/extract` with `{urls: [url], timeout}` and `Authorization: Bearer <key>`. The first
 * of its `failed_results` is the error the model reads; else the first of its `results`, `# <title>` then its
 * `raw_content`. (Tavily's search is `SearchProviders.tavily`.)
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { SearchError } from "../../services/WebSearch.js"
import { bearerJson, call, clean, type Connection, decodeJson, join, masked, Str } from "../SearchProviders.js"
import type { Reader } from "./ProviderFetch.js"

/** Tavily's address, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://api.tavily.com"

const Extract = Schema.Struct({
  results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ title: Str, raw_content: Str })))),
  failed_results: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({ error: Str }))))
})

const failure = (message: string) => new SearchError({ provider: "Tavily", reason: "invalid_response", message })

/** Tavily as the reader of `web_fetch`; its `timeout` (the seconds Tavily may take, 1-60) is the connection's. */
export const reader = (connection: Connection): Reader => ({
  name: "Tavily",
  read: (url) =>
    call("Tavily", connection, {
      url: join(connection.baseUrl ?? DEFAULT_BASE_URL, "/extract"),
      method: "POST",
      headers: bearerJson(connection),
      body: JSON.stringify({ urls: [url], timeout: Math.min(60, Math.max(1, Math.round(connection.timeoutMs / 1000))) })
    }).pipe(
      Effect.flatMap((response) => decodeJson("Tavily", Extract, response.body)),
      Effect.flatMap((answer) => {
        const failed = answer.failed_results?.[0]
        if (failed !== undefined) {
          const [said] = masked(connection, [clean(failed.error || "the page could not be extracted", 500)])
          return Effect.fail(failure(said!))
        }
        const first = answer.results?.[0]
        if (first === undefined) return Effect.fail(failure("No results found"))
        const page = { title: clean(first.title || "Untitled", 300), text: first.raw_content ?? "" }
        return Effect.succeed(masked(connection, [page])[0]!)
      })
    )
})
