/**
 * Browserless (headless Chrome, self-hosted: `http://localhost:3032` unless `base_url`), as DeerFlow's
 * `community/browserless` fetcher asks it: `POST {base}/content` with `{url, token?, waitForEvent?,
 * waitForTimeout?, waitForSelector?: {selector, timeout: 5000}}` and `Cache-Control: no-cache`; the rendered HTML goes
 * through the readability step, and a page that itself answered an error (`X-Response-Code` 4xx/5xx, which
 * Browserless answers with 200) is said after the text. It runs inside the deployment's network, so a URL's host
 * is resolved and checked first (`resolvesHost`).
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { SearchError } from "../../services/WebSearch.js"
import * as DocumentConverter from "../DocumentConverter.js"
import { call, clean, type Connection, join, masked } from "../SearchProviders.js"
import { article, type Reader } from "./ProviderFetch.js"

/** Browserless's address, unless `base_url` says otherwise (DeerFlow's default). */
export const DEFAULT_BASE_URL = "http://localhost:3032"
/** The environment variable DeerFlow's Browserless tool reads the token from (else the entry's `token`). */
export const KEY_ENV = "BROWSERLESS_TOKEN"

/** DeerFlow's Browserless keys: `wait_for_event`, `wait_for_timeout_ms`, `wait_for_selector`. */
export interface Options {
  readonly waitForEvent?: string | undefined
  readonly waitForTimeoutMs?: number | undefined
  readonly waitForSelector?: string | undefined
}

/** DeerFlow's words for a page that answered an error though Browserless rendered it, or "". */
const targetWarning = (headers: Readonly<Record<string, string>>): string => {
  const code = clean(headers["x-response-code"] ?? "", 10)
  if (code === "" || code.startsWith("2") || code.startsWith("3")) return ""
  const detail = `${code} ${clean(headers["x-response-status"] ?? "", 100)}`.trim()
  return ` (warning: target page responded ${detail})`
}

/** Browserless as the reader of `web_fetch`. */
export const reader = (connection: Connection, options: Options = {}): Reader => ({
  name: "Browserless",
  resolvesHost: true,
  read: (url) =>
    call("Browserless", connection, {
      url: join(connection.baseUrl ?? DEFAULT_BASE_URL, "/content"),
      method: "POST",
      headers: { "content-type": "application/json", "cache-control": "no-cache" },
      body: JSON.stringify({
        url,
        ...(connection.apiKey !== undefined ? { token: Redacted.value(connection.apiKey) } : {}),
        ...(options.waitForEvent ? { waitForEvent: options.waitForEvent } : {}),
        ...(options.waitForTimeoutMs ? { waitForTimeout: options.waitForTimeoutMs } : {}),
        ...(options.waitForSelector ? { waitForSelector: { selector: options.waitForSelector, timeout: 5000 } } : {})
      })
    }, (status) => `Browserless HTTP ${status}`, "token").pipe(
      Effect.flatMap((response) => {
        const html = DocumentConverter.decodeHtml(response.body)
        if (html.trim() === "") {
          const message = "Browserless returned empty response"
          return Effect.fail(new SearchError({ provider: "Browserless", reason: "invalid_response", message }))
        }
        return Effect.map(article("Browserless", html), (page) => ({ ...page, note: targetWarning(response.headers) }))
      }),
      Effect.map((page) => masked(connection, [page])[0]!)
    )
})
