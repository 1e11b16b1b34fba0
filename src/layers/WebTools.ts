/**
 * The web tools: `web_fetch` (a page as Markdown, its main element alone when it has one, over `SafeHttp`:
 * deadline, size cap, bounded redirects, private addresses refused unless allowed), `web_search` and
 * `image_search` (over a `WebSearch` provider). Every failure is a readable `Error: ...` result, never a failed run.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as WebSearch from "../services/WebSearch.js"
import * as OptionalPackage from "../internal/OptionalPackage.js"
import { withDefault } from "../services/AppConfig.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import * as Tool from "../services/Tool.js"
import * as Json from "../state/Json.js"
import type { Redactor } from "../state/Redact.js"
import * as DocumentConverter from "./DocumentConverter.js"
import * as SafeHttp from "./SafeHttp.js"
import { clean, htmlText } from "./SearchProviders.js"
import type { Provider } from "./web/ProviderNames.js"
import * as WebTexts from "./web/Texts.js"

// ---------------------------------------------------------------------------------------------------------
// web_fetch

/** Options of `web_fetch`. */
export interface FetchOptions {
  /** The whole fetch, redirects included (DeerFlow's `timeout`, seconds). Default 10 s. */
  readonly timeoutMs?: number | undefined
  /** Bytes read at most. Default 5 MiB. */
  readonly maxBytes?: number | undefined
  /** Default 5. */
  readonly maxRedirects?: number | undefined
  /** Private, loopback and link-local addresses: refused (default), all allowed, or the listed ranges. */
  readonly allowPrivateAddresses?: boolean | ReadonlyArray<string> | undefined
  /** Characters of Markdown returned at most. Default 200,000 (longer output is cut with a note). */
  readonly maxChars?: number | undefined
}

const DEFAULT_FETCH = { timeoutMs: 10_000, maxBytes: 5 * 1024 * 1024, maxRedirects: 5, maxChars: 200_000 }

/** The arguments of `web_fetch`. */
export const FetchArgs = Schema.Struct({
  url: Schema.String.annotations({ description: WebTexts.FETCH_URL })
})

/** The `<title>` of an HTML page, if it has one. */
export const htmlTitle = (html: string): string | undefined => {
  const lower = html.slice(0, 200_000).toLowerCase()
  const open = lower.indexOf("<title")
  if (open < 0) return undefined
  const start = lower.indexOf(">", open)
  const end = lower.indexOf("</title>", start)
  if (start < 0 || end < 0) return undefined
  const title = clean(htmlText(html.slice(start + 1, end)), 300)
  return title === "" ? undefined : title
}

// the start of each `<tag` opening tag (not `<tagname...`), at most two
const openings = (html: string, tag: string): ReadonlyArray<number> => {
  const out: Array<number> = []
  for (const match of html.matchAll(new RegExp(`<${tag}[\\s>/]`, "gi"))) {
    out.push(match.index)
    if (out.length === 2) break
  }
  return out
}

/**
 * The part of a page that is its content, as DeerFlow's readability step keeps the article rather than the
 * navigation around it: its one `<main>` element, else its one `<article>`, else the whole page (several of either
 * say nothing about which one matters).
 */
export const mainContent = (html: string): string => {
  for (const tag of ["main", "article"]) {
    const opens = openings(html, tag)
    if (opens.length !== 1) continue
    let close = -1
    let closeLength = 0
    for (const match of html.matchAll(new RegExp(`</${tag}\\s*>`, "gi"))) {
      close = match.index
      closeLength = match[0].length
    }
    if (close > opens[0]!) return html.slice(opens[0], close + closeLength)
  }
  return html
}

const mimeOf = (contentType: string | undefined): string => (contentType ?? "").split(";")[0]!.trim().toLowerCase()

const TEXT_TYPES = /^(text\/|application\/(json|xml|javascript|x-javascript|ld\+json|rss\+xml|atom\+xml|x-yaml|yaml))/

