/**
 * Search providers behind the `WebSearch` port: Tavily (API key), SearXNG (self-hosted, JSON API) and
 * DuckDuckGo (no key: its HTML endpoint for web results, its `i.js` endpoint for images). Endpoints are the
 * operator's choice (`base_url`), so the address policy of `web_fetch` does not apply to them; deadlines and
 * size limits do. Everything a provider answers is decoded with Schema, and text is cleaned of control
 * characters and clipped before the model reads it.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type { ImageResult, SearchResult, Service } from "../services/WebSearch.js"
import { SearchError } from "../services/WebSearch.js"
import * as SafeHttp from "./SafeHttp.js"
import * as Json from "../state/Json.js"
import * as Redact from "../state/Redact.js"
import { clipChars, headChars } from "../state/Chars.js"

/** How a provider is reached. */
export interface Connection {
  readonly baseUrl?: string | undefined
  readonly apiKey?: Redacted.Redacted<string> | undefined
  readonly timeoutMs: number
  /** DuckDuckGo's region (`kl`), such as `us-en` or `wt-wt`; unset: DuckDuckGo's default. */
  readonly region?: string | undefined
  /** DuckDuckGo's safe search (`kp`); unset: DuckDuckGo's default (moderate). */
  readonly safesearch?: "on" | "moderate" | "off" | undefined
}

/** Bytes of a provider's answer read at most. */
export const MAX_BYTES = 4 * 1024 * 1024
const MAX_SNIPPET = 1000
const MAX_TITLE = 300

/** Text from a provider, safe to show: control characters removed, whitespace folded, clipped. */
export const clean = (text: string, max: number): string => {
  // eslint-disable-next-line no-control-regex
  const folded = text.replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069]+/g, " ")
    .replace(/\s+/g, " ").trim()
  return clipChars(folded, max)
}

/** `value` as an http(s) URL, or undefined. */
export const httpUrl = (value: string | undefined): string | undefined => {
  if (value === undefined) return undefined
  try {
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : undefined
  } catch {
    return undefined
  }
}

/** `base` and `path`, one slash between. */
export const join = (base: string, path: string): string => `${base.replace(/\/+$/, "")}${path}`

/** A request to a provider: what `call` takes (its deadline, size cap and address policy are the provider's). */
export type Call = Omit<SafeHttp.RequestSpec, "timeoutMs" | "maxBytes" | "maxRedirects" | "policy">

/** The headers of a JSON request whose key goes as `Authorization: Bearer <key>` (when there is a key). */
export const bearerJson = (connection: Connection): Record<string, string> => ({
  "content-type": "application/json",
  ...(connection.apiKey !== undefined ? { authorization: `Bearer ${Redacted.value(connection.apiKey)}` } : {})
})

/**
 * A request to a provider, a `SearchError` unless it answers 2xx. `statusMessage` words a refusal as the provider's
 * DeerFlow tool does (`Serper API error: HTTP 500`); by default, Antler's words. Advice follows on a 429, and
 * on a 401/403 it names the entry's `keyName` (`api_key`; Browserless and Crawl4AI: `token`).
 */
export const call = (
  provider: string,
  connection: Connection,
  spec: Call,
  statusMessage?: (status: number) => string,
  keyName = "api_key"
) =>
  SafeHttp.request({
    ...spec,
    timeoutMs: connection.timeoutMs,
    maxBytes: MAX_BYTES,
    maxRedirects: 3,
    // (the provider's own address is the operator's, private or not; another host it redirects to must be public)
    policy: SafeHttp.anyAddress,
    redirectPolicy: SafeHttp.publicOnly()
  }).pipe(
    Effect.mapError((error) =>
      new SearchError({
        provider,
        reason: "unreachable",
        message: `${provider} could not be reached at ${new URL(spec.url).origin}: ${error.message}`
      })
    ),
    Effect.flatMap((response) => {
      if (response.status >= 200 && response.status < 300) return Effect.succeed(response)
      const reason = response.status === 401 || response.status === 403
        ? "auth" as const
        : response.status === 429
        ? "rate_limited" as const
        : "http" as const
      const advice = reason === "auth"
        ? ` (check its ${keyName})`
        : reason === "rate_limited"
        ? " (too many requests: wait a moment)"
        : ""
      const message = statusMessage !== undefined
        ? `${statusMessage(response.status)}${advice}`
        : `${provider} answered HTTP ${response.status}${advice}`
      return Effect.fail(new SearchError({ provider, reason, message }))
    })
  )

