/**
 * `web_fetch` through a provider that reads the page for Antler (DeerFlow's Jina AI, Tavily, Exa, Firecrawl, fastCRW,
 * Browserless, Crawl4AI, InfoQuest and GroundRoute fetchers): the URL is checked before it is sent (http(s) only; an
 * address literal, `localhost` or `metadata.google.internal` that is private refused unless allowed) and, for a
 * reader inside the deployment's network (`resolvesHost`), its host name is resolved and refused when any address
 * is private or when it resolves to none (DeerFlow's `validate_public_http_url`). The page comes back as DeerFlow
 * writes it, `# <title>\n\n<text>`, cut at `max_chars` with a note, masked before the cut for the process's secrets
 * and the run's (`ProcessSecrets.ofRun`). Every failure is an `Error: ...` result.
 */
import * as Net from "node:net"
import * as Effect from "effect/Effect"
import type * as HostResolver from "../../services/HostResolver.js"
import * as ProcessSecrets from "../../services/ProcessSecrets.js"
import { SearchError } from "../../services/WebSearch.js"
import * as OptionalPackage from "../../internal/OptionalPackage.js"
import * as Tool from "../../services/Tool.js"
import * as DocumentConverter from "../DocumentConverter.js"
import * as SafeHttp from "../SafeHttp.js"
import { clean } from "../SearchProviders.js"
import * as WebTools from "../WebTools.js"
import * as WebTexts from "./Texts.js"

/** A page a provider read. */
export interface Page {
  /** Its title, written as `# <title>` before the text; none for a reader whose Markdown carries its own. */
  readonly title?: string | undefined
  readonly text: string
  /** A line after the (cut) text, such as Browserless's word that the page itself answered an error. */
  readonly note?: string | undefined
}

/** A provider that reads pages. */
export interface Reader {
  /** Its name, as users know it (`Firecrawl`). */
  readonly name: string
  /**
   * Whether it runs inside the deployment's network (self-hosted), so that a URL's host name is resolved and its
   * addresses checked before the URL is sent to it.
   */
  readonly resolvesHost?: boolean | undefined
  /** The page at `url`, at most `maxChars` characters of it asked for; "nothing there" is a `SearchError`. */
  readonly read: (url: string, maxChars: number) => Effect.Effect<Page, SearchError>
}

/** Options of a provider's `web_fetch`. */
export interface Options {
  /** Characters returned at most. Default 200,000. */
  readonly maxChars?: number | undefined
  /** Private, loopback and link-local addresses: refused (default), all allowed, or the listed ranges. */
  readonly allowPrivateAddresses?: boolean | ReadonlyArray<string> | undefined
  /** The resolver a `resolvesHost` reader's URLs are checked with; without one, their host names are refused. */
  readonly resolver?: HostResolver.Service | undefined
  /** The tool's description: DeerFlow's fetcher of this reader (`Texts.FETCH`). Default: its Jina AI fetcher's. */
  readonly description?: string | undefined
}

// names that are private whatever they resolve to here (DeerFlow's `_BLOCKED_HOSTNAMES`)
const PRIVATE_NAMES: ReadonlyArray<string> = ["localhost", "metadata.google.internal"]

/** Why `url` is not sent to the provider, judged on its text alone, or undefined when it may be. */
export const refusal = (url: string, allow: Options["allowPrivateAddresses"]): string | undefined => {
  const policy = allow === true ? SafeHttp.anyAddress : SafeHttp.publicOnly(Array.isArray(allow) ? allow : undefined)
  const checked = SafeHttp.urlProblem(url, policy)
  if (!(checked instanceof URL)) return checked.message
  const host = checked.hostname.toLowerCase().replace(/\.$/, "")
  if (allow === true) return undefined
  if (host === "localhost" || host.endsWith(".localhost")) return `${host} is a loopback name`
  return PRIVATE_NAMES.includes(host) ? `${host} is a cloud metadata name` : undefined
}