const documentName = (mime: string): string | undefined => {
  switch (mime) {
    case "application/pdf":
      return "page.pdf"
    case "application/vnd.openxmlformats-officedocument.wordprocessingml.document":
      return "page.docx"
    case "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":
      return "page.xlsx"
    case "application/vnd.openxmlformats-officedocument.presentationml.presentation":
      return "page.pptx"
    default:
      return undefined
  }
}

const sizeText = (bytes: number) =>
  bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`

/** DeerFlow's text for a page with nothing to read (a script-only page, an empty body). */
export const NO_CONTENT = "No content could be extracted from this page"

/** What `web_fetch` returns for a response: the page as Markdown with its title and final URL, or an error text. */
export const pageText = (
  response: SafeHttp.Response,
  options: { readonly maxChars: number; readonly maxBytes: number }
) =>
  Effect.gen(function*() {
    if (response.status >= 400) {
      return `Error: ${response.url} answered HTTP ${response.status}; nothing was read.`
    }
    const mime = mimeOf(response.headers["content-type"])
    const cut = response.truncated
      ? `\n\n[The page is longer than ${sizeText(options.maxBytes)}; the rest was not read.]`
      : ""
    let title: string | undefined
    let markdown: string
    if (mime === "" || mime === "text/html" || mime === "application/xhtml+xml") {
      const html = DocumentConverter.decodeHtml(response.body)
      title = htmlTitle(html)
      const converted = yield* Effect.try({
        try: () => {
          const main = mainContent(html)
          const content = DocumentConverter.htmlToMarkdown(main)
          // an empty main element: the page's content is elsewhere
          return main !== html && content.trim() === "" ? DocumentConverter.htmlToMarkdown(html) : content
        },
        catch: (cause) => cause
      }).pipe(Effect.either)
      if (converted._tag === "Left") {
        // a missing optional package (turndown) is said as such; anything else is a bug, a defect as before
        if (converted.left instanceof OptionalPackage.MissingPackageError) {
          return `Error: ${response.url} could not be read: ${converted.left.message}.`
        }
        return yield* Effect.die(converted.left)
      }
      markdown = converted.right
    } else if (TEXT_TYPES.test(mime)) {
      markdown = new TextDecoder().decode(response.body)
    } else {
      const name = documentName(mime)
      if (name === undefined || response.truncated) {
        return `Error: ${response.url} is ${mime || "binary data"} (${sizeText(response.body.length)}${
          response.truncated ? " or more" : ""
        }), not a page web_fetch can read (HTML, text, PDF or Office documents).`
      }
      const converted = yield* Effect.either(DocumentConverter.toMarkdown({ name, bytes: response.body }))
      if (converted._tag === "Left") return `Error: ${response.url} could not be read: ${converted.left.detail}.`
      markdown = Option.getOrElse(converted.right, () => "")
    }
    // (masked for the process's secrets and the run's before the cut at `maxChars`, as a cut text's end: a body read
    // to `maxBytes` ends where it was cut, and the title is cut at 300; a cut inside a key kept its beginning, which
    // the masks of whole values after it do not find)
    const hide = yield* ProcessSecrets.inRun
    markdown = hide.last(markdown)
    if (markdown.length > options.maxChars) {
      markdown = `${markdown.slice(0, options.maxChars)}\n\n[Cut at ${options.maxChars} characters.]`
    }
    const head = title !== undefined ? `# ${cutEnd(hide, title)}\n\n` : ""
    const body = markdown.trim() === "" ? NO_CONTENT : markdown.trim()
    return `${head}URL: ${response.url}\n\n${body}${cut}\n`
  })

