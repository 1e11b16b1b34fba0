/**
 * Attack round 30 on Antler's own `web_fetch` (no reader) and one of the process's own secrets (a configured model's
 * key) or the run's: the page is cut at `max_chars`, its body is read to `max_bytes` and its title cut at 300, and
 * none of these cuts masked anything before it; the masks of whole values after them find nothing. A page saying a key
 * back where a cut fell (a request echo) had its beginning read by the model, streamed and kept.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as WebTools from "../../src/layers/WebTools.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"
import * as HttpServer from "../support/httpServer.js"

// (a configured model's key: one of the process's secrets)
const KEY = "sk-proc-a30-fetch-0123456789abcdef"
// (the run's request secret)
const TOKEN = "erp-token-a30-fetch-0123456789abcd"

/** A run whose model fetches a loopback page answering `body` as `type`, with `options`. */
const fetched = (body: string, type: string, options: WebTools.FetchOptions = {}) =>
  Effect.gen(function*() {
    const page = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, body, type))
    const o = yield* H.run({
      input: "read it",
      tools: [WebTools.webFetch({ allowPrivateAddresses: true, ...options })],
      options: { secrets: Redacted.make(new Map([["ERP_TOKEN", TOKEN]])) },
      script: [{ toolCalls: [{ name: "web_fetch", args: { url: `${page.url}/echo` } }] }, "Read."]
    })
    const [text] = o.state.messages.filter((m) => m.type === "tool").map(M.text)
    return { o, text: text ?? "" }
  }).pipe(Effect.provideService(ProcessSecrets, Redact.make([KEY])), H.withStore)

const unseen = (o: H.Outcome, start: string) => {
  assert.notInclude(JSON.stringify(o.requests), start, "what the model read")
  assert.notInclude(JSON.stringify([o.events, o.state]), start, "what is streamed and kept")
}

describe("Attack30: Antler's own web_fetch cut inside a secret", () => {
  it.scopedLive("cut at max_chars inside the process's key: the model reads the page's head, none of the key", () =>
    Effect.gen(function*() {
      const { o, text } = yield* fetched(`${"x".repeat(990)}${KEY}${"y".repeat(500)}`, "text/plain", { maxChars: 1000 })
      assert.include(text, "[Cut at 1000 characters.]", "the page was cut")
      assert.include(text, "xxxx", "the model reads the page")
      unseen(o, KEY.slice(0, 8))
    }))

  it.scopedLive("read to max_bytes inside the run's request secret: none of it", () =>
    Effect.gen(function*() {
      const { o, text } = yield* fetched(`${"x".repeat(1012)}${TOKEN}${"y".repeat(3000)}`, "text/plain", {
        maxBytes: 1024
      })
      assert.include(text, "the rest was not read", "the body was cut")
      unseen(o, TOKEN.slice(0, 8))
    }))

  it.scopedLive("a title cut at 300 inside the process's key: none of it", () =>
    Effect.gen(function*() {
      const html = `<html><head><title>${"t".repeat(288)}${KEY}</title></head><body><p>the page</p></body></html>`
      const { o, text } = yield* fetched(html, "text/html")
      assert.include(text, "# tttt", "the model reads the title")
      unseen(o, KEY.slice(0, 8))
    }))
})
