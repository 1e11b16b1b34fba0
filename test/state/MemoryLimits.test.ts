/**
 * The size limits of long-term memory: a document over them (a hostile model's update, a file written by hand
 * or by an older version) is cut to them, and what was cut is named, one line per kind.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as MemoryDoc from "../../src/state/Memory.js"
import * as MemoryLimits from "../../src/state/MemoryLimits.js"

const LIMITS: MemoryLimits.Limits = { maxFacts: 3, maxFactChars: 50, maxSummaryChars: 100 }

const fact = (i: number, content = `fact ${i}`, confidence = 0.5 + i / 100): MemoryDoc.Fact => ({
  id: `f${i}`,
  content,
  category: "context",
  confidence,
  createdAt: "",
  source: "t1"
})

describe("a memory document within its limits", () => {
  it("summaries, facts and their number, short fields and watermarks are cut; what was cut is named", () => {
    const empty = MemoryDoc.empty()
    const doc: MemoryDoc.Document = {
      ...empty,
      lastUpdated: "x".repeat(1000),
      user: { ...empty.user, workContext: { summary: "w".repeat(5000), updatedAt: "" } },
      history: { ...empty.history, longTermBackground: { summary: "😀".repeat(80), updatedAt: "" } },
      facts: [
        fact(1, "c".repeat(60)),
        fact(2),
        fact(3, "d".repeat(70)),
        { ...fact(4), lastConfirmedAt: "z".repeat(300) },
        { ...fact(5), category: "k".repeat(300) }
      ],
      threads: Object.fromEntries([
        ...Array.from({ length: MemoryDoc.MAX_WATERMARKS + 5 }, (_, i) => [`t${i}`, `m${i}`]),
        ["t".repeat(500), "m"]
      ])
    }
    const { cut, value } = MemoryLimits.capDocument(doc, LIMITS)
    assert.strictEqual(value.user.workContext.summary, "w".repeat(100))
    // never between the halves of a surrogate pair
    assert.strictEqual(value.history.longTermBackground.summary, "😀".repeat(50))
    // the most confident facts, in their order, each within max_fact_chars
    assert.deepStrictEqual(value.facts.map((f) => f.id), ["f3", "f4", "f5"])
    assert.isTrue(
      value.facts.every((f) => f.content.length <= 50 && (f.category ?? "").length <= MemoryLimits.MAX_LABEL_CHARS)
    )
    assert.lengthOf(value.lastUpdated, MemoryLimits.MAX_LABEL_CHARS)
    // DeerMem's lastConfirmedAt (read by hybrid-v1) is a short field too
    assert.lengthOf(value.facts[1]!.lastConfirmedAt!, MemoryLimits.MAX_LABEL_CHARS)
    assert.lengthOf(Object.keys(value.threads), MemoryDoc.MAX_WATERMARKS)
    assert.strictEqual(value.threads[`t${MemoryDoc.MAX_WATERMARKS + 4}`], `m${MemoryDoc.MAX_WATERMARKS + 4}`)
    assert.deepStrictEqual(cut, [
      "the summary user.workContext (5,000 characters, kept 100 characters)",
      "the summary history.longTermBackground (160 characters, kept 100 characters)",
      "2 facts over max_facts (3; the least confident)",
      "1 fact contents over 50 characters (cut to it)",
      "3 short fields (ids, categories, sources, timestamps) over 200 characters",
      "1 watermarks with an id too long to keep (dropped)",
      "5 watermarks over 500 (the oldest)"
    ])
    // within its limits: the same document, nothing named
    assert.deepStrictEqual(MemoryLimits.capDocument(value, LIMITS), { value, cut: [] })
    assert.strictEqual(MemoryLimits.capDocument(empty, LIMITS).value, empty)
  })

  it("a file's JSON of 100,000 facts and a 2 MB summary decodes to the limits", () => {
    const text = JSON.stringify({
      user: { topOfMind: { summary: "s".repeat(2_000_000) } },
      facts: Array.from({ length: 100_000 }, (_, i) => ({
        id: `f${i}`,
        content: "c".repeat(20),
        confidence: (i % 100) / 100
      })),
      threads: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`t${i}`, `m${i}`]))
    })
    const { cut, value } = Either.getOrThrow(MemoryLimits.decodeDocument(text, LIMITS))
    assert.lengthOf(value.user.topOfMind.summary, 100)
    assert.deepStrictEqual(value.facts.map((f) => f.confidence), [0.99, 0.99, 0.99])
    assert.lengthOf(Object.keys(value.threads), MemoryDoc.MAX_WATERMARKS)
    assert.deepStrictEqual(cut, [
      "99997 facts over max_facts (3; the least confident)",
      "9500 watermarks over 500 (the oldest)",
      "the summary user.topOfMind (2,000,000 characters, kept 100 characters)"
    ])
    assert.isTrue(Either.isLeft(MemoryLimits.decodeDocument("{\"facts\": 3}", LIMITS)))
  })
})

describe("a memory model's answer within the limits", () => {
  it("no more new facts or removals than max_facts are decoded; summaries, contents and categories are cut", () => {
    const raw = {
      user: { topOfMind: { summary: "t".repeat(300), shouldUpdate: true, scope: "user", authority: "descriptive" } },
      newFacts: Array.from({ length: 10 }, (_, i) => ({
        content: `${i}${"n".repeat(80)}`,
        category: "g".repeat(250),
        scope: "user",
        durability: "durable",
        authority: "descriptive"
      })),
      factsToRemove: Array.from({ length: 5 }, (_, i) => ({ id: `f${i}`, scope: "user", reason: "retracted" }))
    }
    const bounded = MemoryLimits.capRawUpdate(raw, LIMITS)
    assert.deepStrictEqual(bounded.cut, [
      "7 of the update's 10 newFacts (at most max_facts, 3)",
      "2 of the update's 5 factsToRemove (at most max_facts, 3)"
    ])
    const update = Either.getOrThrow(MemoryDoc.decodeUpdate(bounded.value))
    assert.lengthOf(update.newFacts!, 3)
    assert.lengthOf(update.factsToRemove!, 3)
    const { cut, value } = MemoryLimits.capUpdate(update, LIMITS)
    assert.lengthOf(value.user!.topOfMind!.summary!, 100)
    assert.isTrue(value.user!.topOfMind!.shouldUpdate!)
    // what is cut keeps the write gate's labels (else the gate would refuse it)
    assert.strictEqual(value.user!.topOfMind!.scope, "user")
    assert.deepStrictEqual(
      value.newFacts!.map((f) => [f.scope, f.durability, f.authority]),
      Array.from({ length: 3 }, () => ["user", "durable", "descriptive"])
    )
    assert.deepStrictEqual(
      value.newFacts!.map((f) => [f.content.length, f.category!.length]),
      [[50, 200], [50, 200], [50, 200]]
    )
    assert.deepStrictEqual(cut, [
      "the summary user.topOfMind (300 characters, kept 100 characters)",
      "3 new facts over 50 characters (cut to it)",
      "3 short fields (ids, categories, sources, timestamps) over 200 characters"
    ])
    // anything else is left to the decoder, which refuses it
    assert.deepStrictEqual(MemoryLimits.capRawUpdate([1], LIMITS), { value: [1], cut: [] })
  })
})

describe("confirmations and merges within the limits", () => {
  it("no more than max_facts of either are decoded; a merged fact is cut as a new fact is", () => {
    const merge = (i: number) => ({
      sourceIds: [`f${i}`, `g${i}`],
      consolidated: { content: `${i}${"m".repeat(80)}`, category: "k".repeat(250), scope: "user" }
    })
    const raw = {
      newFacts: [],
      factsToReinforce: Array.from({ length: 5 }, (_, i) => ({ id: `f${i}`, scope: "user", reason: "confirmed" })),
      factsToConsolidate: Array.from({ length: 4 }, (_, i) => merge(i))
    }
    const bounded = MemoryLimits.capRawUpdate(raw, LIMITS)
    assert.deepStrictEqual(bounded.cut, [
      "2 of the update's 5 factsToReinforce (at most max_facts, 3)",
      "1 of the update's 4 factsToConsolidate (at most max_facts, 3)"
    ])
    const update = Either.getOrThrow(MemoryDoc.decodeUpdate(bounded.value))
    assert.lengthOf(update.factsToReinforce!, 3)
    const { cut, value } = MemoryLimits.capUpdate(update, LIMITS)
    assert.deepStrictEqual(
      value.factsToConsolidate!.map((m) => [m.consolidated.content.length, m.consolidated.category.length]),
      [[50, 200], [50, 200], [50, 200]]
    )
    assert.strictEqual(value.factsToConsolidate![0]!.consolidated.scope, "user")
    assert.deepStrictEqual(cut, [
      "3 merged facts over 50 characters (cut to it)",
      "3 short fields (ids, categories, sources, timestamps) over 200 characters"
    ])
  })

  it("a stored merged fact keeps at most 20 ids it replaced, each a short field; its count is a count or none", () => {
    const text = JSON.stringify({
      facts: [{
        ...fact(1),
        consolidatedAt: "t".repeat(300),
        consolidatedFrom: [...Array.from({ length: 30 }, (_, i) => `f${i}`), 7, "x".repeat(300)],
        confirmationCount: "3"
      }, { ...fact(2), consolidatedFrom: "f1,f2", confirmationCount: 2 }]
    })
    const { value } = Either.getOrThrow(MemoryLimits.decodeDocument(text, LIMITS))
    assert.deepStrictEqual(value.facts[0]!.consolidatedFrom, Array.from({ length: 20 }, (_, i) => `f${i}`))
    assert.lengthOf(value.facts[0]!.consolidatedAt!, MemoryLimits.MAX_LABEL_CHARS)
    assert.isUndefined(value.facts[0]!.confirmationCount)
    assert.deepStrictEqual(value.facts[1]!.consolidatedFrom, [])
    assert.strictEqual(value.facts[1]!.confirmationCount, 2)
  })
})
