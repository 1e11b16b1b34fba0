/**
 * The search providers a configured `web_search` / `image_search` can name, the keys of its `tools[]` entry
 * (decoded with Schema) and the provider built from them: its key from `api_key`, else the environment variable
 * DeerFlow reads (`SERPER_API_KEY`...), its address from `base_url` (fastCRW: else `CRW_API_URL`), else the
 * provider's own. The same for the providers that read pages for `web_fetch` (`READERS`).
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as WebSearch from "../../services/WebSearch.js"
import * as SearchProviders from "../SearchProviders.js"
import * as Brave from "./Brave.js"
import * as Browserless from "./Browserless.js"
import * as Crawl4AI from "./Crawl4AI.js"
import * as Exa from "./Exa.js"
import * as Firecrawl from "./Firecrawl.js"
import * as GroundRoute from "./GroundRoute.js"
import * as InfoQuest from "./InfoQuest.js"
import * as Jina from "./Jina.js"
import type * as ProviderFetch from "./ProviderFetch.js"
import * as Serper from "./Serper.js"
import * as Tavily from "./Tavily.js"
import type { Provider, ReaderProvider } from "./ProviderNames.js"
import { PROVIDERS } from "./ProviderNames.js"

export { PROVIDERS, READERS } from "./ProviderNames.js"
export type { Provider, ReaderProvider } from "./ProviderNames.js"

/** Each provider as users know it. */
export const LABEL: Readonly<Record<Provider, string>> = {
  duckduckgo: "DuckDuckGo",
  tavily: "Tavily",
  searxng: "SearXNG",
  serper: "Serper",
  brave: "Brave Search",
  exa: "Exa",
  firecrawl: "Firecrawl",
  fastcrw: "fastCRW",
  infoquest: "InfoQuest",
  groundroute: "GroundRoute"
}

/** The providers of DeerFlow's `deerflow.community.<module>.tools:web_search_tool`, by module. */
export const SEARCH_MODULES: Readonly<Record<string, Provider>> = {
  ddg_search: "duckduckgo",
  tavily: "tavily",
  searxng: "searxng",
  serper: "serper",
  brave: "brave",
  exa: "exa",
  firecrawl: "firecrawl",
  fastcrw: "fastcrw",
  infoquest: "infoquest",
  groundroute: "groundroute"
}

/** The providers of DeerFlow's `deerflow.community.<module>.tools:image_search_tool`, by module. */
export const IMAGE_MODULES: Readonly<Record<string, Provider>> = {
  image_search: "duckduckgo",
  serper: "serper",
  brave: "brave",
  infoquest: "infoquest"
}

const Seconds = Schema.Number.pipe(Schema.positive())
const HttpUrl = Schema.String.pipe(Schema.filter((value) => {
  try {
    const url = new URL(value)
    return url.protocol === "http:" || url.protocol === "https:" || "expected an http:// or https:// URL"
  } catch {
    return "expected an http:// or https:// URL"
  }
}))
/** The most results an entry's `max_results` may set: the largest provider's cap (Brave's image search's). */
export const MAX_RESULTS = 200

// a number written as text too (a `$VAR` from the environment is), as DeerFlow's tools coerce it
const Count = (min: number, max: number) =>
  Schema.Union(Schema.Number, Schema.NumberFromString).pipe(Schema.int(), Schema.between(min, max))

