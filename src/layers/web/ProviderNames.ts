/**
 * The names of the web providers Antler has: the search providers and the readers of `web_fetch` (by DeerFlow's
 * module name). Their own module, so that what only needs the names (the tools' texts, web/Texts.ts) does not
 * import the providers.
 */

/** Search providers Antler has. */
export const PROVIDERS = [
  "duckduckgo",
  "tavily",
  "searxng",
  "serper",
  "brave",
  "exa",
  "firecrawl",
  "fastcrw",
  "infoquest",
  "groundroute"
] as const

/** A search provider Antler has. */
export type Provider = typeof PROVIDERS[number]

/** The providers of DeerFlow's `deerflow.community.<module>.tools:web_fetch_tool`, by module. */
export const READERS = {
  jina_ai: "jina",
  tavily: "tavily",
  exa: "exa",
  firecrawl: "firecrawl",
  fastcrw: "fastcrw",
  browserless: "browserless",
  crawl4ai: "crawl4ai",
  infoquest: "infoquest",
  groundroute: "groundroute"
} as const

/** A provider that reads pages for `web_fetch`. */
export type ReaderProvider = typeof READERS[keyof typeof READERS]
