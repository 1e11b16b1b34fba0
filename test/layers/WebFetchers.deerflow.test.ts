/**
 * DeerFlow's Jina AI, Tavily, Browserless and Crawl4AI fetchers configured as DeerFlow configures them, over real
 * HTTP against loopback servers that answer as each provider does to the request DeerFlow's client sends. Mirrors
 * `test_jina_client.py`, `test_browserless_client.py`, `test_crawl4ai_tools.py` and DeerFlow's Tavily tool: the
 * request (path, headers, body), the text the model reads, the key or token (from the entry or the environment) kept
 * out of it, refusals in DeerFlow's words. Then `url_safety.py` and `test_fastcrw_tools.py`: a self-hosted reader
 * (fastCRW, Browserless, Crawl4AI, any reader at a `base_url`) gets no URL whose host resolves to a private address or
 * to none, through an injected resolver (no DNS here). Last, the Firecrawl SDK's `success` flag and bare-URL results.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as DnsResolver from "../../src/layers/web/DnsResolver.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import { HostResolver } from "../../src/services/HostResolver.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const tempDir = tempDirs()

const KEY = "sk-test-fetcher-key-0123456789"

/** A resolver answering from a table (a name not in it resolves to nothing), recording what it was asked. */
const resolver = (table: Readonly<Record<string, ReadonlyArray<string>>>) => {
  const asked: Array<string> = []
  const service = HostResolver.of({
    lookup: (host) => Effect.sync(() => (asked.push(host), table[host] ?? []))
  })
  return { asked, service }
}

const PUBLIC = resolver({ "example.com": ["93.184.215.14"] })

const assemble = (
  tools: ReadonlyArray<Record<string, unknown>>,
  env: Record<string, string> = {},
  hosts: HostResolver["Type"] = PUBLIC.service
) =>
  Effect.gen(function*() {
    const app = yield* ConfigFile.fromObject({ tools }, { home: tempDir("antler-fetchers-df-") })
    return yield* ToolAssembly.assemble({ vision: false }).pipe(
      Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app)))),
      Effect.provideService(HostResolver, hosts),
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
    )
  })

const call = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "c", name: tool.name, args }).pipe(
    Effect.map((r) => ({ text: M.contentText(r.message.content), status: r.message.status })),
    provideRun
  )

const toolOf = (assembly: ToolAssembly.Assembly, name: string) => {
  const tool = assembly.tools.find((t) => t.name === name)
  assert.isDefined(tool, `${name} is there (warnings: ${assembly.warnings.join("; ")})`)
  return tool!
}

const fetchTool = (
  module: string,
  extra: Record<string, unknown>,
  env: Record<string, string> = {},
  hosts: HostResolver["Type"] = PUBLIC.service
) =>
  Effect.map(
    assemble([{ name: "web_fetch", group: "web", use: `deerflow.community.${module}.tools:web_fetch_tool`, ...extra }],
      env, hosts),
    (assembly) => toolOf(assembly, "web_fetch")
  )

const json = (value: unknown): HttpServer.Handler => (_, res) =>
  HttpServer.reply(res, 200, JSON.stringify(value), "application/json")

const PAGE = "<html><head><title>Velvet</title></head><body><nav>Menu</nav>" +
  "<main><h1>Antlers</h1><p>Shed every <em>winter</em>.</p></main></body></html>"