/** Keys a configured `web_search` / `image_search` reads. */
export const Settings = Schema.Struct({
  provider: Schema.optional(Schema.Literal(...PROVIDERS)),
  /**
   * Results asked of the provider, at most `MAX_RESULTS`; bounded by the provider's cap where the tool reads it
   * (`WebTools.resultCount`: Serper 10, Brave 20 or 200 for images, GroundRoute 50, the others 20).
   */
  max_results: Schema.optional(Count(1, MAX_RESULTS)),
  api_key: Schema.optional(Schema.String),
  base_url: Schema.optional(HttpUrl),
  timeout: Schema.optional(Seconds),
  /** DuckDuckGo's region (DeerFlow's `region`: `wt-wt`, `us-en`, `cn-zh`...). */
  region: Schema.optional(Schema.String.pipe(
    Schema.filter((r) => /^[a-z]{2,3}-[a-z]{2,4}$/i.test(r) || "expected a region such as us-en, cn-zh or wt-wt")
  )),
  /** DuckDuckGo's safe search (DeerFlow's `safesearch`); Brave's image search's (`off` or `strict`). */
  safesearch: Schema.optional(Schema.Literal("on", "moderate", "off", "strict")),
  /** Brave's image search: the country results come from (`us`, `de`... or `all`). */
  country: Schema.optional(Schema.String.pipe(
    Schema.filter((c) => /^([a-z]{2}|all)$/i.test(c) || "expected a two-letter country code such as us or de, or all")
  )),
  /** Brave's image search: the language searched (`en`, `fr`, `zh-hans`, `pt-br`...). */
  search_lang: Schema.optional(Schema.String.pipe(
    Schema.filter((l) => /^[a-z]{2}(-[a-z]{2,4})?$/i.test(l) || "expected a language code such as en, fr or zh-hans")
  )),
  /** Brave's image search: whether Brave corrects the query's spelling. */
  spellcheck: Schema.optional(Schema.Boolean),
  /** Exa's search type (`auto`, `neural`, `keyword`, `fast`...). */
  search_type: Schema.optional(Schema.String.pipe(Schema.pattern(/^[a-z_-]{1,40}$/))),
  /** Characters of highlights Exa gives per result. */
  contents_max_characters: Schema.optional(Count(1, 100_000)),
  /** InfoQuest: days back its web search looks. */
  search_time_range: Schema.optional(Count(1, 36_500)),
  /** InfoQuest: days back its image search looks. */
  image_search_time_range: Schema.optional(Count(1, 365)),
  /** InfoQuest: the size of the images (`l`, `m`, `i`). */
  image_size: Schema.optional(Schema.Literal("l", "m", "i"))
})

/** Keys of `Settings` only some providers read (the others name them as not read). */
export const ONLY: Readonly<Record<string, ReadonlyArray<Provider>>> = {
  region: ["duckduckgo"],
  safesearch: ["duckduckgo", "brave"],
  country: ["brave"],
  search_lang: ["brave"],
  spellcheck: ["brave"],
  search_type: ["exa"],
  contents_max_characters: ["exa"],
  search_time_range: ["infoquest"],
  image_search_time_range: ["infoquest"],
  image_size: ["infoquest"]
}

interface KeyRule {
  readonly env: string
  /** Whether the provider cannot work without one (fastCRW self-hosted and InfoQuest can). */
  readonly required: "always" | "default_base" | "never"
}

const KEYS: Readonly<Record<Provider | ReaderOnly, KeyRule | undefined>> = {
  duckduckgo: undefined,
  searxng: undefined,
  tavily: { env: "TAVILY_API_KEY", required: "always" },
  serper: { env: Serper.KEY_ENV, required: "always" },
  brave: { env: Brave.KEY_ENV, required: "always" },
  exa: { env: Exa.KEY_ENV, required: "always" },
  groundroute: { env: GroundRoute.KEY_ENV, required: "always" },
  firecrawl: { env: Firecrawl.KEY_ENV, required: "default_base" },
  fastcrw: { env: Firecrawl.FASTCRW_KEY_ENV, required: "never" },
  infoquest: { env: InfoQuest.KEY_ENV, required: "never" },
  jina: { env: Jina.KEY_ENV, required: "never" },
  browserless: { env: Browserless.KEY_ENV, required: "never" },
  // its `token`, from the entry alone
  crawl4ai: undefined
}

/** The environment variables the providers read their keys from (secrets wherever they are set). */
export const KEY_ENVS: ReadonlyArray<string> = Object.values(KEYS).flatMap((rule) =>
  rule === undefined ? [] : [rule.env]
)

const fromEnv = (name: string) =>
  Effect.orElseSucceed(Config.option(Config.string(name)), () => Option.none<string>()).pipe(
    Effect.map((value) => Option.getOrUndefined(Option.filter(value, (v) => v.trim() !== ""))?.trim())
  )

const missingKey = (provider: Provider | ReaderOnly, env: string) =>
  provider === "tavily"
    ? `Tavily needs an API key: set api_key: $${env} in its entry, or ${env} in the environment`
    : `${env} is not configured: set api_key: $${env} in its entry, or ${env} in the environment`

