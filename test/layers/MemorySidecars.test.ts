/**
 * DeerMem's recall records and eviction audit beside a memory file (DeerFlow's test_deermem_self_contained.py and
 * test_memory_eviction.py): under `hybrid-v1` a recall heats a fact and the heat keeps it when `max_facts` leaves one
 * out; what is left out is audited without its content, redacted, the newest `eviction_audit_max_entries` kept; a
 * deleted fact leaves both, a cleared memory leaves none; one user's or agent's files never touch another's; and the
 * update path audits what its trim left out.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import type { Scope } from "../../src/services/Memory.js"
import { Memory } from "../../src/services/Memory.js"
import { ModelService } from "../../src/services/ModelService.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import * as M from "../../src/state/Message.js"
import type * as MemoryDoc from "../../src/state/Memory.js"
import { tempDirs } from "../support/fixtures.js"

const tempDir = tempDirs()
const KEY = "sk-live-0123456789abcdef"
const NOW = Date.parse("2026-08-13T00:00:00Z")

const setup = (
  backend_config: Record<string, unknown>,
  script: ScriptedModel.Script = []
) =>
  Effect.gen(function*() {
    const home = tempDir("antler-memside-")
    const store = MemoryThreadStore.make()
    yield* store.ensure("t1")
    const context = yield* Layer.build(FileMemory.layer().pipe(
      Layer.provide(Layer.succeed(ModelService, ScriptedModel.make(script))),
      Layer.provide(Layer.succeed(ThreadStore, store)),
      Layer.provide(ConfigFile.layerFromObject({
        models: [{ name: "main", model: "main-model", api_key: KEY }],
        memory: { backend_config }
      }, { home })),
      Layer.provide(NodeFileSystem.layer)
    ))
    yield* TestClock.setTime(NOW)
    return { home, memory: context.unsafeMap.get(Memory.key) as Memory["Type"] }
  })

const fact = (id: string, content: string, confidence: number, category = "preference"): MemoryDoc.Fact => ({
  id,
  content,
  category,
  confidence,
  createdAt: "2026-08-12T00:00:00Z",
  source: "t1"
})

/** As `memory_add` writes a fact. */
const add = (memory: Memory["Type"], scope: Scope, added: MemoryDoc.Fact) =>
  memory.modify(scope, (doc) => [undefined, { ...doc, facts: [...doc.facts, added] }] as const)

const remove = (memory: Memory["Type"], scope: Scope, id: string) =>
  memory.modify(scope, (doc) => [undefined, { ...doc, facts: doc.facts.filter((f) => f.id !== id) }] as const)

const metadata = (home: string, user: string, agent = "__default__") =>
  Path.join(home, "users", user, "agents", agent, ".metadata")

const readJson = (file: string): any => JSON.parse(Fs.readFileSync(file, "utf8"))

const ids = (doc: MemoryDoc.Document) => doc.facts.map((f) => f.id)

const U1: Scope = { userId: "u1" }

