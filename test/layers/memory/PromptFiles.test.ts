/**
 * DeerMem's `prompts_dir` (DeerFlow's test_prompt_external.py: a custom directory's template wins over the bundled
 * one, `{prompts_dir}/{agent}/` over the directory's for that agent only, isolated from other agents): real files in
 * temporary directories. A template missing or refused leaves the one it overrides, with one warning naming the key,
 * the file and why; an agent's file is read once.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as PromptFiles from "../../../src/layers/memory/PromptFiles.js"
import type { ChatTemplate } from "../../../src/state/MemoryTemplate.js"
import { tempDirs } from "../../support/fixtures.js"
import { captureLogs } from "../../support/logs.js"

const tempDir = tempDirs()
const DEERMEM_PROMPT = Path.resolve(
  Path.dirname(fileURLToPath(import.meta.url)),
  "../../fixtures/deerflow/deermem/prompts/memory_update.chat.yaml"
)

/** A template keeping the protocol, its system message saying `name`. */
const template = (name: string) =>
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

const write = (file: string, text: string) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, text)
}

const systemOf = (found: ChatTemplate | undefined) => found?.messages.find((m) => m.role === "system")?.content

describe("prompts_dir", () => {
  it.effect("the directory's template, an agent's own over it for that agent only; no warning", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-prompts-")
      write(Path.join(dir, PromptFiles.UPDATE_FILE), template("DEFAULT PROMPT"))
      write(Path.join(dir, "researcher", PromptFiles.UPDATE_FILE), template("RESEARCHER PROMPT"))
      const { capture, logged } = captureLogs()
      const files = yield* PromptFiles.make(dir).pipe(Effect.provide(capture))
      assert.include(systemOf(yield* files.updateTemplate(undefined)), "DEFAULT PROMPT")
      assert.include(systemOf(yield* files.updateTemplate("researcher")), "RESEARCHER PROMPT")
      assert.include(systemOf(yield* files.updateTemplate("other")), "DEFAULT PROMPT")
      // an agent name that is not a safe id never names a directory
      assert.include(systemOf(yield* files.updateTemplate("../researcher")), "DEFAULT PROMPT")
      assert.deepStrictEqual(logged, [])
    }))

  it.effect("DeerMem's own memory_update.chat.yaml is accepted as the directory's", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-prompts-")
      Fs.copyFileSync(DEERMEM_PROMPT, Path.join(dir, PromptFiles.UPDATE_FILE))
      const { capture, logged } = captureLogs()
      const files = yield* PromptFiles.make(dir).pipe(Effect.provide(capture))
      assert.include(systemOf(yield* files.updateTemplate(undefined)), "memory management system")
      assert.deepStrictEqual(logged, [])
    }))

  it.effect("the directory's file missing or refused: the built-in prompt, with one warning naming key and file", () =>
    Effect.gen(function*() {
      const missing = tempDir("antler-prompts-")
      const first = captureLogs()
      const none = yield* PromptFiles.make(missing).pipe(Effect.provide(first.capture))
      assert.isUndefined(yield* none.updateTemplate(undefined))
      assert.isUndefined(yield* none.updateTemplate("researcher"))
      assert.deepStrictEqual(first.logged, [
        `memory.backend_config.prompts_dir (${missing}): ${Path.join(missing, PromptFiles.UPDATE_FILE)}: not ` +
        "found (the built-in prompt is used)"
      ])
      const bad = tempDir("antler-prompts-")
      // DeerFlow's template of old, without the write gate's labels
      write(
        Path.join(bad, PromptFiles.UPDATE_FILE),
        template("OLD").replace(`"scope": "user", "durability": "durable",`, "")
          .replace(`"authority": "descriptive"`, "")
      )
      const second = captureLogs()
      const refused = yield* PromptFiles.make(bad).pipe(Effect.provide(second.capture))
      assert.isUndefined(yield* refused.updateTemplate(undefined))
      assert.lengthOf(second.logged, 1)
      assert.include(second.logged[0], `${Path.join(bad, PromptFiles.UPDATE_FILE)}: it does not name the answer's keys`)
      assert.include(second.logged[0], "(the built-in prompt is used)")
    }))

  it.effect("an agent's file refused: the directory's template, with one warning, once however often asked", () =>
    Effect.gen(function*() {
      const dir = tempDir("antler-prompts-")
      write(Path.join(dir, PromptFiles.UPDATE_FILE), template("DEFAULT PROMPT"))
      const agentFile = Path.join(dir, "writer", PromptFiles.UPDATE_FILE)
      write(agentFile, "format: text\ntemplate: hello\n")
      const { capture, logged } = captureLogs()
      const files = yield* PromptFiles.make(dir).pipe(Effect.provide(capture))
      assert.deepStrictEqual(logged, [])
      for (let i = 0; i < 3; i++) {
        const found = yield* files.updateTemplate("writer").pipe(Effect.provide(capture))
        assert.include(systemOf(found), "DEFAULT PROMPT")
      }
      assert.deepStrictEqual(logged, [
        `memory.backend_config.prompts_dir (${dir}): ${agentFile}: expected format 'chat', got "text" ` +
        `(${Path.join(dir, PromptFiles.UPDATE_FILE)} is used)`
      ])
    }))

  it.effect("no directory: the built-in prompt, nothing read", () =>
    Effect.gen(function*() {
      const files = yield* PromptFiles.make(undefined)
      assert.isUndefined(yield* files.updateTemplate(undefined))
      assert.isUndefined(yield* files.updateTemplate("researcher"))
    }))
})
