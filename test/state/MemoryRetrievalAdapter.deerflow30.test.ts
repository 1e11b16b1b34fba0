/**
 * DeerFlow's `test_memory_retrieval_adapter.py`, what the model reads of it through `memory_search`'s query
 * (`MemoryDoc.search`): a query of natural-language hyphens and signs is words, never a search syntax; a Chinese
 * sub-phrase finds the fact holding it (DeerMem's jieba tokenizer). Its FTS5 index (warming, rebuilds, restarts,
 * notifications, connections) is not built: Antler searches the memory document itself.
 */
import { assert, describe, it } from "@effect/vitest"
import * as MemoryDoc from "../../src/state/Memory.js"

const fact = (id: string, content: string): MemoryDoc.Fact => ({
  id,
  content,
  category: "context",
  confidence: 0.8,
  createdAt: "2026-07-21T00:00:00Z",
  source: "thread-1"
})

const doc: MemoryDoc.Document = {
  ...MemoryDoc.empty(),
  facts: [fact("zh", "中文检索支持验证"), fact("rt", "Builds a real-time co-pilot in node"), fact("other", "Likes tea")]
}
const ids = (query: string) => MemoryDoc.search(doc, query, { limit: 5 }).map((f) => f.id)

describe("test_memory_retrieval_adapter.py", () => {
  it("test_natural_language_hyphens_are_not_treated_as_fts5_syntax", () => {
    assert.deepStrictEqual(ids("real-time co-pilot node -js +python"), ["rt"])
    assert.deepStrictEqual(ids("co-pilot"), ["rt"])
  })

  it("test_chinese_subphrase_search_uses_jieba_tokenization", () => {
    assert.deepStrictEqual(ids("检索"), ["zh"])
  })
})
