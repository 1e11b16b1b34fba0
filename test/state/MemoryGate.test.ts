/**
 * DeerMem's memory write gate, as DeerFlow's test_memory_scope_gate.py pins it: a new fact is stored only when the
 * model labels it `scope: user`, `durability: durable`, `authority: descriptive`; a summary only with `scope: user`
 * and `authority: descriptive`; a removal only with `scope: user` and a reason, and one that names a replacement
 * only when that replacement is stored. Labels are read trimmed and lower-cased; what is refused is named.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as MemoryDoc from "../../src/state/Memory.js"

/** DeerFlow test_memory_scope_gate.py's `_fact`: a fact that passes the gate, with `overrides`. */
const fact = (content: string, overrides: Record<string, unknown> = {}) => ({
  content,
  category: "preference",
  confidence: 0.9,
  scope: "user",
  durability: "durable",
  authority: "descriptive",
  ...overrides
})

/** DeerFlow test_memory_scope_gate.py's `_stored_fact`. */
const stored = (id: string, content: string): MemoryDoc.Fact => ({
  id,
  content,
  category: "preference",
  confidence: 0.9,
  createdAt: "2026-01-01T00:00:00Z",
  source: "thread-old"
})

let n = 0
const options = (extra: Partial<MemoryDoc.ApplyOptions> = {}): MemoryDoc.ApplyOptions => ({
  now: "2026-05-08T10:00:00.000Z",
  maxFacts: 100,
  threshold: 0.7,
  newId: () => `fact_new${++n}`,
  source: "thread-new",
  ...extra
})

const memoryOf = (facts: ReadonlyArray<MemoryDoc.Fact> = []): MemoryDoc.Document => ({ ...MemoryDoc.empty(), facts })

/** An update as the model answers it: its JSON read as `FileMemory` reads it (normalised, then decoded). */
const decoded = (update: unknown): MemoryDoc.Update => Either.getOrThrow(MemoryDoc.decodeUpdate(update))

const apply = (doc: MemoryDoc.Document, update: unknown, extra: Partial<MemoryDoc.ApplyOptions> = {}) =>
  MemoryDoc.applyUpdateGated(doc, decoded(update), options(extra))

describe("the write gate's labels, as an answer is read", () => {
  // test_normalize_preserves_extraction_only_classification_fields (and _normalize_gate_label: trimmed, lower-cased)
  it("are kept through normalisation, trimmed and lower-cased; one that is not text is no label", () => {
    const update = decoded({
      user: { workContext: { summary: "Engineer", shouldUpdate: true, scope: " USER ", authority: "Descriptive" } },
      history: {},
      newFacts: [
        fact("User prefers concise answers"),
        fact("Shouted labels", { scope: "  User\n", durability: "DURABLE", authority: " Descriptive " }),
        fact("Not text", { scope: true, durability: 3, authority: "   " })
      ],
      factsToRemove: [{ id: " fact_a ", scope: "USER", reason: "  retracted  ", replacementFactIndex: 0 }]
    })
    const labels = update.newFacts!.map((f) => [f.scope, f.durability, f.authority])
    assert.deepStrictEqual(labels, [
      ["user", "durable", "descriptive"],
      ["user", "durable", "descriptive"],
      [undefined, undefined, undefined]
    ])
    assert.deepStrictEqual(update.user!.workContext, {
      summary: "Engineer",
      shouldUpdate: true,
      scope: "user",
      authority: "descriptive"
    })
    assert.deepStrictEqual(update.factsToRemove, [
      { id: "fact_a", scope: "user", reason: "retracted", replacementFactIndex: 0 }
    ])
  })
})

