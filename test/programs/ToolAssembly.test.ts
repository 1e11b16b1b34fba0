/**
 * Tool assembly from DeerFlow's configuration: its `config.example.yaml` gives web_search, web_fetch and
 * image_search plus the sandbox tools, in file order; tool groups filter configured tools (an empty list means
 * none); DeerFlow `use:` paths Antler has no tool for are left out with a warning naming the tool; a configured
 * web_fetch refuses private addresses by default and reads a loopback page as Markdown when allowed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as LocalSandbox from "../../src/layers/LocalSandbox.js"
import * as ToolAssembly from "../../src/programs/ToolAssembly.js"
import { AppConfigService, defaults } from "../../src/services/AppConfig.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { provideRun, tempDirs } from "../support/fixtures.js"
import * as HttpServer from "../support/httpServer.js"

const tempDir = tempDirs()
const FIXTURE = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "../fixtures/deerflow/config.example.yaml")

const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

const assembleWith = (app: AppConfigService["Type"], options: ToolAssembly.Options) =>
  ToolAssembly.assemble(options).pipe(
    Effect.provide(LocalSandbox.layer().pipe(Layer.provideMerge(Layer.succeed(AppConfigService, app))))
  )

const fromObject = (raw: Record<string, unknown>) => ConfigFile.fromObject(raw, { home: tempDir("antler-assembly-") })

const call = (tool: Tool.Tool, args: Record<string, unknown>) =>
  Tool.invoke(tool, { id: "c", name: tool.name, args }).pipe(Effect.map((r) => M.contentText(r.message.content)), provideRun)

describe("ToolAssembly", () => {
  it.effect("DeerFlow's example config: its web tools and the sandbox tools, in its order, then the built-ins", () =>
    Effect.gen(function*() {
      const app = yield* ConfigFile.load(FIXTURE).pipe(withEnv({ ANTLER_HOME: tempDir("antler-df-") }))
      assert.deepStrictEqual(ToolAssembly.check(app.config), [])
      const assembly = yield* assembleWith(app, { vision: false })
      assert.deepStrictEqual(assembly.tools.map((t) => t.name), [
        "web_search", "web_fetch", "image_search", "ls", "read_file", "glob", "grep", "write_file", "str_replace", "bash",
        "present_files", "review_skill_package", "list_uploaded_files"
      ])
      const search = assembly.entries.find((e) => e.name === "web_search")!
      assert.deepInclude(search, { source: "config", group: "web", use: "deerflow.community.ddg_search.tools:web_search_tool" })
      assert.include(search.note!, "DuckDuckGo")
      assert.deepStrictEqual(assembly.warnings, [])
      assert.isUndefined(assembly.deferred)
    }))

  it.effect("tool groups keep only their configured tools; [] keeps none; built-ins stay", () =>
    Effect.gen(function*() {
      const app = yield* ConfigFile.load(FIXTURE).pipe(withEnv({ ANTLER_HOME: tempDir("antler-df-") }))
      const reader = yield* assembleWith(app, { vision: true, groups: ["file:read"] })
      assert.deepStrictEqual(reader.tools.map((t) => t.name), [
        "ls", "read_file", "glob", "grep", "present_files", "review_skill_package", "list_uploaded_files", "view_image"
      ])
      const webMissing = reader.entries.find((e) => e.name === "web_fetch")!
      assert.deepInclude(webMissing, { state: "missing", note: "its group web is not among the agent's tool groups" })
      const none = yield* assembleWith(app, { vision: false, groups: [] })
      assert.deepStrictEqual(none.tools.map((t) => t.name), [
        "present_files", "review_skill_package", "list_uploaded_files"
      ])
      // Without a tools: section the sandbox tools have DeerFlow's groups.
      const bare = yield* fromObject({})
      const writer = yield* assembleWith(bare, { vision: false, groups: ["file:write"] })
      assert.deepStrictEqual(writer.tools.map((t) => t.name), [
        "write_file", "str_replace", "present_files", "review_skill_package", "list_uploaded_files"
      ])
      // a subagent's tools: no list_uploaded_files (its state has no uploaded_files)
      const sub = yield* assembleWith(bare, { vision: false, groups: [], uploads: false })
      assert.deepStrictEqual(sub.tools.map((t) => t.name), ["present_files", "review_skill_package"])
    }))

  it.effect("bash is left out, under any name, where commands cannot run (no bubblewrap, no allow_host_bash)", () =>
    Effect.gen(function*() {
      // DeerFlow's get_available_tools hides host bash (and a renamed alias of it) when it is not allowed
      const bare = yield* fromObject({})
      const hidden = yield* assembleWith(bare, { vision: false, bash: false })
      assert.deepStrictEqual(hidden.tools.map((t) => t.name), [
        "ls", "read_file", "glob", "grep", "write_file", "str_replace", "present_files", "review_skill_package",
        "list_uploaded_files"
      ])
      assert.deepInclude(hidden.entries.find((e) => e.name === "bash")!, {
        state: "missing",
        note: ToolAssembly.BASH_UNAVAILABLE
      })
      assert.deepStrictEqual(hidden.warnings, [`the sandbox's bash: left out: ${ToolAssembly.BASH_UNAVAILABLE}`])
      const aliased = yield* fromObject({
        tools: [
          { name: "bash", group: "bash", use: "deerflow.sandbox.tools:bash_tool" },
          { name: "shell", group: "bash", use: "deerflow.sandbox.tools:bash_tool" },
          { name: "ls", group: "file:read", use: "deerflow.sandbox.tools:ls_tool" }
        ]
      })
      const noShell = yield* assembleWith(aliased, { vision: false, bash: false })
      assert.deepStrictEqual(noShell.tools.map((t) => t.name), ["ls", "present_files", "review_skill_package",
        "list_uploaded_files"])
      assert.deepStrictEqual(noShell.warnings, [`tools[0] (bash): left out: ${ToolAssembly.BASH_UNAVAILABLE}`])
      // where bash runs (under bubblewrap, as here, or allowed on the host) it stays
      const kept = yield* assembleWith(aliased, { vision: false, bash: true })
      assert.include(kept.tools.map((t) => t.name), "bash")
      const probed = yield* assembleWith(bare, { vision: false })
      assert.include(probed.tools.map((t) => t.name), "bash")
    }))

  it.effect("uses Antler has no tool for are left out with a warning naming the tool; Tavily without a key too", () =>
    Effect.gen(function*() {
      const app = yield* fromObject({
        tools: [
          { name: "web_search", group: "web", use: "deerflow.community.bing.tools:web_search_tool" },
          { name: "browser_click", group: "browser", use: "deerflow.community.browser_automation.tools:browser_click_tool" },
          { name: "mine", group: "web", use: "my_company.tools:magic_tool" },
          { name: "web_search", group: "web", use: "deerflow.community.tavily.tools:web_search_tool" },
          { name: "web_fetch", group: "web", use: "deerflow.community.jina_ai.tools:web_fetch_tool", proxy: "http://p" }
        ]
      })
      const assembly = yield* assembleWith(app, { vision: false }).pipe(withEnv({}))
      assert.deepStrictEqual(assembly.tools.map((t) => t.name), [
        "web_fetch", "present_files", "review_skill_package", "list_uploaded_files"
      ])
      assert.deepStrictEqual(assembly.warnings, [
        "tools[0] (web_search): left out: Antler has no bing search provider; use one of " +
        ["ddg_search", "tavily", "searxng", "serper", "brave", "exa", "firecrawl", "fastcrw", "infoquest",
          "groundroute"].map((m) => `deerflow.community.${m}.tools:web_search_tool`).join(", "),
        "tools[1] (browser_click): left out: Antler has no browser tools",
        "tools[2] (mine): left out: Antler has no tool for use: my_company.tools:magic_tool",
        "tools[3] (web_search): left out: Tavily needs an API key: set api_key: $TAVILY_API_KEY in its entry, or " +
        "TAVILY_API_KEY in the environment",
        "tools[4] (web_fetch): keys not used by Antler (ignored): proxy"
      ])
      const keyed = yield* assembleWith(app, { vision: false }).pipe(withEnv({ TAVILY_API_KEY: "tvly-x" }))
      assert.include(keyed.tools.map((t) => t.name), "web_search")
    }))

  it.effect("bad values in a configured tool are configuration issues at their key path", () =>
    Effect.gen(function*() {
      const app = yield* fromObject({
        tools: [
          { name: "web_fetch", use: "deerflow.community.jina_ai.tools:web_fetch_tool", timeout: "soon", allow_private_addresses: ["intranet"] },
          { name: "web_search", use: "antler:web_search" }
        ]
      })
      const issues = ToolAssembly.check(app.config)
      assert.deepStrictEqual(issues, [
        { path: "tools[0].timeout", message: "expected a number, got \"soon\"" },
        { path: "tools[0].allow_private_addresses[0]", message: "expected an address or CIDR range such as 10.0.0.0/8" },
        {
          path: "tools[1].provider",
          message: "antler:web_search needs a provider: duckduckgo, tavily, searxng, serper, brave, exa, firecrawl, " +
            "fastcrw, infoquest, groundroute"
        }
      ])
    }))

  it.scopedLive("a configured web_fetch refuses a private address by default and reads it when allowed", () =>
    Effect.gen(function*() {
      const site = yield* HttpServer.start((_, res) => HttpServer.reply(res, 200, "<h1>Inside</h1><p>hello <em>there</em></p>"))
      const entry = { name: "web_fetch", group: "web", use: "antler:web_fetch", timeout: 10 }
      const strict = yield* assembleWith(yield* fromObject({ tools: [entry] }), { vision: false })
      const refused = yield* call(strict.tools[0]!, { url: `${site.url}/` })
      assert.include(refused, "is a loopback address")
      assert.lengthOf(site.requests, 0)
      const open = yield* assembleWith(yield* fromObject({ tools: [{ ...entry, allow_private_addresses: ["127.0.0.1"] }] }), { vision: false })
      const page = yield* call(open.tools[0]!, { url: `${site.url}/` })
      assert.include(page, "# Inside")
      assert.include(page, "hello _there_")
    }))
})

describe("ToolAssembly.secrets", () => {
  it("names the search providers' keys taken from the environment, beside the entries' own keys", () => {
    const entry = { name: "web_search", use: "deerflow.community.serper.tools:web_search_tool", api_key: "entry-key-123" }
    const config = { ...defaults(), tools: [entry] }
    const env = { SERPER_API_KEY: " serper-env-key-456 ", TAVILY_API_KEY: "tavily-env-key-789", EXA_API_KEY: "" }
    const found = ToolAssembly.secrets(config, { ...env, HOME: "/home/x" })
    assert.includeMembers([...found], ["entry-key-123", "serper-env-key-456", "tavily-env-key-789"])
    assert.notInclude(found, "/home/x")
    assert.notInclude(found, "")
  })
})