/** How a provider is reached (its key, address, deadline), or why it cannot be (no key where one is needed). */
const connectionOf = (
  provider: Provider | ReaderOnly,
  settings: Pick<typeof Settings.Type, "api_key" | "base_url" | "timeout" | "region" | "safesearch">,
  defaultTimeout: number
): Effect.Effect<Either.Either<SearchProviders.Connection, string>> =>
  Effect.gen(function*() {
    const rule = KEYS[provider]
    const configured = settings.api_key?.trim()
    const key = configured !== undefined && configured !== ""
      ? configured
      : rule === undefined
      ? undefined
      : yield* fromEnv(rule.env)
    let baseUrl = settings.base_url
    if (baseUrl === undefined && provider === "fastcrw") {
      const env = yield* fromEnv(Firecrawl.FASTCRW_URL_ENV)
      if (env !== undefined && Either.isLeft(Schema.decodeEither(HttpUrl)(env))) {
        return Either.left(`${Firecrawl.FASTCRW_URL_ENV} is not an http:// or https:// URL`)
      }
      baseUrl = env
    }
    if (rule !== undefined && key === undefined) {
      if (rule.required === "always" || (rule.required === "default_base" && baseUrl === undefined)) {
        return Either.left(missingKey(provider, rule.env))
      }
    }
    return Either.right({
      baseUrl,
      apiKey: key === undefined ? undefined : Redacted.make(key),
      timeoutMs: (settings.timeout ?? defaultTimeout) * 1000,
      region: settings.region,
      // (`strict`, Brave's, is refused for DuckDuckGo: `ToolAssembly.check`)
      safesearch: settings.safesearch === "strict" ? "on" : settings.safesearch
    })
  })

/** The provider a configured tool names, or why it cannot work (no key where one is needed, a bad address). */
export const build = (
  provider: Provider,
  settings: typeof Settings.Type
): Effect.Effect<Either.Either<WebSearch.Service, string>> =>
  Effect.gen(function*() {
    const reached = yield* connectionOf(provider, settings, 15)
    if (Either.isLeft(reached)) return Either.left(reached.left)
    const connection = reached.right
    switch (provider) {
      case "duckduckgo":
        return Either.right(SearchProviders.duckduckgo(connection))
      case "tavily":
        return Either.right(SearchProviders.tavily(connection))
      case "searxng":
        return Either.right(SearchProviders.searxng(connection))
      case "serper":
        return Either.right(Serper.make(connection))
      case "brave":
        return Either.right(Brave.make(connection, {
          country: settings.country,
          search_lang: settings.search_lang,
          safesearch: settings.safesearch,
          spellcheck: settings.spellcheck
        }))
      case "exa":
        return Either.right(Exa.make(connection, {
          searchType: settings.search_type,
          contentsMaxCharacters: settings.contents_max_characters
        }))
      case "firecrawl":
        return Either.right(Firecrawl.firecrawl(connection))
      case "fastcrw":
        return Either.right(Firecrawl.fastcrw(connection))
      case "infoquest":
        return Either.right(InfoQuest.make(connection, {
          searchTimeRange: settings.search_time_range,
          imageTimeRange: settings.image_search_time_range,
          imageSize: settings.image_size
        }))
      case "groundroute":
        return Either.right(GroundRoute.make(connection))
    }
  })

// ---------------------------------------------------------------------------------------------------------
// Readers of web_fetch


/** The readers that are no search provider. */
type ReaderOnly = Exclude<ReaderProvider, Provider>

const Text = (max: number) => Schema.String.pipe(Schema.maxLength(max))

