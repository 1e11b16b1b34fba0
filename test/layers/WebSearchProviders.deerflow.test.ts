/**
 * DeerFlow's keyed search providers (Serper, Brave, Exa, Firecrawl, fastCRW, InfoQuest, GroundRoute) configured as
 * DeerFlow configures them, over real HTTP against loopback servers playing each provider. Mirrors
 * `test_serper_tools.py`, `test_brave_tools.py`, `test_exa_tools.py`, `test_firecrawl_tools.py`,
 * `test_fastcrw_tools.py`, `test_infoquest_client.py` and `test_groundroute_tools.py`: the request each sends (path,
 * key header, body), the results the model reads, a key from the entry or from the environment DeerFlow reads, a
 * missing key, a refusal worded as DeerFlow words it, a provider that never answers; and the key is never in what
 * the model reads, even when the provider repeats it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import { HostResolver } from "../../src/services/HostResolver.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const tempDir = tempDirs()

const KEY = "sk-test-provider-key-0123456789"

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const assemble = (tools: ReadonlyArray<Record<string, unknown>>, env: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const app = yield* ConfigFile.fromObject({ tools }, { home: tempDir("antler-search-df-") })
    return yield* ToolAssembly.assemble({ vision: false }).pipe(
      Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app)))),
      // every name is public here (no DNS in tests): the fetchers that resolve one are tested in WebFetchers
      Effect.provideService(HostResolver, HostResolver.of({ lookup: () => Effect.succeed(["93.184.215.14"]) })),
      withEnv(env)
    )
  })

const call = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "c", name: tool.name, args }).pipe(
    Effect.map((r) => ({ text: M.contentText(r.message.content), status: r.message.status })),
    provideRun
  )

const json = (value: unknown): HttpServer.Handler => (_, res) =>
  HttpServer.reply(res, 200, JSON.stringify(value), "application/json")

/** The one tool of an assembly named `name`, failing the test when it is missing. */
const toolOf = (assembly: ToolAssembly.Assembly, name: string) => {
  const tool = assembly.tools.find((t) => t.name === name)
  assert.isDefined(tool, `${name} is there (warnings: ${assembly.warnings.join("; ")})`)
  return tool!
}

const search = (use: string, url: string, extra: Record<string, unknown> = {}, env: Record<string, string> = {}) =>
  Effect.flatMap(
    assemble([{ name: "web_search", group: "web", use, base_url: url, api_key: KEY, ...extra }], env),
    (assembly) => Effect.succeed(toolOf(assembly, "web_search"))
  )

