/**
 * DeerMem's `hybrid-v1` capacity policy (DeerFlow's test_memory_eviction.py): a recently confirmed fact outlives a
 * stale confident one, recalled facts count, corrections keep some room that others get back when no correction
 * needs it, malformed times count as none; and its laws: never more than max_facts, nothing left out below it, the
 * memory's order kept, no left-out fact outscoring a kept one of its kind, the same answer for the same input.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as MemoryDoc from "../../src/state/Memory.js"
import * as MemoryEviction from "../../src/state/MemoryEviction.js"

const NOW = Date.parse("2026-08-13T00:00:00Z")

const fact = (
  id: string,
  confidence: unknown,
  extra: { readonly createdAt?: string; readonly category?: string; readonly lastConfirmedAt?: string } = {}
) => ({
  id,
  content: id,
  category: extra.category ?? "preference",
  confidence,
  createdAt: "2026-08-01T00:00:00Z",
  ...extra
})

const ids = (facts: ReadonlyArray<{ readonly id: string }>) => facts.map((f) => f.id)

describe("MemoryEviction (hybrid-v1)", () => {
  it("keeps a recently confirmed fact over a stale, more confident one", () => {
    const decision = MemoryEviction.select([
      fact("stale_high", 0.9, { createdAt: "2026-02-14T00:00:00Z" }),
      fact("recent_confirmed", 0.7, { createdAt: "2026-01-01T00:00:00Z", lastConfirmedAt: "2026-08-06T00:00:00Z" })
    ], { maxFacts: 1, now: NOW })
    assert.deepStrictEqual(ids(decision.kept), ["recent_confirmed"])
    const evicted = decision.evicted[0]!
    assert.strictEqual(evicted.factId, "stale_high")
    assert.closeTo(evicted.components.confidence, 0.9, 1e-9)
    assert.isBelow(evicted.components.confirmationFreshness, 0.13)
    assert.notProperty(evicted, "content")
  })

  it("counts how often a fact was recalled, bounded to 1", () => {
    const decision = MemoryEviction.select([fact("recalled", 0.7), fact("unused", 0.75)], {
      maxFacts: 1,
      now: NOW,
      usage: new Map([["recalled", { accessHeat: 100_000, lastAccessedAt: "2026-08-13T00:00:00Z" }]])
    })
    assert.deepStrictEqual(ids(decision.kept), ["recalled"])
    assert.closeTo(decision.scores.get("recalled")!.components.accessHeat, 1, 1e-9)
  })

  it("keeps room for a correction, and gives it back when there is none", () => {
    const preferences = Array.from({ length: 10 }, (_, i) => fact(`preference_${i}`, 0.99 - i / 100))
    const correction = fact("correction", 0.1, { category: "correction" })
    const withCorrection = MemoryEviction.select([...preferences, correction], { maxFacts: 10, now: NOW })
    assert.include(ids(withCorrection.kept), "correction")
    assert.lengthOf(withCorrection.kept, 10)
    assert.strictEqual(withCorrection.reservedCorrectionSlots, 1)
    const without = MemoryEviction.select(
      Array.from({ length: 11 }, (_, i) => fact(`preference_${i}`, 0.9 - i / 100)),
      { maxFacts: 10, now: NOW }
    )
    assert.lengthOf(without.kept, 10)
    assert.strictEqual(without.reservedCorrectionSlots, 0)
    assert.deepStrictEqual(without.evicted.map((e) => e.factId), ["preference_10"])
  })

  it("reads a malformed time as none, and a confidence that is not a number as 0.5", () => {
    const decision = MemoryEviction.select([
      fact("malformed", 0.8, { createdAt: "not-a-date", lastConfirmedAt: "also-not-a-date" }),
      fact("valid", 0.7)
    ], { maxFacts: 1, now: NOW })
    assert.lengthOf(decision.kept, 1)
    assert.strictEqual(decision.scores.get("malformed")!.components.confirmationFreshness, 0)
    for (const [raw, read] of [[null, 0.5], ["0.9", 0.9], ["high", 0.5], [true, 0.5], [7, 1], [-1, 0]] as const) {
      assert.strictEqual(MemoryEviction.score(fact("x", raw), { now: NOW }).components.confidence, read, String(raw))
    }
    // a time without an offset is UTC, as DeerMem reads it
    assert.strictEqual(MemoryEviction.parseTime("2026-08-13T00:00:00"), NOW)
    assert.strictEqual(MemoryEviction.parseTime("2026-08-13T05:30:00+0530"), NOW)
    assert.isUndefined(MemoryEviction.parseTime("13/08/2026"))
  })

  const Fact = FC.record({
    id: FC.constantFrom("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"),
    category: FC.constantFrom("preference", "correction", "context", "Correction "),
    confidence: FC.oneof(FC.double({ min: -1, max: 2, noNaN: true }), FC.constant(null), FC.constant("0.4")),
    createdAt: FC.oneof(
      FC.date({ min: new Date("2024-01-01T00:00:00Z"), max: new Date("2026-09-01T00:00:00Z") })
        .map((d) => d.toISOString()),
      FC.constant("not-a-date")
    ),
    lastConfirmedAt: FC.option(
      FC.date({ min: new Date("2025-01-01T00:00:00Z"), max: new Date("2026-08-13T00:00:00Z") })
        .map((d) => d.toISOString()),
      { nil: undefined }
    )
  }, { requiredKeys: ["id", "category", "confidence", "createdAt"] })
  const Facts = FC.uniqueArray(Fact, { selector: (f) => f.id, maxLength: 12 })

  it.prop(
    "never more than max_facts, nothing left out below it, the memory's order kept, no kept fact outscored",
    [Facts, FC.integer({ min: 0, max: 14 })],
    ([facts, maxFacts]) => {
      const decision = MemoryEviction.select(facts, { maxFacts, now: NOW })
      if (facts.length <= maxFacts) {
        assert.strictEqual(decision.kept, facts)
        assert.deepStrictEqual(decision.evicted, [])
        return
      }
      assert.lengthOf(decision.kept, maxFacts)
      const kept = new Set(ids(decision.kept))
      // the memory's order, and every fact either kept or left out, once
      assert.deepStrictEqual(ids(decision.kept), ids(facts).filter((id) => kept.has(id)))
      assert.deepStrictEqual([...kept, ...decision.evicted.map((e) => e.factId)].sort(), ids(facts).sort())
      const isCorrection = (category: string) => category.trim().toLowerCase() === "correction"
      const scoreOf = (id: string) => decision.scores.get(id)!.value
      const keptOthers = decision.kept.filter((f) => !isCorrection(f.category)).map((f) => scoreOf(f.id))
      for (const left of decision.evicted) {
        // no fact left out outscores a kept one of its kind (a correction may be kept over others by its room)
        const rivals = isCorrection(left.category)
          ? decision.kept.filter((f) => isCorrection(f.category)).map((f) => scoreOf(f.id))
          : keptOthers
        for (const rival of rivals) assert.isAtMost(left.score, rival)
        assert.isAtLeast(left.score, 0)
        assert.isAtMost(left.score, 1 + 1e-9)
      }
      // the room kept for corrections: ceil(10%) of max_facts, as far as there are corrections
      const corrections = facts.filter((f) => isCorrection(f.category)).length
      const room = maxFacts === 0 ? 0 : Math.min(10, Math.ceil(maxFacts * 0.1), corrections)
      assert.strictEqual(decision.reservedCorrectionSlots, room)
      assert.isAtLeast(decision.kept.filter((f) => isCorrection(f.category)).length, room)
      // the same input, the same answer
      assert.deepStrictEqual(ids(MemoryEviction.select([...facts], { maxFacts, now: NOW }).kept), ids(decision.kept))
    }
  )

  it("a memory update under `hybrid-v1` keeps what the policy keeps; without it, the most confident", () => {
    const doc = Schema.decodeUnknownSync(MemoryDoc.Document)({
      facts: [
        fact("stale_high", 0.9, { createdAt: "2026-02-14T00:00:00Z" }),
        fact("recent_confirmed", 0.85, { createdAt: "2026-01-01T00:00:00Z", lastConfirmedAt: "2026-08-06T00:00:00Z" })
      ]
    })
    const update = {
      newFacts: [
        { content: "Prefers tea", confidence: 0.8, scope: "user", durability: "durable", authority: "descriptive" }
      ]
    } as const
    const options = { now: "2026-08-13T00:00:00.000Z", maxFacts: 2, threshold: 0.7, newId: () => "new", source: "t1" }
    const hybrid = MemoryDoc.applyUpdateGated(doc, update, { ...options, hybrid: MemoryEviction.DEFAULT_SETTINGS })
    assert.deepStrictEqual(ids(hybrid.value.facts), ["recent_confirmed", "new"])
    // DeerMem's lastConfirmedAt is kept with the fact
    assert.strictEqual(hybrid.value.facts[0]!.lastConfirmedAt, "2026-08-06T00:00:00Z")
    const confidence = MemoryDoc.applyUpdateGated(doc, update, options)
    assert.deepStrictEqual(ids(confidence.value.facts), ["stale_high", "recent_confirmed"])
  })
})
