/**
 * Attack round 30 on a search provider's results (a self-hosted SearXNG's) and one of the process's own secrets (a
 * configured model's key) or the run's: a result's title is cut at 300 characters and its snippet at 1,000 (`…` after
 * the cut), masked before the cut for the provider's own key only. A result saying a key back where a cut fell (a page
 * that quotes it, indexed) had its beginning read by the model, streamed and kept, where the masks of whole values after
 * the cut find nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as SearchProviders from "../../src/layers/SearchProviders.js"
import * as WebTools from "../../src/layers/WebTools.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"
import * as HttpServer from "../support/httpServer.js"

// (a configured model's key: one of the process's secrets)
const KEY = "sk-proc-a30-search-0123456789abcdef"
// (the run's request secret)
const TOKEN = "erp-token-a30-search-0123456789abcd"

/** A run whose model searches once, a SearXNG instance at loopback answering `results`. */
const searched = (results: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const searx = yield* HttpServer.start((_, res) =>
      HttpServer.reply(res, 200, JSON.stringify({ results }), "application/json"))
    const service = SearchProviders.searxng({ baseUrl: searx.url, timeoutMs: 5000 })
    const o = yield* H.run({
      input: "search it",
      tools: [WebTools.webSearch(service)],
      options: { secrets: Redacted.make(new Map([["ERP_TOKEN", TOKEN]])) },
      script: [{ toolCalls: [{ name: "web_search", args: { query: "antlers" } }] }, "Found."]
    })
    const [found] = o.state.messages.filter((m) => m.type === "tool").map(M.text)
    return { o, found: found ?? "" }
  }).pipe(Effect.provideService(ProcessSecrets, Redact.make([KEY])), H.withStore)

const unseen = (o: H.Outcome, start: string) => {
  assert.notInclude(JSON.stringify(o.requests), start, "what the model read")
  assert.notInclude(JSON.stringify([o.events, o.state]), start, "what is streamed and kept")
}

describe("Attack30: a search result cut inside a secret that is not the provider's", () => {
  it.scopedLive("a snippet cut at 1,000 inside the process's key: the model reads the result, none of the key", () =>
    Effect.gen(function*() {
      const { o, found } = yield* searched([
        { title: "Echo", url: "https://example.com/echo", content: `${"s".repeat(988)}${KEY} rest` }
      ])
      assert.include(found, "https://example.com/echo", "the model reads the result")
      assert.include(found, "ssss", "and its snippet")
      unseen(o, KEY.slice(0, 8))
    }))

  it.scopedLive("a title cut at 300 inside the run's request secret: none of it", () =>
    Effect.gen(function*() {
      const { o, found } = yield* searched([
        { title: `${"t".repeat(288)}${TOKEN}`, url: "https://example.com/echo", content: "snippet" }
      ])
      assert.include(found, "tttt", "the model reads the title")
      unseen(o, TOKEN.slice(0, 8))
    }))
})