describe("Serper (deerflow.community.serper.tools)", () => {
  it.scopedLive("web_search posts {q, num} with X-API-KEY to /search; organic results become {title, url, snippet}", () =>
    Effect.gen(function*() {
      const serper = yield* HttpServer.start(json({
        organic: [
          { title: "Effect", link: "https://effect.website/", snippet: "Build robust apps" },
          { title: "No link", snippet: "dropped" },
          { title: "Docs", link: "https://effect.website/docs", snippet: "Read the docs" }
        ]
      }))
      const tool = yield* search("deerflow.community.serper.tools:web_search_tool", serper.url, { max_results: 15 })
      const result = yield* call(tool, { query: `  ${"x".repeat(600)}  ` })
      const sent = serper.requests[0]!
      assert.strictEqual(sent.method, "POST")
      assert.strictEqual(sent.url, "/search")
      assert.strictEqual(sent.headers["x-api-key"], KEY)
      // the query trimmed and cut at 500 characters, the count at Serper's 10
      assert.deepStrictEqual(JSON.parse(sent.body), { q: "x".repeat(500), num: 10 })
      assert.deepStrictEqual(JSON.parse(result.text), [
        { title: "Effect", url: "https://effect.website/", snippet: "Build robust apps" },
        { title: "Docs", url: "https://effect.website/docs", snippet: "Read the docs" }
      ])
    }))

  it.scopedLive("image_search posts to /images; private and localhost image URLs are dropped, not swapped", () =>
    Effect.gen(function*() {
      const serper = yield* HttpServer.start(json({
        images: [
          { title: "Cat", imageUrl: "https://img.example/cat.jpg", thumbnailUrl: "https://t.example/cat.jpg" },
          { title: "Metadata", imageUrl: "http://169.254.169.254/latest", thumbnailUrl: "http://0x7f000001/t.jpg" },
          { title: "Only thumb", thumbnailUrl: "https://t.example/dog.jpg" },
          { title: "Local", imageUrl: "http://localhost./x.jpg" }
        ]
      }))
      const assembly = yield* assemble([{
        name: "image_search",
        use: "deerflow.community.serper.tools:image_search_tool",
        base_url: serper.url
      }], { SERPER_API_KEY: KEY })
      const result = yield* call(toolOf(assembly, "image_search"), { query: "cats" })
      assert.strictEqual(serper.requests[0]!.url, "/images")
      assert.strictEqual(serper.requests[0]!.headers["x-api-key"], KEY, "the key from SERPER_API_KEY")
      const answer = JSON.parse(result.text)
      assert.deepStrictEqual(answer.results, [
        { title: "Cat", image_url: "https://img.example/cat.jpg", thumbnail_url: "https://t.example/cat.jpg" },
        { title: "Only thumb", image_url: "https://t.example/dog.jpg", thumbnail_url: "https://t.example/dog.jpg" }
      ])
      assert.strictEqual(answer.total_results, 2)
      assert.include(answer.usage_hint, "image_url")
    }))

  it.scopedLive("without a key it is left out, in DeerFlow's words; a refusal is 'Serper API error: HTTP n'", () =>
    Effect.gen(function*() {
      const unkeyed = yield* assemble([{ name: "web_search", use: "deerflow.community.serper.tools:web_search_tool" }])
      assert.notInclude(unkeyed.tools.map((t) => t.name), "web_search")
      assert.deepStrictEqual(unkeyed.warnings, [
        "tools[0] (web_search): left out: SERPER_API_KEY is not configured: set api_key: $SERPER_API_KEY in its " +
        "entry, or SERPER_API_KEY in the environment"
      ])
      // the provider's refusal repeats the key: the model never reads it
      const serper = yield* HttpServer.start((_, res) => HttpServer.reply(res, 403, `{"message":"bad key ${KEY}"}`))
      const tool = yield* search("deerflow.community.serper.tools:web_search_tool", serper.url)
      const result = yield* call(tool, { query: "q" })
      assert.strictEqual(result.text, "Error: web_search failed: Serper API error: HTTP 403 (check its api_key).")
    }))
})