describe("Jina AI (deerflow.community.jina_ai.tools:web_fetch_tool)", () => {
  it.scopedLive("POST {url} with X-Return-Format: html and X-Timeout; the HTML's article as Markdown", () =>
    Effect.gen(function*() {
      const jina = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, PAGE))
      const assembly = yield* assemble([{
        name: "web_fetch",
        use: "deerflow.community.jina_ai.tools:web_fetch_tool",
        base_url: jina.url,
        timeout: 10,
        proxy: "http://proxy:7890",
        trust_env: false
      }])
      assert.deepStrictEqual(assembly.warnings, [
        "tools[0] (web_fetch): keys not used by Antler (ignored): proxy, trust_env"
      ])
      assert.strictEqual(assembly.entries.find((e) => e.name === "web_fetch")!.note, "read through Jina AI")
      const result = yield* call(toolOf(assembly, "web_fetch"), { url: "https://example.com/deer" })
      assert.strictEqual(result.text, "# Velvet\n\n# Antlers\n\nShed every _winter_.")
      const sent = jina.requests[0]!
      assert.strictEqual(sent.method, "POST")
      assert.strictEqual(sent.url, "/")
      assert.deepStrictEqual(JSON.parse(sent.body), { url: "https://example.com/deer" })
      assert.strictEqual(sent.headers["x-return-format"], "html")
      assert.strictEqual(sent.headers["x-timeout"], "10")
      assert.strictEqual(sent.headers["content-type"], "application/json")
      // no key: no Authorization (Jina answers at a lower rate limit)
      assert.isUndefined(sent.headers.authorization)
    }))

  it.scopedLive("JINA_API_KEY is sent as a bearer key and never read back; refusals in DeerFlow's words", () =>
    Effect.gen(function*() {
      let answer: [number, string] = [200, `<title>Key ${KEY}</title><p>said ${KEY}</p>`]
      const jina = yield* HttpServer.start((_, res) => HttpServer.reply(res, answer[0], answer[1]))
      const tool = yield* fetchTool("jina_ai", { base_url: jina.url }, { JINA_API_KEY: KEY })
      const echoed = yield* call(tool, { url: "https://example.com/" })
      assert.strictEqual(jina.requests[0]!.headers.authorization, `Bearer ${KEY}`)
      assert.notInclude(echoed.text, KEY)
      assert.strictEqual(echoed.text, "# Key [redacted]\n\nsaid [redacted]")
      answer = [429, "Rate limited"]
      const limited = yield* call(tool, { url: "https://example.com/" })
      assert.strictEqual(limited.status, "error")
      assert.strictEqual(limited.text, "Error: Jina API returned status 429 (too many requests: wait a moment)")
      answer = [200, "   \n  "]
      assert.strictEqual((yield* call(tool, { url: "https://example.com/" })).text,
        "Error: Jina API returned empty response")
    }))
})

describe("Tavily (deerflow.community.tavily.tools:web_fetch_tool)", () => {
  it.scopedLive("POST /extract {urls: [url], timeout} with a bearer key; '# <title>' then its raw_content", () =>
    Effect.gen(function*() {
      let answer: unknown = {
        results: [{ url: "https://example.com/a", title: "Velvet", raw_content: "Antlers grow in velvet." }],
        failed_results: []
      }
      const tavily = yield* HttpServer.start((_, res) => json(answer)(_, res))
      const tool = yield* fetchTool("tavily", { base_url: tavily.url, api_key: KEY })
      assert.strictEqual((yield* call(tool, { url: "https://example.com/a" })).text,
        "# Velvet\n\nAntlers grow in velvet.")
      const sent = tavily.requests[0]!
      assert.strictEqual(sent.url, "/extract")
      assert.strictEqual(sent.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(sent.body), { urls: ["https://example.com/a"], timeout: 30 })
      answer = { results: [], failed_results: [{ url: "https://example.com/a", error: `Failed to fetch (${KEY})` }] }
      assert.strictEqual((yield* call(tool, { url: "https://example.com/a" })).text,
        "Error: Failed to fetch ([redacted])")
      answer = { results: [], failed_results: [] }
      assert.strictEqual((yield* call(tool, { url: "https://example.com/a" })).text, "Error: No results found")
      answer = { results: [{ url: "https://example.com/a", raw_content: "untitled text" }] }
      assert.strictEqual((yield* call(tool, { url: "https://example.com/a" })).text, "# Untitled\n\nuntitled text")
    }))

  it.scopedLive("TAVILY_API_KEY from the environment; without a key, Antler's own fetcher with a warning", () =>
    Effect.gen(function*() {
      const tavily = yield* HttpServer.start(json({ results: [{ title: "T", raw_content: "text" }] }))
      const tool = yield* fetchTool("tavily", { base_url: tavily.url }, { TAVILY_API_KEY: KEY })
      assert.strictEqual((yield* call(tool, { url: "https://example.com/" })).text, "# T\n\ntext")
      assert.strictEqual(tavily.requests[0]!.headers.authorization, `Bearer ${KEY}`)
      const unkeyed = yield* assemble([{ name: "web_fetch", use: "deerflow.community.tavily.tools:web_fetch_tool" }])
      assert.deepStrictEqual(unkeyed.warnings, [
        "tools[0] (web_fetch): Tavily needs an API key: set api_key: $TAVILY_API_KEY in its entry, or TAVILY_API_KEY " +
        "in the environment; Antler's own fetcher reads pages instead"
      ])
      assert.strictEqual(unkeyed.entries.find((e) => e.name === "web_fetch")!.note, "Antler's own fetcher")
    }))
})