describe("the write gate on new facts", () => {
  // test_fact_gate_accepts_only_durable_descriptive_user_facts
  it("stores only durable, descriptive facts of the user's scope, without their labels; refusals are named", () => {
    const { refused, value } = apply(memoryOf(), {
      user: {},
      history: {},
      factsToRemove: [],
      newFacts: [
        fact("accepted"),
        fact("thread only", { scope: "thread" }),
        fact("temporary", { durability: "temporary" }),
        fact("permission", { authority: "transactional" }),
        { content: "missing labels", category: "context", confidence: 0.9 }
      ]
    })
    assert.deepStrictEqual(value.facts.map((f) => f.content), ["accepted"])
    assert.deepStrictEqual(Object.keys(value.facts[0]!).sort(), [
      "category",
      "confidence",
      "content",
      "createdAt",
      "id",
      "source"
    ])
    assert.deepStrictEqual(refused, [
      "1 new fact (scope not user)",
      "1 new fact (durability not durable)",
      "1 new fact (authority not descriptive)",
      "1 new fact (without scope, durability and authority)"
    ])
    const twice = apply(memoryOf(), { newFacts: [fact("a", { scope: "project" }), fact("b", { scope: "thread" })] })
    assert.deepStrictEqual(twice.refused, ["2 new facts (scope not user)"])
  })

  it("each label missing, or any other value, refuses the fact; case and whitespace do not", () => {
    const kept = (overrides: Record<string, unknown>) =>
      MemoryDoc.applyUpdate(memoryOf(), { newFacts: [fact("User likes tea", overrides)] }, options()).facts.length
    for (const label of ["scope", "durability", "authority"]) {
      assert.strictEqual(kept({ [label]: undefined }), 0, `${label} missing`)
      assert.strictEqual(kept({ [label]: "" }), 0, `${label} blank`)
      assert.strictEqual(kept({ [label]: "   " }), 0, `${label} blank`)
      assert.strictEqual(kept({ [label]: "project" }), 0, `${label} project`)
      assert.strictEqual(kept({ [label]: null }), 0, `${label} null`)
    }
    assert.strictEqual(kept({ scope: "users" }), 0)
    assert.strictEqual(kept({ durability: "temporary" }), 0)
    assert.strictEqual(kept({ authority: "transactional" }), 0)
    assert.strictEqual(kept({ scope: " USER ", durability: "Durable\t", authority: "\nDESCRIPTIVE" }), 1)
    assert.strictEqual(kept({}), 1)
  })

  // test_missing_classification_rejects_one_fact_without_aborting_other_updates
  it("an unlabelled fact is refused alone: the rest of the update is made, its paired removal is not", () => {
    const { value } = apply(memoryOf([stored("fact_old", "Old durable preference")]), {
      user: {},
      history: {},
      newFacts: [
        fact("Accepted durable preference"),
        { content: "Unclassified replacement", category: "preference", confidence: 0.9 }
      ],
      factsToRemove: [{ id: "fact_old", scope: "user", reason: "Replace it", replacementFactIndex: 1 }]
    })
    assert.deepStrictEqual(value.facts.map((f) => f.content).sort(), [
      "Accepted durable preference",
      "Old durable preference"
    ])
  })
})

