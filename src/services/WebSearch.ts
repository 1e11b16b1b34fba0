/**
 * The web search port: what `web_search` and `image_search` ask of a search provider (Tavily, SearXNG,
 * DuckDuckGo... in `layers/SearchProviders.ts`; Serper, Brave, Exa... in `layers/web/`; or an app's own). Results
 * are plain data; what a provider sends is untrusted and decoded by the adapter.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/** One web result. */
export interface SearchResult {
  readonly title: string
  readonly url: string
  readonly snippet: string
  /** The engine that answered, where a meta search says it (GroundRoute's `source_engine`). */
  readonly source_engine?: string | undefined
}

/** One image result. */
export interface ImageResult {
  readonly title: string
  readonly image_url: string
  readonly thumbnail_url?: string | undefined
  /** The page the image is on. */
  readonly source_url?: string | undefined
  /** The image's size, where the provider gives it (Brave). */
  readonly width?: number | undefined
  readonly height?: number | undefined
}

/** A search that failed: the provider could not be reached, refused the key, or answered something unreadable. */
export class SearchError extends Schema.TaggedError<SearchError>()("SearchError", {
  provider: Schema.String,
  reason: Schema.Literal("unreachable", "auth", "rate_limited", "http", "invalid_response"),
  message: Schema.String
}) {}

/**
 * Filters the model may give `image_search` (DeerFlow's `size`, `type_image`, `layout`); a provider without them
 * ignores them.
 */
export interface ImageFilters {
  readonly size?: "Small" | "Medium" | "Large" | "Wallpaper" | undefined
  readonly type_image?: "photo" | "clipart" | "gif" | "transparent" | "line" | undefined
  readonly layout?: "Square" | "Tall" | "Wide" | undefined
}

/** A search provider. */
export interface Service {
  /** Its name, as users know it (`Tavily`, `SearXNG`). */
  readonly name: string
  readonly search: (query: string, maxResults: number) => Effect.Effect<ReadonlyArray<SearchResult>, SearchError>
  /** Image search, when the provider has it. */
  readonly images?:
    | ((
      query: string,
      maxResults: number,
      filters?: ImageFilters
    ) => Effect.Effect<ReadonlyArray<ImageResult>, SearchError>)
    | undefined
}

/** A search provider an app provides for its own `web_search` (configured tools name theirs in `config.yaml`). */
export class WebSearch extends Context.Tag("antler/WebSearch")<WebSearch, Service>() {}