describe("Browserless (deerflow.community.browserless.tools:web_fetch_tool)", () => {
  it.scopedLive("POST /content {url, token, waits}, no-cache; the rendered article, and the page's own error", () =>
    Effect.gen(function*() {
      let status: Record<string, string> = {}
      const browserless = yield* HttpServer.start((_, res) => {
        res.writeHead(200, { "content-type": "text/html", ...status })
        res.end(PAGE)
      })
      const assembly = yield* assemble([{
        name: "web_fetch",
        use: "deerflow.community.browserless.tools:web_fetch_tool",
        base_url: browserless.url,
        token: KEY,
        api_key: "not-read",
        timeout_s: 20,
        wait_for_event: "networkidle",
        wait_for_timeout_ms: 500,
        wait_for_selector: "#app"
      }])
      assert.deepStrictEqual(assembly.warnings, ["tools[0] (web_fetch): keys not used by Antler (ignored): api_key"])
      const tool = toolOf(assembly, "web_fetch")
      assert.strictEqual((yield* call(tool, { url: "https://example.com/spa" })).text,
        "# Velvet\n\n# Antlers\n\nShed every _winter_.")
      const sent = browserless.requests[0]!
      assert.strictEqual(sent.url, "/content")
      assert.strictEqual(sent.headers["cache-control"], "no-cache")
      assert.isUndefined(sent.headers.authorization)
      assert.deepStrictEqual(JSON.parse(sent.body), {
        url: "https://example.com/spa",
        token: KEY,
        waitForEvent: "networkidle",
        waitForTimeout: 500,
        waitForSelector: { selector: "#app", timeout: 5000 }
      })
      status = { "x-response-code": "404", "x-response-status": "Not Found" }
      assert.strictEqual((yield* call(tool, { url: "https://example.com/gone" })).text,
        "# Velvet\n\n# Antlers\n\nShed every _winter_. (warning: target page responded 404 Not Found)")
      status = { "x-response-code": "302", "x-response-status": "Found" }
      assert.notInclude((yield* call(tool, { url: "https://example.com/moved" })).text, "warning")
    }))

  it.scopedLive("BROWSERLESS_TOKEN from the environment; refusals name the status and the token, never its value", () =>
    Effect.gen(function*() {
      let answer: [number, string] = [200, `<p>token ${KEY}</p>`]
      const browserless = yield* HttpServer.start((_, res) => HttpServer.reply(res, answer[0], answer[1]))
      const tool = yield* fetchTool("browserless", { base_url: browserless.url }, { BROWSERLESS_TOKEN: KEY })
      const echoed = yield* call(tool, { url: "https://example.com/" })
      assert.strictEqual(JSON.parse(browserless.requests[0]!.body).token, KEY)
      assert.strictEqual(echoed.text, "# Untitled\n\ntoken [redacted]")
      answer = [401, `bad token ${KEY}`]
      assert.strictEqual((yield* call(tool, { url: "https://example.com/" })).text,
        "Error: Browserless HTTP 401 (check its token)")
      answer = [500, "boom"]
      assert.strictEqual((yield* call(tool, { url: "https://example.com/" })).text, "Error: Browserless HTTP 500")
      answer = [200, ""]
      assert.strictEqual((yield* call(tool, { url: "https://example.com/" })).text,
        "Error: Browserless returned empty response")
      // no token anywhere: none sent
      const open = yield* fetchTool("browserless", { base_url: browserless.url })
      answer = [200, "<p>ok</p>"]
      yield* call(open, { url: "https://example.com/" })
      assert.notProperty(JSON.parse(browserless.requests.at(-1)!.body), "token")
    }))
})

