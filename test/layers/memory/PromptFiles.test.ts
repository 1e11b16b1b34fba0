/**
 * DeerMem's `prompts_dir` (DeerFlow's test_prompt_external.py: a custom directory's template wins over the bundled
 * one, `{prompts_dir}/{agent}/` over the directory's for that agent only, isolated from other agents): real files in
 * temporary directories. DeerMem's own three files are accepted; a template missing or refused leaves the one it
 * overrides, with one warning naming the key, the files and why; an agent's files are read once.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as PromptFiles from "../../../src/layers/memory/PromptFiles.js"
import * as MemoryTemplate from "../../../src/state/MemoryTemplate.js"
import { tempDirs } from "../../support/fixtures.js"
import { captureLogs } from "../../support/logs.js"

const tempDir = tempDirs()
const DEERMEM_PROMPTS = Path.resolve(
  Path.dirname(fileURLToPath(import.meta.url)),
  "../../fixtures/deerflow/deermem/prompts"
)
const FILES = [PromptFiles.UPDATE_FILE, PromptFiles.STALENESS_FILE, PromptFiles.CONSOLIDATION_FILE]

/** An update template keeping the protocol, its system message saying `name`. */
const update = (name: string) =>
  [
    "format: chat",
    "messages:",
    "  - role: system",
    "    content: |-",
    `      ${name}. Answer {{"user": {{}}, "history": {{}}, "newFacts": [{{"scope": "user", "durability": "durable",`,
    `      "authority": "descriptive"}}], "factsToRemove": [], "shouldUpdate": false}}`,
    "  - role: user",
    "    content: |-",
    "      <current_memory>{current_memory}</current_memory>",
    "      <conversation>{conversation}</conversation>",
    ""
  ].join("\n")

const staleness = (name: string) =>
  `template: |-\n  ${name}\n  <stale_facts>{stale_facts}</stale_facts>\n  Put removals in "staleFactsToRemove".\n`

const consolidation = (name: string) =>
  `format: text\ntemplate: |-\n  ${name} (at most {max_groups})\n  {consolidation_groups}\n` +
  `  Answer "factsToConsolidate": [{{"sourceIds": [], "consolidated": {{"scope": "user", "durability": "durable", ` +
  `"authority": "descriptive"}}}}]\n`

const write = (file: string, text: string) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, text)
}

/** A directory with the three templates, named `name`. */
const writeAll = (dir: string, name: string) => {
  write(Path.join(dir, PromptFiles.UPDATE_FILE), update(name))
  write(Path.join(dir, PromptFiles.STALENESS_FILE), staleness(name))
  write(Path.join(dir, PromptFiles.CONSOLIDATION_FILE), consolidation(name))
}

const systemOf = (found: PromptFiles.Templates) => found.update?.messages.find((m) => m.role === "system")?.content

