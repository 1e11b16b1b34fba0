/**
 * Mirrors DeerFlow's test_skill_catalog.py: with deferred skill discovery, `describe_skill` finds skills with
 * `tool_search`'s query forms. A run of the whole app (SCRIPTED model on the loopback server, the real `openai`
 * client, skills as real files) calls `describe_skill` with each form; what the model reads back is checked:
 * `select:` gives every skill it names (uncapped, each once) and nothing for an unknown name; `+term more words` only skills
 * whose name holds `term`, ranked by the other words; a bare `+` nothing; other words name matches first, at most
 * five, whatever the case; a query that is not a valid regular expression is just words.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import type { ChatRequestBody, Turn } from "../../src/layers/ScriptedChatServer.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as Factory from "../../src/programs/Factory.js"
import { tempDirs } from "../support/fixtures.js"
import { toolNames } from "../support/modelRequests.js"

const tempDir = tempDirs()

// test_skill_catalog.py's sample skills
const SKILLS: ReadonlyArray<readonly [string, string, "public" | "custom"]> = [
  ["data-analysis", "Analyze data with Python, pandas, jupyter", "public"],
  ["deep-research", "Conduct multi-source research with fact-checking", "public"],
  ["chart-visualization", "Visualize data with interactive charts", "public"],
  ["podcast-generation", "Generate podcast scripts and audio", "public"],
  ["music-generation", "Generate music compositions", "public"],
  ["video-generation", "Generate video from text prompts", "public"],
  ["image-generation", "Generate images from descriptions", "public"],
  ["ppt-generation", "Generate PowerPoint presentations", "public"],
  ["custom-analyzer", "Custom data analyzer", "custom"]
]

const SELECT_ALL = `select:${SKILLS.map(([name]) => name).join(",")}`

const QUERIES = [
  "select:data-analysis,deep-research",
  "select:data-analysis,nonexistent",
  "select:data-analysis, data-analysis",
  SELECT_ALL,
  "+podcast",
  "+gen music",
  "+",
  "+zzz_nonexistent",
  "chart",
  "DATA",
  "generation",
  "(invalid"
]

const textOf = (m: { readonly [key: string]: unknown }): string =>
  typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")

/** The model: one describe_skill call per query, then an answer. */
const script = (body: ChatRequestBody): Turn =>
  body.messages.some((m) => m.role === "tool")
    ? "done"
    : {
      toolCalls: QUERIES.map((name, i) => ({ id: `q${i}`, name: "describe_skill", arguments: { name } }))
    }

/** The skills a describe_skill answer names, in its order. */
const named = (answer: string): ReadonlyArray<string> => Array.from(answer.matchAll(/^## Skill: (.+)$/gm), (m) => m[1]!)

describe("describe_skill (DeerFlow's SkillCatalog.search)", () => {
  it.live("finds skills with select:, +term and words, as the model reads them", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const home = tempDir("antler-skill-catalog-")
      const skills = Path.join(home, "skills")
      for (const [name, description, category] of SKILLS) {
        Fs.mkdirSync(Path.join(skills, category, name), { recursive: true })
        Fs.writeFileSync(
          Path.join(skills, category, name, "SKILL.md"),
          `---\nname: ${name}\ndescription: ${description}\n---\n# ${name}\n`
        )
      }
      const app = yield* ConfigFile.fromObject({
        models: [{ name: "scripted", model: "scripted-model", base_url: server.url, api_key: "sk-test-catalog" }],
        skills: { path: skills, deferred_discovery: true },
        memory: { enabled: false },
        title: { enabled: false }
      }, { home })
      const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
      const layer = App.factoryLayer(app, choice).pipe(Layer.provide(NodeFileSystem.layer))
      const factory = Context.get(yield* Layer.build(layer), Factory.AgentFactory)
      const events = yield* Stream.runCollect(
        factory.run({ threadId: "t1", prompt: "Which skills fit?", settings: { model_name: "scripted" } })
      )
      assert.strictEqual(Array.from(events).at(-1)?.type, "run_end")
      assert.include(toolNames(server.requests[0]!), "describe_skill")

      const last = server.requests.at(-1)!
      const answers = new Map(
        last.messages.filter((m) => m.role === "tool").map((m) => [String(m.tool_call_id), textOf(m)])
      )
      const answer = (query: string) => answers.get(`q${QUERIES.indexOf(query)}`)!
      assert.strictEqual(answers.size, QUERIES.length)

      // exact selection: every name given that exists, uncapped
      assert.sameMembers([...named(answer("select:data-analysis,deep-research"))], ["data-analysis", "deep-research"])
      assert.deepStrictEqual(named(answer("select:data-analysis,nonexistent")), ["data-analysis"])
      assert.deepStrictEqual(named(answer("select:data-analysis, data-analysis")), ["data-analysis"])
      assert.sameMembers([...named(answer(SELECT_ALL))], SKILLS.map(([name]) => name))

      // +term: only skills whose name holds the term, ranked by the other words
      assert.deepStrictEqual(named(answer("+podcast")), ["podcast-generation"])
      const gen = named(answer("+gen music"))
      assert.strictEqual(gen[0], "music-generation")
      assert.isTrue(gen.every((name) => name.includes("gen")), gen.join(", "))
      assert.isAtMost(gen.length, 5)
      assert.strictEqual(answer("+"), "No skills matched: +")
      assert.strictEqual(answer("+zzz_nonexistent"), "No skills matched: +zzz_nonexistent")

      // words: a name match first, any case, at most five; no regular expression to get wrong
      assert.strictEqual(named(answer("chart"))[0], "chart-visualization")
      assert.sameMembers([...named(answer("DATA"))], ["data-analysis", "chart-visualization", "custom-analyzer"])
      assert.strictEqual(named(answer("generation")).length, 5)
      assert.strictEqual(answer("(invalid"), "No skills matched: (invalid")

      // what a skill is: its description, whether it may be edited, its tools, where its SKILL.md is
      assert.include(answer("select:data-analysis,nonexistent"), "- Location: /mnt/skills/public/data-analysis/SKILL.md")
      assert.include(answer(SELECT_ALL), "- Description: Custom data analyzer [custom, editable]")
    })), 60_000)
})