describe("Crawl4AI (deerflow.community.crawl4ai.tools:web_fetch_tool)", () => {
  it.scopedLive("POST /md {url, f} with a bearer token; its Markdown as it is; failures in DeerFlow's words", () =>
    Effect.gen(function*() {
      let answer: (res: Parameters<HttpServer.Handler>[1]) => void = (res) =>
        HttpServer.reply(res, 200, JSON.stringify({ success: true, markdown: "# Title\n\nHello" }), "application/json")
      const crawl = yield* HttpServer.start((_, res) => answer(res))
      const tool = yield* fetchTool("crawl4ai", { base_url: `${crawl.url}/`, token: KEY, filter: " RAW " })
      assert.strictEqual((yield* call(tool, { url: "https://example.com/article" })).text, "# Title\n\nHello")
      const sent = crawl.requests[0]!
      assert.strictEqual(sent.url, "/md")
      assert.strictEqual(sent.headers.authorization, `Bearer ${KEY}`)
      assert.deepStrictEqual(JSON.parse(sent.body), { url: "https://example.com/article", f: "raw" })
      const said = (body: string, type = "application/json", status = 200) => {
        answer = (res) => HttpServer.reply(res, status, body, type)
        return Effect.map(call(tool, { url: "https://example.com/" }), (r) => r.text)
      }
      assert.strictEqual(yield* said(JSON.stringify({ success: false, markdown: "" })),
        "Error: Crawl4AI reported failure for https://example.com/")
      assert.strictEqual(yield* said(JSON.stringify({ success: true, markdown: "   " })),
        "Error: Crawl4AI returned empty markdown")
      assert.strictEqual(yield* said("<html>login wall</html>", "text/html"),
        "Error: Crawl4AI returned a non-JSON 200 response (content-type: text/html)")
      assert.strictEqual(yield* said("Bad Gateway", "text/plain", 502), "Error: Crawl4AI HTTP 502")
      assert.strictEqual(yield* said(JSON.stringify({ success: true, markdown: `leak ${KEY}` })), "leak [redacted]")
      // DeerFlow's default filter
      const plain = yield* fetchTool("crawl4ai", { base_url: crawl.url })
      answer = (res) => HttpServer.reply(res, 200, JSON.stringify({ success: true, markdown: "x".repeat(5000) }))
      const long = yield* fetchTool("crawl4ai", { base_url: crawl.url, max_chars: 4096 })
      assert.strictEqual((yield* call(long, { url: "https://example.com/" })).text,
        `${"x".repeat(4096)}\n\n[Cut at 4096 characters.]`)
      yield* call(plain, { url: "https://example.com/" })
      assert.strictEqual(JSON.parse(crawl.requests.at(-1)!.body).f, "fit")
      assert.isUndefined(crawl.requests.at(-1)!.headers.authorization)
    }))

  it.scopedLive("an unknown filter is a configuration issue; a server that never answers gives up at the timeout", () =>
    Effect.gen(function*() {
      const app = yield* ConfigFile.fromObject({
        tools: [{ name: "web_fetch", use: "deerflow.community.crawl4ai.tools:web_fetch_tool", filter: "fit_content" }]
      }, { home: tempDir("antler-fetchers-df-") })
      assert.deepStrictEqual(ToolAssembly.check(app.config), [
        { path: "tools[0].filter", message: "expected \"fit\", \"raw\", \"bm25\" or \"llm\", got \"fit_content\"" }
      ])
      const silent = yield* HttpServer.start(() => {})
      const tool = yield* fetchTool("crawl4ai", { base_url: silent.url, timeout: 0.3 })
      const result = yield* call(tool, { url: "https://example.com/" })
      assert.strictEqual(result.status, "error")
      assert.match(result.text, /^Error: Crawl4AI could not be reached at http:\/\/127\.0\.0\.1:\d+: /)
      assert.include(result.text, "no complete answer within 0.3 s")
    }))
})

