import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Either from "effect/Either"
import * as FC from "effect/FastCheck"
import * as Schema from "effect/Schema"
import type { Message, MessageWrite } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import * as FastDecode from "../../src/internal/FastDecode.js"
import * as R from "../../src/state/Reducers.js"
import * as TS from "../../src/state/ThreadState.js"

// Ids come from a small pool so that writes collide with existing messages (replace, remove).
const ids = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"]
const idArb = FC.constantFrom(...ids)
const messageArb: FC.Arbitrary<Message> = FC.tuple(Arbitrary.make(M.Message), idArb).map(([message, id]) => ({
  ...message,
  id
}))
const writeItemArb: FC.Arbitrary<MessageWrite> = FC.oneof(
  { weight: 6, arbitrary: messageArb },
  { weight: 2, arbitrary: idArb.map(M.remove) },
  { weight: 1, arbitrary: FC.constant(M.remove(M.REMOVE_ALL_MESSAGES)) }
)
const writeArb = FC.array(writeItemArb, { maxLength: 6 })
const longIdArb = FC.integer({ min: 1, max: 40 }).map((n) => `l${n}`)
const longMessageArb: FC.Arbitrary<Message> = FC.tuple(Arbitrary.make(M.Message), longIdArb).map(([message, id]) => ({
  ...message,
  id
}))
const uniqueMessagesArb = FC.uniqueArray(messageArb, { selector: (m) => m.id, maxLength: 6 })

/** The obviously-correct reference for add_messages: linear scans, no index. */
const reference = (existing: ReadonlyArray<Message>, write: ReadonlyArray<MessageWrite>) => {
  let cut = -1
  write.forEach((item, i) => {
    if (item.type === "remove" && item.id === M.REMOVE_ALL_MESSAGES) cut = i
  })
  const out: Array<Message> = cut >= 0 ? [] : [...existing]
  const deleted = new Set<string>()
  for (const item of write.slice(cut + 1)) {
    const at = out.findIndex((m) => m.id === item.id)
    if (item.type === "remove") {
      if (at < 0) return Either.left(item.id)
      deleted.add(item.id)
    } else {
      deleted.delete(item.id)
      if (at >= 0) out[at] = item
      else out.push(item)
    }
  }
  return Either.right(out.filter((m) => !deleted.has(m.id)))
}

const same = (
  actual: Either.Either<ReadonlyArray<Message>, R.UnknownMessageRemoval>,
  expected: Either.Either<ReadonlyArray<Message>, string>
) => {
  if (Either.isLeft(expected)) {
    assert.isTrue(Either.isLeft(actual))
    if (Either.isLeft(actual)) assert.strictEqual(actual.left.id, expected.left)
  } else {
    assert.isTrue(Either.isRight(actual))
    if (Either.isRight(actual)) assert.deepStrictEqual(actual.right, expected.right)
  }
}