/** The `web_fetch` tool. */
export const webFetch = (options: FetchOptions = {}): Tool.Tool => {
  const timeoutMs = options.timeoutMs ?? DEFAULT_FETCH.timeoutMs
  const maxBytes = options.maxBytes ?? DEFAULT_FETCH.maxBytes
  const maxChars = options.maxChars ?? DEFAULT_FETCH.maxChars
  const maxRedirects = options.maxRedirects ?? DEFAULT_FETCH.maxRedirects
  const allow = options.allowPrivateAddresses
  const policy: SafeHttp.AddressPolicy = allow === true
    ? SafeHttp.anyAddress
    : SafeHttp.publicOnly(Array.isArray(allow) ? allow : undefined)
  return Tool.make({
    name: "web_fetch",
    // DeerFlow's words (its Jina AI fetcher's docstring), then what Antler's own fetcher does
    description: `${WebTexts.FETCH.jina}\n\nHere Antler's own fetcher reads the page (a text, PDF or Office ` +
      "document too) and returns it as Markdown, with its title and final URL. " +
      (allow === true ? "" : "Only public addresses can be read. ") +
      `The fetch gives up after ${Math.round(timeoutMs / 1000)} s.`,
    parameters: FetchArgs,
    handler: (args) =>
      SafeHttp.request({ url: args.url.trim(), timeoutMs, maxBytes, maxRedirects, policy }).pipe(
        Effect.flatMap((response) => pageText(response, { maxChars, maxBytes })),
        Effect.catchTag("WebRequestError", (error) =>
          Effect.succeed(
            error.reason === "blocked_address"
              ? `Error: web_fetch refused ${clean(args.url, 300)}: ${error.message}. Only public addresses can be ` +
                "fetched (an operator can allow others with allow_private_addresses)."
              : `Error: web_fetch could not read ${clean(args.url, 300)}: ${error.message}.`
          ))
      )
  })
}

// ---------------------------------------------------------------------------------------------------------
// web_search, image_search

/**
 * How a provider's `web_search` / `image_search` reads the model's `max_results`, as DeerFlow's tool of that
 * provider does: bounded by `cap`; the entry's `max_results`, when set, goes before the model's (DuckDuckGo, Serper,
 * Brave), or the model's before the entry's (`modelFirst`: GroundRoute); a count below 1 is 1, or the default 5
 * (`belowOneDefault`: Serper).
 */
export interface ResultsRule {
  readonly cap: number
  readonly modelFirst?: boolean | undefined
  readonly belowOneDefault?: boolean | undefined
}

/** The providers whose DeerFlow `web_search` takes `max_results`, and how (DuckDuckGo's: no cap; the entry's 20). */
export const SEARCH_RESULTS: Readonly<Partial<Record<Provider, ResultsRule>>> = {
  duckduckgo: { cap: 20 },
  serper: { cap: 10, belowOneDefault: true },
  brave: { cap: 20 },
  groundroute: { cap: 50, modelFirst: true }
}

/** The providers whose DeerFlow `image_search` takes `max_results`, and how. */
export const IMAGE_RESULTS: Readonly<Partial<Record<Provider, ResultsRule>>> = {
  duckduckgo: { cap: 20 },
  serper: { cap: 10, belowOneDefault: true },
  brave: { cap: 200 }
}

/**
 * The most results an entry's `max_results` asks of a provider whose DeerFlow tool does not bound it (Tavily, Exa,
 * SearXNG...): Antler's bound.
 */
export const UNCAPPED_BOUND = 20

/**
 * How many results a search asks for: the entry's `configured` count and the model's `asked` one, by `rule`, each
 * bounded by the provider's cap as DeerFlow's tool bounds both (none: `UNCAPPED_BOUND`).
 */
export const resultCount = (
  rule: ResultsRule | undefined,
  configured: number | undefined,
  asked: number | null | undefined
): number => {
  const entry = configured === undefined ? undefined : Math.min(configured, rule?.cap ?? UNCAPPED_BOUND)
  if (rule === undefined || asked == null) return entry ?? 5
  const model = asked < 1 ? (rule.belowOneDefault === true ? 5 : 1) : Math.min(asked, rule.cap)
  return rule.modelFirst === true ? model : entry ?? model
}