/** A provider's JSON answer decoded with `schema` (excess keys ignored), or an `invalid_response` error. */
export const decodeJson = <A, I>(provider: string, schema: Schema.Schema<A, I>, body: Uint8Array) => {
  let raw: unknown
  try {
    raw = Json.parse(new TextDecoder().decode(body))
  } catch {
    return Effect.fail(
      new SearchError({ provider, reason: "invalid_response", message: `${provider} did not answer JSON` })
    )
  }
  return Either.match(Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore" })(raw), {
    onLeft: () =>
      Effect.fail(
        new SearchError({
          provider,
          reason: "invalid_response",
          message: `${provider} answered JSON of an unexpected shape`
        })
      ),
    onRight: Effect.succeed
  })
}

/** A text field as a provider may give it. */
export type Text = string | null | undefined

/** One web result, when its URL is http(s); text cleaned and clipped. */
export const result = (title: Text, url: Text, snippet: Text): SearchResult | undefined => {
  const href = httpUrl(url ?? undefined)
  if (href === undefined) return undefined
  return { title: clean(title ?? href, MAX_TITLE), url: href, snippet: clean(snippet ?? "", MAX_SNIPPET) }
}

/** One image result, when its image URL is http(s). */
export const image = (title: Text, src: Text, thumb?: Text, page?: Text): ImageResult | undefined => {
  const imageUrl = httpUrl(src ?? undefined)
  if (imageUrl === undefined) return undefined
  return {
    title: clean(title ?? "", MAX_TITLE),
    image_url: imageUrl,
    thumbnail_url: httpUrl(thumb ?? undefined),
    source_url: httpUrl(page ?? undefined)
  }
}

/** The results that are there, `max` at most. */
export const defined = <A>(items: ReadonlyArray<A | undefined>, max: number): ReadonlyArray<A> =>
  items.filter((item): item is A => item !== undefined).slice(0, max)

/** An optional text field of a provider's answer (null allowed). */
export const Str = Schema.optional(Schema.NullOr(Schema.String))

// ---------------------------------------------------------------------------------------------------------
// Tavily

const TavilyAnswer = Schema.Struct({
  results: Schema.optionalWith(
    Schema.Array(Schema.Struct({ title: Str, url: Str, content: Str })),
    { default: () => [] }
  ),
  images: Schema.optionalWith(
    Schema.Array(Schema.Union(Schema.String, Schema.Struct({ url: Str, description: Str }))),
    { default: () => [] }
  )
})

/** Tavily's search API (`POST {base}/search`, `Authorization: Bearer <key>`; default base `https://api.tavily.com`). */
export const tavily = (connection: Connection): Service => {
  const base = connection.baseUrl ?? "https://api.tavily.com"
  const post = (query: string, maxResults: number, images: boolean) =>
    Effect.flatMap(
      call("Tavily", connection, {
        url: join(base, "/search"),
        method: "POST",
        headers: bearerJson(connection),
        body: JSON.stringify({
          query,
          max_results: maxResults,
          ...(images ? { include_images: true, include_image_descriptions: true } : {})
        })
      }),
      (response) => decodeJson("Tavily", TavilyAnswer, response.body)
    )
  return {
    name: "Tavily",
    search: (query, max) =>
      Effect.map(post(query, max, false), (answer) =>
        defined(answer.results.map((r) => result(r.title, r.url, r.content)), max)),
    images: (query, max) =>
      Effect.map(post(query, max, true), (answer) =>
        defined(
          answer.images.map((entry) =>
            typeof entry === "string" ? image(undefined, entry) : image(entry.description, entry.url)
          ),
          max
        ))
  }
}

// ---------------------------------------------------------------------------------------------------------
// SearXNG

const SearxAnswer = Schema.Struct({
  results: Schema.optionalWith(
    Schema.Array(Schema.Struct({ title: Str, url: Str, content: Str, img_src: Str, thumbnail_src: Str })),
    { default: () => [] }
  )
})

/** A SearXNG instance's JSON API (`GET {base}/search?format=json`; default base `http://localhost:8088`). */
export const searxng = (connection: Connection): Service => {
  const base = connection.baseUrl ?? "http://localhost:8088"
  const get = (query: string, categories: string | undefined) => {
    const params = new URLSearchParams({
      q: query,
      format: "json",
      ...(categories !== undefined ? { categories } : {})
    })
    const url = join(base, `/search?${params}`)
    return call("SearXNG", connection, { url, headers: { accept: "application/json" } }).pipe(
      Effect.catchTag("SearchError", (error) =>
        error.reason === "auth"
          ? Effect.fail(new SearchError({
            ...error,
            message: `${error.message}; a SearXNG instance answers 403 when its JSON format is off: add json to ` +
              "search.formats in its settings.yml"
          }))
          : Effect.fail(error)),
      Effect.flatMap((response) => decodeJson("SearXNG", SearxAnswer, response.body))
    )
  }
  return {
    name: "SearXNG",
    search: (query, max) =>
      Effect.map(get(query, undefined), (answer) =>
        defined(answer.results.map((r) => result(r.title, r.url, r.content)), max)),
    images: (query, max) =>
      Effect.map(get(query, "images"), (answer) =>
        defined(
          answer.results.map((r) =>
            image(r.title, r.img_src, r.thumbnail_src, r.url)
          ),
          max
        ))
  }
}