describe("the write gate on summaries", () => {
  // test_summary_gate_requires_user_scope_and_descriptive_authority
  it("a summary is written only with scope user and authority descriptive", () => {
    const current = memoryOf()
    const doc: MemoryDoc.Document = {
      ...current,
      user: { ...current.user, personalContext: { summary: "Existing summary", updatedAt: "" } }
    }
    const { refused, value } = apply(doc, {
      user: {
        workContext: {
          summary: "User is a software engineer",
          shouldUpdate: true,
          scope: "user",
          authority: "descriptive"
        },
        personalContext: {
          summary: "Constraint for this PR",
          shouldUpdate: true,
          scope: "project",
          authority: "descriptive"
        },
        topOfMind: {
          summary: "User granted push access",
          shouldUpdate: true,
          scope: "user",
          authority: "transactional"
        }
      },
      history: { recentMonths: { summary: "Missing authority label", shouldUpdate: true, scope: "user" } },
      newFacts: [],
      factsToRemove: []
    })
    assert.deepStrictEqual(value.user.workContext, {
      summary: "User is a software engineer",
      updatedAt: "2026-05-08T10:00:00.000Z"
    })
    assert.strictEqual(value.user.personalContext.summary, "Existing summary")
    assert.strictEqual(value.user.topOfMind.summary, "")
    assert.strictEqual(value.history.recentMonths.summary, "")
    assert.deepStrictEqual(refused, [
      "the summary user.personalContext (scope not user)",
      "the summary user.topOfMind (authority not descriptive)",
      "the summary history.recentMonths (without scope and authority)"
    ])
    // a summary left as it is (shouldUpdate false) is not the gate's
    const kept = apply(doc, { user: { topOfMind: { summary: "x", shouldUpdate: false } }, history: {}, newFacts: [] })
    assert.deepStrictEqual(kept.refused, [])
    assert.strictEqual(kept.value.user.topOfMind.summary, "")
  })
})

describe("the write gate on removals", () => {
  const api = () => memoryOf([stored("fact_api", "User generally prefers API compatibility")])
  const removing = (...factsToRemove: ReadonlyArray<unknown>) => ({
    user: {},
    history: {},
    newFacts: [],
    factsToRemove
  })

  // test_thread_scoped_removal_cannot_delete_user_fact
  it("a removal scoped to the thread does not delete a fact of the user's", () => {
    const { refused, value } = apply(api(), removing({ id: "fact_api", scope: "thread", reason: "This PR may break" }))
    assert.deepStrictEqual(value.facts.map((f) => f.id), ["fact_api"])
    assert.deepStrictEqual(refused, ["1 removal (scope not user)"])
  })

  // test_unreasoned_user_scoped_removal_fails_closed
  it("a removal of the user's scope without a reason (or a blank one) fails closed", () => {
    for (const removal of [{ id: "fact_api", scope: "user" }, { id: "fact_api", scope: "user", reason: "  " }]) {
      const { refused, value } = apply(api(), removing(removal))
      assert.deepStrictEqual(value.facts.map((f) => f.id), ["fact_api"], JSON.stringify(removal))
      assert.deepStrictEqual(refused, ["1 removal (without scope and reason)"])
    }
    const removed = apply(api(), removing({ id: "fact_api", scope: " User ", reason: "No longer true" }))
    assert.deepStrictEqual(removed.value.facts, [])
    assert.deepStrictEqual(removed.refused, [])
  })

  // test_legacy_string_removal_fails_closed_and_reports_missing_scope
  it("a removal given as a bare id (the legacy form) fails closed and is reported", () => {
    const update = decoded(removing("fact_api"))
    assert.deepStrictEqual(update.factsToRemove, [{ id: "fact_api" }])
    const { refused, value } = MemoryDoc.applyUpdateGated(api(), update, options())
    assert.deepStrictEqual(value.facts.map((f) => f.id), ["fact_api"])
    assert.deepStrictEqual(refused, ["1 removal (without scope and reason)"])
  })
})