// the model's `max_results`, described in DeerFlow's words (GroundRoute's may be left out or null: the entry's)
const resultsField = (description: string, rule: ResultsRule) =>
  rule.modelFirst === true
    ? Schema.optionalWith(Schema.Int.annotations({ description }), { nullable: true })
    : withDefault(Schema.Int.annotations({ description }), () => 5)

/** The fields of a search tool's arguments, `max_results` where the provider's tool takes it. */
const withResults = <F extends Schema.Struct.Fields>(fields: F, text: WebTexts.SearchText, rule?: ResultsRule) => {
  // (one Schema for either shape: the model's `max_results` is read as absent when the tool has none)
  // (after `query`, in DeerFlow's order)
  const { query, ...rest } = fields
  const all = text.max_results !== undefined && rule !== undefined
    ? { query, max_results: resultsField(text.max_results, rule), ...rest }
    : fields
  return Schema.Struct(all) as unknown as Schema.Schema<
    Schema.Struct.Type<F> & { readonly max_results?: number | null | undefined },
    Schema.Struct.Encoded<F>
  >
}

/**
 * The arguments of `web_search`, `query` (and `max_results`, where the provider's DeerFlow `web_search` takes it,
 * read by `rule`) described as that `web_search` describes them.
 */
export const searchArgs = (text: WebTexts.SearchText, rule?: ResultsRule) =>
  withResults({ query: Schema.String.annotations({ description: text.query }) }, text, rule)

/** The arguments of `web_search` described as DeerFlow's DuckDuckGo search describes them. */
export const SearchArgs = searchArgs(WebTexts.SEARCH.duckduckgo, SEARCH_RESULTS.duckduckgo)

/**
 * The arguments of `image_search`: `query` described as the provider's DeerFlow `image_search` describes it, the
 * filters as DeerFlow's DuckDuckGo one (the only one with filters) describes them.
 */
export const imageSearchArgs = (text: WebTexts.SearchText, rule?: ResultsRule) =>
  withResults({
    query: Schema.String.annotations({ description: text.query }),
    // (described on the value's schema: with `max_results`' default the arguments are a transformation, whose
    // JSON Schema is its encoded side's, without the annotations of a property)
    size: Schema.optional(Schema.NullOr(Schema.Literal("Small", "Medium", "Large", "Wallpaper")).annotations({
      description: WebTexts.IMAGE_FILTERS.size
    })),
    type_image: Schema.optional(
      Schema.NullOr(Schema.Literal("photo", "clipart", "gif", "transparent", "line"))
        .annotations({ description: WebTexts.IMAGE_FILTERS.type_image })
    ),
    layout: Schema.optional(Schema.NullOr(Schema.Literal("Square", "Tall", "Wide")).annotations({
      description: WebTexts.IMAGE_FILTERS.layout
    }))
  }, text, rule)

const DUCKDUCKGO_IMAGES = WebTexts.IMAGE.duckduckgo!

/** The arguments of `image_search` described as DeerFlow's DuckDuckGo image search describes them. */
export const ImageSearchArgs = imageSearchArgs(DUCKDUCKGO_IMAGES, IMAGE_RESULTS.duckduckgo)

/** What `image_search` tells the model to do with its results (DeerFlow's `usage_hint`). */
export const IMAGE_USAGE_HINT =
  "Use the 'image_url' values as reference images in image generation. Download them first if needed."

const searchFailed = (tool: string, error: WebSearch.SearchError) => `Error: ${tool} failed: ${error.message}.`

/**
 * A text that may end where it was cut (by `clean`, `…` after the cut, or by the provider itself) masked with `hide`
 * as a cut text's end (`Redactor.last`): a beginning of a secret it ends in is hidden too.
 */
export const cutEnd = (hide: Redactor, text: string): string =>
  text.endsWith("…") ? `${hide.last(text.slice(0, -1))}…` : hide.last(text)