describe("Brave (deerflow.community.brave.tools)", () => {
  it.scopedLive("web_search GETs /res/v1/web/search with q, count, text_decorations and X-Subscription-Token", () =>
    Effect.gen(function*() {
      const brave = yield* HttpServer.start(json({
        web: { results: [{ title: "Brave", url: "https://brave.com/", description: "Private search" }] }
      }))
      const tool = yield* search("deerflow.community.brave.tools:web_search_tool", brave.url, { max_results: "7" })
      const result = yield* call(tool, { query: "private search engine" })
      const sent = brave.requests[0]!
      assert.strictEqual(sent.method, "GET")
      const url = new URL(sent.url, brave.url)
      assert.strictEqual(url.pathname, "/res/v1/web/search")
      assert.deepStrictEqual(Object.fromEntries(url.searchParams), {
        q: "private search engine",
        count: "7",
        text_decorations: "false"
      })
      assert.strictEqual(sent.headers["x-subscription-token"], KEY)
      assert.deepStrictEqual(JSON.parse(result.text), [
        { title: "Brave", url: "https://brave.com/", snippet: "Private search" }
      ])
    }))

  it.scopedLive("image_search: the full image, its thumbnail, its page and the shown image's size", () =>
    Effect.gen(function*() {
      const brave = yield* HttpServer.start(json({
        results: [
          {
            title: "Tower",
            url: "https://page.example/tower",
            source: "page.example",
            thumbnail: { src: "https://imgs.search.brave.com/t.jpg", width: 200, height: 100 },
            properties: { url: "https://page.example/tower.jpg", width: 2000, height: 1000 }
          },
          { title: "Inside", properties: { url: "http://10.0.0.5/x.jpg" }, thumbnail: { src: "http://[::1]/t.jpg" } }
        ]
      }))
      const assembly = yield* assemble([{
        name: "image_search",
        use: "deerflow.community.brave.tools:image_search_tool",
        base_url: brave.url
      }], { BRAVE_SEARCH_API_KEY: KEY })
      const result = yield* call(toolOf(assembly, "image_search"), { query: "eiffel tower" })
      assert.strictEqual(new URL(brave.requests[0]!.url, brave.url).pathname, "/res/v1/images/search")
      assert.isNull(new URL(brave.requests[0]!.url, brave.url).searchParams.get("country"))
      assert.strictEqual(brave.requests[0]!.headers["x-subscription-token"], KEY)
      assert.deepStrictEqual(JSON.parse(result.text).results, [{
        title: "Tower",
        image_url: "https://page.example/tower.jpg",
        thumbnail_url: "https://imgs.search.brave.com/t.jpg",
        source_url: "https://page.example/tower",
        width: 2000,
        height: 1000
      }])
    }))

  // DeerFlow's image_search_tool sends the entry's country, search_lang, safesearch and spellcheck
  it.scopedLive("image_search sends the entry's country, search_lang, safesearch and spellcheck; bad ones refused", () =>
    Effect.gen(function*() {
      const brave = yield* HttpServer.start(json({ results: [] }))
      const assembly = yield* assemble([{
        name: "image_search",
        use: "deerflow.community.brave.tools:image_search_tool",
        base_url: brave.url,
        country: "de",
        search_lang: "zh-hans",
        safesearch: "off",
        spellcheck: false
      }], { BRAVE_SEARCH_API_KEY: KEY })
      yield* call(toolOf(assembly, "image_search"), { query: "tower" })
      const params = new URL(brave.requests[0]!.url, brave.url).searchParams
      assert.deepStrictEqual(
        ["country", "search_lang", "safesearch", "spellcheck"].map((key) => params.get(key)),
        ["de", "zh-hans", "off", "false"]
      )
      const bad = yield* Effect.either(assemble([{
        name: "image_search",
        use: "deerflow.community.brave.tools:image_search_tool",
        country: "Germany"
      }], { BRAVE_SEARCH_API_KEY: KEY }))
      assert.include(JSON.stringify(bad), "expected a two-letter country code")
    }))

  it.scopedLive("a refusal is 'Brave Search API error: HTTP n'; a missing key names BRAVE_SEARCH_API_KEY", () =>
    Effect.gen(function*() {
      const brave = yield* HttpServer.start((_, res) => HttpServer.reply(res, 500, "oops"))
      const tool = yield* search("deerflow.community.brave.tools:web_search_tool", brave.url)
      assert.strictEqual((yield* call(tool, { query: "q" })).text,
        "Error: web_search failed: Brave Search API error: HTTP 500.")
      const unkeyed = yield* assemble([{ name: "web_search", use: "deerflow.community.brave.tools:web_search_tool" }])
      assert.include(unkeyed.warnings[0], "BRAVE_SEARCH_API_KEY is not configured")
    }))
})