describe("messages reducer (add_messages)", () => {
  it.prop("matches the reference semantics for any write", [uniqueMessagesArb, writeArb], ([existing, write]) => {
    same(R.addMessages(existing, write), reference(existing, write))
  })

  it.prop(
    "matches the reference for long writes (many new ids, repeated within the write)",
    [
      FC.uniqueArray(longMessageArb, { selector: (m) => m.id, maxLength: 10 }),
      FC.array(
        FC.oneof({ weight: 8, arbitrary: longMessageArb }, { weight: 1, arbitrary: longIdArb.map(M.remove) }),
        { minLength: 10, maxLength: 60 }
      )
    ],
    ([existing, write]) => same(R.addMessages(existing, write), reference(existing, write))
  )

  it.prop(
    "matches the reference over a sequence of writes, including writes to older versions (branches)",
    [FC.array(writeArb, { minLength: 1, maxLength: 6 }), FC.array(FC.nat(), { minLength: 1, maxLength: 6 })],
    ([writes, picks]) => {
      const versions: Array<ReadonlyArray<Message>> = [[]]
      for (const [i, write] of writes.entries()) {
        // apply to the newest version, and also to an older one picked at random
        for (const base of [versions[versions.length - 1]!, versions[picks[i % picks.length]! % versions.length]!]) {
          const actual = R.addMessages(base, write)
          same(actual, reference(base, write))
          if (Either.isRight(actual)) versions.push(actual.right)
        }
      }
    }
  )

  it.prop("an empty write is the identity (same array)", [uniqueMessagesArb], ([existing]) => {
    const result = R.addMessages(existing, [])
    assert.isTrue(Either.isRight(result) && result.right === existing)
  })

  it.prop("new ids are appended in order after the existing messages", [uniqueMessagesArb], ([write]) => {
    const existing = [M.human("first", { id: "x1" }), M.ai("second", { id: "x2" })]
    const result = Either.getOrThrow(R.addMessages(existing, write))
    assert.deepStrictEqual(result.map((m) => m.id), ["x1", "x2", ...write.map((m) => m.id)])
  })

  it.prop(
    "a message with a known id replaces it in place (length and positions kept)",
    [uniqueMessagesArb.filter((m) => m.length > 0), FC.nat(), FC.string()],
    ([existing, pick, content]) => {
      const target = existing[pick % existing.length]!
      const result = Either.getOrThrow(R.addMessages(existing, [M.ai(content, { id: target.id })]))
      assert.deepStrictEqual(result.map((m) => m.id), existing.map((m) => m.id))
      assert.strictEqual(result[pick % existing.length]!.content, content)
    }
  )

  it.prop("writes without removals are idempotent", [uniqueMessagesArb, FC.array(messageArb, { maxLength: 6 })], ([
    existing,
    write
  ]) => {
    const once = Either.getOrThrow(R.addMessages(existing, write))
    const twice = Either.getOrThrow(R.addMessages(once, write))
    assert.deepStrictEqual(twice, once)
  })

  it.prop("removing an id that is not there is a typed failure", [uniqueMessagesArb], ([existing]) => {
    const result = R.addMessages(existing, [M.remove("not-there")])
    assert.isTrue(Either.isLeft(result) && result.left._tag === "UnknownMessageRemoval")
  })

  it.prop(
    "remove-all keeps exactly what follows the last marker",
    [uniqueMessagesArb, uniqueMessagesArb, uniqueMessagesArb],
    ([existing, before, after]) => {
      const write = [...before, M.remove(M.REMOVE_ALL_MESSAGES), ...after]
      assert.deepStrictEqual(Either.getOrThrow(R.addMessages(existing, write)), after)
    }
  )

  it("a removal followed by the same id in one write keeps the message (the later write wins)", () => {
    const existing = [M.human("a", { id: "a" })]
    const result = Either.getOrThrow(R.addMessages(existing, [M.remove("a"), M.human("again", { id: "a" })]))
    assert.deepStrictEqual(result.map((m) => m.content), ["again"])
  })
})

const sandboxArb = FC.option(FC.record({ sandbox_id: FC.option(FC.constantFrom("s1", "s2"), { nil: null }) }), {
  nil: null
})
const pathArb = FC.constantFrom("/a", "/b", "/c", "/d", "/e")

describe("sandbox reducer", () => {
  it.prop("null keeps what is there", [sandboxArb], ([existing]) => {
    assert.deepStrictEqual(Either.getOrThrow(R.mergeSandbox(existing, null)), existing)
  })
  it.prop("binding the same sandbox again is idempotent", [sandboxArb], ([incoming]) => {
    const once = Either.getOrThrow(R.mergeSandbox(null, incoming))
    assert.deepStrictEqual(Either.getOrThrow(R.mergeSandbox(once, incoming)), once)
  })
  it.prop("a different sandbox id is a typed conflict, never an overwrite", [FC.constantFrom("s1", "s2")], ([id]) => {
    const other = id === "s1" ? "s2" : "s1"
    const result = R.mergeSandbox({ sandbox_id: id }, { sandbox_id: other })
    assert.isTrue(Either.isLeft(result))
    if (Either.isLeft(result)) {
      assert.strictEqual(result.left._tag, "SandboxConflict")
      assert.strictEqual(result.left.existing, id)
      assert.strictEqual(result.left.incoming, other)
    }
  })
})

describe("artifacts reducer", () => {
  it.prop("de-duplicates in first-seen order", [FC.array(pathArb), FC.array(pathArb)], ([a, b]) => {
    const merged = R.mergeArtifacts(Array.from(new Set(a)), b)
    assert.deepStrictEqual(merged, Array.from(new Set([...a, ...b])))
  })
  it.prop("is idempotent", [FC.array(pathArb), FC.array(pathArb)], ([a, b]) => {
    const once = R.mergeArtifacts(a, b)
    assert.deepStrictEqual(R.mergeArtifacts(once, b), once)
  })
  it.prop("null and [] keep what is there (same array)", [FC.array(pathArb)], ([a]) => {
    assert.strictEqual(R.mergeArtifacts(a, null), a)
    assert.strictEqual(R.mergeArtifacts(a, []), a)
  })
})

