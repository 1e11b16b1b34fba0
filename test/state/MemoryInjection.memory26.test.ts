/**
 * The injected memory block's budget is spent on what the model reads (DeerFlow
 * test_memory_prompt_injection.py): DeerMem escapes summaries and facts (`html.escape`, quote=False) before it
 * counts them, so text full of `<`, `>` and `&` (which the user can import or type) keeps the block within
 * `max_injection_tokens`; escaping leaves benign text byte-identical.
 */
import { assert, describe, it } from "@effect/vitest"
import * as DynamicContext from "../../src/middleware/DynamicContext.js"
import * as MemoryDoc from "../../src/state/Memory.js"
import * as Tokens from "../../src/state/Tokens.js"

const fact = (id: string, content: string, confidence: number): MemoryDoc.Fact => ({
  id,
  content,
  category: "knowledge",
  confidence,
  createdAt: "",
  source: ""
})

const withSummary = (summary: string, facts: ReadonlyArray<MemoryDoc.Fact>): MemoryDoc.Document => ({
  ...MemoryDoc.empty(),
  user: { ...MemoryDoc.empty().user, workContext: { summary, updatedAt: "" } },
  facts
})

/** The text between the `<memory>` tags the model reads. */
const readByModel = (body: string) => {
  const block = DynamicContext.memoryBlock(body)
  return block.slice("<memory>\n".length, block.length - "\n</memory>".length)
}

const inject = (doc: MemoryDoc.Document, maxTokens: number, count: (text: string) => number) =>
  MemoryDoc.formatForInjection(doc, {
    maxTokens,
    count,
    guaranteedCategories: ["correction"],
    guaranteedBudget: 60,
    includeFacts: true
  })

describe("the memory block's budget", () => {
  const counters = [["o200k", Tokens.countText], ["char", Tokens.estimateText]] as const

  for (const [name, count] of counters) {
    it(`counts the escaped text the model reads (${name})`, () => {
      const doc = withSummary(
        "a<b ".repeat(20).trim(),
        Array.from({ length: 40 }, (_, i) => fact(`f${i}`, `x<y && p>q ${i} `.repeat(5), 0.9 - i / 100))
      )
      const read = readByModel(inject(doc, 300, count))
      assert.isAtMost(count(read), 300)
      assert.include(read, "&lt;")
      assert.notInclude(read, "x<y")
      // the summary whole, the facts on what it leaves
      assert.isTrue(read.startsWith(`User Context:\n- Work: ${"a&lt;b ".repeat(20).trim()}\n\nFacts:\n`))
      assert.include(read, "\n- [knowledge | 0.90] x&lt;y &amp;&amp; p&gt;q 0")
      assert.notInclude(read, "| 0.51]")
    })

    it(`selects the facts by their escaped lines (${name})`, () => {
      // equal raw lengths; the first escapes to far more tokens, so only it is weighed by what the model reads
      const doc = withSummary("", [fact("a", "<".repeat(200), 0.95), fact("b", "y".repeat(200), 0.9)])
      const read = readByModel(inject(doc, count(`Facts:\n- [knowledge | 0.95] ${"&lt;".repeat(200)}`) + 1, count))
      assert.include(read, "&lt;".repeat(200))
      assert.notInclude(read, "y".repeat(200))
      assert.isAtMost(count(read), count(`Facts:\n- [knowledge | 0.95] ${"&lt;".repeat(200)}`) + 1)
    })
  }

  it("leaves benign text byte-identical (quotes and apostrophes are not escaped)", () => {
    const benign = "User's preference: dark mode, said \"use uv\"."
    const read = readByModel(inject(withSummary(benign, [fact("a", benign, 0.9)]), 2000, Tokens.countText))
    assert.strictEqual(read, `User Context:\n- Work: ${benign}\n\nFacts:\n- [knowledge | 0.90] ${benign}`)
  })
})