describe("Exa (deerflow.community.exa.tools)", () => {
  it.scopedLive("posts {query, type, numResults, contents.highlights} with x-api-key; highlights are the snippet", () =>
    Effect.gen(function*() {
      const exa = yield* HttpServer.start(json({
        results: [
          { title: "Test Title 1", url: "https://example.com/1", highlights: ["This is a highlight about the topic."] },
          { title: "Test Title 2", url: "https://example.com/2", highlights: ["First highlight.", "Second."] },
          { title: "No Highlights", url: "https://example.com/empty", highlights: null }
        ]
      }))
      const tool = yield* search("deerflow.community.exa.tools:web_search_tool", exa.url, {
        max_results: 10,
        search_type: "neural",
        contents_max_characters: 2000
      })
      const result = yield* call(tool, { query: "neural search" })
      const sent = exa.requests[0]!
      assert.strictEqual(sent.url, "/search")
      assert.strictEqual(sent.headers["x-api-key"], KEY)
      assert.deepStrictEqual(JSON.parse(sent.body), {
        query: "neural search",
        type: "neural",
        numResults: 10,
        contents: { highlights: { maxCharacters: 2000 } }
      })
      assert.deepStrictEqual(JSON.parse(result.text).map((r: { snippet: string }) => r.snippet), [
        "This is a highlight about the topic.",
        "First highlight. Second.",
        ""
      ])
    }))

  it.scopedLive("DeerFlow's defaults (auto, 5, 1000) and the key from EXA_API_KEY; its keys are unread elsewhere", () =>
    Effect.gen(function*() {
      const exa = yield* HttpServer.start(json({ results: [] }))
      const assembly = yield* assemble([{
        name: "web_search",
        use: "deerflow.community.exa.tools:web_search_tool",
        base_url: exa.url
      }], { EXA_API_KEY: KEY })
      const result = yield* call(toolOf(assembly, "web_search"), { query: "nothing" })
      assert.strictEqual(result.text, "No results found for: nothing")
      assert.strictEqual(exa.requests[0]!.headers["x-api-key"], KEY)
      assert.deepStrictEqual(JSON.parse(exa.requests[0]!.body), {
        query: "nothing",
        type: "auto",
        numResults: 5,
        contents: { highlights: { maxCharacters: 1000 } }
      })
      const other = yield* assemble([{
        name: "web_search",
        use: "deerflow.community.serper.tools:web_search_tool",
        api_key: KEY,
        search_type: "neural"
      }])
      assert.deepStrictEqual(other.warnings, ["tools[0] (web_search): keys not used by Antler (ignored): search_type"])
    }))
})

describe("Firecrawl and fastCRW (deerflow.community.firecrawl.tools, deerflow.community.fastcrw.tools)", () => {
  it.scopedLive("Firecrawl: POST /v2/search {query, limit} with a bearer key; data.web becomes the results", () =>
    Effect.gen(function*() {
      const firecrawl = yield* HttpServer.start(json({
        success: true,
        data: { web: [{ title: "Result", url: "https://example.com", description: "Snippet" }] }
      }))
      const tool = yield* search("deerflow.community.firecrawl.tools:web_search_tool", firecrawl.url, {
        max_results: 7
      })
      const result = yield* call(tool, { query: "test query" })
      const sent = firecrawl.requests[0]!
      assert.strictEqual(sent.url, "/v2/search")
      assert.strictEqual(sent.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(sent.body), { query: "test query", limit: 7 })
      assert.deepStrictEqual(JSON.parse(result.text), [
        { title: "Result", url: "https://example.com/", snippet: "Snippet" }
      ])
    }))

  it.scopedLive("fastCRW: its key and address from CRW_API_KEY and CRW_API_URL; self-hosted without a key too", () =>
    Effect.gen(function*() {
      const crw = yield* HttpServer.start(json({ success: true, data: { web: [] } }))
      const assembly = yield* assemble([{ name: "web_search", use: "deerflow.community.fastcrw.tools:web_search_tool" }], {
        CRW_API_KEY: KEY,
        CRW_API_URL: `${crw.url}/api`
      })
      const result = yield* call(toolOf(assembly, "web_search"), { query: "q" })
      assert.strictEqual(result.text, "No results found for: q")
      assert.strictEqual(crw.requests[0]!.url, "/api/v2/search")
      assert.strictEqual(crw.requests[0]!.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(crw.requests[0]!.body), { query: "q", limit: 5 })
      const keyless = yield* assemble([{
        name: "web_search",
        use: "deerflow.community.fastcrw.tools:web_search_tool",
        base_url: crw.url
      }])
      yield* call(toolOf(keyless, "web_search"), { query: "q" })
      assert.isUndefined(crw.requests[1]!.headers.authorization)
      const bad = yield* assemble([{ name: "web_search", use: "deerflow.community.fastcrw.tools:web_search_tool" }], {
        CRW_API_URL: "self-hosted:3000"
      })
      assert.deepStrictEqual(bad.warnings, [
        "tools[0] (web_search): left out: CRW_API_URL is not an http:// or https:// URL"
      ])
    }))

  it.scopedLive("Firecrawl needs a key for its own service, not for a base_url of yours", () =>
    Effect.gen(function*() {
      const cloud = yield* assemble([{ name: "web_search", use: "deerflow.community.firecrawl.tools:web_search_tool" }])
      assert.deepStrictEqual(cloud.warnings, [
        "tools[0] (web_search): left out: FIRECRAWL_API_KEY is not configured: set api_key: $FIRECRAWL_API_KEY in " +
        "its entry, or FIRECRAWL_API_KEY in the environment"
      ])
      const own = yield* assemble([{
        name: "web_search",
        use: "deerflow.community.firecrawl.tools:web_search_tool",
        base_url: "http://127.0.0.1:3002"
      }])
      assert.include(own.tools.map((t) => t.name), "web_search")
    }))
})