// ---------------------------------------------------------------------------------------------------------
// DuckDuckGo

const entities: Readonly<Record<string, string>> = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: " " }

/** HTML text with its tags removed and entities decoded (linear, no regular expression over the markup). */
export const htmlText = (html: string): string => {
  let out = ""
  let inTag = false
  for (const ch of html) {
    if (ch === "<") inTag = true
    else if (ch === ">") inTag = false
    else if (!inTag) out += ch
  }
  return out.replace(/&(#x[0-9a-f]{1,6}|#\d{1,7}|[a-z]{2,6});/gi, (match, name: string) => {
    if (name[0] === "#") {
      const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10)
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : match
    }
    return entities[name.toLowerCase()] ?? match
  })
}

const attribute = (tag: string, name: string): string | undefined => {
  const at = tag.toLowerCase().indexOf(` ${name}=`)
  if (at < 0) return undefined
  const start = at + name.length + 2
  const quote = tag[start]
  if (quote === "\"" || quote === "'") {
    const end = tag.indexOf(quote, start + 1)
    return end < 0 ? undefined : htmlText(tag.slice(start + 1, end))
  }
  const end = tag.slice(start).search(/[\s>]/)
  return htmlText(end < 0 ? tag.slice(start) : tag.slice(start, start + end))
}

/** The real target of a DuckDuckGo result link (`//duckduckgo.com/l/?uddg=<target>`), or the link itself. */
export const ddgTarget = (href: string): string | undefined => {
  try {
    const url = new URL(href, "https://duckduckgo.com")
    const target = url.searchParams.get("uddg")
    return httpUrl(target ?? url.href)
  } catch {
    return undefined
  }
}

/**
 * The results of a DuckDuckGo HTML page: each `a.result__a` (title and link) with the `result__snippet`
 * after it. Scanned with `indexOf`, so a hostile page cannot make it slow.
 */
export const parseDdgHtml = (html: string, max: number): ReadonlyArray<SearchResult> => {
  const out: Array<SearchResult> = []
  let at = 0
  while (out.length < max) {
    const start = html.indexOf("<a", at)
    if (start < 0) break
    const close = html.indexOf(">", start)
    if (close < 0) break
    const tag = html.slice(start, close + 1)
    at = close + 1
    const classes = attribute(tag, "class") ?? ""
    if (!classes.split(/\s+/).includes("result__a")) continue
    const end = html.indexOf("</a>", at)
    if (end < 0) break
    const title = htmlText(html.slice(at, end))
    at = end + 4
    const next = html.indexOf("result__a", at)
    const snippetAt = html.indexOf("result__snippet", at)
    let snippet = ""
    if (snippetAt >= 0 && (next < 0 || snippetAt < next)) {
      const tagStart = html.lastIndexOf("<", snippetAt)
      const name = /^<([a-z0-9]+)/i.exec(html.slice(tagStart, tagStart + 12))?.[1]?.toLowerCase() ?? "a"
      const open = html.indexOf(">", snippetAt)
      const stop = open < 0 ? -1 : html.toLowerCase().indexOf(`</${name}>`, open)
      if (open >= 0 && stop >= 0) snippet = htmlText(html.slice(open + 1, stop))
    }
    const href = attribute(tag, "href")
    const entry = result(title, href === undefined ? undefined : ddgTarget(href), snippet)
    if (entry !== undefined) out.push(entry)
  }
  return out
}

const DdgImages = Schema.Struct({
  results: Schema.optionalWith(
    Schema.Array(Schema.Struct({ title: Str, image: Str, thumbnail: Str, url: Str })),
    { default: () => [] }
  )
})

