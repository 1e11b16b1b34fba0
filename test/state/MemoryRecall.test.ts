/**
 * DeerMem's recall records (DeerFlow's test_memory_eviction.py, test_deermem_self_contained.py): a recall decays a
 * fact's heat over its half-life and adds one, counts one more access, and records only facts still in the memory;
 * what a file holds is never trusted; and the laws: the records never outnumber the facts, every heat stays finite
 * and at least 1 once recalled, and the count is the number of recalls.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import * as MemoryEviction from "../../src/state/MemoryEviction.js"
import * as MemoryRecall from "../../src/state/MemoryRecall.js"

const FIRST = Date.parse("2026-08-01T00:00:00Z")
const SECOND = Date.parse("2026-08-31T00:00:00Z")
const facts = new Set(["fact_a", "fact_b"])

describe("MemoryRecall", () => {
  it("two recalls a half-life apart: heat 1.5, two accesses, the last time (DeerMem's record_fact_accesses)", () => {
    const once = MemoryRecall.record(MemoryRecall.empty, ["fact_a"], { now: FIRST, halfLifeDays: 30, facts })
    const twice = MemoryRecall.record(once, ["fact_a"], { now: SECOND, halfLifeDays: 30, facts })
    assert.deepStrictEqual(twice, {
      fact_a: { accessHeat: 1.5, accessCount: 2, lastAccessedAt: "2026-08-31T00:00:00.000Z" }
    })
    // the policy reads it: a recalled fact outlives a slightly more confident one never recalled
    const decision = MemoryEviction.select([
      { id: "fact_a", category: "context", confidence: 0.7, createdAt: "2026-08-31T00:00:00Z" },
      { id: "fact_b", category: "context", confidence: 0.75, createdAt: "2026-08-31T00:00:00Z" }
    ], { maxFacts: 1, now: SECOND, usage: MemoryRecall.forPolicy(twice) })
    assert.deepStrictEqual(decision.kept.map((f) => f.id), ["fact_a"])
  })

  it("an id given twice counts once; an unknown or empty one is not recorded", () => {
    const usage = MemoryRecall.record(MemoryRecall.empty, ["fact_b", "fact_b", "gone", ""], {
      now: FIRST,
      halfLifeDays: 30,
      facts
    })
    assert.deepStrictEqual(Object.keys(usage), ["fact_b"])
    assert.strictEqual(usage.fact_b?.accessCount, 1)
    // nothing to record: the same records
    const same = MemoryRecall.record(usage, ["gone"], { now: FIRST, halfLifeDays: 30, facts })
    assert.strictEqual(same, usage)
  })

  it("a file's records are read without trust: a bad heat, count or time starts afresh", () => {
    const usage = MemoryRecall.parse(JSON.stringify({
      fact_a: { accessHeat: "hot", accessCount: -3, lastAccessedAt: "yesterday" },
      fact_b: "not an entry",
      __proto__: { accessHeat: 5 }
    }))
    assert.deepStrictEqual(Object.keys(usage), ["fact_a"])
    const next = MemoryRecall.record(usage, ["fact_a"], { now: FIRST, halfLifeDays: 30, facts })
    assert.deepStrictEqual(next.fact_a, { accessHeat: 1, accessCount: 1, lastAccessedAt: "2026-08-01T00:00:00.000Z" })
    assert.deepStrictEqual(MemoryRecall.parse("[1, 2]"), {})
    assert.deepStrictEqual(MemoryRecall.parse("{ not json"), {})
  })

  it("the records of facts no longer in the memory are dropped", () => {
    const usage = MemoryRecall.record(MemoryRecall.empty, ["fact_a", "fact_b"], { now: FIRST, halfLifeDays: 30, facts })
    assert.deepStrictEqual(Object.keys(MemoryRecall.keepOnly(usage, new Set(["fact_b"]))), ["fact_b"])
    assert.strictEqual(MemoryRecall.keepOnly(usage, facts), usage)
  })

  const Id = FC.constantFrom("a", "b", "c", "d", "__proto__", "constructor")
  const Recall = FC.record({
    ids: FC.array(Id, { maxLength: 6 }),
    days: FC.double({ min: 0, max: 400, noNaN: true })
  })

  it.prop(
    "never more records than facts; heats finite, at least 1 and at most the recalls; counts the recalls",
    [FC.array(Recall, { maxLength: 12 }), FC.uniqueArray(Id, { maxLength: 6 }), FC.integer({ min: 1, max: 3650 })],
    ([recalls, known, halfLifeDays]) => {
      const inMemory = new Set(known)
      let usage = MemoryRecall.empty
      let now = FIRST
      const counts = new Map<string, number>()
      for (const recall of recalls) {
        now += recall.days * 86_400_000
        usage = MemoryRecall.record(usage, recall.ids, { now, halfLifeDays, facts: inMemory })
        for (const id of new Set(recall.ids)) {
          if (inMemory.has(id) && id !== "__proto__") counts.set(id, (counts.get(id) ?? 0) + 1)
        }
      }
      assert.isAtMost(Object.keys(usage).length, inMemory.size)
      assert.deepStrictEqual(Object.keys(usage).sort(), [...counts.keys()].sort())
      for (const [id, count] of counts) {
        const entry = Object.entries(usage).find(([key]) => key === id)![1] as MemoryRecall.Entry
        assert.strictEqual(entry.accessCount, count)
        assert.isTrue(Number.isFinite(entry.accessHeat))
        assert.isAtLeast(entry.accessHeat, 1)
        assert.isAtMost(entry.accessHeat, count + 1e-9)
      }
      // written and read back, the same records
      assert.deepStrictEqual(MemoryRecall.parse(MemoryRecall.text(usage)), usage)
    }
  )
})
