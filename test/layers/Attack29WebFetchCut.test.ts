/**
 * Attack round 29 on `web_fetch`'s cut (the reader's page at `maxChars`) and one of the process's own secrets (a
 * configured key: `ProcessSecrets`): the page was cut unmasked, and the masks after it find whole values only. A page
 * saying a key back where the cut fell (a request echo, a reader quoting what it was sent) had its beginning read by
 * the model, streamed and kept.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ProviderFetch from "../../src/layers/web/ProviderFetch.js"
import { ProcessSecrets } from "../../src/services/ProcessSecrets.js"
import * as M from "../../src/state/Message.js"
import * as Redact from "../../src/state/Redact.js"
import * as H from "../support/harness.js"

const KEY = "sk-proc-a29-fetch-0123456789abcdef"
const START = KEY.slice(0, 8)

// (a reader whose page holds the key 990 characters in: the cut at 1,000 keeps 10 of it)
const reader: ProviderFetch.Reader = {
  name: "Echo",
  read: () => Effect.succeed({ title: "Echo", text: `${"x".repeat(990)}${KEY}${"y".repeat(500)}` })
}

describe("Attack29: a web_fetch page cut inside one of the process's own secrets", () => {
  it.effect("the model reads the page's head, none of the key", () =>
    Effect.gen(function*() {
      const o = yield* H.run({
        input: "read it",
        tools: [ProviderFetch.webFetch(reader, { maxChars: 1000 })],
        script: [{ toolCalls: [{ name: "web_fetch", args: { url: "https://example.com/echo" } }] }, "Read."]
      })
      const [page] = o.state.messages.filter((m) => m.type === "tool").map(M.text)
      assert.include(page, "[Cut at 1000 characters.]", "the page was cut")
      assert.include(page, "x[redacted]", "masked, then cut")
      assert.notInclude(JSON.stringify(o.requests), START, "what the model read")
      assert.notInclude(JSON.stringify([o.events, o.state]), START, "what is streamed and kept")
    }).pipe(Effect.provideService(ProcessSecrets, Redact.make([KEY])), H.withStore))
})
