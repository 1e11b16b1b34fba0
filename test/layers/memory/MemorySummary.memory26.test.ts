/**
 * A summary that is not text in `memory.json` (DeerFlow test_memory_prompt_injection.py
 * `test_format_memory_tolerates_non_string_summary`: an import or a hand edit can plant `"summary": 12345`) is
 * read as its text, as DeerMem's `str()` reads it: the memory is injected and stays writable, where the whole
 * memory was refused as damaged (neither injected nor updated until cleared).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { tempDirs } from "../../support/fixtures.js"
import * as MemoryFile from "../../support/memoryFile.js"

const tempDir = tempDirs()

const memoryWith = (doc: unknown) => MemoryFile.holding(tempDir("antler-memsummary-"), doc)

describe("a summary that is not text", () => {
  it.scoped("is read as its text: injected, and the memory stays readable", () =>
    Effect.gen(function*() {
      const memory = yield* memoryWith({
        user: { topOfMind: { summary: 12345 }, workContext: { summary: true } },
        history: { recentMonths: { summary: { project: "antler" } } },
        facts: [{ id: "f1", content: "Prefers tea.", category: "preference", confidence: 0.9 }]
      })
      const block = yield* memory.context({ userId: "default" })
      assert.include(block, "- Current Focus: 12345")
      assert.include(block, "- Work: true")
      assert.include(block, "- Recent: {\"project\":\"antler\"}")
      assert.include(block, "- [preference | 0.90] Prefers tea.")
      const doc = yield* memory.load({ userId: "default" })
      assert.strictEqual(doc.user.topOfMind.summary, "12345")
    }))
})
