/**
 * DeerFlow's web tools as its model reads them, word for word (bytedance/deer-flow, MIT licence,
 * backend/packages/harness/deerflow/community/<module>/tools.py): each provider's `web_search_tool` and
 * `web_fetch_tool` (and `image_search_tool`) docstring through LangChain's `@tool(parse_docstring=True)` (the
 * paragraphs before `Args:` joined by a space; each `Args:` entry its argument's description). Generated from
 * test/fixtures/deerflow/prompts/tool_descriptions.json and tool_arguments.json (`web_search@<module>`); a line too
 * long for this file goes on with a backslash at its end (nothing of it is in the text).
 */
import type { Provider, ReaderProvider } from "./ProviderNames.js"

/** A `web_search` as DeerFlow describes it: the tool, its `query` argument, and its `max_results` where it has one. */
export interface SearchText {
  readonly description: string
  readonly query: string
  readonly max_results?: string | undefined
}

/** DeerFlow's `web_search` of each provider. */
export const SEARCH: Readonly<Record<Provider, SearchText>> = {
  duckduckgo: {
    description: `Search the web for information. Use this tool to find current information, news, articles, and \
facts from the internet.`,
    query: `Search keywords describing what you want to find. Be specific for better results.`,
    max_results: `Maximum number of results to return. Default is 5.`
  },
  tavily: {
    description: `Search the web.`,
    query: `The query to search for.`
  },
  searxng: {
    description: `Search the web using SearXNG.`,
    query: `The query to search for.`
  },
  serper: {
    description: `Search the web for information using Google Search via Serper.`,
    query: `Search keywords describing what you want to find. Be specific for better results.`,
    max_results: `Maximum number of search results to return. Default is 5, capped at 10.`
  },
  brave: {
    description: `Search the web for information using Brave Search.`,
    query: `Search keywords describing what you want to find. Be specific for better results.`,
    max_results: `Maximum number of search results to return. Default is 5.`
  },
  exa: {
    description: `Search the web.`,
    query: `The query to search for.`
  },
  firecrawl: {
    description: `Search the web.`,
    query: `The query to search for.`
  },
  fastcrw: {
    description: `Search the web.`,
    query: `The query to search for.`
  },
  infoquest: {
    description: `Search the web.`,
    query: `The query to search for.`
  },
  groundroute: {
    description: `Search the web for information using GroundRoute. GroundRoute routes the query across six search \
engines and returns the result
set from the engine it selected, with failover if one engine is unavailable.`,
    query: `Search keywords describing what you want to find. Be specific for better results.`,
    max_results: `Maximum number of search results to return. If omitted, uses the configured value (default 5). \
Clamped to 1-50.`
  }
}

/** Every DeerFlow `web_fetch`'s description of its `url` argument. */
export const FETCH_URL = `The URL to fetch the contents of.`

/** What every one of DeerFlow's `web_fetch` tools says after its first line. */
const FETCH_RULES = `Only fetch EXACT URLs that have been provided directly by the user or have been returned in \
results from the web_search and web_fetch tools.
This tool can NOT access content that requires authentication, such as private Google Docs or pages behind login walls.
Do NOT add www. to URLs that do NOT have them.
URLs must include the schema: https://example.com is a valid URL while example.com is an invalid URL.`

/** DeerFlow's `web_fetch` of each reader (Jina AI's is also its most common one). */
export const FETCH: Readonly<Record<ReaderProvider, string>> = {
  jina: `Fetch the contents of a web page at a given URL.
${FETCH_RULES}`,
  tavily: `Fetch the contents of a web page at a given URL.
${FETCH_RULES}`,
  exa: `Fetch the contents of a web page at a given URL.
${FETCH_RULES}`,
  firecrawl: `Fetch the contents of a web page at a given URL.
${FETCH_RULES}`,
  fastcrw: `Fetch the contents of a web page at a given URL.
${FETCH_RULES}`,
  browserless: `Fetch the contents of a web page at a given URL using Browserless (headless Chrome).
${FETCH_RULES}`,
  crawl4ai: `Fetch the contents of a web page at a given URL.
${FETCH_RULES}`,
  infoquest: `Fetch the contents of a web page at a given URL.
${FETCH_RULES}`,
  groundroute: `Fetch the contents of a web page at a given URL via GroundRoute.
${FETCH_RULES}`
}

/** DuckDuckGo's and InfoQuest's `image_search` (one docstring). */
const IMAGE_WITH_WHEN = `Search for images online. Use this tool BEFORE image generation to find reference images for \
characters, portraits, objects, scenes, or any content requiring visual accuracy. **When to use:**
- Before generating character/portrait images: search for similar poses, expressions, styles
- Before generating specific objects/products: search for accurate visual references
- Before generating scenes/locations: search for architectural or environmental references
- Before generating fashion/clothing: search for style and detail references The returned image URLs can be used as \
reference images in image generation to significantly improve quality.`

/** DuckDuckGo's and Serper's `image_search` `query`. */
const IMAGE_KEYWORDS = `Search keywords describing the images you want to find. Be specific for better results \
(e.g., "Japanese woman street photography 1990s" instead of just "woman").`

/** DeerFlow's `image_search` of each provider that has one: the tool, and its `query` argument. */
export const IMAGE: Readonly<Partial<Record<Provider, SearchText>>> = {
  duckduckgo: {
    description: IMAGE_WITH_WHEN,
    query: IMAGE_KEYWORDS,
    max_results: `Maximum number of images to return. Default is 5.`
  },
  serper: {
    description: `Search for images online using Google Images via Serper. Use this tool BEFORE image generation to \
find reference images for characters, portraits, objects, scenes, or any content requiring visual accuracy. The \
returned image URLs can be used as reference images in image generation to significantly improve quality.`,
    query: IMAGE_KEYWORDS,
    max_results: `Maximum number of images to return. Default is 5, capped at 10.`
  },
  brave: {
    description: `Search for images online using Brave Image Search. Use this tool BEFORE image generation to find \
reference images for characters, portraits, objects, scenes, or any content requiring visual accuracy. The returned \
image URLs can be used as reference images in image generation to significantly improve quality.`,
    query: `Search keywords describing the images you want to find. Be specific for better results.`,
    max_results: `Maximum number of images to return. Default is 5, capped at 200.`
  },
  infoquest: {
    description: IMAGE_WITH_WHEN,
    query: `The query to search for images.`
  }
}

/** DeerFlow's (DuckDuckGo) `image_search`'s descriptions of its filters. */
export const IMAGE_FILTERS = {
  size: `Image size filter. Options: "Small", "Medium", "Large", "Wallpaper". Use "Large" for reference images.`,
  type_image: `Image type filter. Options: "photo", "clipart", "gif", "transparent", "line". Use "photo" for \
realistic references.`,
  layout: `Layout filter. Options: "Square", "Tall", "Wide". Choose based on your generation needs.`
} as const
