/**
 * The web tools over real HTTP against loopback servers that play a web site and the search providers: a page
 * read as Markdown, private addresses refused by default (before any connection, by IP literal, by DNS, and
 * after a redirect), the limits (redirects, size, deadline), and Tavily, SearXNG and DuckDuckGo results as the
 * model reads them. Loopback is refused by default, so these tests allow it explicitly where they need it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as zlib from "node:zlib"
import * as SafeHttp from "../../src/layers/SafeHttp.js"
import * as SearchProviders from "../../src/layers/SearchProviders.js"
import * as WebTools from "../../src/layers/WebTools.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const callTool = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "call_1", name: tool.name, args }).pipe(
    Effect.map((result) => M.contentText(result.message.content)),
    provideRun
  )

const PAGE = `<!doctype html><html><head><title>Antler &amp; friends</title><style>p{}</style></head>
<body><h1>Field notes</h1><p>Antlers are <strong>shed</strong> every year. See <a href="https://example.org/deer">deer</a>.</p>
<ul><li>velvet</li><li>tines</li></ul></body></html>`

describe("web_fetch", () => {
  it.scoped("reads a loopback page as Markdown when loopback is allowed", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, PAGE))
      const text = yield* callTool(WebTools.webFetch({ allowPrivateAddresses: ["127.0.0.1"] }), { url: `${site.url}/notes` })
      assert.include(text, "# Antler & friends")
      assert.include(text, `URL: ${site.url}/notes`)
      assert.include(text, "# Field notes")
      assert.include(text, "Antlers are **shed** every year. See [deer](https://example.org/deer).")
      assert.match(text, /-\s+velvet/)
      assert.notInclude(text, "p{}")
    }))

  it.scoped("decompresses a gzip page", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((_, res) => {
        res.writeHead(200, { "content-type": "text/html", "content-encoding": "gzip" })
        res.end(zlib.gzipSync(PAGE))
      })
      const text = yield* callTool(WebTools.webFetch({ allowPrivateAddresses: true }), { url: site.url })
      assert.include(text, "Antlers are **shed**")
    }))

  it.scoped("refuses private addresses by default, before connecting: IP literals, names resolving to them", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, PAGE))
      const fetch = WebTools.webFetch()
      const loopback = yield* callTool(fetch, { url: `${site.url}/` })
      assert.match(loopback, /^Error: web_fetch refused http:\/\/127\.0\.0\.1:\d+\/: 127\.0\.0\.1 is a loopback address/)
      const byName = yield* callTool(fetch, { url: `http://localhost:${site.port}/` })
      assert.include(byName, "localhost resolves to")
      assert.include(byName, "a loopback address")
      const metadata = yield* callTool(fetch, { url: "http://169.254.169.254/latest/meta-data/" })
      assert.include(metadata, "169.254.169.254 is a link-local address")
      const mapped = yield* callTool(fetch, { url: `http://[::ffff:127.0.0.1]:${site.port}/` })
      assert.include(mapped, "a loopback address")
      const privateNet = yield* callTool(fetch, { url: "http://10.1.2.3/" })
      assert.include(privateNet, "10.1.2.3 is a private address")
      assert.lengthOf(site.requests, 0, "nothing reached the server")
      const scheme = yield* callTool(fetch, { url: "file:///etc/passwd" })
      assert.include(scheme, "only http:// and https:// URLs can be fetched")
    }))

  it.scoped("checks every redirect hop: an allowed page cannot redirect to an address that is not allowed", () =>
    Effect.gen(function*() {
      const inside = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, "secret"), "127.0.0.2")
      const site = yield* HttpServer.start((req, res) => {
        res.writeHead(302, { location: req.url === "/hop" ? `${site.url}/page` : `${inside.url}/admin` })
        res.end()
      })
      const fetch = WebTools.webFetch({ allowPrivateAddresses: ["127.0.0.1/32"] })
      const text = yield* callTool(fetch, { url: `${site.url}/start` })
      assert.include(text, "127.0.0.2 is a loopback address")
      assert.lengthOf(inside.requests, 0, "the redirect target was never contacted")
    }))

  it.scopedLive("a page with nothing to read says so, as DeerFlow's extractor does", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((req, res) =>
        req.url === "/blank"
          ? HttpServer.reply(res, 200, "<html><head><script>app()</script></head><body><div id=a></div></body></html>")
          : HttpServer.reply(res, 200, "", "text/plain")
      )
      const fetch = WebTools.webFetch({ allowPrivateAddresses: true })
      assert.strictEqual(
        yield* callTool(fetch, { url: `${site.url}/blank` }),
        `URL: ${site.url}/blank\n\nNo content could be extracted from this page\n`
      )
      assert.strictEqual(
        yield* callTool(fetch, { url: `${site.url}/empty` }),
        `URL: ${site.url}/empty\n\nNo content could be extracted from this page\n`
      )
    }))

  it.scopedLive("bounds redirects, size and time", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((req, res) => {
        if (req.url.startsWith("/loop")) {
          res.writeHead(301, { location: `/loop${req.url.length}` })
          return res.end()
        }
        if (req.url === "/big") return HttpServer.reply(res, 200, `<p>${"word ".repeat(50_000)}</p>`)
        if (req.url === "/image") return HttpServer.reply(res, 200, "\x89PNG....", "image/png")
        if (req.url === "/missing") return HttpServer.reply(res, 404, "no")
        // /slow: never answers
      })
      const fetch = WebTools.webFetch({ allowPrivateAddresses: true, maxRedirects: 2, maxBytes: 10_000, timeoutMs: 300 })
      assert.include(yield* callTool(fetch, { url: `${site.url}/loop` }), "more than 2 redirects")
      const big = yield* callTool(fetch, { url: `${site.url}/big` })
      assert.include(big, "[The page is longer than 10 KiB; the rest was not read.]")
      assert.isBelow(big.length, 11_000)
      assert.include(yield* callTool(fetch, { url: `${site.url}/image` }), "is image/png")
      assert.include(yield* callTool(fetch, { url: `${site.url}/missing` }), "answered HTTP 404")
      assert.include(yield* callTool(fetch, { url: `${site.url}/slow` }), "no complete answer within 0.3 s")
    }))
})

describe("the address policy", () => {
  it("classifies addresses, including IPv4 carried inside IPv6", () => {
    const strict = SafeHttp.publicOnly()
    assert.isUndefined(SafeHttp.addressProblem("93.184.216.34", strict))
    assert.isUndefined(SafeHttp.addressProblem("2606:4700::1111", strict))
    assert.strictEqual(SafeHttp.addressProblem("100.100.1.1", strict), "a shared (CGNAT) address")
    assert.strictEqual(SafeHttp.addressProblem("fd12::1", strict), "a private (unique local) address")
    assert.strictEqual(SafeHttp.addressProblem("64:ff9b::a00:1", strict), "a private address")
    assert.strictEqual(SafeHttp.addressProblem("2002:7f00:1::", strict), "a loopback address")
    assert.isUndefined(SafeHttp.addressProblem("10.0.0.5", SafeHttp.publicOnly(["10.0.0.0/24"])))
    assert.isDefined(SafeHttp.addressProblem("10.0.1.5", SafeHttp.publicOnly(["10.0.0.0/24"])))
    assert.isTrue(SafeHttp.isRange("10.0.0.0/8"))
    assert.isFalse(SafeHttp.isRange("10.0.0.0/33"))
    assert.isFalse(SafeHttp.isRange("intranet"))
  })
})

describe("IPv4 addresses carried inside IPv6", () => {
  // Each spelling of an IPv6 address that embeds a non-public IPv4 address, and the address it carries.
  const refused: ReadonlyArray<readonly [string, string]> = [
    ["::127.0.0.1", "a loopback address"], // IPv4-compatible
    ["::7f00:1", "a loopback address"],
    ["::10.0.0.1", "a private address"],
    ["::ffff:127.0.0.1", "a loopback address"], // IPv4-mapped, every spelling
    ["::ffff:7f00:1", "a loopback address"],
    ["0:0:0:0:0:FFFF:7F00:0001", "a loopback address"],
    ["0::ffff:169.254.169.254", "a link-local address (cloud metadata lives here)"],
    ["::ffff:0:7f00:1", "a loopback address"], // IPv4-translated (SIIT)
    ["64:ff9b::127.0.0.1", "a loopback address"], // NAT64, well-known prefix
    ["64:ff9b::a9fe:a9fe", "a link-local address (cloud metadata lives here)"],
    ["64:ff9b:1::7f00:1", "a local-use NAT64 address (it may reach any IPv4 address of its network)"],
    ["64:ff9b:1:7f00:1::", "a local-use NAT64 address (it may reach any IPv4 address of its network)"],
    ["2002:7f00:1::1", "a loopback address"], // 6to4: bits 16-48
    ["2002:a00:1:ffff::", "a private address"],
    ["2001:0:4136:e378:8000:63bf:80ff:fffe", "a loopback address"], // Teredo, client 127.0.0.1 (bits inverted)
    ["2001:0:4136:e378:8000:63bf:f5ff:fffe", "a private address"], // Teredo, client 10.0.0.1
    ["2001:0:a00:1:8000:63bf:f7f7:f7f7", "a private address"] // Teredo, server 10.0.0.1
  ]

  it.scoped("web_fetch refuses each spelling before connecting, naming what the embedded address is", () =>
    Effect.gen(function*() {
      const fetch = WebTools.webFetch()
      for (const [address, what] of refused) {
        const text = yield* callTool(fetch, { url: `http://[${address}]:8080/` })
        assert.match(text, /^Error: web_fetch refused http:\/\/\[/, address)
        assert.include(text, `is ${what}`, address)
      }
    }))

  it("an embedded public address is allowed where the rules allow it; a range in allow covers the carried address", () => {
    const strict = SafeHttp.publicOnly()
    for (const address of ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7"]) {
      assert.isUndefined(SafeHttp.addressProblem(address, strict), address)
    }
    assert.strictEqual(SafeHttp.addressProblem("::1", strict), "a loopback address")
    assert.strictEqual(SafeHttp.addressProblem("::", strict), "an unspecified address")
    assert.isUndefined(SafeHttp.addressProblem("64:ff9b::a00:5", SafeHttp.publicOnly(["10.0.0.0/24"])))
    assert.isUndefined(SafeHttp.addressProblem("2001:0:4136:e378:8000:63bf:f5ff:fffe", SafeHttp.publicOnly(["10.0.0.1"])))
    assert.isDefined(SafeHttp.addressProblem("64:ff9b:1::808:808", strict), "local-use NAT64 is refused whole")
    assert.isUndefined(SafeHttp.addressProblem("64:ff9b:1::808:808", SafeHttp.publicOnly(["64:ff9b:1::/48"])))
  })
})

describe("web_search providers", () => {
  it.scoped("Tavily: a POST with the key as a bearer token; results as {title, url, snippet}", () =>
    Effect.gen(function*() {
      const tavily = yield* HttpServer.start((_, res) =>
        HttpServer.reply(res, 200, JSON.stringify({
          query: "deer",
          results: [
            { title: "Deer\u001b[31m facts", url: "https://example.org/deer", content: "Deer shed antlers.", score: 0.9 },
            { title: "bad", url: "javascript:alert(1)", content: "x" }
          ]
        }), "application/json"))
      const provider = SearchProviders.tavily({ baseUrl: tavily.url, apiKey: Redacted.make("tvly-secret"), timeoutMs: 5000 })
      const text = yield* callTool(WebTools.webSearch(provider, 3), { query: "deer antlers" })
      assert.deepStrictEqual(JSON.parse(text), [{ title: "Deer [31m facts", url: "https://example.org/deer", snippet: "Deer shed antlers." }])
      const request = tavily.requests[0]!
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.url, "/search")
      assert.strictEqual(request.headers.authorization, "Bearer tvly-secret")
      assert.deepInclude(JSON.parse(request.body), { query: "deer antlers", max_results: 3 })
    }))

  it.scoped("Tavily: a refused key is a readable error result", () =>
    Effect.gen(function*() {
      const tavily = yield* HttpServer.start((_, res) => HttpServer.reply(res, 401, "{}", "application/json"))
      const provider = SearchProviders.tavily({ baseUrl: tavily.url, apiKey: Redacted.make("bad"), timeoutMs: 5000 })
      const text = yield* callTool(WebTools.webSearch(provider), { query: "deer" })
      assert.strictEqual(text, "Error: web_search failed: Tavily answered HTTP 401 (check its api_key).")
    }))

  it.scoped("SearXNG: the JSON API for web and image results; a 403 explains the json format setting", () =>
    Effect.gen(function*() {
      let forbid = false
      const searx = yield* HttpServer.start((req, res) => {
        if (forbid) return HttpServer.reply(res, 403, "Forbidden", "text/plain")
        const images = new URL(req.url, "http://x").searchParams.get("categories") === "images"
        HttpServer.reply(res, 200, JSON.stringify({
          results: images
            ? [{ title: "A stag", url: "https://example.org/stag", img_src: "https://img.example.org/stag.jpg", thumbnail_src: "https://img.example.org/t.jpg" }]
            : [{ title: "Red deer", url: "https://en.wikipedia.org/wiki/Red_deer", content: "The red deer is..." }]
        }), "application/json")
      })
      const provider = SearchProviders.searxng({ baseUrl: searx.url, timeoutMs: 5000 })
      const web = JSON.parse(yield* callTool(WebTools.webSearch(provider), { query: "red deer" }))
      assert.strictEqual(web[0].url, "https://en.wikipedia.org/wiki/Red_deer")
      const query = new URL(searx.requests[0]!.url, "http://x").searchParams
      assert.deepStrictEqual([query.get("q"), query.get("format")], ["red deer", "json"])
      const images = JSON.parse(yield* callTool(WebTools.imageSearch(provider as any), { query: "stag" }))
      assert.strictEqual(images.results[0].image_url, "https://img.example.org/stag.jpg")
      assert.strictEqual(images.results[0].source_url, "https://example.org/stag")
      forbid = true
      const refused = yield* callTool(WebTools.webSearch(provider), { query: "deer" })
      assert.include(refused, "add json to search.formats in its settings.yml")
    }))

  it.scoped("DuckDuckGo: results read from its HTML page (real links behind its redirects); images via vqd", () =>
    Effect.gen(function*() {
      const ddg = yield* HttpServer.start((req, res) => {
        if (req.url === "/html/") {
          return HttpServer.reply(res, 200, `<div class="result"><h2><a rel="nofollow" class="result__a"
            href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fmoose&amp;rut=abc">The <b>Moose</b> &amp; Elk</a></h2>
            <a class="result__snippet" href="#">Moose are the largest <b>deer</b>.</a></div>
            <div class="result"><a class="result__a" href="https://example.com/direct">Direct</a></div>`)
        }
        if (req.url.startsWith("/i.js")) {
          return HttpServer.reply(res, 200, JSON.stringify({
            results: [{ title: "Moose", image: "https://img.example.org/moose.jpg", thumbnail: "https://img.example.org/m.jpg", url: "https://example.org/moose" }]
          }), "application/json")
        }
        HttpServer.reply(res, 200, "<script>vqd=\"4-123456789\";</script>")
      })
      const provider = SearchProviders.duckduckgo({ baseUrl: ddg.url, timeoutMs: 5000 })
      const web = JSON.parse(yield* callTool(WebTools.webSearch(provider), { query: "moose" }))
      assert.deepStrictEqual(web, [
        { title: "The Moose & Elk", url: "https://example.org/moose", snippet: "Moose are the largest deer." },
        { title: "Direct", url: "https://example.com/direct", snippet: "" }
      ])
      assert.strictEqual(ddg.requests[0]!.body, "q=moose")
      const images = JSON.parse(yield* callTool(WebTools.imageSearch(provider as any), { query: "moose" }))
      // the full-size image, not the thumbnail (DeerFlow's test_image_search regression)
      assert.strictEqual(images.results[0].image_url, "https://img.example.org/moose.jpg")
      assert.strictEqual(images.results[0].thumbnail_url, "https://img.example.org/m.jpg")
      const imageCall = ddg.requests.find((r) => r.url.startsWith("/i.js"))!
      assert.strictEqual(new URL(imageCall.url, "http://x").searchParams.get("vqd"), "4-123456789")
    }))

  it.scoped("an unreachable provider is an error result, not a failed run", () =>
    Effect.gen(function*() {
      const gone = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, ""))
      const url = gone.url
      const provider = SearchProviders.searxng({ baseUrl: url.replace(/:\d+$/, ":9"), timeoutMs: 2000 })
      const text = yield* callTool(WebTools.webSearch(provider), { query: "deer" })
      assert.match(text, /^Error: web_search failed: SearXNG could not be reached at http:\/\/127\.0\.0\.1:9/)
    }))
})
