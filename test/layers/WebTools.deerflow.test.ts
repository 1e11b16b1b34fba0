/**
 * The web tools configured as DeerFlow configures them, over real HTTP against loopback servers playing the
 * providers. Mirrors `test_ddg_search_tools.py` (the entry's `max_results`, `region` and `safesearch` reach the
 * search; `backend`, a DDGS library setting, has no meaning for DuckDuckGo's own endpoint and is named as not
 * read), `test_searxng_client.py` (the entry's `max_results` caps what a SearXNG instance answers),
 * Antler's own fetcher (`antler:web_fetch`: a refused fetch is an `Error:` naming the status) and
 * `test_readability.py` (the page's article is what the model reads, not the navigation around it: here its one main
 * element). The keyed providers (Serper, Brave, Exa, Firecrawl, fastCRW, InfoQuest, GroundRoute) are in
 * WebSearchProviders.deerflow.test.ts; the Jina AI, Tavily, Browserless and Crawl4AI fetchers in
 * WebFetchers.deerflow.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as WebTools from "../../src/layers/WebTools.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const tempDir = tempDirs()

const assemble = (tools: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const app = yield* ConfigFile.fromObject({ tools }, { home: tempDir("antler-web-df-") })
    const assembly = yield* ToolAssembly.assemble({ vision: false }).pipe(
      Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app))))
    )
    return { app, assembly }
  })

const call = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "c", name: tool.name, args }).pipe(
    Effect.map((r) => ({ text: M.contentText(r.message.content), status: r.message.status })),
    provideRun
  )

const DDG_PAGE = Array.from({ length: 8 }, (_, i) =>
  `<div class="result"><a class="result__a" href="https://example.org/${i}">Result ${i}</a>
   <a class="result__snippet" href="#">Snippet ${i}</a></div>`).join("\n")

describe("web_search configured as DeerFlow's DuckDuckGo tool", () => {
  it.scoped("region and safesearch reach DuckDuckGo, max_results caps the results; backend is named unread", () =>
    Effect.gen(function*() {
      const ddg = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, DDG_PAGE))
      const { assembly } = yield* assemble([{
        name: "web_search",
        group: "web",
        use: "deerflow.community.ddg_search.tools:web_search_tool",
        base_url: ddg.url,
        max_results: 3,
        region: "cn-zh",
        safesearch: "off",
        backend: "auto"
      }])
      assert.deepStrictEqual(assembly.warnings, [
        "tools[0] (web_search): keys not used by Antler (ignored): backend"
      ])
      const search = assembly.tools.find((t) => t.name === "web_search")!
      assert.include(Tool.definition(search).description, "Use this tool to find current information, news, articles")
      const result = yield* call(search, { query: "世界杯新闻 2026" })
      assert.strictEqual(result.status, "success")
      assert.deepStrictEqual(JSON.parse(result.text).map((r: { url: string }) => r.url), [
        "https://example.org/0", "https://example.org/1", "https://example.org/2"
      ])
      const form = new URLSearchParams(ddg.requests[0]!.body)
      assert.deepStrictEqual(Object.fromEntries(form), { q: "世界杯新闻 2026", kl: "cn-zh", kp: "-2" })
    }))

  it.scoped("without region and safesearch, DuckDuckGo's own defaults apply (nothing is sent for them)", () =>
    Effect.gen(function*() {
      const ddg = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, DDG_PAGE))
      const { assembly } = yield* assemble([{
        name: "web_search",
        use: "deerflow.community.ddg_search.tools:web_search_tool",
        base_url: ddg.url
      }])
      const search = assembly.tools.find((t) => t.name === "web_search")!
      assert.lengthOf(JSON.parse((yield* call(search, { query: "moose" })).text), 5, "DeerFlow's default of 5")
      assert.deepStrictEqual(Object.fromEntries(new URLSearchParams(ddg.requests[0]!.body)), { q: "moose" })
    }))

  it.effect("a safesearch or region DuckDuckGo cannot take is an issue at its key; other providers ignore them", () =>
    Effect.gen(function*() {
      const { app, assembly } = yield* assemble([
        { name: "web_search", use: "deerflow.community.ddg_search.tools:web_search_tool", safesearch: "strict" },
        { name: "web_search", use: "deerflow.community.ddg_search.tools:web_search_tool", region: "Chinese" },
        { name: "web_search", use: "deerflow.community.searxng.tools:web_search_tool", region: "us-en" }
      ])
      const issues = ToolAssembly.check(app.config)
      assert.deepStrictEqual(issues.map((i) => i.path), ["tools[0].safesearch", "tools[1].region"])
      assert.include(issues[1]!.message, "expected a region such as us-en, cn-zh or wt-wt")
      assert.include(assembly.warnings, "tools[2] (web_search): keys not used by Antler (ignored): region")
    }))
})

describe("image_search configured as DeerFlow's DuckDuckGo image tool", () => {
  it.scoped("the model's size, type and layout filters reach DuckDuckGo; the results carry DeerFlow's usage_hint", () =>
    Effect.gen(function*() {
      const ddg = yield* HttpServer.start((req, res) =>
        req.url.startsWith("/i.js")
          ? HttpServer.reply(res, 200, JSON.stringify({
            results: [{
              title: "Moose",
              image: "https://img.example.org/m.jpg",
              thumbnail: "https://img.example.org/t.jpg"
            }]
          }), "application/json")
          : HttpServer.reply(res, 200, "<script>vqd=\"4-123456789\";</script>"))
      const { assembly } = yield* assemble([{
        name: "image_search",
        use: "deerflow.community.image_search.tools:image_search_tool",
        base_url: ddg.url
      }])
      const images = assembly.tools.find((t) => t.name === "image_search")!
      assert.include(Tool.definition(images).description, "Use this tool BEFORE image generation")
      const result = yield* call(images, { query: "moose", size: "Large", type_image: "photo", layout: "Wide" })
      const parsed = JSON.parse(result.text)
      assert.strictEqual(parsed.usage_hint, WebTools.IMAGE_USAGE_HINT)
      assert.include(parsed.usage_hint, "Use the 'image_url' values as reference images in image generation")
      assert.strictEqual(parsed.results[0].image_url, "https://img.example.org/m.jpg")
      const query = (n: number) => new URL(ddg.requests.filter((r) => r.url.startsWith("/i.js"))[n]!.url, "http://x")
      assert.strictEqual(query(0).searchParams.get("f"), ",size:Large,,type:photo,layout:Wide,")
      yield* call(images, { query: "moose", size: null })
      assert.strictEqual(query(1).searchParams.get("f"), ",,,,,")
      const refused = yield* call(images, { query: "moose", size: "Huge" })
      assert.strictEqual(refused.status, "error")
      assert.include(refused.text, "size")
    }))
})

describe("web_search configured as DeerFlow's SearXNG tool", () => {
  it.scoped("max_results, a number as text too (a $VAR), caps what the instance answers (it may answer more)", () =>
    Effect.gen(function*() {
      const searx = yield* HttpServer.start((_, res) =>
        HttpServer.reply(res, 200, JSON.stringify({
          results: Array.from({ length: 10 }, (_, i) => ({
            title: `Result ${i}`,
            url: `https://example.com/${i}`,
            content: `Desc ${i}`
          }))
        }), "application/json"))
      const { assembly } = yield* assemble([{
        name: "web_search",
        use: "deerflow.community.searxng.tools:web_search_tool",
        base_url: searx.url,
        max_results: "3"
      }])
      const search = assembly.tools.find((t) => t.name === "web_search")!
      const results = JSON.parse((yield* call(search, { query: "test query" })).text)
      assert.deepStrictEqual(results[0], { title: "Result 0", url: "https://example.com/0", snippet: "Desc 0" })
      assert.lengthOf(results, 3)
    }))
})

describe("web_fetch configured as antler:web_fetch", () => {
  it.scoped("is served by Antler's fetcher with DeerFlow's guidance; a provider's api_key is named unread", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, "<p>Velvet grows in spring.</p>"))
      const { assembly } = yield* assemble([{
        name: "web_fetch",
        use: "antler:web_fetch",
        api_key: "tvly-not-needed",
        allow_private_addresses: ["127.0.0.1"]
      }])
      assert.deepStrictEqual(assembly.warnings, ["tools[0] (web_fetch): keys not used by Antler (ignored): api_key"])
      assert.strictEqual(assembly.entries.find((e) => e.name === "web_fetch")!.note, "Antler's own fetcher")
      const fetch = assembly.tools.find((t) => t.name === "web_fetch")!
      const described = Tool.definition(fetch).description
      assert.include(described, "Only fetch EXACT URLs that have been provided directly by the user or have been " +
        "returned in results from the web_search and web_fetch tools.")
      assert.include(described, "Do NOT add www. to URLs that do NOT have them.")
      const result = yield* call(fetch, { url: `${site.url}/velvet` })
      assert.include(result.text, "Velvet grows in spring.")
      assert.deepStrictEqual(site.requests.map((r) => r.url), ["/velvet"])
    }))
})

describe("Antler's own web_fetch", () => {
  it.scoped("a page refused with 429 is an Error: result naming the status", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((_, res) => HttpServer.reply(res, 429, "Too many requests"))
      const { assembly } = yield* assemble([{
        name: "web_fetch",
        use: "antler:web_fetch",
        allow_private_addresses: ["127.0.0.1"]
      }])
      const fetch = assembly.tools.find((t) => t.name === "web_fetch")!
      const result = yield* call(fetch, { url: `${site.url}/busy` })
      assert.strictEqual(result.status, "error")
      assert.match(result.text, /^Error: .*429/)
    }))
})

describe("web_fetch reads the page's content, as DeerFlow's readability step does", () => {
  const page = (body: string) =>
    `<!doctype html><html><head><title>Velvet season</title></head><body>
    <nav><a href="/">Home</a> <a href="/shop">SHOP-LINK</a></nav>${body}
    <footer>COOKIE-BANNER and copyright</footer></body></html>`

  it.scoped("the one main element (else the one article) alone; several, or an empty one: the whole page", () =>
    Effect.gen(function*() {
      const pages: Record<string, string> = {
        "/main": page("<MAIN class=\"post\"><h1>Antlers</h1><p>They are shed every winter.</p></Main >"),
        "/article": page("<div><article><h2>Moose</h2><p>The largest deer.</p></article></div>"),
        "/two": page("<article><p>First story.</p></article><article><p>Second story.</p></article>"),
        "/empty": page("<main></main><div><p>Content outside main.</p></div>")
      }
      const site = yield* HttpServer.start((req, res) => HttpServer.reply(res, 200, pages[req.url] ?? ""))
      const { assembly } = yield* assemble([{
        name: "web_fetch",
        use: "antler:web_fetch",
        allow_private_addresses: ["127.0.0.1"]
      }])
      const fetch = assembly.tools.find((t) => t.name === "web_fetch")!
      const read = (path: string) => Effect.map(call(fetch, { url: `${site.url}${path}` }), (r) => r.text)

      const main = yield* read("/main")
      assert.strictEqual(
        main,
        `# Velvet season\n\nURL: ${site.url}/main\n\n# Antlers\n\nThey are shed every winter.\n`
      )
      const article = yield* read("/article")
      assert.include(article, "## Moose\n\nThe largest deer.")
      for (const text of [main, article]) {
        assert.notInclude(text, "SHOP-LINK")
        assert.notInclude(text, "COOKIE-BANNER")
      }
      for (const [path, content] of [["/two", "Second story."], ["/empty", "Content outside main."]] as const) {
        const whole = yield* read(path)
        assert.include(whole, content)
        assert.include(whole, "SHOP-LINK", `${path}: the whole page`)
        assert.include(whole, "COOKIE-BANNER")
      }
    }))
})