/** Keys a reader's `web_fetch` entry reads besides `timeout`, `max_chars` and `allow_private_addresses`. */
export const ReaderSettings = Schema.Struct({
  api_key: Schema.optional(Schema.String),
  /** Browserless and Crawl4AI: their token (DeerFlow's `token`; Browserless: else `BROWSERLESS_TOKEN`). */
  token: Schema.optional(Schema.String),
  base_url: Schema.optional(HttpUrl),
  /** InfoQuest: seconds it may spend fetching (`fetch_time`). */
  fetch_time: Schema.optional(Count(1, 600)),
  /** InfoQuest: seconds its browser may spend navigating (`navigation_timeout`). */
  navigation_timeout: Schema.optional(Count(1, 600)),
  /** Crawl4AI: its Markdown filter (`fit`, `raw`, `bm25`, `llm`; written in any case). */
  filter: Schema.optional(Schema.compose(Schema.Trim, Schema.Lowercase).pipe(
    Schema.compose(Schema.Literal(...Crawl4AI.FILTERS))
  )),
  /** Browserless: the page event it waits for (`load`, `networkidle`...). */
  wait_for_event: Schema.optional(Text(100)),
  /** Browserless: milliseconds it waits after the page loaded. */
  wait_for_timeout_ms: Schema.optional(Count(0, 600_000)),
  /** Browserless: the CSS selector it waits for (5 s at most). */
  wait_for_selector: Schema.optional(Text(1000))
})

/** Keys of `ReaderSettings` only some readers read (the others name them as not read). */
export const READER_ONLY: Readonly<Record<string, ReadonlyArray<ReaderProvider>>> = {
  api_key: ["jina", "tavily", "exa", "firecrawl", "fastcrw", "infoquest", "groundroute"],
  token: ["browserless", "crawl4ai"],
  fetch_time: ["infoquest"],
  navigation_timeout: ["infoquest"],
  filter: ["crawl4ai"],
  wait_for_event: ["browserless"],
  wait_for_timeout_ms: ["browserless"],
  wait_for_selector: ["browserless"]
}

/** The keys of `ReaderSettings` `reader` does not read. */
export const unreadBy = (reader: ReaderProvider): ReadonlyArray<string> =>
  Object.entries(READER_ONLY).filter(([, readers]) => !readers.includes(reader)).map(([key]) => key)

/**
 * The reader a `web_fetch` entry names, or why it cannot work (no key where one is needed). `timeout` (seconds) is
 * the whole request's deadline (default 30: the provider loads the page first; Jina AI: 10, as DeerFlow's) and, for
 * InfoQuest, Jina AI and Tavily, the provider's own.
 */
export const buildReader = (
  provider: ReaderProvider,
  settings: typeof ReaderSettings.Type & { readonly timeout?: number | undefined }
): Effect.Effect<Either.Either<ProviderFetch.Reader, string>> => {
  const tokened = provider === "browserless" || provider === "crawl4ai"
  const keyed = { ...settings, api_key: tokened ? settings.token : settings.api_key }
  return Effect.map(connectionOf(provider, keyed, provider === "jina" ? 10 : 30), (reached) =>
    Either.map(reached, (connection) => {
      const reader = readerOf(provider, settings, connection)
      // (a reader at an operator's address may run inside the deployment's network, a self-hosted Jina AI reader or
      // a proxy, and fetch from there what it is sent: its URLs' host names are resolved and checked first, as a
      // self-hosted one's; a cloud service at its own address resolves them itself, as in DeerFlow)
      return connection.baseUrl != null && reader.resolvesHost !== true ? { ...reader, resolvesHost: true } : reader
    }))
}

/** The reader of `provider` over its connection. */
const readerOf = (
  provider: ReaderProvider,
  settings: typeof ReaderSettings.Type & { readonly timeout?: number | undefined },
  connection: SearchProviders.Connection
): ProviderFetch.Reader => {
  switch (provider) {
    case "jina":
      return Jina.reader(connection)
    case "tavily":
      return Tavily.reader(connection)
    case "exa":
      return Exa.reader(connection)
    case "firecrawl":
      return Firecrawl.firecrawlReader(connection)
    case "fastcrw":
      return Firecrawl.fastcrwReader(connection)
    case "browserless":
      return Browserless.reader(connection, {
        waitForEvent: settings.wait_for_event,
        waitForTimeoutMs: settings.wait_for_timeout_ms,
        waitForSelector: settings.wait_for_selector
      })
    case "crawl4ai":
      return Crawl4AI.reader(connection, { filter: settings.filter })
    case "groundroute":
      return GroundRoute.reader(connection)
    case "infoquest":
      return InfoQuest.reader(connection, {
        fetchTime: settings.fetch_time,
        timeout: settings.timeout,
        navigationTimeout: settings.navigation_timeout
      })
  }
}