describe("recall records", () => {
  // DeerFlow test_memory_eviction.py::test_hybrid_policy_uses_bounded_access_heat, through the files: two facts as
  // confident, the later one recalled; a third written past max_facts leaves out the one never recalled
  it.scoped("under hybrid-v1, a recalled fact outlives an equal one never recalled; without the recall, it goes", () =>
    Effect.gen(function*() {
      for (const recalled of [true, false]) {
        const { home, memory } = yield* setup({ fact_eviction_policy: "hybrid-v1", max_facts: 2 })
        yield* add(memory, U1, fact("fact_tea", "Prefers tea", 0.8))
        yield* add(memory, U1, fact("fact_lyon", "Lives in Lyon", 0.8))
        if (recalled) yield* memory.recall(U1, ["fact_lyon"])
        yield* add(memory, U1, fact("fact_acme", "Works at Acme", 0.9))
        const doc = yield* memory.load(U1)
        assert.deepStrictEqual(ids(doc), recalled ? ["fact_lyon", "fact_acme"] : ["fact_tea", "fact_acme"])
        const events = readJson(Path.join(metadata(home, "u1"), "eviction-audit.json"))
        assert.lengthOf(events, 1)
        assert.deepInclude(events[0], {
          occurredAt: "2026-08-13T00:00:00.000Z",
          reason: "capacity",
          policyVersion: "hybrid-v1",
          maxFacts: 2,
          reservedCorrectionSlots: 0
        })
        const [evicted] = events[0].evicted
        assert.strictEqual(evicted.factId, recalled ? "fact_tea" : "fact_lyon")
        assert.strictEqual(evicted.category, "preference")
        assert.deepStrictEqual(Object.keys(evicted.components), ["confidence", "confirmationFreshness", "accessHeat"])
        assert.strictEqual(evicted.components.accessHeat, 0)
        // the audit never holds what a fact said
        const audit = Fs.readFileSync(Path.join(metadata(home, "u1"), "eviction-audit.json"), "utf8")
        assert.notInclude(audit, "Prefers tea")
        assert.notInclude(audit, "Lives in Lyon")
        // the records: only facts still there (the evicted one's went with it)
        const usageFile = Path.join(metadata(home, "u1"), "fact-usage.json")
        if (recalled) {
          assert.deepStrictEqual(readJson(usageFile), {
            fact_lyon: { accessHeat: 1, accessCount: 1, lastAccessedAt: "2026-08-13T00:00:00.000Z" }
          })
        } else {
          assert.isFalse(Fs.existsSync(usageFile))
        }
      }
    }))

  // DeerFlow test_memory_eviction.py::test_file_storage_records_decayed_access_heat_without_touching_fact and
  // test_deermem_self_contained.py::test_query_search_records_access_but_default_injection_does_not
  it.scoped("a recall a half-life later: heat 1.5, two accesses; the memory untouched; an injection counts none", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup({ fact_eviction_policy: "hybrid-v1" })
      yield* add(memory, U1, fact("fact_a", "Prefers tea", 0.8))
      const file = Path.join(home, "users", "u1", "memory.json")
      const before = Fs.readFileSync(file, "utf8")
      yield* memory.context(U1)
      assert.isFalse(Fs.existsSync(metadata(home, "u1")))
      yield* memory.recall(U1, ["fact_a"])
      yield* TestClock.adjust("30 days")
      yield* memory.recall(U1, ["fact_a", "fact_a"])
      assert.deepStrictEqual(readJson(Path.join(metadata(home, "u1"), "fact-usage.json")), {
        fact_a: { accessHeat: 1.5, accessCount: 2, lastAccessedAt: "2026-09-12T00:00:00.000Z" }
      })
      assert.strictEqual(Fs.readFileSync(file, "utf8"), before)
    }))

  // DeerFlow test_deermem_self_contained.py::test_default_confidence_policy_does_not_collect_hybrid_usage
  it.scoped("under the confidence policy (the default), a recall records nothing", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup({})
      yield* add(memory, U1, fact("fact_a", "Prefers tea", 0.8))
      yield* memory.recall(U1, ["fact_a"])
      assert.isFalse(Fs.existsSync(metadata(home, "u1")))
    }))

  it.scoped("a deleted fact's record goes, and a recall of it is not recorded again; clear removes the sidecars", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup({ fact_eviction_policy: "hybrid-v1", max_facts: 1 })
      yield* add(memory, U1, fact("fact_a", "Prefers tea", 0.8))
      yield* add(memory, U1, fact("fact_b", "Lives in Lyon", 0.1))
      yield* memory.recall(U1, ["fact_a"])
      assert.isTrue(Fs.existsSync(Path.join(metadata(home, "u1"), "eviction-audit.json")))
      yield* remove(memory, U1, "fact_a")
      assert.isFalse(Fs.existsSync(Path.join(metadata(home, "u1"), "fact-usage.json")))
      yield* memory.recall(U1, ["fact_a"])
      assert.isFalse(Fs.existsSync(Path.join(metadata(home, "u1"), "fact-usage.json")))
      // DeerFlow test_deermem_self_contained.py::test_clear_memory_removes_usage_and_eviction_sidecars
      yield* add(memory, U1, fact("fact_c", "Works at Acme", 0.9))
      yield* memory.recall(U1, ["fact_c"])
      yield* memory.clear(U1)
      assert.isFalse(Fs.existsSync(Path.join(home, "users", "u1", "agents", "__default__")))
      assert.deepStrictEqual(ids(yield* memory.load(U1)), [])
      // as the gateway clears a memory (its watermarks kept): a memory left remembering nothing keeps no sidecars
      yield* add(memory, U1, fact("fact_d", "Works at Acme", 0.9))
      yield* memory.recall(U1, ["fact_d"])
      assert.isTrue(Fs.existsSync(metadata(home, "u1")))
      yield* memory.modify(U1, (doc) => [undefined, { ...doc, facts: [] }] as const)
      assert.isFalse(Fs.existsSync(Path.join(home, "users", "u1", "agents", "__default__")))
    }))

  it.scoped("each user's and each agent's files are their own: one's recall or eviction never touches another's", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup({ fact_eviction_policy: "hybrid-v1", max_facts: 1 })
      const writer: Scope = { userId: "u1", agentName: "writer" }
      const u2: Scope = { userId: "u2" }
      for (const scope of [U1, writer, u2]) yield* add(memory, scope, fact("fact_same", "Prefers tea", 0.8))
      yield* memory.recall(U1, ["fact_same"])
      yield* add(memory, writer, fact("fact_low", "Lives in Lyon", 0.1))
      assert.deepStrictEqual(Fs.readdirSync(metadata(home, "u1")), ["fact-usage.json"])
      const writerDir = Path.join(home, "users", "u1", "agents", "writer", ".metadata")
      assert.deepStrictEqual(Fs.readdirSync(writerDir), ["eviction-audit.json"])
      assert.isFalse(Fs.existsSync(Path.join(home, "users", "u2", "agents")))
      // a damaged file is ignored, and replaced at the next recall
      Fs.writeFileSync(Path.join(metadata(home, "u1"), "fact-usage.json"), "{ not json")
      yield* memory.recall(U1, ["fact_same"])
      assert.strictEqual(readJson(Path.join(metadata(home, "u1"), "fact-usage.json")).fact_same.accessCount, 1)
    }))
})

