/**
 * The tools DeerFlow also has are described to the model in DeerFlow's words: each tool's description and each
 * argument's, as LangChain's `@tool` renders its docstring (with `parse_docstring=True`: the paragraphs before `Args:`
 * joined by a space, each `Args:` entry the argument's description). The fixtures are rendered from DeerFlow's source
 * by test/fixtures/deerflow/prompts/render_tool_descriptions.py (its output checked against langchain_core's own
 * rendering). Checked where the model reads them: the `tools` of the requests the real `openai` client sends to the
 * loopback scripted server. Where Antler adds to a description (bash's sandbox, write_file's cap on appends) the
 * addition follows DeerFlow's text after a blank line (docs/deerflow.md).
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, beforeAll, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as CustomAgents from "../../src/programs/CustomAgents.js"
import * as Factory from "../../src/programs/Factory.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const fixtures = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "deerflow", "prompts")
const fixture = <A>(name: string): A => JSON.parse(Fs.readFileSync(Path.join(fixtures, name), "utf8")) as A
const DESCRIPTIONS = fixture<Record<string, string>>("tool_descriptions.json")
const ARGUMENTS = fixture<Record<string, Record<string, string>>>("tool_arguments.json")

interface Property {
  readonly description?: string
  readonly items?: Property & { readonly properties?: Record<string, Property> }
  readonly anyOf?: ReadonlyArray<Property>
}
interface WireTool {
  readonly function: {
    readonly name: string
    readonly description: string
    readonly parameters: { readonly properties: Record<string, Property> }
  }
}

type Offered = Map<string, WireTool["function"]>

/**
 * Every tool the model was offered in any request of one run of each of `shapes` (run settings), by name: a vision
 * model with host bash, deferred skill discovery and skill self-evolution (an admin's run), and `config`.
 */
const toolsOffered = (config: Record<string, unknown>, shapes: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start(() => "ok")
    const home = tempDir("antler-df28-tools-")
    const skills = Path.join(home, "skills")
    Fs.mkdirSync(Path.join(skills, "public", "notes"), { recursive: true })
    Fs.writeFileSync(Path.join(skills, "public", "notes", "SKILL.md"), "---\nname: notes\ndescription: Notes\n---\n")
    const app = yield* ConfigFile.fromObject({
      models: [{
        name: "scripted",
        model: "scripted-model",
        base_url: server.url,
        api_key: "sk-test-df28",
        supports_vision: true
      }],
      memory: { enabled: false },
      skills: { path: skills, deferred_discovery: true },
      skill_evolution: { enabled: true },
      sandbox: { allow_host_bash: true },
      ...config
    }, { home })
    yield* CustomAgents.save(home, "default", "ada", { config: { description: "Ada" }, soul: "I am Ada." })
    const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
    const context = yield* Layer.build(App.factoryLayer(app, choice).pipe(Layer.provide(NodeFileSystem.layer)))
    const factory = Context.get(context, Factory.AgentFactory)
    for (const [index, settings] of shapes.entries()) {
      yield* Stream.runDrain(factory.run({
        threadId: `df28-tools-${index}`,
        prompt: "Hello",
        admin: true,
        settings: { model_name: "scripted", ...settings }
      }))
    }
    const seen: Offered = new Map()
    for (const body of server.requests) {
      for (const tool of (body.tools ?? []) as ReadonlyArray<WireTool>) seen.set(tool.function.name, tool.function)
    }
    return seen
  }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))

let seen: Offered = new Map()

// one run of each shape that adds tools: the default agent, the bootstrap agent, a custom agent
beforeAll(() =>
  toolsOffered({}, [{}, { is_bootstrap: true, agent_name: "newbie" }, { agent_name: "ada" }]).pipe(
    Effect.map((offered) => {
      seen = offered
    }),
    Effect.runPromise
  ), 60_000)

/** The description of an argument (of a nullable one, as its `anyOf` carries it or not). */
const described = (property: Property | undefined) => property?.description

/** The tool as the model read it: its description, and its arguments' descriptions. */
const offered = (name: string, tools: Offered = seen) => {
  const tool = tools.get(name)
  assert.isDefined(tool, `${name} was offered`)
  const args = Object.fromEntries(
    Object.entries(tool!.parameters.properties).map(([arg, property]) => [arg, described(property)])
  )
  return { description: tool!.description, args, properties: tool!.parameters.properties }
}

/** DeerFlow's argument descriptions of a tool (not those of a nested type). */
const deerflowArgs = (name: string) =>
  Object.fromEntries(Object.entries(ARGUMENTS[name]!).filter(([arg]) => !arg.endsWith("[]")))

const equalToDeerFlow = (name: string) => {
  const tool = offered(name)
  assert.strictEqual(tool.description, DESCRIPTIONS[name])
  assert.deepStrictEqual(tool.args, deerflowArgs(name))
}