describe("prompts_dir", () => {
  it.effect("the directory's templates, an agent's own over each for that agent only; no warning", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-prompts-")
      writeAll(dir, "DEFAULT")
      write(Path.join(dir, "researcher", PromptFiles.UPDATE_FILE), update("RESEARCHER"))
      write(Path.join(dir, "researcher", PromptFiles.STALENESS_FILE), staleness("RESEARCHER"))
      const { capture, logged } = captureLogs()
      const files = yield* PromptFiles.make(dir).pipe(Effect.provide(capture))
      const of = (agent: string | undefined) => files.templates(agent).pipe(Effect.provide(capture))
      const user = yield* of(undefined)
      assert.include(systemOf(user), "DEFAULT")
      assert.include(user.staleness, "DEFAULT")
      assert.include(user.consolidation, "DEFAULT")
      const researcher = yield* of("researcher")
      assert.include(systemOf(researcher), "RESEARCHER")
      assert.include(researcher.staleness, "RESEARCHER")
      // an agent without its own consolidation.yaml uses the directory's
      assert.include(researcher.consolidation, "DEFAULT")
      assert.include(systemOf(yield* of("other")), "DEFAULT")
      // an agent name that is not a safe id never names a directory
      assert.include(systemOf(yield* of("../researcher")), "DEFAULT")
      assert.deepStrictEqual(logged, [])
    }))

  it.effect("DeerMem's own three files are accepted, and render as DeerMem renders them", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-prompts-")
      for (const name of FILES) Fs.copyFileSync(Path.join(DEERMEM_PROMPTS, name), Path.join(dir, name))
      const { capture, logged } = captureLogs()
      const found = yield* Effect.flatMap(PromptFiles.make(dir), (files) => files.templates(undefined)).pipe(
        Effect.provide(capture)
      )
      assert.deepStrictEqual(logged, [])
      assert.include(systemOf(found), "memory management system")
      const stale = MemoryTemplate.renderText(found.staleness!, { stale_facts: "- [f1] x" })
      assert.include(stale, "## Staleness Review")
      assert.include(stale, "<stale_facts>\n- [f1] x\n</stale_facts>")
      assert.include(stale, `Each entry must be {"id": "fact_id", "reason": "brief explanation"}.`)
      const merging = MemoryTemplate.renderText(found.consolidation!, { consolidation_groups: "G", max_groups: "3" })
      assert.include(merging, "## Memory Consolidation")
      assert.include(merging, "- Maximum 3 consolidation groups per cycle")
    }))

  it.effect("the directory's files missing or refused: the built-in prompts, one warning naming key and files", () =>
    Effect.gen(function*() {
      const missing = tempDir("antler-prompts-")
      const first = captureLogs()
      const none = yield* PromptFiles.make(missing).pipe(Effect.provide(first.capture))
      assert.deepStrictEqual(yield* none.templates(undefined), {
        update: undefined,
        staleness: undefined,
        consolidation: undefined
      })
      assert.isUndefined((yield* none.templates("researcher")).update)
      assert.deepStrictEqual(first.logged, [
        `memory.backend_config.prompts_dir (${missing}): ` +
        FILES.map((name) => `${Path.join(missing, name)}: not found (the built-in prompt is used)`).join("; ")
      ])
      const bad = tempDir("antler-prompts-")
      writeAll(bad, "OLD")
      // DeerFlow's templates of old, without the write gate's labels
      write(
        Path.join(bad, PromptFiles.UPDATE_FILE),
        update("OLD").replace(`"scope": "user", "durability": "durable",`, "")
          .replace(`"authority": "descriptive"`, "")
      )
      write(Path.join(bad, PromptFiles.STALENESS_FILE), "template: 'Review {stale_facts}'\n")
      const second = captureLogs()
      const refused = yield* PromptFiles.make(bad).pipe(Effect.provide(second.capture))
      const found = yield* refused.templates(undefined)
      assert.isUndefined(found.update)
      assert.isUndefined(found.staleness)
      assert.include(found.consolidation, "OLD")
      assert.lengthOf(second.logged, 1)
      assert.include(second.logged[0], `${Path.join(bad, PromptFiles.UPDATE_FILE)}: it does not name the answer's keys`)
      assert.include(
        second.logged[0],
        `${Path.join(bad, PromptFiles.STALENESS_FILE)}: it does not name the answer's keys "staleFactsToRemove"`
      )
      assert.notInclude(second.logged[0], PromptFiles.CONSOLIDATION_FILE)
    }))

  it.effect("an agent's file refused: the directory's template, with one warning, once however often asked", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-prompts-")
      writeAll(dir, "DEFAULT")
      const agentFile = Path.join(dir, "writer", PromptFiles.UPDATE_FILE)
      write(agentFile, "format: text\ntemplate: hello\n")
      const { capture, logged } = captureLogs()
      const files = yield* PromptFiles.make(dir).pipe(Effect.provide(capture))
      assert.deepStrictEqual(logged, [])
      for (let i = 0; i < 3; i++) {
        const found = yield* files.templates("writer").pipe(Effect.provide(capture))
        assert.include(systemOf(found), "DEFAULT")
      }
      assert.deepStrictEqual(logged, [
        `memory.backend_config.prompts_dir (${dir}): ${agentFile}: expected format 'chat', got "text" ` +
        `(${Path.join(dir, PromptFiles.UPDATE_FILE)} is used)`
      ])
    }))

  it.effect("no directory: the built-in prompts, nothing read", () =>
    Effect.gen(function*() {
      const files = yield* PromptFiles.make(undefined)
      assert.deepStrictEqual(yield* files.templates(undefined), {})
      assert.deepStrictEqual(yield* files.templates("researcher"), {})
    }))
})
