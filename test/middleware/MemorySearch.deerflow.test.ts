/**
 * Mirrors DeerFlow's test_memory_search.py, through the `memory_search` tool the model calls in tool mode, over a
 * real `memory.json` (written as a hand-edited or older file may be): a match in any case; none for a word no fact
 * holds; the most confident first; at most `limit`; `category` chosen before `limit` cuts, so a category is not
 * crowded out by more confident facts of others; a fact with a `null` confidence sorted rather than crashing the
 * search; a fact whose content is not text left out. Antler's differences (docs/deerflow.md, "`memory_search`
 * matches words"): an empty query lists the facts, and a `limit` outside 1-50 is an argument error naming it.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ConfigFile from "../../src/layers/ConfigFile.js"
import * as FileMemory from "../../src/layers/FileMemory.js"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as MemoryMW from "../../src/middleware/Memory.js"
import { Memory } from "../../src/services/Memory.js"
import { ModelService } from "../../src/services/ModelService.js"
import type { JsonObject } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import { tempDirs } from "../support/fixtures.js"
import * as H from "../support/harness.js"

const tempDir = tempDirs()

const fact = (id: string, content: unknown, category: string, confidence: unknown) => ({
  id,
  content,
  category,
  confidence,
  createdAt: "2026-07-09T00:00:00Z",
  source: "test"
})

/** The default user's memory in tool mode, its file holding `facts` as written. */
const memoryWith = (facts: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const home = tempDir("antler-memsearch-")
    const file = Path.join(home, "users", "default", "memory.json")
    Fs.mkdirSync(Path.dirname(file), { recursive: true })
    Fs.writeFileSync(file, JSON.stringify({ version: "1.0", lastUpdated: "", facts }))
    const context = yield* Layer.build(FileMemory.layer().pipe(
      Layer.provide(Layer.succeed(ModelService, ScriptedModel.make([]))),
      Layer.provide(MemoryThreadStore.layer()),
      Layer.provide(ConfigFile.layerFromObject({ memory: { mode: "tool" } }, { home })),
      Layer.provide(NodeFileSystem.layer)
    ))
    return context.unsafeMap.get(Memory.key) as Memory["Type"]
  })

/** What the model reads back from one memory_search call per set of arguments, in order. */
const searches = (memory: Memory["Type"], calls: ReadonlyArray<JsonObject>) =>
  Effect.map(
    H.run({
      input: "What do you know about me?",
      script: [{ toolCalls: calls.map((args, i) => ({ id: `s${i}`, name: "memory_search", args })) }, "Done."],
      middlewares: () => [MemoryMW.layer({ memory })]
    }),
    (o) => o.state.messages.filter((m): m is M.ToolMessage => m.type === "tool").map(M.text)
  )

const contents = (answer: string): ReadonlyArray<string> =>
  (JSON.parse(answer) as { results: ReadonlyArray<{ content: string }> }).results.map((f) => f.content)

describe("memory_search (DeerMem.search)", () => {
  it.scoped("matches in any case, the most confident first, at most limit; no match is an empty list", () =>
    Effect.gen(function*() {
      const memory = yield* memoryWith([
        fact("f1", "User prefers Python", "preference", 0.9),
        fact("f2", "User works with TypeScript", "context", 0.7),
        fact("f3", "Fact A", "context", 0.3),
        fact("f4", "Fact B", "context", 0.9),
        fact("f5", "Fact C", "context", 0.6)
      ])
      const [lower, upper, none, ranked, capped] = yield* searches(memory, [
        { query: "python" },
        { query: "PYTHON" },
        { query: "Rust" },
        { query: "Fact" },
        { query: "Fact", limit: 2 }
      ])
      assert.deepStrictEqual(contents(lower!), ["User prefers Python"])
      assert.deepStrictEqual(contents(upper!), ["User prefers Python"])
      assert.deepStrictEqual(JSON.parse(none!), { results: [], count: 0 })
      assert.deepStrictEqual(contents(ranked!), ["Fact B", "Fact C", "Fact A"])
      assert.deepStrictEqual(JSON.parse(capped!).count, 2)
      assert.deepStrictEqual(contents(capped!), ["Fact B", "Fact C"])
    }).pipe(H.withStore))

  it.scoped("category is chosen before limit cuts, so a category's fact is not crowded out", () =>
    Effect.gen(function*() {
      const memory = yield* memoryWith([
        fact("f1", "uv fast", "preference", 0.9),
        fact("f2", "uv tool", "context", 0.95),
        fact("f3", "uv python", "context", 0.9),
        fact("f4", "uv rust", "context", 0.85)
      ])
      const [top, preference, all] = yield* searches(memory, [
        { query: "uv", limit: 1 },
        { query: "uv", limit: 1, category: "preference" },
        { query: "uv" }
      ])
      assert.deepStrictEqual(contents(top!), ["uv tool"])
      assert.deepStrictEqual(contents(preference!), ["uv fast"])
      assert.strictEqual(JSON.parse(all!).count, 4)
    }).pipe(H.withStore))

  it.scoped("a null confidence is sorted, not a crash; a fact whose content is not text is left out", () =>
    Effect.gen(function*() {
      const memory = yield* memoryWith([
        fact("f1", "Fact high", "context", 0.9),
        fact("f2", "Fact with null confidence", "context", null),
        fact("f3", "Fact low", "context", 0.2),
        fact("f4", 42, "context", 0.5),
        fact("f5", null, "context", 0.5),
        fact("f6", "likes uv", "preference", 0.9)
      ])
      const [facts, uv] = yield* searches(memory, [{ query: "Fact" }, { query: "uv" }])
      assert.strictEqual(contents(facts!)[0], "Fact high")
      assert.sameMembers([...contents(facts!)], ["Fact high", "Fact with null confidence", "Fact low"])
      assert.deepStrictEqual(JSON.parse(uv!).results.map((f: { id: string }) => f.id), ["f6"])
    }).pipe(H.withStore))

  it.scoped("Antler's: an empty query lists the facts; a limit of 0 or over 50 is an argument error naming it", () =>
    Effect.gen(function*() {
      const memory = yield* memoryWith([fact("f1", "Some fact", "context", 0.7)])
      const [empty, zero, many] = yield* searches(memory, [
        { query: "   " },
        { query: "Some", limit: 0 },
        { query: "Some", limit: 51 }
      ])
      assert.deepStrictEqual(contents(empty!), ["Some fact"])
      for (const refused of [zero!, many!]) {
        assert.match(refused, /^Error: Invalid arguments for tool 'memory_search': limit: /)
      }
    }).pipe(H.withStore))
})