const INFOQUEST_WEB = {
  search_result: {
    results: [{
      content: {
        results: {
          organic: [
            { title: "Page 1", desc: "Description 1", url: "https://example.com/1" },
            { title: "Again", desc: "Same URL", url: "https://example.com/1" }
          ],
          top_stories: {
            items: [
              { title: "News 1", source: "Wire", time_frame: "2 hours ago", url: "https://news.example/1" },
              { source: "Untitled", url: "https://news.example/2" }
            ]
          }
        }
      }
    }]
  }
}

describe("InfoQuest (deerflow.community.infoquest.tools)", () => {
  it.scopedLive("web_search posts {format, query, time_range} with a bearer key; pages then news, each URL once", () =>
    Effect.gen(function*() {
      const infoquest = yield* HttpServer.start(json(INFOQUEST_WEB))
      const tool = yield* search("deerflow.community.infoquest.tools:web_search_tool", infoquest.url, {
        search_time_range: 30
      })
      const result = yield* call(tool, { query: "test query" })
      const sent = infoquest.requests[0]!
      assert.strictEqual(sent.method, "POST")
      assert.strictEqual(sent.url, "/")
      assert.strictEqual(sent.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(sent.body), { format: "JSON", query: "test query", time_range: 30 })
      assert.deepStrictEqual(JSON.parse(result.text), [
        { title: "Page 1", url: "https://example.com/1", snippet: "Description 1" },
        { title: "News 1", url: "https://news.example/1", snippet: "" }
      ])
    }))

  it.scopedLive("image_search asks for Images of image_size; an answer without search_result is the wrong format", () =>
    Effect.gen(function*() {
      let answer: unknown = {
        search_result: {
          results: [{
            content: {
              results: {
                images_results: [
                  { original: "https://img.example/1.jpg", title: "Image 1" },
                  { original: "https://img.example/1.jpg", title: "Duplicate" }
                ]
              }
            }
          }]
        }
      }
      const infoquest = yield* HttpServer.start((_, res) =>
        HttpServer.reply(res, 200, JSON.stringify(answer), "application/json")
      )
      const assembly = yield* assemble([{
        name: "image_search",
        use: "deerflow.community.infoquest.tools:image_search_tool",
        base_url: infoquest.url,
        image_size: "l",
        image_search_time_range: 7
      }], { INFOQUEST_API_KEY: KEY })
      const images = toolOf(assembly, "image_search")
      const result = yield* call(images, { query: "cats" })
      assert.deepStrictEqual(JSON.parse(infoquest.requests[0]!.body), {
        format: "JSON",
        query: "cats",
        search_type: "Images",
        time_range: 7,
        image_size: "l"
      })
      assert.strictEqual(infoquest.requests[0]!.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(result.text).results, [{ title: "Image 1", image_url: "https://img.example/1.jpg" }])
      answer = { content: "something else" }
      assert.strictEqual((yield* call(images, { query: "cats" })).text,
        "Error: image_search failed: image search API return wrong format.")
    }))

  it.scopedLive("without a key the request goes unauthenticated (as DeerFlow's); a refusal names the search", () =>
    Effect.gen(function*() {
      const infoquest = yield* HttpServer.start((_, res) => HttpServer.reply(res, 401, "unauthorized"))
      const assembly = yield* assemble([{
        name: "web_search",
        use: "deerflow.community.infoquest.tools:web_search_tool",
        base_url: infoquest.url
      }])
      const result = yield* call(toolOf(assembly, "web_search"), { query: "q" })
      assert.isUndefined(infoquest.requests[0]!.headers.authorization)
      assert.strictEqual(result.text,
        "Error: web_search failed: InfoQuest Web-Search - Search tool execution failed | HTTP 401 (check its api_key).")
    }))
})