/** The `vqd` token DuckDuckGo's image endpoint needs, from its search page. */
export const ddgVqd = (page: string): string | undefined => /vqd=["']?([0-9-]{5,80})/.exec(page.slice(0, 500_000))?.[1]

/** DuckDuckGo's `kp` values (its URL parameters: 1 on, -1 moderate, -2 off). */
const SAFE_SEARCH = { on: "1", moderate: "-1", off: "-2" } as const

/**
 * DuckDuckGo (no key): web results from `POST {base}/html/` (default base `https://html.duckduckgo.com`),
 * images from `{imagesBase}/i.js` (default `https://duckduckgo.com`). Both take `base_url` in tests. A `region`
 * and `safesearch` (DeerFlow's keys) are sent as DuckDuckGo's `kl` and `kp` (`l` and `p` for images), the image
 * filters the model gives (size, type, layout) in its `f`.
 */
export const duckduckgo = (connection: Connection): Service => {
  const htmlBase = connection.baseUrl ?? "https://html.duckduckgo.com"
  const imagesBase = connection.baseUrl ?? "https://duckduckgo.com"
  return {
    name: "DuckDuckGo",
    search: (query, max) =>
      Effect.map(
        call("DuckDuckGo", connection, {
          url: join(htmlBase, "/html/"),
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            q: query,
            ...(connection.region !== undefined ? { kl: connection.region.toLowerCase() } : {}),
            ...(connection.safesearch !== undefined ? { kp: SAFE_SEARCH[connection.safesearch] } : {})
          }).toString()
        }),
        (response) => parseDdgHtml(new TextDecoder().decode(response.body), max)
      ),
    images: (query, max, filters = {}) =>
      Effect.gen(function*() {
        const page = yield* call("DuckDuckGo", connection, {
          url: join(imagesBase, `/?${new URLSearchParams({ q: query, iax: "images", ia: "images" })}`)
        })
        const vqd = ddgVqd(new TextDecoder().decode(page.body))
        if (vqd === undefined) {
          return yield* new SearchError({
            provider: "DuckDuckGo",
            reason: "invalid_response",
            message: "DuckDuckGo's image search did not give its search token (vqd); it may be limiting requests"
          })
        }
        const params = new URLSearchParams({
          l: connection.region?.toLowerCase() ?? "us-en",
          o: "json",
          q: query,
          vqd,
          // time, size, color, type, layout, license
          f: [
            "",
            filters.size !== undefined ? `size:${filters.size}` : "",
            "",
            filters.type_image !== undefined ? `type:${filters.type_image}` : "",
            filters.layout !== undefined ? `layout:${filters.layout}` : "",
            ""
          ].join(","),
          p: connection.safesearch === "off" ? "-1" : "1"
        })
        const answer = yield* Effect.flatMap(
          call("DuckDuckGo", connection, {
            url: join(imagesBase, `/i.js?${params}`),
            headers: { referer: `${imagesBase.replace(/\/+$/, "")}/`, accept: "application/json" }
          }),
          (response) => decodeJson("DuckDuckGo", DdgImages, response.body)
        )
        return defined(
          answer.results.map((r) =>
            image(r.title, r.image, r.thumbnail, r.url)
          ),
          max
        )
      })
  }
}

// ---------------------------------------------------------------------------------------------------------
// Shared by the keyed providers (layers/web/*)

/**
 * `items` with the provider's key replaced by `[redacted]` wherever an answer repeats it (a hostile or broken
 * provider may echo it back); keys under 8 characters are left alone, as everywhere else. A text `clean` cut (it ends
 * in "…") that ends in the key's first `Redact.MIN_HIDDEN_PREFIX` characters or more has them replaced too: the cut
 * fell inside the key, whose whole value is no longer there to be found.
 */
export const masked = <A>(connection: Connection, items: ReadonlyArray<A>): ReadonlyArray<A> => {
  const key = connection.apiKey === undefined ? "" : Redacted.value(connection.apiKey)
  if (key.length < 8) return items
  const text = JSON.stringify(items)
  const escaped = JSON.stringify(key).slice(1, -1)
  const whole = text.includes(escaped) ? JSON.parse(text.split(escaped).join("[redacted]")) as ReadonlyArray<A> : items
  return Json.mapStrings(whole, (text) => {
    if (!text.endsWith("…")) return text
    const body = text.slice(0, -1)
    for (let k = Math.min(key.length - 1, body.length); k >= Redact.MIN_HIDDEN_PREFIX; k--) {
      if (body.endsWith(key.slice(0, k))) return `${body.slice(0, body.length - k)}[redacted]…`
    }
    return text
  })
}

/** The text of a query as a provider takes it: trimmed, at most `max` characters (DeerFlow's `_clean_query`). */
export const clippedQuery = (query: string, max: number): string => headChars(query.trim(), max)

/**
 * `value` when it is an http(s) URL that does not name a private, loopback or link-local address nor `localhost`
 * (DeerFlow's `_safe_public_url` for image URLs, which a consumer may download); else undefined. Only the URL is
 * judged: `web_fetch` checks the address it really connects to.
 */
export const publicUrl = (value: Text): string | undefined => {
  const href = httpUrl(value ?? undefined)
  if (href === undefined) return undefined
  const checked = SafeHttp.urlProblem(href, SafeHttp.publicOnly())
  if (!(checked instanceof URL)) return undefined
  const host = checked.hostname.toLowerCase().replace(/\.$/, "")
  return host === "localhost" || host.endsWith(".localhost") ? undefined : href
}