describe("a self-hosted reader gets no URL whose host resolves to a private address (DeerFlow's url_safety)", () => {
  const HOSTS = {
    "example.com": ["93.184.215.14"],
    "internal.example.com": ["10.0.0.5"],
    "mixed.example.com": ["93.184.215.14", "169.254.169.254"],
    "mapped.example.com": ["::ffff:127.0.0.1"]
  }
  const answers: Record<string, HttpServer.Handler> = {
    fastcrw: json({ success: true, data: { markdown: "read", metadata: { title: "Page" } } }),
    firecrawl: json({ success: true, data: { markdown: "read", metadata: { title: "Page" } } }),
    browserless: (_, res) => HttpServer.reply(res, 200, "<title>Page</title><p>read</p>"),
    crawl4ai: json({ success: true, markdown: "# Page\n\nread" })
  }

  it.scopedLive("fastCRW, Browserless, Crawl4AI, Firecrawl at a base_url: resolved, refused, reader not asked", () =>
    Effect.gen(function*() {
      for (const [module, handler] of Object.entries(answers)) {
        const hosts = resolver(HOSTS)
        const server = yield* HttpServer.start(handler)
        const tool = yield* fetchTool(module, { base_url: server.url, api_key: KEY }, {}, hosts.service)
        const refused = {
          "https://internal.example.com/": "internal.example.com resolves to 10.0.0.5, a private address",
          "https://mixed.example.com/":
            "mixed.example.com resolves to 169.254.169.254, a link-local address (cloud metadata lives here)",
          "https://mapped.example.com/": "mapped.example.com resolves to ::ffff:127.0.0.1, a loopback address",
          "https://nowhere.example.com/": "nowhere.example.com could not be resolved, so its address cannot be checked",
          "http://metadata.google.internal/computeMetadata/v1/": "metadata.google.internal is a cloud metadata name"
        }
        for (const [url, why] of Object.entries(refused)) {
          assert.strictEqual((yield* call(tool, { url })).text,
            `Error: web_fetch refused ${url}: ${why}. Only public addresses can be fetched (an operator can allow ` +
              "others with allow_private_addresses).", `${module} ${url}`)
        }
        assert.lengthOf(server.requests, 0, module)
        assert.include((yield* call(tool, { url: "https://example.com/" })).text, "read", module)
        assert.lengthOf(server.requests, 1, module)
        assert.includeMembers(hosts.asked, ["internal.example.com", "example.com"], module)
      }
    }))

  it.scopedLive("allow_private_addresses: true asks no resolver; a list allows its ranges only", () =>
    Effect.gen(function*() {
      const server = yield* HttpServer.start(answers.crawl4ai!)
      const all = resolver(HOSTS)
      const open = yield* fetchTool("crawl4ai", { base_url: server.url, allow_private_addresses: true }, {},
        all.service)
      assert.include((yield* call(open, { url: "https://internal.example.com/" })).text, "read")
      assert.deepStrictEqual(all.asked, [])
      const some = resolver(HOSTS)
      const listed = yield* fetchTool("crawl4ai", {
        base_url: server.url,
        allow_private_addresses: ["10.0.0.0/8"]
      }, {}, some.service)
      assert.include((yield* call(listed, { url: "https://internal.example.com/" })).text, "read")
      assert.include((yield* call(listed, { url: "https://mixed.example.com/" })).text, "169.254.169.254")
    }))

  // (at its own address a cloud reader resolves names itself, as in DeerFlow; at an operator's `base_url` it may be
  // a self-hosted one, and is held to the resolver: see Attack23ReaderBaseUrl)
  it.scopedLive("a cloud reader (Jina AI, Tavily, Exa) at a base_url is held to the local resolver", () =>
    Effect.gen(function*() {
      const hosts = resolver(HOSTS)
      const jina = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, "<p>read</p>"))
      const tool = yield* fetchTool("jina_ai", { base_url: jina.url }, {}, hosts.service)
      assert.include((yield* call(tool, { url: "https://internal.example.com/" })).text,
        "internal.example.com resolves to 10.0.0.5, a private address")
      assert.include((yield* call(tool, { url: "https://example.com/" })).text, "read")
      assert.deepStrictEqual(hosts.asked, ["internal.example.com", "example.com"])
      // its URL's text is still checked
      assert.include((yield* call(tool, { url: "http://169.254.169.254/latest/meta-data/" })).text,
        "Error: web_fetch refused http://169.254.169.254/latest/meta-data/: 169.254.169.254 is a link-local address")
      assert.lengthOf(jina.requests, 1)
    }))
})

