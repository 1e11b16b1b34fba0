/**
 * Custom agents on disk (DeerFlow's layout, real files in temp dirs) and the tools that write them.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as AgentTools from "../../src/programs/AgentTools.js"
import * as CustomAgents from "../../src/programs/CustomAgents.js"
import * as Factory from "../../src/programs/Factory.js"
import { RunContext } from "../../src/services/RunContext.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { inRun, runContext, tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()

const writeAgent = (root: string, name: string, config: string, soul?: string) => {
  const dir = Path.join(root, name)
  Fs.mkdirSync(dir, { recursive: true })
  Fs.writeFileSync(Path.join(dir, "config.yaml"), config)
  if (soul !== undefined) Fs.writeFileSync(Path.join(dir, "SOUL.md"), soul)
}

describe("custom agents on disk", () => {
  it.effect("the user's agents, and the shared layout's they do not shadow; a bad config is a readable problem", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-ca-")
      const mine = CustomAgents.agentsDir(home, "default")
      writeAgent(
        mine,
        "writer",
        "description: Writes\ntool_groups: [file:write]\ngithub: { repo: x }\n",
        "  Be brief.  \n"
      )
      writeAgent(mine, "broken", "model_settings:\n  temperature: 7\n")
      // DeerFlow's test_agent_model_settings: test_model_settings_forbids_unknown_keys
      writeAgent(mine, "sampled", "model_settings:\n  temperature: 0.5\n  top_p: 0.9\n")
      writeAgent(CustomAgents.legacyAgentsDir(home), "writer", "description: the old writer\n")
      writeAgent(CustomAgents.legacyAgentsDir(home), "old", "description: From before\n")
      Fs.mkdirSync(Path.join(mine, "no-config"))
      const { agents, problems } = yield* CustomAgents.list(home, "default")
      assert.deepStrictEqual(agents.map((a) => [a.name, a.config.description, a.legacy]), [
        ["old", "From before", true],
        ["writer", "Writes", false]
      ])
      const writer = agents[1]!
      assert.strictEqual(writer.soul, "Be brief.")
      assert.deepStrictEqual(writer.config.tool_groups, ["file:write"])
      assert.deepStrictEqual(writer.raw.github, { repo: "x" })
      assert.lengthOf(problems, 2)
      assert.strictEqual(problems[0]!.reason, "invalid_config")
      assert.match(problems[0]!.message, /broken\/config\.yaml: model_settings\.temperature: .*between 0 and 2/)
      assert.match(problems[1]!.message, /sampled\/config\.yaml: model_settings\.top_p: is unexpected/)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("loading: a name that is not a name, a missing agent, a YAML error with its line", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-ca-")
      const bad = yield* Effect.flip(CustomAgents.load(home, "default", "../etc"))
      assert.strictEqual(bad.reason, "invalid_name")
      const missing = yield* Effect.flip(CustomAgents.load(home, "default", "ghost"))
      assert.strictEqual(missing.reason, "not_found")
      assert.include(missing.message, `No agent named "ghost"`)
      // (the command creating it is the CLI's to add, typed as Antler is run there: a gateway's client has none)
      assert.notInclude(missing.message, "agents create")
      assert.strictEqual(CustomAgents.createHint("ghost", "npx antler"), "Create one with: npx antler agents create ghost")
      writeAgent(CustomAgents.agentsDir(home, "default"), "yaml", "description: [unclosed\n")
      const syntax = yield* Effect.flip(CustomAgents.load(home, "default", "yaml"))
      assert.match(syntax.message, /yaml\/config\.yaml:\d+:\d+: YAML syntax error/)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("saving a new agent makes it appear whole; saving again replaces its files, leaving nothing behind", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-ca-")
      const dir = yield* CustomAgents.save(
        home,
        "default",
        "ada",
        { config: { description: "first" }, soul: "Soul one" }
      )
      assert.strictEqual(dir, Path.join(home, "users", "default", "agents", "ada"))
      yield* CustomAgents.save(home, "default", "ada", { config: { description: "second", github: { repo: "y" } } })
      const ada = yield* CustomAgents.load(home, "default", "ada")
      assert.deepStrictEqual([ada.config.description, ada.soul, ada.raw.name], ["second", "Soul one", "ada"])
      assert.sameMembers(Fs.readdirSync(dir), ["config.yaml", "SOUL.md"])
      assert.deepStrictEqual(Fs.readdirSync(Path.dirname(dir)), ["ada"])
      const invalid = yield* Effect.flip(
        CustomAgents.save(home, "default", "ada", { config: { reasoning_effort: "extreme" } })
      )
      assert.strictEqual(invalid.reason, "invalid_config")
      assert.strictEqual((yield* CustomAgents.load(home, "default", "ada")).config.description, "second")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("an agent only in the shared layout is read, never written", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-ca-")
      writeAgent(CustomAgents.legacyAgentsDir(home), "old", "description: From before\n")
      const refused = yield* Effect.flip(CustomAgents.save(home, "default", "old", { config: { description: "new" } }))
      assert.strictEqual(refused.reason, "legacy")
      assert.strictEqual((yield* CustomAgents.load(home, "default", "old")).config.description, "From before")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("a user's memory of a shared agent (its directory without config.yaml) neither hides nor unlocks it", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-ca-")
      writeAgent(CustomAgents.legacyAgentsDir(home), "old", "description: From before\n", "Old soul")
      const memoryDir = Path.join(CustomAgents.agentsDir(home, "bob"), "old")
      Fs.mkdirSync(memoryDir, { recursive: true })
      Fs.writeFileSync(Path.join(memoryDir, "memory.json"), "{}")
      const old = yield* CustomAgents.load(home, "bob", "old")
      assert.deepStrictEqual([old.legacy, old.soul], [true, "Old soul"])
      const refused = yield* Effect.flip(CustomAgents.save(home, "bob", "old", { config: {}, soul: "Bob's soul" }))
      assert.strictEqual(refused.reason, "legacy")
      assert.deepStrictEqual(Fs.readdirSync(memoryDir), ["memory.json"])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("agent names: letters, digits and '-', at most 64, none reserved; refused when loading and saving", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-ca-")
      for (const name of ["../etc", "a/b", "a.b", "", "default", "Lead-Agent", "bootstrap", "x".repeat(65)]) {
        assert.isDefined(CustomAgents.nameProblem(name), name)
        const loaded = yield* Effect.flip(CustomAgents.load(home, "default", name))
        assert.strictEqual(loaded.reason, "invalid_name", name)
        const saved = yield* Effect.flip(CustomAgents.save(home, "default", name, { config: {} }))
        assert.strictEqual(saved.reason, "invalid_name", name)
      }
      assert.include(CustomAgents.nameProblem("Default"), `"default" is a reserved name`)
      for (const name of ["ada", "Research-Bot-2", "x".repeat(64)]) assert.isUndefined(CustomAgents.nameProblem(name))
      assert.isFalse(Fs.existsSync(Path.join(home, "users")))
      // a run's settings name agents by the same rule
      const settings = Factory.settingsOf({ agent_name: "default" })
      assert.isTrue(Either.isLeft(settings))
      assert.include(Either.isLeft(settings) ? settings.left.message : "", `agent_name: "default" is a reserved name`)
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

const callTool = (tool: Tool.Tool, args: Record<string, unknown>, agentName?: string, admin?: boolean) => {
  const run = inRun()
  const context = agentName === undefined && admin === undefined
    ? run.context
    : Context.add(run.context, RunContext, {
      ...runContext("t1", "default"),
      options: {
        recursionLimit: 10,
        toolConcurrency: 1,
        ...(agentName !== undefined ? { extra: { agent_name: agentName } } : {}),
        ...(admin !== undefined ? { admin } : {})
      }
    })
  return Effect.map(
    Tool.invoke(tool, { id: "c1", name: tool.name, args }).pipe(Effect.provide(context)),
    (result) => ({ text: M.text(result.message), events: run.events })
  )
}

describe("setup_agent and update_agent", () => {
  it.effect("setup_agent writes the named agent, or (an admin's run) the default soul; an empty soul: nothing", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-tools-")
      const setup = yield* AgentTools.setupAgent(home)
      const empty = yield* callTool(setup, { soul: "  ", description: "d" }, "ada")
      // DeerFlow's test_setup_agent_tool looks for "soul content is empty"
      assert.match(empty.text, /^Error: soul content is empty/)
      assert.isFalse(Fs.existsSync(CustomAgents.agentsDir(home, "default")))
      const made = yield* callTool(setup, { soul: "# Ada", description: "Research", skills: ["deep-research"] }, "ada")
      assert.strictEqual(made.text, "Agent 'ada' created successfully!")
      assert.deepInclude(made.events[0]!, { type: "custom", name: "agent_created" })
      const ada = yield* CustomAgents.load(home, "default", "ada")
      assert.deepStrictEqual(
        [ada.config.description, ada.config.skills, ada.soul],
        ["Research", ["deep-research"], "# Ada"]
      )
      // every user's default agent reads the default soul: a run that is not an admin's writes nothing
      for (const admin of [undefined, false]) {
        const refused = yield* callTool(setup, { soul: "Not an admin's soul", description: "d" }, undefined, admin)
        assert.strictEqual(refused.text, AgentTools.NOT_ADMIN)
        assert.lengthOf(refused.events, 0)
        assert.isFalse(Fs.existsSync(CustomAgents.globalSoulPath(home)))
      }
      const global = yield* callTool(setup, { soul: "The default soul", description: "d" }, undefined, true)
      assert.match(global.text, /default agent's SOUL\.md was saved/)
      assert.strictEqual(Fs.readFileSync(CustomAgents.globalSoulPath(home), "utf8").trim(), "The default soul")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("a soul over 128 KiB is refused by setup_agent and update_agent (it could not be read back); nothing is written", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-tools-big-")
      const setup = yield* AgentTools.setupAgent(home)
      const huge = "Be thorough. ".repeat(12_000)
      const refused = yield* callTool(setup, { soul: huge, description: "d" }, "ada")
      assert.strictEqual(refused.text, "Error: The soul is 152.3 KiB; a SOUL.md holds at most 128 KiB. Write a shorter one.")
      assert.isFalse(Fs.existsSync(Path.join(CustomAgents.agentsDir(home, "default"), "ada")))
      const global = yield* callTool(setup, { soul: huge, description: "d" }, undefined, true)
      assert.match(global.text, /^Error: The soul is 152\.3 KiB/)
      assert.isFalse(Fs.existsSync(CustomAgents.globalSoulPath(home)))
      assert.strictEqual((yield* callTool(setup, { soul: "# Ada", description: "d" }, "ada")).text, "Agent 'ada' created successfully!")
      const update = yield* AgentTools.updateAgent(home, [])
      const again = yield* callTool(update, { soul: huge }, "ada")
      assert.match(again.text, /^Error: The soul is 152\.3 KiB/)
      assert.strictEqual((yield* CustomAgents.load(home, "default", "ada")).soul, "# Ada")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.effect("update_agent changes only what it is given, keeps unmanaged settings, treats 'null' as left out", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-tools-")
      yield* CustomAgents.save(home, "default", "ada", {
        config: { description: "Research", thinking_enabled: false, github: { repo: "x" } },
        soul: "Old soul"
      })
      const update = yield* AgentTools.updateAgent(home, [{ name: "main" }, { name: "deep" }])
      const nothing = yield* callTool(update, { soul: "null", model: "None", skills: "undefined" }, "ada")
      // DeerFlow's test_update_agent_tool looks for "No fields provided", "soul content is empty", "Omit the soul field"
      assert.match(nothing.text, /^Error: No fields provided/)
      for (const blank of ["", "  \n\t "]) {
        const empty = yield* callTool(update, { soul: blank, description: "Other" }, "ada")
        assert.match(empty.text, /^Error: soul content is empty.*Omit the soul field/)
      }
      assert.strictEqual((yield* CustomAgents.load(home, "default", "ada")).config.description, "Research")
      const unknown = yield* callTool(update, { model: "gpt-9" }, "ada")
      assert.strictEqual(unknown.text, `Error: Unknown model "gpt-9". Configured models: main, deep.`)
      const notList = yield* callTool(update, { skills: "deep-research" }, "ada")
      assert.match(notList.text, /^Error: skills must be a list/)
      // DeerFlow's test_update_agent_rejects_missing_agent_name: its sentence, word for word
      const noAgent = yield* callTool(update, { description: "x" })
      assert.strictEqual(
        noAgent.text,
        "Error: update_agent is only available inside a custom agent's chat. There is no agent_name in the current " +
          "runtime context, so there is nothing to update. If you are inside the bootstrap flow, use setup_agent instead."
      )
      const done = yield* callTool(
        update,
        { model: "deep", tool_groups: ["web"], soul: "New soul", description: "Research" },
        "ada"
      )
      assert.strictEqual(
        done.text,
        "Agent 'ada' updated successfully. Changed: model, tool_groups, soul. The new configuration takes effect on the next user turn."
      )
      const ada = yield* CustomAgents.load(home, "default", "ada")
      assert.deepStrictEqual([ada.config.model, ada.config.tool_groups, ada.soul], ["deep", ["web"], "New soul"])
      assert.deepStrictEqual([ada.config.thinking_enabled, ada.raw.github], [false, { repo: "x" }])
      const same = yield* callTool(update, { model: "deep" }, "ada")
      assert.match(same.text, /^No changes applied/)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  // DeerFlow's test_setup_agent_tool: test_setup_agent_rejects_invalid_agent_name_before_writing (and absolute);
  // test_update_agent_tool: test_update_agent_rejects_invalid_agent_name
  it.effect("an invalid agent name in the run is refused by both tools; nothing is written, not the default soul", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-tools-bad-name-")
      const setup = yield* AgentTools.setupAgent(home)
      const update = yield* AgentTools.updateAgent(home, [])
      for (const name of ["../../outside/evil", Path.join(home, "outside-agent"), "lead-agent"]) {
        const made = yield* callTool(setup, { soul: "# Evil", description: "d" }, name, true)
        assert.match(made.text, /^Error: Invalid agent name/, name)
        assert.lengthOf(made.events, 0)
        const changed = yield* callTool(update, { soul: "# Evil" }, name, true)
        assert.match(changed.text, /^Error: Invalid agent name/, name)
      }
      assert.deepStrictEqual(Fs.readdirSync(home), [])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  // DeerFlow's test_update_agent_tool: test_update_agent_rejects_legacy_agent_when_user_dir_has_only_memory
  it.effect("update_agent refuses an agent of the shared layout without naming the data directory", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-tools-legacy-")
      writeAgent(CustomAgents.legacyAgentsDir(home), "old", "description: shared\n", "Old soul")
      const own = Path.join(CustomAgents.agentsDir(home, "default"), "old")
      Fs.mkdirSync(own, { recursive: true })
      Fs.writeFileSync(Path.join(own, "memory.json"), "{}")
      const update = yield* AgentTools.updateAgent(home, [])
      const refused = yield* callTool(update, { soul: "Mine now" }, "old")
      assert.strictEqual(
        refused.text,
        "Error: Agent 'old' only exists in the legacy shared layout and is not scoped to a user. Move agents/old of " +
          "the data directory to users/default/agents/old before updating."
      )
      assert.deepStrictEqual(Fs.readdirSync(own), ["memory.json"])
      assert.strictEqual(Fs.readFileSync(Path.join(CustomAgents.legacyAgentsDir(home), "old", "SOUL.md"), "utf8"), "Old soul")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  // DeerFlow's test_update_agent_tool: test_update_agent_rejects_unknown_agent
  it.effect("update_agent of an agent that is not there says so in DeerFlow's words; nothing is written", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-tools-unknown-")
      const update = yield* AgentTools.updateAgent(home, [])
      const refused = yield* callTool(update, { soul: "A soul" }, "ghost")
      assert.strictEqual(
        refused.text,
        "Error: Agent 'ghost' does not exist for the current user. Use setup_agent to create a new agent first."
      )
      assert.deepStrictEqual(Fs.readdirSync(home), [])
      const mine = CustomAgents.agentsDir(home, "default")
      writeAgent(mine, "broken", "model_settings:\n  temperature: 7\n", "Old soul")
      const unreadable = yield* callTool(update, { soul: "A soul" }, "broken")
      assert.match(
        unreadable.text,
        /^Error: Agent 'broken' has an unreadable config: users\/default\/agents\/broken\/config\.yaml: model_settings\.temperature: /
      )
      assert.notInclude(unreadable.text, home)
      assert.strictEqual(Fs.readFileSync(Path.join(mine, "broken", "SOUL.md"), "utf8"), "Old soul")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it("agent names in a run's settings are validated before any path is made from them", () => {
    const context = {
      ...runContext(),
      options: { recursionLimit: 1, toolConcurrency: 1, extra: { agent_name: "../../etc" } }
    }
    assert.isUndefined(AgentTools.agentNameOf(context))
    assert.isTrue(Either.isLeft(CustomAgents.parseConfig("- a list", "x/config.yaml")))
  })
})
