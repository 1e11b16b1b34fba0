/**
 * `web_fetch` through a provider that reads the page for Antler (DeerFlow's Exa, Firecrawl, fastCRW, InfoQuest and
 * GroundRoute fetchers): the URL is checked as Antler's own fetcher checks it before it is sent (http(s) only; an
 * address literal or `localhost` that is private refused unless allowed), and the page comes back as DeerFlow
 * writes it, `# <title>\n\n<text>`, cut at `max_chars` with a note. Every failure is an `Error: ...` result.
 */
import * as Effect from "effect/Effect"
import type { SearchError } from "../../services/WebSearch.js"
import * as Tool from "../../services/Tool.js"
import * as SafeHttp from "../SafeHttp.js"
import { clean } from "../SearchProviders.js"
import { FetchArgs } from "../WebTools.js"

/** A page a provider read. */
export interface Page {
  readonly title: string
  readonly text: string
}

/** A provider that reads pages. */
export interface Reader {
  /** Its name, as users know it (`Firecrawl`). */
  readonly name: string
  /** The page at `url`, at most `maxChars` characters of it asked for; "nothing there" is a `SearchError`. */
  readonly read: (url: string, maxChars: number) => Effect.Effect<Page, SearchError>
}

/** Options of a provider's `web_fetch`. */
export interface Options {
  /** Characters returned at most. Default 200,000. */
  readonly maxChars?: number | undefined
  /** Private, loopback and link-local address literals: refused (default), all allowed, or the listed ranges. */
  readonly allowPrivateAddresses?: boolean | ReadonlyArray<string> | undefined
}

/** Why `url` is not sent to the provider, or undefined when it may be. */
export const refusal = (url: string, allow: Options["allowPrivateAddresses"]): string | undefined => {
  const policy = allow === true ? SafeHttp.anyAddress : SafeHttp.publicOnly(Array.isArray(allow) ? allow : undefined)
  const checked = SafeHttp.urlProblem(url, policy)
  if (!(checked instanceof URL)) return checked.message
  const host = checked.hostname.toLowerCase().replace(/\.$/, "")
  const loopbackName = host === "localhost" || host.endsWith(".localhost")
  return allow !== true && loopbackName ? `${host} is a loopback name` : undefined
}

/** The `web_fetch` tool over a reader. */
export const webFetch = (reader: Reader, options: Options = {}): Tool.Tool => {
  const maxChars = options.maxChars ?? 200_000
  return Tool.make({
    name: "web_fetch",
    // DeerFlow's guidance (its fetchers' docstring)
    description: `Fetch the contents of a web page at a given URL (read through ${reader.name}).\n` +
      "Only fetch EXACT URLs that have been provided directly by the user or have been returned in results from " +
      "the web_search and web_fetch tools.\n" +
      "This tool can NOT access content that requires authentication, such as private Google Docs or pages behind " +
      "login walls.\nDo NOT add www. to URLs that do NOT have them.\n" +
      "URLs must include the schema: https://example.com is a valid URL while example.com is an invalid URL.",
    parameters: FetchArgs,
    handler: (args) => {
      const url = args.url.trim()
      const refused = refusal(url, options.allowPrivateAddresses)
      if (refused !== undefined) {
        return Effect.succeed(
          `Error: web_fetch refused ${clean(url, 300)}: ${refused}. Only public addresses can be fetched (an ` +
            "operator can allow others with allow_private_addresses)."
        )
      }
      return reader.read(url, maxChars).pipe(
        Effect.map((page) => {
          const cut = page.text.length > maxChars
            ? `${page.text.slice(0, maxChars)}\n\n[Cut at ${maxChars} characters.]`
            : page.text
          return `# ${page.title}\n\n${cut}`
        }),
        Effect.catchTag("SearchError", (error) => Effect.succeed(`Error: ${error.message}`))
      )
    }
  })
}