describe("a removal paired with its replacement", () => {
  const paired = (newFacts: ReadonlyArray<unknown>, replacementFactIndex: unknown = 0) => ({
    user: {},
    history: {},
    newFacts,
    factsToRemove: [{ id: "fact_api", scope: "user", reason: "Preference changed", replacementFactIndex }]
  })
  const api = () => memoryOf([stored("fact_api", "User generally prefers API compatibility")])

  // test_paired_removal_is_skipped_when_replacement_fails_scope_gate
  it("is not made when its replacement fails the gate", () => {
    const { refused, value } = apply(api(), paired([fact("This PR may break the API", {
      scope: "thread",
      durability: "temporary"
    })]))
    assert.deepStrictEqual(value.facts.map((f) => f.id), ["fact_api"])
    assert.deepStrictEqual(refused, ["1 new fact (scope not user)", "1 removal (its replacement fact not stored)"])
  })

  // test_paired_removal_is_skipped_when_replacement_fails_confidence_gate
  it("is not made when its replacement is below the confidence threshold", () => {
    const { refused, value } = apply(api(), paired([fact("User no longer requires API compatibility", {
      confidence: 0.69
    })]))
    assert.deepStrictEqual(value.facts.map((f) => f.id), ["fact_api"])
    assert.deepStrictEqual(refused, ["1 removal (its replacement fact not stored)"])
  })

  // test_paired_removal_is_atomic_when_replacement_is_persisted
  it("is made with its replacement when the replacement is stored", () => {
    const doc = memoryOf([stored("fact_editor", "User prefers Vim")])
    const { refused, value } = apply(doc, {
      user: {},
      history: {},
      newFacts: [fact("User now prefers VS Code")],
      factsToRemove: [{
        id: "fact_editor",
        scope: "user",
        reason: "User changed their durable editor preference",
        replacementFactIndex: 0
      }]
    })
    assert.deepStrictEqual(value.facts.map((f) => f.content), ["User now prefers VS Code"])
    assert.deepStrictEqual(refused, [])
  })

  // test_paired_removal_is_skipped_when_replacement_is_trimmed
  it("is not made when max_facts does not keep its replacement", () => {
    const doc = memoryOf([stored("fact_editor", "User prefers Vim")])
    const { value } = apply(doc, {
      user: {},
      history: {},
      newFacts: [fact("User now prefers VS Code", { confidence: 0.8 })],
      factsToRemove: [{
        id: "fact_editor",
        scope: "user",
        reason: "User changed their durable editor preference",
        replacementFactIndex: 0
      }]
    }, { maxFacts: 1 })
    assert.deepStrictEqual(value.facts.map((f) => f.content), ["User prefers Vim"])
  })

  // updater._apply_updates: an index that is not a non-negative integer, or names no new fact, refuses the removal;
  // a replacement that says what the removed fact says does not replace it
  it("is not made when its index is not one of a stored new fact, or the replacement is the removed fact", () => {
    for (const index of ["0", -1, 1.5, true, null, 1]) {
      const { refused, value } = apply(api(), paired([fact("User no longer requires API compatibility")], index))
      assert.deepStrictEqual(value.facts.map((f) => f.id).sort(), ["fact_api", "fact_new" + n].sort(), String(index))
      assert.deepStrictEqual(refused, ["1 removal (its replacement fact not stored)"], String(index))
    }
    const same = apply(api(), paired([fact("user generally prefers API  compatibility")]))
    assert.deepStrictEqual(same.value.facts.map((f) => f.id), ["fact_api"])
    assert.deepStrictEqual(same.refused, ["1 removal (its replacement fact not stored)"])
  })
})

describe("the update prompt", () => {
  // test_prompt_requires_scope_labels_for_every_mutating_path
  it("asks for the write gate's labels on every change, in DeerMem's words", () => {
    const prompt = MemoryDoc.updatePrompt(MemoryDoc.empty(), [
      { role: "user", text: "Remember that I prefer concise answers." },
      { role: "assistant", text: "Noted." }
    ], { threshold: 0.7 })
    for (
      const part of [
        "scope=\"user\"",
        "durability=\"durable\"",
        "authority=\"transactional\"",
        "\"scope\": \"user|thread|project\", \"authority\": \"descriptive|transactional\"",
        "\"scope\": \"user|thread|project\", \"durability\": \"durable|temporary\", " +
        "\"authority\": \"descriptive|transactional\"",
        "replacementFactIndex",
        "unrelated future thread",
        "factsToRemove entries MUST include scope and reason",
        "Every summary with shouldUpdate=true MUST include scope and authority",
        "When uncertain, use thread/project or temporary; never guess user+durable."
      ]
    ) assert.include(prompt, part)
  })
})
