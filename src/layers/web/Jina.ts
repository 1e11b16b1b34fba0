/**
 * Jina AI's reader (`https://r.jina.ai/`), as DeerFlow's `community/jina_ai` fetcher asks it: `POST` with `{url}`,
 * `X-Return-Format: html`, `X-Timeout: <timeout seconds>` and, with a key, `Authorization: Bearer <key>` (it works
 * without one, at a lower rate limit). The HTML it answers goes through the readability step: `# <title>` then the
 * page's main part as Markdown.
 */
import * as Effect from "effect/Effect"
import { SearchError } from "../../services/WebSearch.js"
import * as DocumentConverter from "../DocumentConverter.js"
import { bearerJson, call, type Connection, masked } from "../SearchProviders.js"
import { article, type Reader } from "./ProviderFetch.js"

/** Jina AI's reader, unless `base_url` says otherwise. */
export const DEFAULT_BASE_URL = "https://r.jina.ai/"
/** The environment variable DeerFlow's Jina client reads the key from. */
export const KEY_ENV = "JINA_API_KEY"

const NAME = "Jina AI"

/** Jina AI as the reader of `web_fetch`; the page may take the connection's whole deadline to load (`X-Timeout`). */
export const reader = (connection: Connection): Reader => ({
  name: NAME,
  read: (url) =>
    call(NAME, connection, {
      url: connection.baseUrl ?? DEFAULT_BASE_URL,
      method: "POST",
      headers: {
        ...bearerJson(connection),
        "x-return-format": "html",
        "x-timeout": String(Math.max(1, Math.round(connection.timeoutMs / 1000)))
      },
      body: JSON.stringify({ url })
    }, (status) => `Jina API returned status ${status}`).pipe(
      Effect.flatMap((response) => {
        const html = DocumentConverter.decodeHtml(response.body)
        if (html.trim() === "") {
          const message = "Jina API returned empty response"
          return Effect.fail(new SearchError({ provider: NAME, reason: "invalid_response", message }))
        }
        return article(NAME, html)
      }),
      Effect.map((page) => masked(connection, [page])[0]!)
    )
})