describe("the eviction audit", () => {
  // DeerFlow test_memory_eviction.py::test_file_storage_writes_bounded_metadata_only_eviction_audit
  it.scoped("keeps the newest eviction_audit_max_entries; confidence evictions are audited too; 0 writes none", () =>
    Effect.gen(function*() {
      for (const max of [2, 0]) {
        const { home, memory } = yield* setup({ max_facts: 1, eviction_audit_max_entries: max })
        yield* add(memory, U1, fact("fact_keep", "Prefers tea", 0.9))
        for (const n of [1, 2, 3]) {
          yield* TestClock.adjust("1 hour")
          yield* add(memory, U1, fact(`fact_low${n}`, `low ${n}`, 0.1))
        }
        const file = Path.join(metadata(home, "u1"), "eviction-audit.json")
        if (max === 0) {
          assert.isFalse(Fs.existsSync(file))
          continue
        }
        const events = readJson(file)
        assert.deepStrictEqual(events.map((e: any) => [e.occurredAt, e.policyVersion, e.evicted]), [
          [
            "2026-08-13T02:00:00.000Z",
            "confidence",
            [{ factId: "fact_low2", category: "preference", score: 0.1, components: { confidence: 0.1 } }]
          ],
          [
            "2026-08-13T03:00:00.000Z",
            "confidence",
            [{ factId: "fact_low3", category: "preference", score: 0.1, components: { confidence: 0.1 } }]
          ]
        ])
      }
    }))

  // DeerFlow test_deermem_self_contained.py::test_confidence_policy_shadow_does_not_change_actual_selection
  it.scoped("shadow mode: confidence still decides; the audit says what hybrid-v1 would have left out", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup({ fact_eviction_shadow_enabled: true, max_facts: 10 })
      const facts = [
        ...Array.from({ length: 8 }, (_, i) => fact(`high_${i}`, `high ${i}`, 0.99)),
        { ...fact("stale_high", "stale high confidence", 0.9), createdAt: "2025-01-01T00:00:00Z" },
        {
          ...fact("confirmed_recently", "recently confirmed preference", 0.7),
          createdAt: "2025-01-01T00:00:00Z",
          lastConfirmedAt: "2026-08-12T00:00:00Z"
        }
      ]
      yield* memory.modify(U1, (doc) => [undefined, { ...doc, facts }] as const)
      yield* add(memory, U1, fact("new_context", "new useful context", 0.8, "context"))
      const kept = ids(yield* memory.load(U1))
      assert.include(kept, "stale_high")
      assert.notInclude(kept, "confirmed_recently")
      const [event] = readJson(Path.join(metadata(home, "u1"), "eviction-audit.json"))
      assert.strictEqual(event.policyVersion, "confidence")
      assert.deepStrictEqual(event.evicted.map((e: any) => e.factId), ["confirmed_recently"])
      assert.deepStrictEqual(event.shadow, { policyVersion: "hybrid-v1", wouldEvict: ["stale_high"], disagrees: true })
      // recalls are recorded for the shadow to read
      yield* memory.recall(U1, ["high_0"])
      assert.strictEqual(readJson(Path.join(metadata(home, "u1"), "fact-usage.json")).high_0.accessCount, 1)
    }))

  it.scoped("holds no secret: what it names is redacted as the memory is", () =>
    Effect.gen(function*() {
      const { home, memory } = yield* setup({ max_facts: 1 })
      yield* add(memory, U1, fact("fact_keep", "Prefers tea", 0.9))
      yield* add(memory, U1, fact("fact_low", "low", 0.1, `key ${KEY}`))
      const audit = Fs.readFileSync(Path.join(metadata(home, "u1"), "eviction-audit.json"), "utf8")
      assert.notInclude(audit, KEY)
      assert.include(audit, "[redacted]")
    }))

  it.scoped("a memory update whose new facts max_facts leaves out audits them; what it removes is not audited", () =>
    Effect.gen(function*() {
      const USER = { scope: "user", durability: "durable", authority: "descriptive" }
      const update = JSON.stringify({
        newFacts: [{ content: "Uses uv", category: "preference", confidence: 0.75, ...USER }]
      })
      const removal = JSON.stringify({
        factsToRemove: [{ id: "fact_keep", scope: "user", reason: "not true" }],
        newFacts: [{ content: "Drinks coffee", category: "preference", confidence: 0.9, ...USER }]
      })
      const { home, memory } = yield* setup({ fact_eviction_policy: "hybrid-v1", max_facts: 1 }, [update, removal])
      yield* add(memory, U1, fact("fact_keep", "Prefers tea", 0.95))
      yield* memory.enqueue({ threadId: "t1", userId: "u1", messages: [M.human("I use uv."), M.ai("Noted.")] })
      yield* memory.flush
      assert.deepStrictEqual(ids(yield* memory.load(U1)), ["fact_keep"])
      const file = Path.join(metadata(home, "u1"), "eviction-audit.json")
      const [event] = readJson(file)
      assert.strictEqual(event.policyVersion, "hybrid-v1")
      assert.lengthOf(event.evicted, 1)
      assert.match(event.evicted[0].factId, /^fact_/)
      assert.notInclude(Fs.readFileSync(file, "utf8"), "Uses uv")
      // a fact the update removes is not audited (it was not left out), and the audit keeps what it had
      yield* memory.enqueue({
        threadId: "t1",
        userId: "u1",
        messages: [M.human("I use uv."), M.ai("Noted."), M.human("I drink coffee, not tea."), M.ai("Noted.")]
      })
      yield* memory.flush
      assert.deepStrictEqual((yield* memory.load(U1)).facts.map((f) => f.content), ["Drinks coffee"])
      assert.deepStrictEqual(readJson(file), [event])
    }))
})