describe("GroundRoute (deerflow.community.groundroute.tools)", () => {
  it.scopedLive("posts {query, max_results} to /v1/search with a bearer key; each result names its engine", () =>
    Effect.gen(function*() {
      const groundroute = yield* HttpServer.start(json({
        results: [
          {
            title: "A",
            url: "https://a.example/",
            snippet: "alpha",
            content: "the whole page",
            source_engine: "serper",
            published_at: "2026-01-01"
          }
        ]
      }))
      const tool = yield* search("deerflow.community.groundroute.tools:web_search_tool", groundroute.url, {
        max_results: 3
      })
      const result = yield* call(tool, { query: "alpha" })
      const sent = groundroute.requests[0]!
      assert.strictEqual(sent.url, "/v1/search")
      assert.strictEqual(sent.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(sent.body), { query: "alpha", max_results: 3 })
      assert.deepStrictEqual(JSON.parse(result.text), [
        { title: "A", url: "https://a.example/", snippet: "alpha", source_engine: "serper" }
      ])
    }))

  it.scopedLive("a refusal is 'GroundRoute API error: HTTP n'; a missing key names GROUNDROUTE_API_KEY", () =>
    Effect.gen(function*() {
      const groundroute = yield* HttpServer.start((_, res) => HttpServer.reply(res, 502, "bad gateway"))
      const tool = yield* search("deerflow.community.groundroute.tools:web_search_tool", groundroute.url)
      assert.strictEqual((yield* call(tool, { query: "q" })).text,
        "Error: web_search failed: GroundRoute API error: HTTP 502.")
      const unkeyed = yield* assemble([{ name: "web_search", use: "deerflow.community.groundroute.tools:web_search_tool" }])
      assert.include(unkeyed.warnings[0], "GROUNDROUTE_API_KEY is not configured")
    }))
})

