/**
 * DeerFlow's memory tests swept at assertion level (test_memory_staleness_review.py, test_memory_updater.py), the
 * cases where Antler differed, through FileMemory, its file and a scripted memory model: a stored fact without an id
 * is kept (under one) through an update, a new fact whose confidence is `null` is malformed, and a new fact that
 * says a known one in other case is a repeat with case folded as Python's `casefold()` folds it.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../../src/layers/ConfigFile.js"
import * as FileMemory from "../../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../../src/layers/ScriptedModel.js"
import { Memory } from "../../../src/services/Memory.js"
import type { ModelRequest } from "../../../src/services/ModelService.js"
import { ModelService } from "../../../src/services/ModelService.js"
import { ThreadStore } from "../../../src/services/ThreadStore.js"
import * as M from "../../../src/state/Message.js"
import { tempDirs } from "../../support/fixtures.js"

const tempDir = tempDirs()
const USER = { scope: "user", durability: "durable", authority: "descriptive" } as const

/** FileMemory over `home`, whose default user's memory.json holds `facts`, answered by `script`. */
const setup = (home: string, facts: ReadonlyArray<unknown>, script: ScriptedModel.Script) =>
  Effect.gen(function*() {
    const file = Path.join(home, "users", "default", "memory.json")
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, JSON.stringify({ facts }))
    const requests: Array<ModelRequest> = []
    const scripted = ScriptedModel.make(script)
    const model = ModelService.of({ generate: (r) => Effect.suspend(() => (requests.push(r), scripted.generate(r))) })
    const context = yield* Layer.buildWithScope(
      FileMemory.layer().pipe(
        Layer.provide(Layer.succeed(ModelService, model)),
        Layer.provide(Layer.succeed(ThreadStore, MemoryThreadStore.make())),
        Layer.provide(ConfigFile.layerFromObject({ memory: { backend_config: { fact_confidence_threshold: 0.5 } } }, {
          home,
          source: Path.join(home, "config.yaml")
        })),
        Layer.provide(NodeFileSystem.layer)
      ),
      yield* Scope.make()
    )
    const memory = context.pipe((c) => c.unsafeMap.get(Memory.key) as Memory["Type"])
    const stored = () => (JSON.parse(Fs.readFileSync(file, "utf8")) as { facts: Array<Record<string, unknown>> }).facts
    return { memory, requests, stored }
  })

const update = (memory: Memory["Type"]) =>
  Effect.zipRight(
    memory.enqueue({
      threadId: "t1",
      userId: "default",
      messages: [M.human("I moved to React last month."), M.ai("Noted.")]
    }),
    memory.flush
  )

describe("DeerFlow's memory updater cases", () => {
  // DeerFlow test_memory_staleness_review.py::TestApplyUpdatesStaleness::test_stale_candidate_without_id_does_not_raise:
  // a stored fact without an id (an older or hand-written file) is kept through an update that removes another
  // stale fact; DeerMem's storage gives it an id (`fact_<hex>`) when it is written. A number id is its text.
  it.effect("a stored fact without an id is kept through an update, under an id the update prompt showed", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2026-06-01T00:00:00Z"))
      const aged = "2026-01-01T00:00:00Z"
      const { memory, requests, stored } = yield* setup(tempDir("antler-mem27-"), [
        { id: "fact_keep", content: "User knows Python", category: "knowledge", confidence: 0.9, createdAt: aged },
        { content: "User uses Vue.js", category: "knowledge", confidence: 0.8, createdAt: aged },
        { id: 42, content: "User writes tests first", category: "behavior", confidence: 0.85, createdAt: aged }
      ], [JSON.stringify({ user: {}, history: {}, newFacts: [], staleFactsToRemove: [{ id: "fact_keep", reason: "old" }] })])
      yield* update(memory)
      const facts = stored()
      assert.deepStrictEqual(facts.map((f) => f.content), ["User uses Vue.js", "User writes tests first"])
      const id = facts[0]!.id as string
      assert.match(id, /^fact_[0-9a-f]{12}$/)
      assert.strictEqual(facts[1]!.id, "42")
      // the memory model was shown the fact under the id it is stored with, so it can name it
      assert.lengthOf(requests, 1)
      assert.include(requests[0]!.messages.map(M.text).join("\n"), `"id": "${id}"`)
    }))

  // DeerFlow test_memory_updater.py::TestUpdateMemoryStructuredResponse::test_malformed_replacement_update_fails_closed:
  // a new fact whose confidence is not a number is malformed, so an answer that removes a fact beside it changes
  // nothing; DeerMem reads `"confidence": null` as such (only a missing confidence is 0.5)
  it.effect("a new fact with a null confidence is malformed: the removal beside it is not made", () =>
    Effect.gen(function*() {
      const old = { id: "fact_old", content: "User uses npm", category: "preference", confidence: 0.9 }
      const { memory, stored } = yield* setup(tempDir("antler-mem27-"), [old], [JSON.stringify({
        user: {},
        history: {},
        newFacts: [{ content: "User uses pnpm", category: "preference", confidence: null, ...USER }],
        factsToRemove: [{ id: "fact_old", scope: "user", reason: "switched to pnpm" }]
      })])
      yield* update(memory)
      assert.deepStrictEqual(stored().map((f) => f.content), ["User uses npm"])
    }))

  // DeerFlow test_memory_updater.py::TestFactDeduplicationCaseInsensitive::test_duplicate_fact_different_case_not_stored:
  // DeerMem's key is the content's casefold(), so `ß` and `SS` are one; a fact that says something else is stored
  it.effect("a new fact that says a known one in other case is not stored, with case folded as casefold()", () =>
    Effect.gen(function*() {
      const known = { id: "fact_1", content: "User lives on Hauptstraße", category: "context", confidence: 0.9 }
      const { memory, stored } = yield* setup(tempDir("antler-mem27-"), [known], [JSON.stringify({
        user: {},
        history: {},
        newFacts: [
          { content: "USER LIVES ON HAUPTSTRASSE", category: "context", confidence: 0.95, ...USER },
          { content: "User works in Straßburg", category: "context", confidence: 0.95, ...USER }
        ]
      })])
      yield* update(memory)
      assert.deepStrictEqual(stored().map((f) => f.content), ["User lives on Hauptstraße", "User works in Straßburg"])
    }))
})