const todoArb = Arbitrary.make(TS.Todo)

describe("todos reducer", () => {
  it.prop("an explicit list replaces, [] clears, null keeps", [FC.option(FC.array(todoArb), { nil: null }), FC.array(todoArb)], ([
    existing,
    incoming
  ]) => {
    assert.deepStrictEqual(R.mergeTodos(existing, incoming), incoming)
    assert.deepStrictEqual(R.mergeTodos(existing, []), [])
    assert.strictEqual(R.mergeTodos(existing, null), existing)
  })
})

const imagesArb = FC.dictionary(pathArb, Arbitrary.make(TS.ViewedImage), { maxKeys: 4 })

describe("viewed_images reducer", () => {
  it.prop("merges with new keys winning", [imagesArb, imagesArb], ([a, b]) => {
    assert.deepStrictEqual(R.mergeViewedImages(a, b), Object.keys(b).length === 0 ? {} : { ...a, ...b })
  })
  it.prop("{} empties everything, null keeps", [imagesArb], ([a]) => {
    assert.deepStrictEqual(R.mergeViewedImages(a, {}), {})
    assert.strictEqual(R.mergeViewedImages(a, null), a)
  })
  it.prop("is idempotent", [imagesArb, imagesArb], ([a, b]) => {
    const once = R.mergeViewedImages(a, b)
    assert.deepStrictEqual(R.mergeViewedImages(once, b), once)
  })
})

const promotedArb = FC.record({
  catalog_hash: FC.constantFrom("h1", "h2"),
  names: FC.array(FC.constantFrom("t1", "t2", "t3", "t4"), { maxLength: 5 })
})

describe("promoted reducer", () => {
  it.prop("a new catalog hash replaces (stale names dropped)", [promotedArb, promotedArb], ([a, b]) => {
    const incoming = { ...b, catalog_hash: a.catalog_hash === "h1" ? "h2" : "h1" }
    assert.deepStrictEqual(R.mergePromoted(a, incoming), {
      catalog_hash: incoming.catalog_hash,
      names: Array.from(new Set(incoming.names))
    })
  })
  it.prop("the same hash unions names in order", [promotedArb, promotedArb], ([a, b]) => {
    const incoming = { ...b, catalog_hash: a.catalog_hash }
    assert.deepStrictEqual(R.mergePromoted(a, incoming), {
      catalog_hash: a.catalog_hash,
      names: Array.from(new Set([...a.names, ...incoming.names]))
    })
  })
  it.prop("null keeps; merging twice is idempotent", [promotedArb, promotedArb], ([a, b]) => {
    assert.strictEqual(R.mergePromoted(a, null), a)
    const once = R.mergePromoted(a, b)
    assert.deepStrictEqual(R.mergePromoted(once, b), once)
  })
})

const skillArb = FC.record({
  name: FC.constantFrom("research", "charts", "docs"),
  path: FC.constantFrom(...Array.from({ length: 12 }, (_, i) => `/mnt/skills/s${i}/SKILL.md`)),
  description: FC.string({ maxLength: 20 }),
  loaded_at: FC.nat()
})

/** Promotion updates as the schema admits them: any part may be missing. */
const promotedUpdateArb: FC.Arbitrary<TS.PromotedUpdate> = Arbitrary.make(TS.PromotedUpdate).map((u) => ({
  ...(u.catalog_hash !== undefined ? { catalog_hash: u.catalog_hash.length % 2 === 0 ? "h1" : "h2" } : {}),
  ...(u.names !== undefined ? { names: u.names.map((n) => `t${n.length % 4}`) } : {})
}))

describe("promoted reducer: partial updates", () => {
  it("an empty update changes nothing (it used to wipe the promotions)", () => {
    const existing = { catalog_hash: "h1", names: ["t1", "t2"] }
    assert.strictEqual(R.mergePromoted(existing, {}), existing)
    assert.strictEqual(R.mergePromoted(existing, { names: [] }), existing)
    assert.strictEqual(R.mergePromoted(existing, { catalog_hash: "h1" }), existing)
    assert.deepStrictEqual(R.mergePromoted(existing, { names: ["t3"] }), { catalog_hash: "h1", names: ["t1", "t2", "t3"] })
    assert.isNull(R.mergePromoted(null, {}))
  })

  it.prop(
    "never throws, and no existing name is lost unless the update names a different catalog",
    [FC.option(promotedArb, { nil: null }), promotedUpdateArb],
    ([existing, update]) => {
      const merged = R.mergePromoted(existing, update)
      assert.isTrue(Schema.is(Schema.NullOr(TS.Promoted))(merged))
      const replaced = update.catalog_hash !== undefined && update.catalog_hash !== existing?.catalog_hash
      if (existing !== null && !replaced) {
        for (const name of existing.names) assert.include(merged!.names, name)
        assert.strictEqual(merged!.catalog_hash, existing.catalog_hash)
      }
      if (replaced) assert.deepStrictEqual(merged, { catalog_hash: update.catalog_hash!, names: [...new Set(update.names ?? [])] })
    }
  )
})

