/**
 * DeerMem's eviction audit and the capacity decision it records (DeerFlow's test_memory_eviction.py): an event
 * names the facts left out with their scores, never their content; the audit keeps the newest events; a forgotten
 * fact leaves it, with a `shadow` comparison kept in step and malformed entries dropped; and the laws: never more
 * events than the bound, the newest last, no forgotten fact left, the same decision as `bound` for `confidence`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FC from "effect/FastCheck"
import * as MemoryDoc from "../../src/state/Memory.js"
import * as MemoryAudit from "../../src/state/MemoryAudit.js"
import * as MemoryCapacity from "../../src/state/MemoryCapacity.js"
import * as MemoryEviction from "../../src/state/MemoryEviction.js"

const NOW = Date.parse("2026-08-13T00:00:00Z")

const fact = (id: string, confidence: number, category = "preference"): MemoryDoc.Fact => ({
  id,
  content: `secret content of ${id}`,
  category,
  confidence,
  createdAt: "2026-08-01T00:00:00Z",
  source: "thread-1"
})

describe("MemoryCapacity", () => {
  it("confidence: the most confident stay; the others are named lowest first, with their confidence", () => {
    const decision = MemoryCapacity.decide([fact("a", 0.5), fact("b", 0.9), fact("c", 0.2, "")], 1)
    assert.deepStrictEqual(decision.kept.map((f) => f.id), ["b"])
    assert.deepStrictEqual(decision.evicted, [
      { factId: "c", category: "context", score: 0.2, components: { confidence: 0.2 } },
      { factId: "a", category: "preference", score: 0.5, components: { confidence: 0.5 } }
    ])
    assert.strictEqual(decision.policy, "confidence")
  })

  it("hybrid-v1: the policy's decision, with its three signals", () => {
    const decision = MemoryCapacity.decide([fact("a", 0.9), fact("b", 0.1, "correction"), fact("c", 0.8)], 2, {
      settings: MemoryEviction.DEFAULT_SETTINGS,
      now: NOW
    })
    assert.strictEqual(decision.policy, "hybrid-v1")
    assert.deepStrictEqual(decision.kept.map((f) => f.id), ["a", "b"])
    assert.strictEqual(decision.reservedCorrectionSlots, 1)
    assert.deepStrictEqual(decision.evicted.map((e) => e.factId), ["c"])
    assert.deepStrictEqual(Object.keys(decision.evicted[0]!.components), [
      "confidence",
      "confirmationFreshness",
      "accessHeat"
    ])
  })

  it.prop(
    "confidence keeps what `bound` keeps; kept and left out are every fact once",
    [
      FC.uniqueArray(
        FC.record({ id: FC.string({ minLength: 1, maxLength: 4 }), confidence: FC.double({ min: 0, max: 1 }) }),
        { selector: (f) => f.id, maxLength: 10 }
      ),
      FC.integer({ min: 0, max: 12 })
    ],
    ([raw, max]) => {
      const facts = raw.map((r) => fact(r.id, r.confidence))
      const decision = MemoryCapacity.decide(facts, max)
      assert.deepStrictEqual(decision.kept, MemoryDoc.bound(facts, max))
      assert.lengthOf(decision.kept, Math.min(max, facts.length))
      const all = [...decision.kept.map((f) => f.id), ...decision.evicted.map((e) => e.factId)]
      assert.deepStrictEqual(all.sort(), facts.map((f) => f.id).sort())
      for (let i = 1; i < decision.evicted.length; i++) {
        assert.isAtMost(decision.evicted[i - 1]!.score, decision.evicted[i]!.score)
      }
    }
  )
})

describe("MemoryAudit", () => {
  const decision = MemoryCapacity.decide([fact("kept", 0.9), fact("evicted", 0.1)], 1, {
    settings: MemoryEviction.DEFAULT_SETTINGS,
    now: NOW
  })

  it("an event names what was left out and why, never what it said; the audit keeps the newest", () => {
    const event = MemoryAudit.event(decision, { maxFacts: 1, occurredAt: NOW })!
    assert.deepInclude(event, {
      occurredAt: "2026-08-13T00:00:00.000Z",
      reason: "capacity",
      policyVersion: "hybrid-v1",
      maxFacts: 1,
      reservedCorrectionSlots: 0
    })
    assert.deepStrictEqual(event.evicted.map((e) => [e.factId, e.category]), [["evicted", "preference"]])
    assert.notInclude(MemoryAudit.text([event]), "content")
    const later = { ...event, occurredAt: "2026-08-14T00:00:00.000Z" }
    assert.deepStrictEqual(MemoryAudit.append([event], [later], 1), [later])
    // 0: the audit is off
    assert.deepStrictEqual(MemoryAudit.append([event], [later], 0), [event])
    // nothing left out: no event
    assert.isUndefined(MemoryAudit.event(MemoryCapacity.decide([fact("a", 1)], 1), { maxFacts: 1, occurredAt: NOW }))
  })

  it("a forgotten fact leaves the events; a shadow comparison is kept in step (DeerMem's clear_fact_metadata)", () => {
    const events = MemoryAudit.parse(JSON.stringify([
      {
        reason: "capacity",
        evicted: [{ factId: "common_loser" }, { factId: "stale_high" }],
        shadow: { policyVersion: "hybrid-v1", wouldEvict: ["common_loser", "recent_low"], disagrees: true }
      },
      { reason: "capacity", evicted: [{ factId: "keep" }, { factId: "removed" }, { factId: [] }, "invalid"] },
      { reason: "capacity", evicted: [{ factId: "keep_without_shadow" }], shadow: { wouldEvict: null } },
      { reason: "capacity", evicted: null },
      "not an event"
    ]))
    const forgotten = MemoryAudit.forget(events, new Set(["recent_low", "stale_high", "removed"]))
    assert.deepStrictEqual(forgotten, [
      {
        reason: "capacity",
        evicted: [{ factId: "common_loser" }],
        shadow: { policyVersion: "hybrid-v1", wouldEvict: ["common_loser"], disagrees: false }
      },
      { reason: "capacity", evicted: [{ factId: "keep" }] },
      { reason: "capacity", evicted: [{ factId: "keep_without_shadow" }] }
    ])
    // an event left with nothing goes; nothing to forget, the same events
    assert.deepStrictEqual(MemoryAudit.forget(forgotten, new Set(["common_loser", "keep", "keep_without_shadow"])), [])
    assert.strictEqual(MemoryAudit.forget(forgotten, new Set()), forgotten)
    assert.deepStrictEqual(MemoryAudit.parse("{}"), [])
  })

  const Id = FC.constantFrom("a", "b", "c", "d", "e")
  const Event = FC.record({ ids: FC.uniqueArray(Id, { minLength: 1, maxLength: 3 }), at: FC.nat({ max: 1000 }) })
    .map(({ at, ids }): MemoryAudit.Event => ({
      occurredAt: new Date(NOW + at).toISOString(),
      reason: "capacity",
      policyVersion: "confidence",
      maxFacts: 3,
      reservedCorrectionSlots: 0,
      evicted: ids.map((factId) => ({ factId, category: "context", score: 0.1, components: { confidence: 0.1 } }))
    }))

  it.prop(
    "never more events than the bound, the newest last; a forgotten fact is in none, and no event is empty",
    [FC.array(FC.array(Event, { maxLength: 3 }), { maxLength: 8 }), FC.nat({ max: 5 }), FC.uniqueArray(Id)],
    ([writes, max, forgotten]) => {
      let events: MemoryAudit.Events = []
      for (const added of writes) events = MemoryAudit.append(events, added, max)
      const all = writes.flat()
      assert.deepStrictEqual(events, max === 0 ? [] : all.slice(Math.max(0, all.length - max)))
      const left = MemoryAudit.forget(events, new Set(forgotten))
      for (const event of left) {
        const ids = (event.evicted as ReadonlyArray<{ readonly factId: string }>).map((e) => e.factId)
        assert.isAbove(ids.length, 0)
        for (const id of forgotten) assert.notInclude(ids, id)
      }
      assert.deepStrictEqual(MemoryAudit.parse(MemoryAudit.text(left)), left)
    }
  )
})
