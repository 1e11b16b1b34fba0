/**
 * The memory service with DeerMem's own files (`patterns_dir`, `prompts_dir`), real files in temporary directories
 * named relative to the configuration file: the update's request is the template rendered (its system message, the
 * memory and the conversation in the user's), an agent's own template for its memory, and its answer applied as
 * ever; a file's signal patterns admit a conversation to a full queue, its acknowledgements drop turns.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as FileMemory from "../../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../../src/layers/ScriptedModel.js"
import { Memory } from "../../../src/services/Memory.js"
import type { ModelRequest } from "../../../src/services/ModelService.js"
import { ModelService } from "../../../src/services/ModelService.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import type * as MemoryDoc from "../../../src/state/Memory.js"
import * as M from "../../../src/state/Message.js"
import { tempDirs } from "../../support/fixtures.js"
import { captureLogs } from "../../support/logs.js"

const tempDir = tempDirs()
const DEERMEM_PROMPTS = Path.resolve(
  Path.dirname(fileURLToPath(import.meta.url)),
  "../../fixtures/deerflow/deermem/prompts"
)

const USER = { scope: "user", durability: "durable", authority: "descriptive" } as const
const fact = (content: string) => JSON.stringify({ newFacts: [{ content, confidence: 0.9, ...USER }] })

const template = (name: string) =>
  [
    "messages:",
    "  - role: system",
    "    content: |-",
    `      ${name}. Answer {{"user": {{}}, "history": {{}}, "newFacts": [{{"scope": "user", "durability": "durable",`,
    `      "authority": "descriptive"}}], "factsToRemove": [], "shouldUpdate": false}}`,
    "  - role: user",
    "    content: |-",
    "      <current_memory>{current_memory}</current_memory>",
    "      <conversation>{conversation}</conversation>{correction_hint}",
    "      {staleness_review_section}",
    "      {consolidation_section}",
    ""
  ].join("\n")

const write = (file: string, text: string) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, text)
}

/** The memory service of a config file in `dir` (its memory section `memory`), over a scripted model. */
const setup = (dir: string, memory: Record<string, unknown>, script: ScriptedModel.Script) =>
  Effect.gen(function*() {
    const requests: Array<ModelRequest> = []
    const scripted = ScriptedModel.make(script)
    const model = ModelService.of({ generate: (r) => Effect.suspend(() => (requests.push(r), scripted.generate(r))) })
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      FileMemory.layer().pipe(
        Layer.provide(Layer.succeed(ModelService, model)),
        Layer.provide(Layer.succeed(ThreadStore, MemoryThreadStore.make())),
        Layer.provide(ConfigFile.layerFromObject({ memory }, {
          home: Path.join(dir, "home"),
          source: Path.join(dir, "config.yaml")
        })),
        Layer.provide(NodeFileSystem.layer)
      ),
      scope
    )
    return { memory: context.pipe((c) => c.unsafeMap.get(Memory.key) as Memory["Type"]), requests }
  })

