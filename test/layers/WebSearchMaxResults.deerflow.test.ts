/**
 * The model's `max_results` of `web_search` and `image_search`, read as DeerFlow's tool of the configured provider
 * reads it, over real HTTP against loopback servers playing each provider (`test_serper_tools.py`,
 * `test_brave_tools.py`, `test_groundroute_tools.py`): Serper's and Brave's take the model's count, bounded, when
 * the entry sets none, and the entry's when it does; GroundRoute's the model's over the entry's; a provider whose
 * DeerFlow tool has no `max_results` (Tavily...) reads the entry's only.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const tempDir = tempDirs()
const KEY = "sk-test-max-results-0123456789"

const toolOf = (name: string, use: string, url: string, extra: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const tools = [{ name, group: "web", use, base_url: url, api_key: KEY, ...extra }]
    const app = yield* ConfigFile.fromObject({ tools }, { home: tempDir("antler-maxres-") })
    const assembly = yield* ToolAssembly.assemble({ vision: false }).pipe(
      Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app))))
    )
    const tool = assembly.tools.find((t) => t.name === name)
    assert.isDefined(tool, assembly.warnings.join("; "))
    return tool!
  })

const call = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "c", name: tool.name, args }).pipe(
    Effect.map((r) => M.contentText(r.message.content)),
    provideRun
  )

const json = (value: unknown): HttpServer.Handler => (_, res) =>
  HttpServer.reply(res, 200, JSON.stringify(value), "application/json")

const SERPER = "deerflow.community.serper.tools:web_search_tool"
const BRAVE = "deerflow.community.brave.tools:web_search_tool"
const BRAVE_IMAGES = "deerflow.community.brave.tools:image_search_tool"
const GROUNDROUTE = "deerflow.community.groundroute.tools:web_search_tool"

describe("Serper: the model's max_results", () => {
  it.scopedLive("max results parameter accepted, capped at 10; config max results overrides parameter", () =>
    Effect.gen(function*() {
      const serper = yield* HttpServer.start(json({ organic: [] }))
      const tool = yield* toolOf("web_search", SERPER, serper.url)
      yield* call(tool, { query: "a", max_results: 3 })
      yield* call(tool, { query: "b", max_results: 50 })
      yield* call(tool, { query: "c", max_results: 0 })
      yield* call(tool, { query: "d" })
      const configured = yield* toolOf("web_search", SERPER, serper.url, { max_results: 7 })
      yield* call(configured, { query: "e", max_results: 2 })
      assert.deepStrictEqual(serper.requests.map((r) => JSON.parse(r.body).num), [3, 10, 5, 5, 7])
    }))
})

describe("Brave: the model's max_results", () => {
  it.scopedLive("max results parameter accepted; config max results overrides parameter; images capped at 200", () =>
    Effect.gen(function*() {
      const brave = yield* HttpServer.start(json({ web: { results: [] }, results: [] }))
      const count = (i: number) => new URL(brave.requests[i]!.url, brave.url).searchParams.get("count")
      const tool = yield* toolOf("web_search", BRAVE, brave.url)
      yield* call(tool, { query: "a", max_results: 9 })
      yield* call(tool, { query: "b", max_results: 99 })
      const configured = yield* toolOf("web_search", BRAVE, brave.url, { max_results: 4 })
      yield* call(configured, { query: "c", max_results: 9 })
      const images = yield* toolOf("image_search", BRAVE_IMAGES, brave.url)
      yield* call(images, { query: "d", max_results: 150 })
      yield* call(images, { query: "e", max_results: 900 })
      assert.deepStrictEqual([0, 1, 2, 3, 4].map(count), ["9", "20", "4", "150", "200"])
    }))
})

describe("GroundRoute: the model's max_results", () => {
  it.scopedLive("agent max results is honored over config; config used when caller omits; clamped to cap", () =>
    Effect.gen(function*() {
      const groundroute = yield* HttpServer.start(json({ results: [] }))
      const tool = yield* toolOf("web_search", GROUNDROUTE, groundroute.url, { max_results: 3 })
      yield* call(tool, { query: "a", max_results: 9 })
      yield* call(tool, { query: "b" })
      yield* call(tool, { query: "c", max_results: null })
      yield* call(tool, { query: "d", max_results: 500 })
      const sent = groundroute.requests.map((r) => JSON.parse(r.body).max_results)
      assert.deepStrictEqual(sent, [9, 3, 3, 50])
    }))
})

describe("a provider whose DeerFlow web_search takes no max_results", () => {
  it.scopedLive("Tavily: no max_results argument; the entry's count", () =>
    Effect.gen(function*() {
      const tavily = yield* HttpServer.start(json({ results: [] }))
      const tool = yield* toolOf("web_search", "deerflow.community.tavily.tools:web_search_tool", tavily.url, {
        max_results: 4
      })
      const schema = JSON.stringify(Tool.definition(tool).parameters)
      assert.notInclude(schema, "max_results")
      yield* call(tool, { query: "a", max_results: 9 })
      assert.strictEqual(JSON.parse(tavily.requests[0]!.body).max_results, 4)
    }))
})

// the entry's own `max_results` bounded as DeerFlow's tool of each provider bounds it (it goes through the same
// coercion as the model's): Serper 10, Brave 20 and 200 for images, GroundRoute 50; a provider whose DeerFlow tool
// does not bound it (Tavily...) at Antler's 20. Before, every entry over 20 was refused (Brave images' 150 too),
// and an entry of Serper's 15 asked 15
describe("the entry's max_results, bounded per provider", () => {
  it.scopedLive("Serper 10, Brave 20 and images 200, GroundRoute 50, Tavily 20", () =>
    Effect.gen(function*() {
      const server = yield* HttpServer.start(json({ organic: [], web: { results: [] }, results: [] }))
      const sent = (i: number) => {
        const request = server.requests[i]!
        const count = new URL(request.url, server.url).searchParams.get("count")
        if (count !== null) return Number(count)
        const body = JSON.parse(request.body)
        return body.num ?? body.max_results
      }
      const asks: Array<[string, string, number, Record<string, unknown>]> = [
        ["web_search", SERPER, 15, { max_results: 3 }],
        ["web_search", BRAVE, 60, { max_results: 3 }],
        ["image_search", BRAVE_IMAGES, 150, { max_results: 3 }],
        ["image_search", BRAVE_IMAGES, 200, {}],
        ["web_search", GROUNDROUTE, 40, {}],
        ["web_search", GROUNDROUTE, 120, {}],
        ["web_search", "deerflow.community.tavily.tools:web_search_tool", 60, {}]
      ]
      for (const [name, use, max, args] of asks) {
        yield* call(yield* toolOf(name, use, server.url, { max_results: max }), { query: "q", ...args })
      }
      assert.deepStrictEqual(asks.map((_, i) => sent(i)), [10, 20, 150, 200, 40, 50, 20])
    }))

  it.effect("an entry's max_results over 200 or under 1 is refused, naming the key", () =>
    Effect.gen(function*() {
      for (const max of [201, 0]) {
        const tools = [{ name: "web_search", group: "web", use: BRAVE_IMAGES, api_key: KEY, max_results: max }]
        const app = yield* ConfigFile.fromObject({ tools }, { home: tempDir("antler-maxres-") })
        const issues = ToolAssembly.check(app.config)
        assert.isTrue(issues.some((issue) => issue.path.includes("max_results")), JSON.stringify(issues))
      }
    }))
})
