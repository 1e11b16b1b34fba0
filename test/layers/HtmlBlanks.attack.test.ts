/**
 * A hostile web page of blanks, found to hold the event loop: turndown's last step trims the Markdown's end with
 * `/[\t\r\n\s]+$/`, whose cost is the square of each run of blanks anywhere in the text, so `web_fetch` of a page of
 * 40,000 `<br>` (160 KB) took twenty seconds, every user of the process waiting; 80,000 `&nbsp;` or spaces in a
 * `<pre>` took seconds each, and an HTML or Word upload is read the same way. The page is served over real HTTP on
 * loopback.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { htmlToMarkdown } from "../../src/layers/documents/Html.js"
import * as WebTools from "../../src/layers/WebTools.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const N = 40_000

describe("a page of blanks", () => {
  it.scoped("web_fetch reads one of 40,000 <br> at once, its text after them kept", () =>
    Effect.gen(function*() {
      const page = `<html><body><p>Before.</p><p>${"<br>".repeat(N)}After the breaks.</p></body></html>`
      const site = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, page))
      const tool = WebTools.webFetch({ allowPrivateAddresses: ["127.0.0.1"] })
      const start = performance.now()
      const text = yield* Tool.invoke(tool, { id: "call_1", name: tool.name, args: { url: site.url } }).pipe(
        Effect.map((result) => M.contentText(result.message.content)),
        provideRun
      )
      assert.isBelow(performance.now() - start, 5000)
      assert.include(text, "Before.")
      assert.include(text, "After the breaks.")
    }))

  it("a run of &nbsp; and spaces in a <pre> are read at once, as they were", () => {
    for (const [html, kept] of [
      [`<p>a${"&nbsp;".repeat(2 * N)}x</p>`, `a${"\u00a0".repeat(2 * N)}x`],
      [`<pre>a${" ".repeat(2 * N)}x</pre>`, `a${" ".repeat(2 * N)}x`]
    ] as const) {
      const start = performance.now()
      const markdown = htmlToMarkdown(html)
      assert.isBelow(performance.now() - start, 2000)
      assert.include(markdown, kept)
    }
  })
})
