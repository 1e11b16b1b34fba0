/**
 * Skill self-evolution end to end (DeerFlow's `skill_evolution`): with it on, an admin's run (the CLI's) gets
 * `skill_manage` and the prompt's "Skill Self-Evolution" section; a run (SCRIPTED model on the loopback server,
 * real client, real files) creates a skill under `custom/` and edits it; the next run lists the skill's new
 * version and reads it; the skill's history holds both versions. What the model sends is checked: a name or a
 * path that would leave the skill's folder, a SKILL.md without front matter and an oversized one are refused with
 * an error result and write nothing. Off by default, and never offered to a run that is not an admin's.
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
import type { RunEvent } from "../../src/services/RunEvents.js"
import { tempDirs } from "../support/fixtures.js"
import { toolNames } from "../support/modelRequests.js"

const tempDir = tempDirs()

const textOf = (m: { readonly [key: string]: unknown }): string =>
  typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")
const systemOf = (body: ChatRequestBody) => textOf(body.messages[0]!)
const lastUser = (body: ChatRequestBody) => textOf(body.messages.filter((m) => m.role === "user").at(-1)!)
const toolResults = (body: ChatRequestBody) => body.messages.filter((m) => m.role === "tool").map(textOf)

const collect = (stream: Stream.Stream<RunEvent>) =>
  Effect.map(Stream.runCollect(stream), (chunk) => Array.from(chunk))

const V1 = "---\nname: csv-cleanup\ndescription: Cleans CSV files (first draft)\n---\n# CSV cleanup\n" +
  "1. Read the file.\n"
const V2 = "---\nname: csv-cleanup\ndescription: Cleans CSV files, quoting fixed\n---\n# CSV cleanup\n" +
  "1. Read the file.\n2. Fix the quoting before anything else.\n"
const HUGE = `---\nname: csv-cleanup\ndescription: Too big\n---\n${"x".repeat(600 * 1024)}\n`

const call = (id: string, args: Record<string, unknown>): Turn => ({
  toolCalls: [{ id, name: "skill_manage", arguments: args }]
})

const script = (body: ChatRequestBody): Turn => {
  const user = lastUser(body)
  const step = body.messages.filter((m) => m.role === "assistant").length
  if (user.includes("Learn from this")) {
    const steps: ReadonlyArray<Turn> = [
      call("c1", { action: "create", name: "csv-cleanup", content: V1 }),
      call("c2", { action: "edit", name: "csv-cleanup", content: V2 })
    ]
    return steps[step] ?? "Saved the skill."
  }
  if (user.includes("Try bad skills")) {
    const steps: ReadonlyArray<Turn> = [
      call("b1", { action: "create", name: "../escape", content: V1 }),
      call("b2", { action: "write_file", name: "csv-cleanup", path: "scripts/../../../escape.py", content: "x" }),
      call("b3", { action: "write_file", name: "csv-cleanup", path: "/etc/escape.py", content: "x" }),
      call("b4", { action: "edit", name: "csv-cleanup", content: "no front matter here" }),
      call("b5", { action: "edit", name: "csv-cleanup", content: HUGE }),
      call("b6", { action: "edit", name: "csv-cleanup", content: V1.replace("csv-cleanup", "other-name") })
    ]
    return steps[step] ?? "Nothing written."
  }
  if (user.includes("Clean my CSV")) {
    return step === 0
      ? {
        toolCalls: [{
          id: "r1",
          name: "read_file",
          arguments: { description: "read the skill", path: "/mnt/skills/custom/csv-cleanup/SKILL.md" }
        }]
      }
      : "Following the skill."
  }
  return "Hello."
}

const factoryLayer = (...args: Parameters<typeof App.factoryLayer>) =>
  App.factoryLayer(...args).pipe(Layer.provide(NodeFileSystem.layer))

const setup = (server: { readonly url: string }, evolution: Record<string, unknown> | undefined) =>
  Effect.gen(function*() {
    const home = tempDir("antler-evolve-")
    const skills = Path.join(home, "skills")
    Fs.mkdirSync(Path.join(skills, "public", "demo"), { recursive: true })
    Fs.writeFileSync(
      Path.join(skills, "public", "demo", "SKILL.md"),
      "---\nname: demo\ndescription: A built-in skill\n---\n# Demo\n"
    )
    const app = yield* ConfigFile.fromObject({
      models: [{ name: "scripted", model: "scripted-model", base_url: server.url, api_key: "sk-test-evolve" }],
      skills: { path: skills },
      memory: { enabled: false },
      title: { enabled: false },
      ...(evolution === undefined ? {} : { skill_evolution: evolution })
    }, { home })
    const choice = Either.getOrThrow(App.chooseModel(app.config.models, {}, {}))
    const factory = Context.get(yield* Layer.build(factoryLayer(app, choice)), Factory.AgentFactory)
    return { home, skills, factory }
  })

const settings = { model_name: "scripted" }

describe("skill self-evolution", () => {
  it.live("a run creates then edits a skill; the next run loads the new version; the history has both", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const { factory, skills } = yield* setup(server, { enabled: true })

      yield* collect(factory.run({ threadId: "t1", prompt: "Learn from this task", settings, admin: true }))
      const first = server.requests[0]!
      assert.include(toolNames(first), "skill_manage")
      assert.include(systemOf(first), "## Skill Self-Evolution")
      assert.include(systemOf(first), `skill_manage(action="patch", name="my-skill", find="...", replace="...")`)
      const results = toolResults(server.requests.at(-1)!)
      assert.deepStrictEqual(results, ["Created custom skill 'csv-cleanup'.", "Updated custom skill 'csv-cleanup'."])

      // DeerFlow's layout: the skill under custom/, its history beside it (hidden)
      const file = Path.join(skills, "custom", "csv-cleanup", "SKILL.md")
      assert.strictEqual(Fs.readFileSync(file, "utf8"), V2)
      const history = Fs.readFileSync(Path.join(skills, "custom", ".history", "csv-cleanup.jsonl"), "utf8")
        .trim().split("\n").map((line) => JSON.parse(line))
      assert.deepStrictEqual(history.map((r) => [r.action, r.author, r.thread_id, r.file_path]), [
        ["create", "agent", "t1", "SKILL.md"],
        ["edit", "agent", "t1", "SKILL.md"]
      ])
      assert.deepStrictEqual(history.map((r) => [r.prev_content, r.new_content]), [[null, V1], [V1, V2]])
      for (const record of history) assert.isString(record.ts)

      // the next run lists the new version (its description) and reads it from the skills mount
      const before = server.requests.length
      yield* collect(factory.run({ threadId: "t2", prompt: "Clean my CSV", settings, admin: true }))
      const next = server.requests.slice(before)
      // (DeerFlow's skill entry: its name and description on lines of their own)
      assert.match(systemOf(next[0]!), /<name>csv-cleanup<\/name>\s*<description>Cleans CSV files, quoting fixed/)
      assert.notInclude(systemOf(next[0]!), "first draft")
      assert.include(toolResults(next.at(-1)!)[0]!, "Fix the quoting before anything else.")
    })), 120_000)

  it.live("refuses a name or path leaving custom/, a SKILL.md that is not one, and oversized content", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const { factory, home, skills } = yield* setup(server, { enabled: true })
      yield* collect(factory.run({ threadId: "t1", prompt: "Learn from this task", settings, admin: true }))
      const events = yield* collect(factory.run({ threadId: "t3", prompt: "Try bad skills", settings, admin: true }))
      assert.strictEqual(events.at(-1)?.type, "run_end")
      const results = toolResults(server.requests.at(-1)!)
      assert.strictEqual(results.length, 6)
      assert.include(results[0]!, "Error: Skill name must be hyphen-case")
      assert.include(results[1]!, "Error: Supporting file path must not contain parent-directory traversal.")
      assert.include(results[2]!, "Error: Supporting file path must be relative.")
      assert.include(results[3]!, "Error: SKILL.md does not declare a skill: no YAML front matter")
      assert.match(results[4]!, /^Error: SKILL\.md would be 600(\.\d)? KiB; at most 512 KiB\.$/)
      assert.include(results[5]!, "Error: Frontmatter name 'other-name' must match requested skill name 'csv-cleanup'")
      // nothing written: the skill is as it was, nothing escaped, the history has no refused change
      assert.strictEqual(Fs.readFileSync(Path.join(skills, "custom", "csv-cleanup", "SKILL.md"), "utf8"), V2)
      assert.deepStrictEqual(Fs.readdirSync(Path.join(skills, "custom")).sort(), [".history", "csv-cleanup"])
      assert.deepStrictEqual(Fs.readdirSync(Path.join(skills, "custom", "csv-cleanup")), ["SKILL.md"])
      assert.isFalse(Fs.existsSync(Path.join(skills, "escape")))
      assert.isFalse(Fs.existsSync(Path.join(home, "escape.py")))
      assert.isFalse(Fs.existsSync(Path.join(skills, "escape.py")))
      const lines = Fs.readFileSync(Path.join(skills, "custom", ".history", "csv-cleanup.jsonl"), "utf8").trim()
      assert.strictEqual(lines.split("\n").length, 2)
    })), 120_000)

  it.live("is off by default, and never offered to a run that is not an admin's", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* ScriptedChatServer.start(script)
      const off = yield* setup(server, undefined)
      yield* collect(off.factory.run({ threadId: "t1", prompt: "hi", settings, admin: true }))
      assert.notInclude(toolNames(server.requests.at(-1)!), "skill_manage")
      assert.notInclude(systemOf(server.requests.at(-1)!), "Skill Self-Evolution")

      const on = yield* setup(server, { enabled: true })
      yield* collect(on.factory.run({ threadId: "t1", prompt: "Learn from this task", settings }))
      assert.notInclude(toolNames(server.requests.at(-1)!), "skill_manage")
      assert.notInclude(systemOf(server.requests.at(-1)!), "Skill Self-Evolution")
      assert.isFalse(Fs.existsSync(Path.join(on.skills, "custom")))
    })), 120_000)
})