describe("every keyed provider", () => {
  const USES = ["serper", "brave", "exa", "firecrawl", "fastcrw", "infoquest", "groundroute"]

  /** A server answering every provider's search with one result, `echo`, in that provider's shape. */
  const echoingProviders = (echo: { readonly title: string; readonly url: string; readonly snippet: string }) =>
    HttpServer.start((request, res) => {
      const path = new URL(request.url, "http://x").pathname
      const body = path === "/search"
        ? ("query" in JSON.parse(request.body)
          ? { results: [{ ...echo, highlights: [echo.snippet] }] }
          : { organic: [{ title: echo.title, link: echo.url, snippet: echo.snippet }] })
        : path === "/res/v1/web/search"
        ? { web: { results: [{ ...echo, description: echo.snippet }] } }
        : path.endsWith("/v2/search")
        ? { success: true, data: { web: [{ ...echo, description: echo.snippet }] } }
        : path === "/v1/search"
        ? { results: [echo] }
        : { search_result: { results: [{ content: { results: { organic: [{ ...echo, desc: echo.snippet }] } } }] } }
      HttpServer.reply(res, 200, JSON.stringify(body), "application/json")
    })

  it.scopedLive("a provider that repeats the key back: the model reads [redacted], never the key", () =>
    Effect.gen(function*() {
      const echo = { title: `title ${KEY}`, url: `https://e.example/?k=${KEY}`, snippet: `said ${KEY}` }
      const server = yield* echoingProviders(echo)
      for (const use of USES) {
        const tool = yield* search(`deerflow.community.${use}.tools:web_search_tool`, server.url)
        const result = yield* call(tool, { query: "q" })
        assert.notInclude(result.text, KEY, use)
        assert.include(result.text, "[redacted]", use)
      }
    }))

  // Attack round 27: a title is cut at 300 characters and a snippet at 1,000 before the key is masked; a key said back
  // where the cut falls kept its beginning, which no mask of the whole key finds
  it.scopedLive("a provider that repeats the key where its title's or snippet's cut falls: none of the key is kept", () =>
    Effect.gen(function*() {
      const at = (max: number) => `${"t".repeat(max - 1 - 12)}${KEY} more`
      const echo = { title: at(300), url: "https://e.example/", snippet: at(1000) }
      const server = yield* echoingProviders(echo)
      for (const use of USES) {
        const tool = yield* search(`deerflow.community.${use}.tools:web_search_tool`, server.url)
        const result = yield* call(tool, { query: "q" })
        assert.include(result.text, "tttt", use)
        assert.notInclude(result.text, KEY.slice(0, 8), use)
      }
    }))

  it.scopedLive("a provider that never answers: the search gives up at the entry's timeout with a readable error", () =>
    Effect.gen(function*() {
      const silent = yield* HttpServer.start(() => {})
      for (const use of ["serper", "groundroute"]) {
        const tool = yield* search(`deerflow.community.${use}.tools:web_search_tool`, silent.url, { timeout: 0.3 })
        const result = yield* call(tool, { query: "q" })
        // a tool result the model reads (marked as an error), not a failed run
        assert.strictEqual(result.status, "error", use)
        assert.match(result.text, /^Error: web_search failed: \w+ could not be reached at http:\/\/127\.0\.0\.1:\d+: /)
        assert.include(result.text, "no complete answer within 0.3 s")
        assert.notInclude(result.text, KEY)
      }
    }))

  it.scopedLive("a provider answering something else than its JSON: an error, not a crash", () =>
    Effect.gen(function*() {
      const wrong = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, "{\"organic\": \"many\"}", "application/json"))
      const tool = yield* search("deerflow.community.serper.tools:web_search_tool", wrong.url)
      assert.strictEqual((yield* call(tool, { query: "q" })).text,
        "Error: web_search failed: Serper answered JSON of an unexpected shape.")
    }))
})

const fetchTool = (use: string, url: string, extra: Record<string, unknown> = {}, env: Record<string, string> = {}) =>
  Effect.map(
    assemble([{ name: "web_fetch", group: "web", use, base_url: url, api_key: KEY, ...extra }], env),
    (assembly) => toolOf(assembly, "web_fetch")
  )