/**
 * Why `url` is not sent to `reader`, or undefined when it may be: `refusal`, then, for a reader that `resolvesHost`,
 * every address its host name resolves to (none: refused, as it cannot be checked).
 */
export const check = (
  url: string,
  reader: Pick<Reader, "resolvesHost">,
  options: Pick<Options, "allowPrivateAddresses" | "resolver">
): Effect.Effect<string | undefined> =>
  Effect.gen(function*() {
    const allow = options.allowPrivateAddresses
    const refused = refusal(url, allow)
    if (refused !== undefined || reader.resolvesHost !== true || allow === true) return refused
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "")
    if (Net.isIP(host) !== 0) return undefined
    const addresses = options.resolver === undefined ? [] : yield* options.resolver.lookup(host)
    if (addresses.length === 0) return `${host} could not be resolved, so its address cannot be checked`
    const policy = SafeHttp.publicOnly(Array.isArray(allow) ? allow : undefined)
    for (const address of addresses) {
      const problem = SafeHttp.addressProblem(address, policy)
      if (problem !== undefined) return `${host} resolves to ${address}, ${problem}`
    }
    return undefined
  })

/**
 * An HTML page as DeerFlow's readability step gives it to the model: its title (`Untitled` without one) and its
 * main part as Markdown (DeerFlow's words when nothing is left). A converter that cannot run is `provider`'s error.
 */
export const article = (provider: string, html: string): Effect.Effect<Page, SearchError> =>
  Effect.try({
    try: () => {
      const main = WebTools.mainContent(html)
      const text = DocumentConverter.htmlToMarkdown(main).trim()
      return { title: WebTools.htmlTitle(html) ?? "Untitled", text: text === "" ? WebTools.NO_CONTENT : text }
    },
    catch: (cause) =>
      new SearchError({
        provider,
        reason: "invalid_response",
        message: cause instanceof OptionalPackage.MissingPackageError
          ? cause.message
          : "the page could not be converted"
      })
  })

/** The `web_fetch` tool over a reader. */
export const webFetch = (reader: Reader, options: Options = {}): Tool.Tool => {
  const maxChars = options.maxChars ?? 200_000
  return Tool.make({
    name: "web_fetch",
    // DeerFlow's words: its fetcher's docstring for this reader
    description: options.description ?? WebTexts.FETCH.jina,
    parameters: WebTools.FetchArgs,
    handler: (args) => {
      const url = args.url.trim()
      return Effect.flatMap(check(url, reader, options), (refused) =>
        refused !== undefined
          ? Effect.succeed(
            `Error: web_fetch refused ${clean(url, 300)}: ${refused}. Only public addresses can be fetched (an ` +
              "operator can allow others with allow_private_addresses)."
          )
          : reader.read(url, maxChars).pipe(
            // (masked for the process's secrets and the run's: a page over the bound before its cut, as a cut inside
            // a key would keep its beginning; one within it as the end of a text, since the reader may have cut it
            // itself (at its own limit, or Exa's at the `maxChars` it was asked for), inside a key: `Redactor.last`;
            // its title, which the reader cut at 300 (`clean`'s `…`) masking its own key only, so too)
            Effect.flatMap((page) =>
              Effect.map(ProcessSecrets.inRun, (hide) => ({
                ...page,
                ...(page.title !== undefined ? { title: WebTools.cutEnd(hide, page.title) } : {}),
                text: page.text.length > maxChars ? hide.text(page.text) : hide.last(page.text)
              }))
            ),
            Effect.map((page) => {
              const cut = page.text.length > maxChars
                ? `${page.text.slice(0, maxChars)}\n\n[Cut at ${maxChars} characters.]`
                : page.text
              return `${page.title !== undefined ? `# ${page.title}\n\n` : ""}${cut}${page.note ?? ""}`
            }),
            Effect.catchTag("SearchError", (error) => Effect.succeed(`Error: ${error.message}`))
          ))
    }
  })
}
