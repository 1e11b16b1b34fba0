/**
 * What a subagent reads about skills is DeerFlow's word for word (subagents/executor.py `_build_initial_state`): the
 * skills it loads are the user's enabled ones, limited to its type's `skills` (itself limited by the parent agent's
 * allowlist); with any, its system message is its own prompt, a blank line, and the lead's `<skill_system>` for
 * them (`get_skills_prompt_section(<their names>)`), or, with `skills.deferred_discovery`, the `<skill_index>`; with
 * none, its prompt alone. The fixtures are rendered from DeerFlow's source by
 * test/fixtures/deerflow/prompts/render_lead_prompt.py. Checked where the model reads them: the first request of each
 * subagent, as the real `openai` client sends it to the loopback scripted server.
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
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as ScriptedChatServer from "../../src/layers/ScriptedChatServer.js"
import * as App from "../../src/programs/App.js"
import * as CustomAgents from "../../src/programs/CustomAgents.js"
import * as Factory from "../../src/programs/Factory.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const fixtures = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "deerflow", "prompts")
const fixture = (name: string) => Fs.readFileSync(Path.join(fixtures, name), "utf8")

const GP_PROMPT = fixture("subagent_general_purpose.system_prompt.txt")
const ANALYST_PROMPT = "You analyse data."

const systemOf = (body: ScriptedChatServer.ChatRequestBody) => String(body.messages[0]?.content ?? "")
const isLead = (body: ScriptedChatServer.ChatRequestBody) => systemOf(body).trimStart().startsWith("<role>")

/** The skills of the fixtures: chart, deep-research (public), my-notes (custom), old-thing (public, disabled). */
const writeSkills = (home: string): string => {
  const dir = Path.join(home, "skills")
  const skill = (category: string, name: string, description: string) => {
    Fs.mkdirSync(Path.join(dir, category, name), { recursive: true })
    Fs.writeFileSync(
      Path.join(dir, category, name, "SKILL.md"),
      `---\nname: ${name}\ndescription: ${JSON.stringify(description)}\n---\n# ${name}\n\nSECRET-BODY-OF-${name}\n`
    )
  }
  skill("public", "chart", "Draw charts.")
  skill("public", "deep-research", "Research a topic <deeply> & cite.")
  skill("custom", "my-notes", "Keep notes.")
  skill("public", "old-thing", "Off.")
  Fs.writeFileSync(
    Path.join(home, "extensions_config.json"),
    JSON.stringify({ mcpServers: {}, skills: { "old-thing": { enabled: false } } })
  )
  return dir
}

/**
 * A factory over a scripted server whose lead delegates to the type its user message names ("delegate to <type>"),
 * and whose subagents answer at once; `run` gives the system message of the subagent's first request.
 */
const setup = (raw: Record<string, unknown>) =>
  Effect.gen(function*() {
    const server = yield* ScriptedChatServer.start((body) => {
      if (!isLead(body)) return "Subtask done."
      if (body.messages.some((m) => m.role === "tool")) return "All done."
      const text = String(body.messages.findLast((m) => m.role === "user")?.content ?? "")
      const type = /delegate to ([a-z-]+)/.exec(text)?.[1] ?? "general-purpose"
      return {
        toolCalls: [
          { name: "task", arguments: { description: "Help out", prompt: "Do the job.", subagent_type: type } }
        ]
      }
    })
    const home = tempDir("antler-subskills26-")
    const skills = writeSkills(home)
    const app = yield* ConfigFile.fromObject({
      models: [{ name: "scripted", model: "scripted-model", base_url: server.url, api_key: "sk-test-subskills26" }],
      memory: { enabled: false },
      ...raw,
      skills: { path: skills, ...(raw.skills as object | undefined) }
    }, { home })
    const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
    const context = yield* Layer.build(App.factoryLayer(app, choice).pipe(Layer.provide(NodeFileSystem.layer)))
    const factory = Context.get(context, Factory.AgentFactory)
    const run = (type: string, settings: Record<string, unknown> = {}) =>
      Effect.gen(function*() {
        const before = server.requests.length
        const events = yield* Stream.runCollect(factory.run({
          threadId: `subskills26-${type}-${before}`,
          prompt: `delegate to ${type}`,
          settings: { model_name: "scripted", subagent_enabled: true, ...settings }
        }))
        assert.deepInclude(Array.from(events).at(-1), { type: "run_end", status: "success" })
        const sub = server.requests.slice(before).filter((r) => !isLead(r))
        assert.isAbove(sub.length, 0, "the subagent asked the model")
        return systemOf(sub[0]!)
      })
    return { run, home }
  })

describe("a subagent's skills section is DeerFlow's", () => {
  it.scoped("all enabled skills, the type's `skills`, the parent's allowlist, or none: DeerFlow's conditions", () =>
    Effect.gen(function*() {
      const { home, run } = yield* setup({
        subagents: {
          custom_agents: {
            analyst: {
              description: "Analyses data",
              system_prompt: ANALYST_PROMPT,
              skills: ["deep-research", "my-notes"]
            },
            hermit: { description: "Works alone", system_prompt: "You work alone.", skills: [] },
            ghost: { description: "Haunts", system_prompt: "You haunt.", skills: ["old-thing", "not-installed"] }
          }
        }
      })
      // a type without `skills`: every enabled skill (not the disabled one, and no <disabled_skills>)
      assert.strictEqual(yield* run("general-purpose"), `${GP_PROMPT}\n\n${fixture("subagent_skills.all.txt")}`)
      // a type's `skills`: those
      assert.strictEqual(yield* run("analyst"), `${ANALYST_PROMPT}\n\n${fixture("subagent_skills.two.txt")}`)
      // `skills: []`, or only skills not enabled: no skills section at all
      assert.strictEqual(yield* run("hermit"), "You work alone.")
      assert.strictEqual(yield* run("ghost"), "You haunt.")
      // the parent agent's allowlist limits them: all of it for a type without `skills`, the common part otherwise
      yield* CustomAgents.save(home, "default", "curator", {
        config: { description: "Curates", skills: ["chart", "my-notes"] },
        soul: "I curate."
      })
      assert.strictEqual(
        yield* run("general-purpose", { agent_name: "curator" }),
        `${GP_PROMPT}\n\n${fixture("subagent_skills.chart-notes.txt")}`
      )
      assert.strictEqual(
        yield* run("analyst", { agent_name: "curator" }),
        `${ANALYST_PROMPT}\n\n${fixture("subagent_skills.notes.txt")}`
      )
      // as they are at the task: a skill switched off since is no longer listed (DeerFlow loads them for each task)
      Fs.writeFileSync(
        Path.join(home, "extensions_config.json"),
        JSON.stringify({ mcpServers: {}, skills: { "old-thing": { enabled: false }, chart: { enabled: false } } })
      )
      assert.strictEqual(yield* run("general-purpose"), `${GP_PROMPT}\n\n${fixture("subagent_skills.two.txt")}`)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scoped("with deferred skill discovery, DeerFlow's <skill_index> of the names (no self-evolution block)", () =>
    Effect.gen(function*() {
      const { run } = yield* setup({ skills: { deferred_discovery: true }, skill_evolution: { enabled: true } })
      assert.strictEqual(yield* run("general-purpose"), `${GP_PROMPT}\n\n${fixture("subagent_skills.index.txt")}`)
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