describe("web_fetch read through a provider (DeerFlow's Exa, Firecrawl, fastCRW, InfoQuest, GroundRoute fetchers)", () => {
  it.scopedLive("Firecrawl: POST /v2/scrape {url, formats: [markdown]}; '# <title>' then the Markdown", () =>
    Effect.gen(function*() {
      let answer: unknown = { success: true, data: { markdown: "Fetched markdown", metadata: { title: "Fetched Page" } } }
      const firecrawl = yield* HttpServer.start((_, res) =>
        HttpServer.reply(res, 200, JSON.stringify(answer), "application/json")
      )
      const tool = yield* fetchTool("deerflow.community.firecrawl.tools:web_fetch_tool", firecrawl.url)
      assert.strictEqual((yield* call(tool, { url: "https://example.com" })).text, "# Fetched Page\n\nFetched markdown")
      assert.strictEqual(firecrawl.requests[0]!.url, "/v2/scrape")
      assert.strictEqual(firecrawl.requests[0]!.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(firecrawl.requests[0]!.body), { url: "https://example.com", formats: ["markdown"] })
      answer = { success: true, data: { markdown: "", metadata: { title: "Empty" } } }
      assert.strictEqual((yield* call(tool, { url: "https://example.com" })).text, "Error: No content found")
    }))

  it.scopedLive("a private or loopback URL is refused before the provider is asked, unless allowed", () =>
    Effect.gen(function*() {
      const crw = yield* HttpServer.start(json({
        success: true,
        data: { markdown: "inside", metadata: { title: "Intranet" } }
      }))
      const tool = yield* fetchTool("deerflow.community.fastcrw.tools:web_fetch_tool", crw.url)
      for (const url of ["http://169.254.169.254/latest/meta-data/", "http://0x7f000001/", "http://localhost/x"]) {
        const result = yield* call(tool, { url })
        assert.match(result.text, /^Error: web_fetch refused .*Only public addresses can be fetched/, url)
      }
      assert.strictEqual(crw.requests.length, 0)
      const allowed = yield* fetchTool("deerflow.community.fastcrw.tools:web_fetch_tool", crw.url, {
        allow_private_addresses: true
      })
      assert.strictEqual((yield* call(allowed, { url: "http://10.0.0.5/" })).text, "# Intranet\n\ninside")
    }))

  it.scopedLive("Exa: POST /contents {urls, text.maxCharacters}; GroundRoute: mode=page, its content", () =>
    Effect.gen(function*() {
      const exa = yield* HttpServer.start(json({ results: [{ title: null, text: "This is the page content." }] }))
      const exaFetch = yield* fetchTool("deerflow.community.exa.tools:web_fetch_tool", exa.url, { max_chars: 4096 })
      assert.strictEqual((yield* call(exaFetch, { url: "https://example.com" })).text,
        "# Untitled\n\nThis is the page content.")
      assert.strictEqual(exa.requests[0]!.url, "/contents")
      assert.strictEqual(exa.requests[0]!.headers["x-api-key"], KEY)
      assert.deepStrictEqual(JSON.parse(exa.requests[0]!.body), {
        urls: ["https://example.com"],
        text: { maxCharacters: 4096 }
      })
      const groundroute = yield* HttpServer.start(json({
        results: [{ title: "Page", url: "https://example.com/", snippet: "short", content: `long ${KEY}` }]
      }))
      const grFetch = yield* fetchTool("deerflow.community.groundroute.tools:web_fetch_tool", groundroute.url)
      assert.strictEqual((yield* call(grFetch, { url: "https://example.com/" })).text, "# Page\n\nlong [redacted]")
      assert.deepStrictEqual(JSON.parse(groundroute.requests[0]!.body), {
        query: "https://example.com/",
        mode: "page",
        max_results: 1
      })
    }))

  it.scopedLive("InfoQuest: its reader gets {url, format: HTML, timeouts}; the page's main part as Markdown", () =>
    Effect.gen(function*() {
      const page = "<html><head><title>Article</title></head><body><nav>Menu</nav>" +
        "<main><h1>Heading</h1><p>Body <em>text</em>.</p></main></body></html>"
      const infoquest = yield* HttpServer.start(json({ reader_result: page }))
      const tool = yield* fetchTool("deerflow.community.infoquest.tools:web_fetch_tool", infoquest.url, {
        timeout: 10,
        fetch_time: 5,
        navigation_timeout: 30
      })
      const result = yield* call(tool, { url: "https://example.com/a" })
      assert.deepStrictEqual(JSON.parse(infoquest.requests[0]!.body), {
        url: "https://example.com/a",
        format: "HTML",
        fetch_time: 5,
        timeout: 10,
        navi_timeout: 30
      })
      assert.strictEqual(infoquest.requests[0]!.headers.authorization, `Bearer ${KEY}`)
      assert.match(result.text, /^# Article\n\n# Heading\n\nBody _text_\.$/)
      assert.notInclude(result.text, "Menu")
    }))

  it.scopedLive("without its key, Antler's own fetcher reads the page, with a warning; its keys are named", () =>
    Effect.gen(function*() {
      const assembly = yield* assemble([{
        name: "web_fetch",
        use: "deerflow.community.firecrawl.tools:web_fetch_tool",
        fetch_time: 3
      }])
      assert.deepStrictEqual(assembly.warnings, [
        "tools[0] (web_fetch): FIRECRAWL_API_KEY is not configured: set api_key: $FIRECRAWL_API_KEY in its entry, " +
        "or FIRECRAWL_API_KEY in the environment; Antler's own fetcher reads pages instead",
        "tools[0] (web_fetch): keys not used by Antler (ignored): fetch_time"
      ])
      const tool = toolOf(assembly, "web_fetch")
      // Antler's own fetcher: a loopback page is refused by the address it connects to
      assert.include((yield* call(tool, { url: "http://127.0.0.1:9/" })).text, "Error: web_fetch refused")
    }))
})
