/**
 * A self-hosted Crawl4AI server (`http://localhost:11235` unless `base_url`), as DeerFlow's `community/crawl4ai`
 * fetcher asks it: `POST {base}/md` with `{url, f: <filter>}` (`fit`, `raw`, `bm25`, `llm`; default `fit`) and, with
 * a `token`, `Authorization: Bearer <token>`; its `{success, markdown}` answer is the page, as it is (its Markdown
 * carries its own headings: no `# <title>` is added). It runs inside the deployment's network, so a URL's host is
 * resolved and checked first (`resolvesHost`).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { SearchError } from "../../services/WebSearch.js"
import * as Json from "../../state/Json.js"
import { bearerJson, call, clean, type Connection, join, masked, Str } from "../SearchProviders.js"
import type { Reader } from "./ProviderFetch.js"

/** Crawl4AI's address, unless `base_url` says otherwise (DeerFlow's default). */
export const DEFAULT_BASE_URL = "http://localhost:11235"

/** Crawl4AI's Markdown filters. */
export const FILTERS = ["fit", "raw", "bm25", "llm"] as const

/** A Crawl4AI Markdown filter. */
export type Filter = typeof FILTERS[number]

const Answer = Schema.Struct({ success: Schema.optional(Schema.NullOr(Schema.Boolean)), markdown: Str })

const failure = (message: string) => new SearchError({ provider: "Crawl4AI", reason: "invalid_response", message })

const parsed = (body: Uint8Array): Either.Either<unknown, undefined> => {
  try {
    return Either.right(Json.parse(new TextDecoder().decode(body)))
  } catch {
    return Either.left(undefined)
  }
}

/** Crawl4AI as the reader of `web_fetch`. */
export const reader = (connection: Connection, options: { readonly filter?: Filter | undefined } = {}): Reader => ({
  name: "Crawl4AI",
  resolvesHost: true,
  read: (url) =>
    call("Crawl4AI", connection, {
      url: join(connection.baseUrl ?? DEFAULT_BASE_URL, "/md"),
      method: "POST",
      headers: bearerJson(connection),
      body: JSON.stringify({ url, f: options.filter ?? "fit" })
    }, (status) => `Crawl4AI HTTP ${status}`, "token").pipe(
      Effect.flatMap((response) => {
        const raw = parsed(response.body)
        if (Either.isLeft(raw)) {
          const type = clean(response.headers["content-type"] ?? "unknown", 100)
          return Effect.fail(failure(`Crawl4AI returned a non-JSON 200 response (content-type: ${type})`))
        }
        const answer = Schema.decodeUnknownEither(Answer, { onExcessProperty: "ignore" })(raw.right)
        if (Either.isLeft(answer)) return Effect.fail(failure("Crawl4AI answered JSON of an unexpected shape"))
        if (answer.right.success !== true) {
          return Effect.fail(failure(`Crawl4AI reported failure for ${clean(url, 300)}`))
        }
        const markdown = answer.right.markdown ?? ""
        if (markdown.trim() === "") return Effect.fail(failure("Crawl4AI returned empty markdown"))
        return Effect.succeed(masked(connection, [{ text: markdown }])[0]!)
      })
    )
})
