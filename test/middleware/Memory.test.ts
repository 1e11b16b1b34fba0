/**
 * The Memory middleware: a run's conversation goes to the app's queue when the run ends (not before, and not
 * in tool mode); in tool mode the model searches and writes facts with the memory tools.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as MemoryMW from "../../src/middleware/Memory.js"
import { Memory } from "../../src/services/Memory.js"
import { ModelService } from "../../src/services/ModelService.js"
import * as Tool from "../../src/services/Tool.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"
import { recording } from "../support/memoryRecording.js"

const tempDir = tempDirs()

const fileMemory = (
  mode: "middleware" | "tool",
  backend_config: Record<string, unknown> = {},
  home = tempDir("antler-memmw-")
) =>
  Effect.map(
    Layer.build(FileMemory.layer().pipe(
      Layer.provide(Layer.succeed(ModelService, ScriptedModel.make([]))),
      Layer.provide(MemoryThreadStore.layer()),
      Layer.provide(
        ConfigFile.layerFromObject({ memory: { mode, backend_config } }, { home })
      ),
      Layer.provide(NodeFileSystem.layer)
    )),
    (context) => context.unsafeMap.get(Memory.key) as Memory["Type"]
  )

describe("Memory middleware", () => {
  it.effect("when the run ends, its whole conversation is queued for the thread, user and agent", () =>
    Effect.gen(function*() {
      const memory = recording()
      const o = yield* H.run({
        threadId: "mem-1",
        input: "I live in Lyon.",
        script: ["Noted."],
        options: { modelName: "main" },
        middlewares: () => [MemoryMW.layer({ memory: memory.service, agentName: "writer" })]
      })
      assert.lengthOf(memory.queued, 1)
      const queued = memory.queued[0]!
      assert.deepInclude(queued, { threadId: "mem-1", userId: "default", agentName: "writer", modelName: "main" })
      assert.deepStrictEqual(queued.messages.map(M.text), o.state.messages.map(M.text))
    }).pipe(H.withStore))

  it.scoped("tool mode: nothing is queued; memory_add, memory_search, memory_update and memory_delete work", () =>
    Effect.gen(function*() {
      const memory = yield* fileMemory("tool")
      let factId = ""
      const o = yield* H.run({
        threadId: "mem-2",
        input: "Remember that I prefer tea.",
        script: [
          {
            toolCalls: [{
              name: "memory_add",
              args: { content: "Prefers tea", category: "preference", confidence: 0.9 }
            }]
          },
          { toolCalls: [{ name: "memory_search", args: { query: "tea" } }] },
          (request) => {
            const found = JSON.parse(M.text(request.messages.at(-1)!)) as { results: Array<{ id: string }> }
            factId = found.results[0]!.id
            return { toolCalls: [{ name: "memory_update", args: { fact_id: factId, content: "Prefers green tea" } }] }
          },
          () => ({ toolCalls: [{ name: "memory_delete", args: { fact_id: "nope" } }] }),
          () => ({ toolCalls: [{ name: "memory_update", args: { fact_id: "nope", content: "x" } }] }),
          "Done."
        ],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      assert.strictEqual(yield* memory.pending, 0)
      // DeerFlow test_memory_tools.py: each tool's JSON (TestMemorySearchTool::test_returns_json_with_results,
      // TestMemoryAddTool::test_adds_fact_and_returns_json, TestMemoryUpdateTool::test_updates_fact_and_returns_json,
      // and both ::test_invalid_fact_id_returns_error with the tools' "Fact not found: {id}")
      const results = o.state.messages.filter((m) => m.type === "tool").map((m) => JSON.parse(M.text(m)))
      assert.deepStrictEqual(results[0], { fact_id: factId, status: "added" })
      assert.strictEqual(results[1].count, 1)
      const { createdAt, ...found } = results[1].results[0]
      assert.deepStrictEqual(found, {
        id: factId,
        content: "Prefers tea",
        category: "preference",
        confidence: 0.9,
        source: "mem-2"
      })
      assert.match(createdAt, /^\d{4}-\d\d-\d\dT/)
      assert.deepStrictEqual(results.slice(2), [
        { fact_id: factId, status: "updated" },
        { error: "Fact not found: nope" },
        { error: "Fact not found: nope" }
      ])
      const doc = yield* memory.load({ userId: "default" })
      assert.deepStrictEqual(doc.facts.map((f) => [f.id, f.content, f.source]), [
        [factId, "Prefers green tea", "mem-2"]
      ])
      // in tool mode the injected block has the summaries only, not the facts
      assert.strictEqual(yield* memory.context({ userId: "default" }), "")
    }).pipe(H.withStore))

  // DeerFlow test_memory_tools.py::TestModeGating::test_lead_agent_deduplicates_memory_tools_after_appending: one
  // memory_search; in Antler the memory tool's (docs/deerflow.md: "The memory tools keep their names")
  it.scoped("tool mode: another tool named memory_search is replaced by the memory tool", () =>
    Effect.gen(function*() {
      const memory = yield* fileMemory("tool")
      const impostor = Tool.make({
        name: "memory_search",
        description: "Someone else's search.",
        parameters: Schema.Struct({ query: Schema.String }),
        handler: () => Effect.succeed("impostor")
      })
      let offered: Array<string> = []
      const o = yield* H.run({
        threadId: "mem-6",
        input: "What do you know about me?",
        tools: [impostor],
        script: [
          (request) => {
            offered = request.tools.map((t) => t.name)
            return { toolCalls: [{ name: "memory_search", args: { query: "tea" } }] }
          },
          "Nothing yet."
        ],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      assert.strictEqual(offered.filter((name) => name === "memory_search").length, 1)
      const result = o.state.messages.find((m) => m.type === "tool")!
      assert.deepStrictEqual(JSON.parse(M.text(result)), { results: [], count: 0 })
    }).pipe(H.withStore))

  // DeerFlow test_memory_tools.py::TestMemorySearchTool::test_runtime_error_returns_error_json: an error JSON, which
  // in Antler says what failed but not where the file is
  it.scoped("tool mode: a memory that cannot be read is an error the model is told, without the file's path", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-memmw-")
      Fs.mkdirSync(Path.join(home, "users", "default"), { recursive: true })
      Fs.writeFileSync(Path.join(home, "users", "default", "memory.json"), "{ not json")
      const memory = yield* fileMemory("tool", {}, home)
      const o = yield* H.run({
        threadId: "mem-7",
        input: "What do you know about me?",
        script: [
          { toolCalls: [{ name: "memory_search", args: { query: "tea" } }] },
          { toolCalls: [{ name: "memory_add", args: { content: "Prefers tea" } }] },
          "Nothing."
        ],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      const results = o.state.messages.filter((m) => m.type === "tool").map((m) => JSON.parse(M.text(m)))
      assert.deepStrictEqual(results, [
        { error: "The stored memory is not a memory document." },
        { error: "The stored memory is not a memory document." }
      ])
    }).pipe(H.withStore))

  // DeerFlow test_memory_tools.py::TestMemoryDeleteTool::test_deletes_fact_and_returns_json
  it.scoped("tool mode: memory_delete answers the fact's id and its status, and the fact is gone", () =>
    Effect.gen(function*() {
      const memory = yield* fileMemory("tool")
      const o = yield* H.run({
        threadId: "mem-5",
        input: "Remember that I prefer tea.",
        script: [
          { toolCalls: [{ name: "memory_add", args: { content: "Prefers tea" } }] },
          (request) => {
            const factId = JSON.parse(M.text(request.messages.at(-1)!)).fact_id as string
            return { toolCalls: [{ name: "memory_delete", args: { fact_id: factId } }] }
          },
          "Done."
        ],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      const results = o.state.messages.filter((m) => m.type === "tool").map((m) => JSON.parse(M.text(m)))
      assert.deepStrictEqual(results[1], { fact_id: results[0].fact_id, status: "deleted" })
      assert.deepStrictEqual((yield* memory.load({ userId: "default" })).facts, [])
    }).pipe(H.withStore))

  // DeerFlow test_memory_updater.py::test_create_memory_fact_rejects_empty_content / _rejects_duplicate_content and
  // memory_update's blank content (`update_memory_fact` raises on it): refused, and nothing is stored
  it.scoped("tool mode: a blank fact, or one already known in other case and spacing, is refused", () =>
    Effect.gen(function*() {
      const memory = yield* fileMemory("tool")
      const o = yield* H.run({
        threadId: "mem-3",
        input: "Remember that I prefer tea.",
        script: [
          { toolCalls: [{ name: "memory_add", args: { content: "User prefers dark mode" } }] },
          { toolCalls: [{ name: "memory_add", args: { content: "  user prefers DARK   mode " } }] },
          { toolCalls: [{ name: "memory_add", args: { content: "   " } }] },
          { toolCalls: [{ name: "memory_add", args: { content: "" } }] },
          (request) => {
            const id = JSON.parse(M.text(request.messages.at(-7)!)).fact_id as string
            return {
              toolCalls: [
                { id: "u1", name: "memory_update", args: { fact_id: id, content: " \n " } },
                { id: "u2", name: "memory_update", args: { fact_id: id, content: "" } }
              ]
            }
          },
          "Done."
        ],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      // DeerFlow test_memory_tools.py::TestMemoryAddTool::test_rejects_existing_duplicate_content and
      // ::test_empty_content_returns_error (an empty string too is "empty content", not an argument error)
      const results = o.state.messages.filter((m) => m.type === "tool").map((m) => JSON.parse(M.text(m)))
      assert.deepStrictEqual(results.slice(1), [
        { error: "Duplicate fact" },
        { error: "empty content" },
        { error: "empty content" },
        { error: "empty content" },
        { error: "empty content" }
      ])
      const doc = yield* memory.load({ userId: "default" })
      assert.deepStrictEqual(doc.facts.map((f) => f.content), ["User prefers dark mode"])
    }).pipe(H.withStore))

  // DeerFlow's create_memory_fact / update_memory_fact (`category.strip() or "context"`): a padded category is
  // stored trimmed, a blank one as `context`, so a padded `correction` is a correction
  it.scoped("tool mode: a fact's category is stored trimmed, and a blank one as context", () =>
    Effect.gen(function*() {
      const memory = yield* fileMemory("tool")
      const o = yield* H.run({
        threadId: "mem-cat",
        input: "Remember these.",
        script: [
          { toolCalls: [{ name: "memory_add", args: { content: "Use make dev", category: " correction " } }] },
          { toolCalls: [{ name: "memory_add", args: { content: "Likes tea", category: "  " } }] },
          (request) => {
            const id = JSON.parse(M.text(request.messages.at(-1)!)).fact_id as string
            return { toolCalls: [{ name: "memory_update", args: { fact_id: id, category: " preference\n" } }] }
          },
          "Done."
        ],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      assert.strictEqual(o.state.messages.filter((m) => m.type === "tool").length, 3)
      const doc = yield* memory.load({ userId: "default" })
      assert.deepStrictEqual(doc.facts.map((f) => [f.content, f.category]), [
        ["Use make dev", "correction"],
        ["Likes tea", "preference"]
      ])
    }).pipe(H.withStore))

  // DeerFlow test_memory_updater.py::test_create_memory_fact_trims_to_max_facts_by_confidence and memory_add's
  // capacity error: max_facts keeps the most confident facts; a new fact below all of them is not stored, and the
  // model is told so instead of being given its id
  it.scoped("tool mode: a fact max_facts does not keep is reported as not stored", () =>
    Effect.gen(function*() {
      const memory = yield* fileMemory("tool", { max_facts: 2 })
      const add = (content: string, confidence: number) => ({
        toolCalls: [{ name: "memory_add", args: { content, confidence } }]
      })
      const o = yield* H.run({
        threadId: "mem-4",
        input: "Remember these.",
        script: [add("High confidence", 0.95), add("Low confidence", 0.2), add("Medium confidence", 0.8),
          add("Lowest confidence", 0.1), "Done."],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      const results = o.state.messages.filter((m) => m.type === "tool").map((m) => JSON.parse(M.text(m)))
      assert.deepStrictEqual(results.map((r) => r.status ?? r.error), [
        "added",
        "added",
        "added",
        "Fact was not stored because the configured memory.max_facts capacity policy evicted it"
      ])
      const doc = yield* memory.load({ userId: "default" })
      assert.deepStrictEqual(doc.facts.map((f) => f.content), ["High confidence", "Medium confidence"])
    }).pipe(H.withStore))

  // DeerFlow test_memory_eviction.py::test_hybrid_policy_reserves_bounded_correction_capacity: under hybrid-v1 a
  // correction keeps its room past max_facts and a fresh fact outscores a stale one, where the confidence policy
  // keeps the most confident
  it.scoped("tool mode, fact_eviction_policy hybrid-v1: a correction keeps its room past max_facts", () =>
    Effect.gen(function*() {
      const seeded = () => {
        const home = tempDir("antler-memmw-")
        Fs.mkdirSync(Path.join(home, "users", "default"), { recursive: true })
        Fs.writeFileSync(Path.join(home, "users", "default", "memory.json"), JSON.stringify({
          facts: [
            { id: "pref", content: "Prefers Python", category: "preference", confidence: 0.9, createdAt: "" },
            { id: "fix", content: "Do not run npm start", category: "correction", confidence: 0.3, createdAt: "" }
          ]
        }))
        return home
      }
      const added = (policy: string) =>
        Effect.gen(function*() {
          const memory = yield* fileMemory("tool", { max_facts: 2, fact_eviction_policy: policy }, seeded())
          const o = yield* H.run({
            threadId: `mem-7-${policy}`,
            input: "Remember that I use uv.",
            script: [{ toolCalls: [{ name: "memory_add", args: { content: "Uses uv", confidence: 0.8 } }] }, "Done."],
            middlewares: () => [MemoryMW.layer({ memory })]
          })
          const result = JSON.parse(M.text(o.state.messages.find((m) => m.type === "tool")!))
          const doc = yield* memory.load({ userId: "default" })
          return { said: result.status ?? result.error, kept: doc.facts.map((f) => f.content) }
        })
      // the correction keeps its room, and the new fact (fresh) outscores the old one (no time: never confirmed)
      assert.deepStrictEqual(yield* added("hybrid-v1"), { said: "added", kept: ["Do not run npm start", "Uses uv"] })
      assert.deepStrictEqual(yield* added("confidence"), { said: "added", kept: ["Prefers Python", "Uses uv"] })
    }).pipe(H.withStore))

  // DeerFlow test_deermem_self_contained.py::test_query_search_records_access_but_default_injection_does_not: the
  // facts memory_search returns count as recalled (DeerMem's access heat, read by hybrid-v1); an empty search none
  it.scoped("tool mode, hybrid-v1: the facts memory_search returns are recorded as recalled, for the user", () =>
    Effect.gen(function*() {
      const home = tempDir("antler-memmw-")
      const memory = yield* fileMemory("tool", { fact_eviction_policy: "hybrid-v1" }, home)
      yield* H.run({
        threadId: "mem-8",
        input: "What do I drink?",
        script: [
          { toolCalls: [{ name: "memory_add", args: { content: "Prefers tea", confidence: 0.9 } }] },
          { toolCalls: [{ name: "memory_search", args: { query: "tea" } }] },
          { toolCalls: [{ name: "memory_search", args: { query: "coffee" } }] },
          { toolCalls: [{ name: "memory_search", args: { query: "tea" } }] },
          "Tea."
        ],
        middlewares: () => [MemoryMW.layer({ memory })]
      })
      const [id] = (yield* memory.load({ userId: "default" })).facts.map((f) => f.id)
      const file = Path.join(home, "users", "default", "agents", "__default__", ".metadata", "fact-usage.json")
      const usage = JSON.parse(Fs.readFileSync(file, "utf8"))
      assert.deepStrictEqual(Object.keys(usage), [id])
      assert.strictEqual(usage[id!].accessCount, 2)
    }).pipe(H.withStore))
})