const skillPaths = Array.from({ length: 12 }, (_, i) => `/mnt/skills/s${i}/SKILL.md`)

/** Entries as older threads stored them: the encoded side of SkillEntry (name, description, loaded_at may be missing or null) plus old body keys. */
const legacySkillArb = FC.tuple(
  Arbitrary.make(Schema.encodedSchema(TS.SkillEntry)),
  FC.constantFrom(...skillPaths),
  FC.option(FC.string({ maxLength: 10 }), { nil: undefined })
).map(([entry, path, body]) => ({ ...entry, path, ...(body !== undefined ? { content: body } : {}) }) as unknown as TS.SkillEntry)

describe("skill_context reducer: legacy entries", () => {
  it("an entry without a description merges (it used to throw a TypeError)", () => {
    const legacy = { name: "research", path: skillPaths[0], content: "# Research\n..." } as unknown as TS.SkillEntry
    const fresh = { name: "charts", path: skillPaths[1]!, description: "Draw  charts\n", loaded_at: 5 }
    assert.deepStrictEqual(R.mergeSkillContext([legacy], [fresh]), [
      { name: "research", path: skillPaths[0]!, description: "", loaded_at: 0 },
      { name: "charts", path: skillPaths[1]!, description: "Draw charts", loaded_at: 5 }
    ])
    // A stored thread with such an entry loads, too.
    const state = Schema.decodeUnknownSync(TS.ThreadState)({ ...TS.empty, skill_context: [legacy] })
    assert.deepStrictEqual(state.skill_context, [{ name: "research", path: skillPaths[0]!, description: "", loaded_at: 0 }])
  })

  // DeerFlow test_thread_state_reducers.py::test_description_is_capped_when_normalizing_legacy_entries, with
  // characters counted as Python counts them
  it("a description is capped at 500 characters, an emoji counting once and never cut in half", () => {
    const entry = { name: "charts", path: skillPaths[0], description: `a${"📊".repeat(600)}`, loaded_at: 1 }
    const [stored] = Schema.decodeUnknownSync(TS.ThreadState)({ ...TS.empty, skill_context: [entry] }).skill_context
    assert.strictEqual(stored!.description, `a${"📊".repeat(499)}`)
    const [merged] = R.mergeSkillContext([], [entry as unknown as TS.SkillEntry])
    assert.strictEqual(merged!.description, `a${"📊".repeat(499)}`)
  })

  it("a stored thread's legacy entries load normalised: the body dropped, the description capped at 500", () => {
    const legacy = {
      name: "research",
      path: skillPaths[0],
      description: `Research  ${"deep ".repeat(200)}`,
      loaded_at: 3,
      body: "# Research\n(the whole SKILL.md)"
    }
    // as the stores read a snapshot (excess properties preserved elsewhere in the state)
    const state = Either.getOrThrow(FastDecode.decodeThreadState({ ...TS.empty, skill_context: [legacy] }))
    const [entry] = state.skill_context
    assert.deepStrictEqual(Object.keys(entry!), ["name", "path", "description", "loaded_at"])
    assert.strictEqual(entry!.description.length, 500)
    assert.isTrue(entry!.description.startsWith("Research deep deep"))
    // and a merge with nothing new keeps it so
    assert.strictEqual(R.mergeSkillContext(state.skill_context, []), state.skill_context)
  })

  it.prop(
    "never throws on legacy entries; the result is normalised, Schema-valid, and keeps the 8 most recent paths",
    [FC.array(legacySkillArb, { maxLength: 10 }), FC.array(legacySkillArb, { minLength: 1, maxLength: 10 })],
    ([existing, incoming]) => {
      const merged = R.mergeSkillContext(existing, incoming)
      assert.isTrue(Schema.is(Schema.Array(TS.SkillEntry))(merged))
      for (const entry of merged) assert.deepStrictEqual(Object.keys(entry), ["name", "path", "description", "loaded_at"])
      const recency: Array<string> = []
      for (const entry of [...existing, ...incoming]) {
        const at = recency.indexOf(entry.path)
        if (at >= 0) recency.splice(at, 1)
        recency.push(entry.path)
      }
      assert.deepStrictEqual(merged.map((e) => e.path), recency.slice(-8))
    }
  )
})

