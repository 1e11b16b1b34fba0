/**
 * DeerMem's confirmations (DeerFlow's test_memory_updater.py, the reinforcement tests): a fact the model names in
 * `factsToReinforce` gets `lastConfirmedAt` and one more `confirmationCount` only under `hybrid-v1`, when the user's
 * recent lines carry a reinforcement signal, and when the model labels it `scope: user` with a reason; the capacity
 * policy then keeps it. And the laws of `reinforce`: nothing but the named facts' two fields changes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as MemoryDoc from "../../src/state/Memory.js"
import * as MemoryEviction from "../../src/state/MemoryEviction.js"
import * as MemoryReinforcement from "../../src/state/MemoryReinforcement.js"

const NOW = "2026-08-13T00:00:00.000Z"

const preference = (extra: Record<string, unknown> = {}): MemoryDoc.Fact => ({
  id: "fact_preference",
  content: "User prefers concise answers",
  category: "preference",
  confidence: 0.8,
  createdAt: "2026-01-01T00:00:00Z",
  source: "thread-a",
  ...extra
})

const CONFIRMED = {
  factsToReinforce: [{ id: "fact_preference", scope: "user", reason: "The user explicitly confirmed this preference" }]
}

const decoded = (update: unknown): MemoryDoc.Update => Either.getOrThrow(MemoryDoc.decodeUpdate(update))

const apply = (
  facts: ReadonlyArray<MemoryDoc.Fact>,
  update: Record<string, unknown>,
  extra: Partial<MemoryDoc.ApplyOptions> = {}
) =>
  MemoryDoc.applyUpdateGated({ ...MemoryDoc.empty(), facts }, decoded({ newFacts: [], ...update }), {
    now: NOW,
    maxFacts: 100,
    threshold: 0.7,
    newId: () => "fact_new",
    source: "thread-new",
    hybrid: MemoryEviction.DEFAULT_SETTINGS,
    signals: new Set(["reinforcement"]),
    ...extra
  }).value.facts

describe("a confirmation", () => {
  // test_apply_updates_reinforces_existing_fact_only_with_detected_signal
  it("is recorded under hybrid-v1 when the conversation carries a reinforcement signal; not without either", () => {
    const [confirmed] = apply([preference()], CONFIRMED)
    assert.deepInclude(confirmed, {
      lastConfirmedAt: NOW,
      confirmationCount: 1,
      content: "User prefers concise answers"
    })
    const [noSignal] = apply([preference()], CONFIRMED, { signals: new Set(["preference"]) })
    assert.isUndefined(noSignal!.lastConfirmedAt)
    const [confidenceOnly] = apply([preference()], CONFIRMED, { hybrid: undefined })
    assert.isUndefined(confidenceOnly!.lastConfirmedAt)
  })

  // test_apply_updates_normalizes_prior_confirmation_count: a stored count as the file has it
  it("adds one to a stored count; a count that is not one starts again at 1", () => {
    for (const [prior, expected] of [[3, 4], [0, 1], [true, 1], [-1, 1], ["3", 1], [1.5, 1]] as const) {
      const doc = Either.getOrThrow(MemoryDoc.decodeDocument(JSON.stringify({
        facts: [{ ...preference(), confirmationCount: prior }]
      })))
      const [fact] = apply(doc.facts, CONFIRMED)
      assert.strictEqual(fact!.confirmationCount, expected, JSON.stringify(prior))
    }
  })

  // the write gate: scope user, with a reason
  it("the model labels other than the user's, or gives no reason for, is not recorded", () => {
    for (
      const entry of [
        { id: "fact_preference", scope: "thread", reason: "one-off" },
        { id: "fact_preference", scope: "user" },
        { id: "fact_preference", scope: "user", reason: "   " },
        { id: "fact_preference", reason: "no scope" }
      ]
    ) {
      const [fact] = apply([preference()], { factsToReinforce: [entry] })
      assert.isUndefined(fact!.lastConfirmedAt, JSON.stringify(entry))
    }
  })

  // test_parse_memory_update_response_normalizes_reinforcement_entries
  it("is read trimmed, its scope a gate label; one without an id is none", () => {
    const update = decoded({
      user: {},
      history: {},
      newFacts: [],
      factsToReinforce: [
        { id: " fact_a ", scope: "USER", reason: " explicit confirmation " },
        { id: "fact_b", scope: "thread", reason: "one-off" },
        { id: "", scope: "user", reason: "bad" },
        "fact_c",
        { id: 7, scope: "user", reason: "not text" }
      ]
    })
    assert.deepStrictEqual(update.factsToReinforce, [
      { id: "fact_a", scope: "user", reason: "explicit confirmation" },
      { id: "fact_b", scope: "thread", reason: "one-off" }
    ])
  })

  // test_automatic_update_uses_hybrid_capacity_policy, with the confirmation made by the same update
  it("keeps the fact it confirms through the trim of the same update", () => {
    const facts: Array<MemoryDoc.Fact> = [
      ...Array.from({ length: 8 }, (_, i) => preference({ id: `high_${i}`, content: `high ${i}`, confidence: 0.99 })),
      { ...preference(), id: "stale_high", content: "stale high confidence", confidence: 0.9 },
      { ...preference(), id: "fact_preference", confidence: 0.7, createdAt: "2025-01-01T00:00:00Z" }
    ]
    const update = {
      ...CONFIRMED,
      newFacts: [{
        content: "new useful context",
        category: "context",
        confidence: 0.8,
        scope: "user",
        durability: "durable",
        authority: "descriptive"
      }]
    }
    const kept = apply(facts, update, { maxFacts: 10 }).map((f) => f.id)
    assert.include(kept, "fact_preference")
    assert.notInclude(kept, "stale_high")
    const unconfirmed = apply(facts, update, { maxFacts: 10, signals: new Set() }).map((f) => f.id)
    assert.notInclude(unconfirmed, "fact_preference")
  })

  // DeerMem's prompt asks for confirmations, with its rule
  it("is asked of the memory model, with DeerMem's rule", () => {
    const turns = [{ role: "user", text: "yes, exactly" }] as const
    const prompt = MemoryDoc.updatePrompt(MemoryDoc.empty(), turns, { threshold: 0.7 })
    assert.include(prompt, `"factsToReinforce": [`)
    assert.include(prompt, "Add an existing fact to factsToReinforce only when the new conversation explicitly")
    // the hint of the signal that lets a confirmation count
    assert.include(prompt, "Positive reinforcement signals were detected")
  })

  const Id = FC.constantFrom("a", "b", "c", "d", "e")
  it.prop(
    "changes only the named facts' lastConfirmedAt and count (one more), each once; order and the rest stay",
    [
      FC.uniqueArray(FC.record({ id: Id, count: FC.option(FC.nat({ max: 1000 }), { nil: undefined }) }), {
        selector: (f) => f.id
      }),
      FC.array(FC.record({
        id: FC.constantFrom("a", "b", "c", "d", "e", "z"),
        scope: FC.constantFrom("user", "thread", "User "),
        reason: FC.constantFrom("confirmed", "", "  ")
      }))
    ],
    ([specs, entries]) => {
      const facts = specs.map((s) => preference({ id: s.id, content: s.id, confirmationCount: s.count }))
      const out = MemoryReinforcement.reinforce(facts, entries, NOW)
      const named = new Set(entries.filter((e) => e.scope.trim().toLowerCase() === "user" && e.reason.trim() !== "")
        .map((e) => e.id))
      assert.strictEqual(out.length, facts.length)
      out.forEach((fact, i) => {
        const before = facts[i]!
        if (named.has(before.id)) {
          const count = (before.confirmationCount ?? 0) + 1
          assert.deepStrictEqual(fact, { ...before, lastConfirmedAt: NOW, confirmationCount: count })
        } else {
          assert.strictEqual(fact, before)
        }
      })
    }
  )
})