/**
 * Every text of a provider's results masked for the process's secrets and the run's (`ProcessSecrets.ofRun`) as a cut
 * text's end (`cutEnd`): a title is cut at 300 characters and a snippet at 1,000 masking the provider's own key only,
 * and the masks after them find whole values, so a cut inside another secret kept its beginning.
 */
const maskedResults = <A>(results: A): Effect.Effect<A> =>
  Effect.map(ProcessSecrets.inRun, (hide) =>
    Json.mapStrings(results, (text) => cutEnd(hide, text)))

// the model's `max_results`, where its arguments have one
const askedOf = (args: { readonly max_results?: number | null | undefined }) => args.max_results

/**
 * The `web_search` tool over a provider; results are a JSON list of `{title, url, snippet}`. `maxResults`: the
 * entry's count (none: the model's, else 5); `text`: how DeerFlow's `web_search` of that provider is described
 * (`Texts.SEARCH`; default: its DuckDuckGo search's words), `rule` how it reads the model's `max_results`
 * (`SEARCH_RESULTS`; default: the DuckDuckGo one's, with its words; none: the tool takes no `max_results`).
 */
export const webSearch = (
  provider: WebSearch.Service,
  maxResults?: number,
  text: WebTexts.SearchText = WebTexts.SEARCH.duckduckgo,
  rule: ResultsRule | undefined = text === WebTexts.SEARCH.duckduckgo ? SEARCH_RESULTS.duckduckgo : undefined
): Tool.Tool =>
  Tool.make({
    name: "web_search",
    description: text.description,
    parameters: text === WebTexts.SEARCH.duckduckgo && rule === SEARCH_RESULTS.duckduckgo
      ? SearchArgs
      : searchArgs(text, rule),
    handler: (args) => {
      const query = args.query.trim()
      if (query === "") return Effect.succeed("Error: web_search needs a non-empty query.")
      return provider.search(query, resultCount(rule, maxResults, askedOf(args))).pipe(
        Effect.flatMap(maskedResults),
        Effect.map((results) =>
          results.length === 0 ? `No results found for: ${clean(query, 300)}` : JSON.stringify(results, null, 2)
        ),
        Effect.catchTag("SearchError", (error) => Effect.succeed(searchFailed("web_search", error)))
      )
    }
  })

/**
 * The `image_search` tool over a provider with image search; results are a JSON object listing the images.
 * `maxResults`, `text` and `rule` as `webSearch`'s, of DeerFlow's `image_search` (`Texts.IMAGE`, `IMAGE_RESULTS`).
 */
export const imageSearch = (
  provider: WebSearch.Service & { readonly images: NonNullable<WebSearch.Service["images"]> },
  maxResults?: number,
  text: WebTexts.SearchText = DUCKDUCKGO_IMAGES,
  rule: ResultsRule | undefined = text === DUCKDUCKGO_IMAGES ? IMAGE_RESULTS.duckduckgo : undefined
): Tool.Tool =>
  Tool.make({
    name: "image_search",
    description: text.description,
    parameters: text === DUCKDUCKGO_IMAGES && rule === IMAGE_RESULTS.duckduckgo
      ? ImageSearchArgs
      : imageSearchArgs(text, rule),
    handler: (args) => {
      const query = args.query.trim()
      if (query === "") return Effect.succeed("Error: image_search needs a non-empty query.")
      const filters = {
        size: args.size ?? undefined,
        type_image: args.type_image ?? undefined,
        layout: args.layout ?? undefined
      }
      return provider.images(query, resultCount(rule, maxResults, askedOf(args)), filters).pipe(
        Effect.flatMap(maskedResults),
        Effect.map((results) =>
          results.length === 0
            ? `No images found for: ${clean(query, 300)}`
            : JSON.stringify(
              { query: clean(query, 300), total_results: results.length, results, usage_hint: IMAGE_USAGE_HINT },
              null,
              2
            )
        ),
        Effect.catchTag("SearchError", (error) => Effect.succeed(searchFailed("image_search", error)))
      )
    }
  })
