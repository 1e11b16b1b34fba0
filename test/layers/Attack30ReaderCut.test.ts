/**
 * Attack round 30 on a page a self-hosted reader cut itself (a Crawl4AI server's Markdown, within `web_fetch`'s
 * bound) and the secrets that are not the reader's own: only a page over the bound was masked for the process's
 * secrets and the run's before Antler's cut. A page the reader had cut inside one of them (a request echo, a page
 * quoting what it was sent, cut at the reader's own limit) was passed on as it came, and the masks of whole values
 * after it find nothing: the key's beginning was read by the model, streamed and kept.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Crawl4AI from "../../src/layers/web/Crawl4AI.js"
import * as Firecrawl from "../../src/layers/web/Firecrawl.js"
import * as ProviderFetch from "../../src/layers/web/ProviderFetch.js"
import * as HostResolver from "../../src/services/HostResolver.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"
import * as HttpServer from "../support/httpServer.js"

// (a configured model's key: one of the process's secrets)
const KEY = "sk-proc-a30-reader-0123456789abcdef"
// (the run's request secret)
const TOKEN = "erp-token-a30-reader-0123456789abcd"

const PUBLIC = HostResolver.HostResolver.of({ lookup: () => Effect.succeed(["93.184.215.14"]) })

/** A run whose model fetches a page that a Crawl4AI server at loopback answers with `markdown`. */
const fetched = (markdown: string) => fetchedBy((url) => Crawl4AI.reader({ baseUrl: url, timeoutMs: 5000 }), {
  success: true,
  markdown
})

/** A run whose model fetches a page that a server at loopback, read by `readerAt` its URL, answers with `answer`. */
const fetchedBy = (readerAt: (url: string) => ProviderFetch.Reader, answer: unknown) =>
  Effect.gen(function*() {
    const server = yield* HttpServer.start((_, res) =>
      HttpServer.reply(res, 200, JSON.stringify(answer), "application/json"))
    const reader = readerAt(server.url)
    const o = yield* H.run({
      input: "read it",
      tools: [ProviderFetch.webFetch(reader, { maxChars: 1000, resolver: PUBLIC })],
      options: { secrets: Redacted.make(new Map([["ERP_TOKEN", TOKEN]])) },
      script: [{ toolCalls: [{ name: "web_fetch", args: { url: "https://example.com/echo" } }] }, "Read."]
    })
    const [page] = o.state.messages.filter((m) => m.type === "tool").map(M.text)
    return { o, page: page ?? "" }
  }).pipe(Effect.provideService(ProcessSecrets, Redact.make([KEY])), H.withStore)

const unseen = (o: H.Outcome, start: string) => {
  assert.notInclude(JSON.stringify(o.requests), start, "what the model read")
  assert.notInclude(JSON.stringify([o.events, o.state]), start, "what is streamed and kept")
}

describe("Attack30: a page a self-hosted reader cut inside a secret", () => {
  it.scopedLive("the process's key: the model reads the page, none of the key", () =>
    Effect.gen(function*() {
      // (cut by the reader 12 characters into the key, within web_fetch's bound)
      const { o, page } = yield* fetched(`# Echo\n\nyou sent: ${KEY.slice(0, 12)}`)
      assert.include(page, "you sent: ", "the model reads the page")
      assert.notInclude(page, "[Cut at", "within the bound")
      unseen(o, KEY.slice(0, 8))
    }))

  it.scopedLive("the run's request secret: none of it", () =>
    Effect.gen(function*() {
      const { o, page } = yield* fetched(`# Echo\n\nyou sent: ${TOKEN.slice(0, 12)}`)
      assert.include(page, "you sent: ", "the model reads the page")
      unseen(o, TOKEN.slice(0, 8))
    }))

  it.scopedLive("a self-hosted Firecrawl's title cut at 300 inside the process's key: none of it", () =>
    Effect.gen(function*() {
      const title = `${"t".repeat(288)}${KEY}`
      const { o, page } = yield* fetchedBy((url) => Firecrawl.firecrawlReader({ baseUrl: url, timeoutMs: 5000 }), {
        success: true,
        data: { markdown: "the page", metadata: { title } }
      })
      assert.include(page, "# tttt", "the model reads the title")
      assert.include(page, "the page")
      unseen(o, KEY.slice(0, 8))
    }))
})