describe("prompts_dir", () => {
  it.effect("the update's request is the templates rendered; an agent's own templates for its memory", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-memfiles-")
      const prompts = Path.join(dir, "prompts")
      write(Path.join(prompts, "memory_update.chat.yaml"), template("DEFAULT PROMPT"))
      for (const name of ["staleness_review.yaml", "consolidation.yaml"]) {
        Fs.copyFileSync(Path.join(DEERMEM_PROMPTS, name), Path.join(prompts, name))
      }
      write(Path.join(prompts, "researcher", "memory_update.chat.yaml"), template("RESEARCHER PROMPT"))
      write(
        Path.join(prompts, "researcher", "staleness_review.yaml"),
        `template: |-\n  RESEARCHER REVIEW <stale_facts>{stale_facts}</stale_facts> into "staleFactsToRemove"\n`
      )
      const { capture, logged } = captureLogs()
      const { memory, requests } = yield* setup(
        dir,
        { backend_config: { prompts_dir: "prompts", consolidation_enabled: true, consolidation_min_facts: 3 } },
        [fact("Uses uv"), fact("Reads papers")]
      ).pipe(Effect.provide(capture))
      // three old facts of one category in each memory: due for review, and shown for merging
      const old = (id: string): MemoryDoc.Fact => ({
        id,
        content: `knows ${id}`,
        category: "knowledge",
        confidence: 0.9,
        createdAt: "1960-01-01T00:00:00Z",
        source: "t0"
      })
      const seeded = (agentName?: string) =>
        memory.modify({ userId: "default", agentName }, (doc) =>
          [undefined, { ...doc, facts: [old("fact_a"), old("fact_b"), old("fact_c")] }] as const)
      yield* seeded()
      yield* seeded("researcher")
      const said = (text: string) => [M.human(text), M.ai("Noted.")]
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: said("I always use uv, never pip.") })
      yield* memory.enqueue({
        threadId: "t2",
        userId: "default",
        agentName: "researcher",
        messages: said("I read two papers a day; that's wrong of you to forget.")
      })
      yield* memory.flush.pipe(Effect.provide(capture))
      assert.deepStrictEqual(logged, [])
      assert.lengthOf(requests, 2)
      const [user, agent] = requests
      assert.strictEqual(user!.internal, "memory")
      assert.include(user!.systemPrompt, "DEFAULT PROMPT")
      assert.include(user!.systemPrompt, `{"user": {}, "history": {}`)
      assert.lengthOf(user!.messages, 1)
      const text = M.text(user!.messages[0]!)
      assert.include(text, "<conversation>User: I always use uv, never pip.\n\nAssistant: Noted.</conversation>")
      assert.include(text, `<current_memory>{\n  "user": {`)
      // DeerMem's own words for the sections, from the directory's files, with the facts
      assert.include(text, "## Staleness Review")
      assert.include(text, `<stale_facts>\n- [fact_a | knowledge | 0.90 | 1960-01-01 | valid:90d] "knows fact_a"`)
      assert.include(text, "## Memory Consolidation")
      assert.include(text, `<consolidation_candidates category="knowledge" count="3">`)
      assert.include(text, "- Maximum 3 consolidation groups per cycle")
      const agentText = M.text(agent!.messages[0]!)
      assert.include(agent!.systemPrompt, "RESEARCHER PROMPT")
      // the agent's own staleness words; the directory's consolidation words (it has none of its own)
      assert.match(agentText, /RESEARCHER REVIEW <stale_facts>- \[fact_a [^<]*knows fact_c[^<]*<\/stale_facts>/)
      assert.notInclude(agentText, "## Staleness Review")
      assert.include(agentText, "## Memory Consolidation")
      // the hints of the conversation's signals fill {correction_hint}
      assert.include(agentText, "Explicit correction signals were detected")
      // the answers are applied as ever
      const facts = (agentName?: string) =>
        Effect.map(memory.load({ userId: "default", agentName }), (d) => d.facts.map((f) => f.content))
      assert.include(yield* facts(), "Uses uv")
      assert.include(yield* facts("researcher"), "Reads papers")
    }))

  it.effect("without a template file: Antler's own prompt, and one warning naming the key and the file", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-memfiles-")
      const { capture, logged } = captureLogs()
      const { memory, requests } = yield* setup(dir, { backend_config: { prompts_dir: "nowhere" } }, [fact("x")])
        .pipe(Effect.provide(capture))
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: [M.human("I use uv."), M.ai("Ok.")] })
      yield* memory.flush
      const nowhere = Path.join(dir, "nowhere")
      assert.deepStrictEqual(logged, [
        `memory.backend_config.prompts_dir (${nowhere}): ` +
        ["memory_update.chat.yaml", "staleness_review.yaml", "consolidation.yaml"]
          .map((name) => `${Path.join(nowhere, name)}: not found (the built-in prompt is used)`).join("; ")
      ])
      assert.isUndefined(requests[0]!.systemPrompt)
      assert.include(M.text(requests[0]!.messages[0]!), "You maintain the long-term memory")
    }))
})

describe("patterns_dir", () => {
  it.effect("its signal patterns admit a conversation to a full queue; its acknowledgements drop turns", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-memfiles-")
      write(Path.join(dir, "patterns", "correction.yaml"), "- pattern: '\\bbanana\\b'\n  flags: [ignorecase]\n")
      write(Path.join(dir, "patterns", "trivial.yaml"), "- 'yo'\n")
      const { capture, logged } = captureLogs()
      const { memory, requests } = yield* setup(
        dir,
        { backend_config: { patterns_dir: "patterns", queue_max_depth: 1 } },
        [fact("a"), fact("b")]
      ).pipe(Effect.provide(capture))
      // five files missing: one warning
      assert.lengthOf(logged, 1)
      assert.include(logged[0], `memory.backend_config.patterns_dir (${Path.join(dir, "patterns")}): `)
      const plain = [M.human("Tell me about uv."), M.ai("It installs packages.")]
      yield* memory.enqueue({ threadId: "t1", userId: "default", messages: plain })
      yield* memory.enqueue({ threadId: "t2", userId: "default", messages: plain })
      assert.strictEqual(yield* memory.pending, 1)
      // the built-in correction patterns are replaced by the file's
      const wrong = [...plain, M.human("That's wrong, use make dev."), M.ai("Understood.")]
      yield* memory.enqueue({ threadId: "t3", userId: "default", messages: wrong })
      assert.strictEqual(yield* memory.pending, 1)
      const banana = [M.human("yo"), M.ai("Hi!"), M.human("Banana: use make dev."), M.ai("Understood.")]
      yield* memory.enqueue({ threadId: "t4", userId: "default", messages: banana })
      assert.strictEqual(yield* memory.pending, 2)
      yield* memory.flush
      assert.lengthOf(requests, 2)
      const prompt = M.text(requests[1]!.messages[0]!)
      assert.include(prompt, "User: Banana: use make dev.")
      assert.notInclude(prompt, "User: yo")
      assert.notInclude(prompt, "Assistant: Hi!")
    }))
})