describe("skill_context reducer", () => {
  it.prop("keeps one entry per path, a re-read moves it last, at most 8", [
    FC.array(skillArb, { maxLength: 10 }),
    FC.array(skillArb, { minLength: 1, maxLength: 10 })
  ], ([a, b]) => {
    const merged = R.mergeSkillContext(R.mergeSkillContext([], a), b)
    const paths = merged.map((e) => e.path)
    assert.strictEqual(new Set(paths).size, paths.length)
    assert.isAtMost(merged.length, 8)
    assert.strictEqual(paths[paths.length - 1], b[b.length - 1]!.path)
  })
})

// Ids from a small pool, so updates collide with the ledger; any status, terminal or not.
const delegationArb: FC.Arbitrary<TS.DelegationEntry> = FC.tuple(
  Arbitrary.make(TS.DelegationEntry),
  FC.constantFrom("c1", "c2", "c3", "c4")
).map(([entry, id]) => ({ ...entry, id }))
const ledgerArb = FC.array(delegationArb, { maxLength: 8 }).map((entries) =>
  R.mergeDelegations([], entries)
)
const goalArb = Arbitrary.make(TS.GoalState)

const updateArb: FC.Arbitrary<TS.StateUpdate> = FC.record(
  {
    messages: FC.array(messageArb, { maxLength: 3 }),
    title: FC.option(FC.string(), { nil: null }),
    artifacts: FC.array(pathArb, { maxLength: 3 }),
    todos: FC.option(FC.array(todoArb, { maxLength: 3 }), { nil: null }),
    viewed_images: imagesArb,
    promoted: promotedArb,
    summary_text: FC.option(FC.string(), { nil: null }),
    sandbox: FC.constant({ sandbox_id: "s1" }),
    token_usage: FC.array(
      FC.record({ model: FC.constantFrom("a", "b"), input_tokens: FC.nat(99), output_tokens: FC.nat(99), total_tokens: FC.nat(200) }),
      { maxLength: 2 }
    ),
    delegations: FC.option(FC.array(delegationArb, { maxLength: 3 }), { nil: null }),
    goal: FC.option(FC.oneof(goalArb, FC.constant({ clear: true as const })), { nil: null })
  },
  { requiredKeys: [] }
)


describe("delegations reducer", () => {
  it.prop("a terminal status is never downgraded", [ledgerArb, FC.array(delegationArb, { maxLength: 6 })], ([ledger, update]) => {
    const merged = R.mergeDelegations(ledger, update)
    for (const before of ledger) {
      const after = merged.find((e) => e.id === before.id)
      if (after !== undefined && R.isTerminal(before.status)) assert.isTrue(R.isTerminal(after.status))
    }
  })

  it.prop("one entry per id, first-seen order, created_at and a missing run_id kept from the first", [
    ledgerArb,
    FC.array(delegationArb, { maxLength: 6 })
  ], ([ledger, update]) => {
    const merged = R.mergeDelegations(ledger, update)
    const ids = merged.map((e) => e.id)
    assert.strictEqual(new Set(ids).size, ids.length)
    const firstSeen = [...new Set([...ledger, ...update].map((e) => e.id))]
    assert.deepStrictEqual(ids, firstSeen)
    for (const before of ledger) {
      const after = merged.find((e) => e.id === before.id)!
      assert.strictEqual(after.created_at, before.created_at)
      if (before.run_id !== undefined) assert.isDefined(after.run_id)
    }
  })

  it.prop("a later entry replaces an earlier one unless that would downgrade it", [ledgerArb, delegationArb], ([ledger, entry]) => {
    const before = ledger.find((e) => e.id === entry.id)
    const after = R.mergeDelegations(ledger, [entry]).find((e) => e.id === entry.id)!
    if (before !== undefined && R.isTerminal(before.status) && !R.isTerminal(entry.status)) {
      assert.strictEqual(after, before)
    } else {
      assert.strictEqual(after.status, entry.status)
      assert.strictEqual(after.result_brief, entry.result_brief)
    }
  })

  it.prop("null and [] keep the same array; merging the same update twice changes nothing more", [
    ledgerArb,
    FC.array(delegationArb, { maxLength: 6 })
  ], ([ledger, update]) => {
    assert.strictEqual(R.mergeDelegations(ledger, null), ledger)
    assert.strictEqual(R.mergeDelegations(ledger, []), ledger)
    const once = R.mergeDelegations(ledger, update)
    assert.deepStrictEqual(R.mergeDelegations(once, update), once)
  })

  it("keeps the newest 50 entries", () => {
    const entries = Array.from({ length: 60 }, (_, i): TS.DelegationEntry => ({
      id: `t${i}`,
      description: `task ${i}`,
      subagent_type: "general-purpose",
      status: "completed",
      created_at: "2026-01-01T00:00:00.000Z"
    }))
    const merged = R.mergeDelegations([], entries)
    assert.lengthOf(merged, R.MAX_DELEGATIONS)
    assert.strictEqual(merged[0]!.id, "t10")
    assert.strictEqual(merged.at(-1)!.id, "t59")
  })
})