describe("tool descriptions: DeerFlow's, as the model reads them", () => {
  it("bash: DeerFlow's description, then what this sandbox does otherwise; DeerFlow's arguments", () => {
    const tool = offered("bash")
    assert.isTrue(tool.description.startsWith(`${DESCRIPTIONS["bash"]}\n\n`), tool.description)
    const added = tool.description.slice(DESCRIPTIONS["bash"]!.length + 2)
    assert.include(added, "stopped when the command ends")
    assert.include(added, "Commands time out after 600 s.")
    assert.deepStrictEqual(tool.args, deerflowArgs("bash"))
  })

  it("ls", () => equalToDeerFlow("ls"))
  it("glob", () => equalToDeerFlow("glob"))
  it("grep", () => equalToDeerFlow("grep"))
  it("read_file", () => equalToDeerFlow("read_file"))

  it("write_file: DeerFlow's description, then that the cap holds for appends too; DeerFlow's arguments", () => {
    const tool = offered("write_file")
    assert.strictEqual(
      tool.description,
      `${DESCRIPTIONS["write_file"]}\n\nHere the cap is 81920 bytes and holds for append=True calls too: split a ` +
        "long append into several. A file may grow to at most 512 MB."
    )
    assert.deepStrictEqual(tool.args, deerflowArgs("write_file"))
  })

  it("str_replace", () => equalToDeerFlow("str_replace"))
  it("present_files", () => equalToDeerFlow("present_files"))
  it("view_image", () => equalToDeerFlow("view_image"))
  it("setup_agent", () => equalToDeerFlow("setup_agent"))
  it("update_agent", () => equalToDeerFlow("update_agent"))
  it("skill_manage", () => equalToDeerFlow("skill_manage"))

  it("ask_clarification, and its form field's description (DeerFlow's ClarificationFormField docstring)", () => {
    equalToDeerFlow("ask_clarification")
    const items = offered("ask_clarification").properties["fields"]!.items!
    assert.strictEqual(items.description, ARGUMENTS["ask_clarification"]!["fields[]"])
    // DeerFlow's TypedDict describes no key of its own: what each is for is in `fields`' description
    assert.deepStrictEqual(
      Object.values(items.properties ?? {}).filter((p) => p.description !== undefined),
      []
    )
  })

  it("describe_skill: DeerFlow's description (a plain @tool: its docstring's indentation kept); name described", () => {
    const tool = offered("describe_skill")
    assert.strictEqual(tool.description, DESCRIPTIONS["describe_skill"])
    // DeerFlow's `name` has no description (a plain @tool reads no `Args:`); Antler's says what it takes, as every
    // argument it offers is described
    assert.deepStrictEqual(Object.keys(tool.args), ["name"])
    assert.isString(tool.args["name"])
  })
})

/** A configured `tools[]` entry of DeerFlow's community module `module`. */
const community = (name: "web_search" | "web_fetch", module: string, settings: Record<string, unknown> = {}) => ({
  name,
  group: "web",
  use: `deerflow.community.${module}.tools:${name}_tool`,
  ...settings
})

describe("web tool descriptions: DeerFlow's, of the configured provider", () => {
  // each provider's web_search and each reader's web_fetch, as DeerFlow's module of that name describes them
  const cases: ReadonlyArray<readonly [search: string, fetch: string, settings: Record<string, unknown>]> = [
    ["ddg_search", "jina_ai", {}],
    ["serper", "browserless", { api_key: "key-df28" }],
    ["groundroute", "groundroute", { api_key: "key-df28" }],
    ["searxng", "crawl4ai", { base_url: "http://127.0.0.1:9" }],
    ["brave", "exa", { api_key: "key-df28" }],
    ["tavily", "tavily", { api_key: "key-df28" }]
  ]
  for (const [search, fetch, settings] of cases) {
    it.live(`web_search (${search}) and web_fetch (${fetch})`, () =>
      Effect.gen(function*() {
        const tools = yield* toolsOffered({
          tools: [community("web_search", search, settings), community("web_fetch", fetch, settings)]
        }, [{}])
        const web = offered("web_search", tools)
        assert.strictEqual(web.description, DESCRIPTIONS[`web_search@${search}`])
        // (and `max_results` where DeerFlow's takes it: DuckDuckGo, Serper, GroundRoute; sweep 29)
        assert.deepStrictEqual(web.args, ARGUMENTS[`web_search@${search}`])
        assert.deepStrictEqual(Object.keys(web.properties), Object.keys(ARGUMENTS[`web_search@${search}`]!))
        const page = offered("web_fetch", tools)
        assert.strictEqual(page.description, DESCRIPTIONS[`web_fetch@${fetch}`])
        assert.deepStrictEqual(page.args, ARGUMENTS[`web_fetch@${fetch}`])
      }))
  }

  const imageCases: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
    ["image_search", {}],
    ["serper", { api_key: "key-df28" }],
    ["brave", { api_key: "key-df28" }]
  ]
  for (const [module, settings] of imageCases) {
    it.live(`image_search (${module}); its filters described as DeerFlow's DuckDuckGo image search's`, () =>
      Effect.gen(function*() {
        const use = `deerflow.community.${module}.tools:image_search_tool`
        const entry = { name: "image_search", group: "web", use }
        const tools = yield* toolsOffered({ tools: [{ ...entry, ...settings }] }, [{}])
        const images = offered("image_search", tools)
        assert.strictEqual(images.description, DESCRIPTIONS[`image_search@${module}`])
        const ddg = ARGUMENTS["image_search@image_search"]!
        assert.deepStrictEqual(images.args, {
          query: ARGUMENTS[`image_search@${module}`]!["query"],
          max_results: ARGUMENTS[`image_search@${module}`]!["max_results"],
          size: ddg["size"],
          type_image: ddg["type_image"],
          layout: ddg["layout"]
        })
      }))
  }

  it.live("Antler's own fetcher: DeerFlow's words, then what it does", () =>
    Effect.gen(function*() {
      const tools = yield* toolsOffered({ tools: [{ name: "web_fetch", group: "web", use: "antler:web_fetch" }] }, [{}])
      const page = offered("web_fetch", tools)
      assert.isTrue(page.description.startsWith(`${DESCRIPTIONS["web_fetch@jina_ai"]}\n\nHere Antler's own fetcher`))
      assert.deepStrictEqual(page.args, ARGUMENTS["web_fetch@jina_ai"])
    }))
})
