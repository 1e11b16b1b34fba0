/**
 * DeerFlow's `test_memory_prompt_injection.py`, its cases not pinned elsewhere, through the block a run injects
 * from a real `memory.json` (`FileMemory`'s `context`): a confidence out of 0-1 is shown clamped, as DeerMem's
 * `_coerce_confidence` reads it; every history summary is shown, `Background` included; the guaranteed corrections
 * and the other facts share one `Facts:` header, one blank line after the summaries; facts whose content is not
 * text are left out; `guaranteed_categories` given as one string is a configuration error (DeerMem's TypeError).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import { tempDirs } from "../../support/fixtures.js"
import * as MemoryFile from "../../support/memoryFile.js"

const tempDir = tempDirs()

/** The block injected from a `memory.json` holding `doc`. */
const blockOf = (doc: unknown) =>
  Effect.flatMap(
    MemoryFile.holding(tempDir("antler-meminject-"), doc),
    (memory) => memory.context({ userId: "default" })
  )

describe("test_memory_prompt_injection.py", () => {
  it.scoped("test_coerce_confidence_valid_values_are_clamped: 1.5 is shown 1.00, -0.5 0.00, 0.75 as it is", () =>
    Effect.gen(function*() {
      const block = yield* blockOf({
        facts: [
          { id: "a", content: "Over confident", category: "knowledge", confidence: 1.5 },
          { id: "b", content: "Below zero", category: "knowledge", confidence: -0.5 },
          { id: "c", content: "In between", category: "knowledge", confidence: 0.75 }
        ]
      })
      assert.include(block, "- [knowledge | 1.00] Over confident")
      assert.include(block, "- [knowledge | 0.00] Below zero")
      assert.include(block, "- [knowledge | 0.75] In between")
    }))

  it.scoped("test_format_memory_includes_long_term_background", () =>
    Effect.gen(function*() {
      const block = yield* blockOf({
        history: {
          recentMonths: { summary: "Recent activity summary" },
          earlierContext: { summary: "Earlier context summary" },
          longTermBackground: { summary: "Core expertise in distributed systems" }
        },
        facts: []
      })
      assert.include(block, "Background: Core expertise in distributed systems")
      assert.include(block, "Recent: Recent activity summary")
      assert.include(block, "Earlier: Earlier context summary")
    }))

  it.scoped("test_single_facts_header_... / test_single_inter_section_separator_... / skips non-text content", () =>
    Effect.gen(function*() {
      const block = yield* blockOf({
        user: { workContext: { summary: "Python developer" } },
        facts: [
          { id: "k", content: "Knowledge fact", category: "knowledge", confidence: 0.8 },
          { id: "c", content: "Correction fact", category: "correction", confidence: 0.95, sourceError: "avoid X" },
          { id: "n", content: null, category: "knowledge", confidence: 0.99 },
          { id: "o", content: { text: "not text" }, category: "knowledge", confidence: 0.99 }
        ]
      })
      assert.strictEqual(block.split("Facts:").length - 1, 1, block)
      assert.isBelow(block.indexOf("Correction fact"), block.indexOf("Knowledge fact"))
      assert.notInclude(block, "\n\n\n")
      const between = block.slice(block.indexOf("User Context:"), block.indexOf("Facts:"))
      assert.strictEqual(between.split("\n\n").length - 1, 1, JSON.stringify(between))
      assert.notInclude(block, "not text")
      assert.notInclude(block, "null")
    }))

  it.effect("test_bare_string_guaranteed_categories_raises_type_error: a configuration error naming the key", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.flip(ConfigFile.fromObject(
        { memory: { backend_config: { guaranteed_categories: "correction" } } },
        { home: tempDir("antler-meminject-") }
      ))
      assert.include(JSON.stringify(refused.issues), "guaranteed_categories")
    }))
})