describe("goal reducer", () => {
  it.prop("null keeps, a goal replaces, { clear: true } removes", [FC.option(goalArb, { nil: null }), goalArb], ([existing, goal]) => {
    assert.strictEqual(R.mergeGoal(existing, null), existing)
    assert.strictEqual(R.mergeGoal(existing, undefined), existing)
    assert.strictEqual(R.mergeGoal(existing, goal), goal)
    assert.isNull(R.mergeGoal(existing, { clear: true }))
  })

  it("threads saved before the ledger and the goal existed decode with an empty ledger and no goal", () => {
    const { delegations: _, goal: __, ...old } = TS.empty
    const state = Schema.decodeUnknownSync(TS.ThreadState)(old)
    assert.deepStrictEqual([state.delegations, state.goal], [[], null])
  })
})

const isThreadState = Schema.is(TS.ThreadState)

describe("whole state", () => {
  it.prop("applying valid updates keeps the state Schema-valid", [FC.array(updateArb, { maxLength: 8 })], ([updates]) => {
    const state = Either.getOrThrow(R.applyUpdates(TS.empty, updates))
    assert.isTrue(isThreadState(state))
  })

  it.prop("an update with no fields is the identity", [FC.array(updateArb, { maxLength: 4 })], ([updates]) => {
    const state = Either.getOrThrow(R.applyUpdates(TS.empty, updates))
    assert.strictEqual(Either.getOrThrow(R.applyUpdate(state, {})), state)
  })

  it.prop("token usage totals are the sums of the deltas, per model and overall", [FC.array(updateArb, { maxLength: 8 })], ([
    updates
  ]) => {
    const state = Either.getOrThrow(R.applyUpdates(TS.empty, updates))
    const deltas = updates.flatMap((u) => u.token_usage ?? [])
    if (deltas.length === 0) return assert.isNull(state.token_usage)
    assert.strictEqual(state.token_usage!.total.input_tokens, deltas.reduce((n, d) => n + d.input_tokens, 0))
    assert.strictEqual(state.token_usage!.total.calls, deltas.length)
    for (const model of ["a", "b"]) {
      const mine = deltas.filter((d) => d.model === model)
      assert.strictEqual(state.token_usage!.by_model[model]?.total_tokens ?? 0, mine.reduce((n, d) => n + d.total_tokens, 0))
    }
  })

  it.prop(
    "a reducer never throws: any update the schema admits gives a Schema-valid state or a typed failure",
    [FC.array(updateArb, { maxLength: 4 }), Arbitrary.make(TS.StateUpdate)],
    ([updates, update]) => {
      const state = Either.getOrThrow(R.applyUpdates(TS.empty, updates))
      const result = R.applyUpdate(state, update)
      if (Either.isRight(result)) assert.isTrue(isThreadState(result.right))
      else assert.include(["SandboxConflict", "UnknownMessageRemoval"], result.left._tag)
    },
    { fastCheck: { numRuns: 200 } }
  )

  it("a sandbox conflict fails the update and leaves the state as it was", () => {
    const bound = Either.getOrThrow(R.applyUpdate(TS.empty, { sandbox: { sandbox_id: "s1" } }))
    const result = R.applyUpdate(bound, { title: "t", sandbox: { sandbox_id: "s2" } })
    assert.isTrue(Either.isLeft(result) && result.left._tag === "SandboxConflict")
    assert.isNull(bound.title)
  })
})