describe("Firecrawl as its SDK reads it (@mendable/firecrawl-js v2)", () => {
  it.scopedLive("an answer without success: true is a failure; a result given as a bare URL is a result", () =>
    Effect.gen(function*() {
      let answer: unknown = { success: false, error: `Insufficient credits ${KEY}` }
      const firecrawl = yield* HttpServer.start((_, res) => json(answer)(_, res))
      const entry = { base_url: firecrawl.url, api_key: KEY }
      const search = toolOf(
        yield* assemble([{ name: "web_search", use: "deerflow.community.firecrawl.tools:web_search_tool", ...entry }]),
        "web_search"
      )
      assert.strictEqual((yield* call(search, { query: "deer" })).text,
        "Error: web_search failed: Firecrawl could not search (success: false).")
      const fetch = yield* fetchTool("firecrawl", entry)
      assert.strictEqual((yield* call(fetch, { url: "https://example.com/" })).text,
        "Error: Firecrawl could not scrape (success: false)")
      answer = {
        success: true,
        data: { web: ["https://example.com/bare", { url: "https://example.com/full", title: "Full" }] }
      }
      assert.deepStrictEqual(JSON.parse((yield* call(search, { query: "deer" })).text), [
        { title: "https://example.com/bare", url: "https://example.com/bare", snippet: "" },
        { title: "Full", url: "https://example.com/full", snippet: "" }
      ])
    }))
})

describe("the readers' keys and tokens are secrets", () => {
  it.effect("an entry's api_key and token, and JINA_API_KEY and BROWSERLESS_TOKEN from the environment", () =>
    Effect.gen(function*() {
      const app = yield* ConfigFile.fromObject({
        tools: [
          { name: "web_fetch", use: "deerflow.community.browserless.tools:web_fetch_tool", token: "browserless-tok-1" },
          { name: "f2", use: "deerflow.community.crawl4ai.tools:web_fetch_tool", api_key: "k-1234567", token: "c-tok-2" }
        ]
      }, { home: tempDir("antler-fetchers-df-") })
      const env = { JINA_API_KEY: "jina-env-key-3", BROWSERLESS_TOKEN: " bl-env-tok-4 " }
      assert.includeMembers([...ToolAssembly.secrets(app.config, env)],
        ["browserless-tok-1", "k-1234567", "c-tok-2", "jina-env-key-3", "bl-env-tok-4"])
    }))
})

describe("the system's resolver (DnsResolver, the HostResolver when an app gives none)", () => {
  it.live("every address of a name; a name that does not resolve is no address, not a failure", () =>
    Effect.gen(function*() {
      const system = DnsResolver.make({ timeoutMs: 2_000 })
      const local = yield* system.lookup("localhost")
      assert.isTrue(local.some((a) => a === "127.0.0.1" || a === "::1"), local.join(", "))
      assert.deepStrictEqual(yield* system.lookup("no-such-host.invalid"), [])
    }))
})
