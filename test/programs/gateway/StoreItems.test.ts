/**
 * The store of LangGraph's items (`StoreItems`) answers alike in memory, in a SQLite file and in PostgreSQL (skipped,
 * saying why, without one): items put, replaced and deleted per user; searches by label prefix (a namespace whose
 * text merely starts with the prefix's is not under it, also with labels of several UTF-16 units), filter, query and
 * pages; namespaces listed. On the durable ones, items are there when the store is opened again.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import * as MemoryStoreItems from "../../../src/programs/gateway/store/MemoryStoreItems.js"
import * as PgStoreItems from "../../../src/programs/gateway/store/PgStoreItems.js"
import * as SqliteStoreItems from "../../../src/programs/gateway/store/SqliteStoreItems.js"
import type * as StoreItems from "../../../src/programs/gateway/store/StoreItems.js"
import * as Postgres from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[store items on PostgreSQL] skipped: ${pg.skip}`)

const scopes: Array<Scope.CloseableScope> = []
afterAll(async () => {
  for (const scope of scopes) await Effect.runPromise(Scope.close(scope, Exit.void))
  if ("stop" in pg) await pg.stop()
})

/** Opens a store that stays open until `close` (or the end of the file). */
const open = async (make: Effect.Effect<StoreItems.Service, unknown, Scope.Scope>) => {
  const scope = Effect.runSync(Scope.make())
  scopes.push(scope)
  const store = await Effect.runPromise(Scope.extend(make, scope))
  return { store, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromise(effect)

const search = (overrides: Partial<StoreItems.Search>): StoreItems.Search => ({
  prefix: [],
  filter: {},
  query: undefined,
  limit: 10,
  offset: 0,
  ...overrides
})

const listing = (overrides: Partial<StoreItems.NamespaceQuery>): StoreItems.NamespaceQuery => ({
  prefix: undefined,
  suffix: undefined,
  maxDepth: undefined,
  limit: 100,
  offset: 0,
  ...overrides
})

/** A time `n` seconds into a fixed day (distinct `updated_at`s, in order). */
const at = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString()

const behaves = (open: () => Promise<{ store: StoreItems.Service }>) => {
  it("puts, replaces, reads and deletes each user's items", async () => {
    const { store } = await open()
    await run(store.put("alice", ["a", "b"], "k", { v: 1 }, at(1)))
    await run(store.put("alice", ["a", "b"], "k", { v: 2 }, at(2)))
    await run(store.put("bob", ["a", "b"], "k", { v: 9 }, at(3)))
    const item = Option.getOrThrow(await run(store.get("alice", ["a", "b"], "k")))
    assert.deepStrictEqual(item, {
      namespace: ["a", "b"],
      key: "k",
      value: { v: 2 },
      created_at: at(1),
      updated_at: at(2)
    })
    assert.isTrue(Option.isNone(await run(store.get("carol", ["a", "b"], "k"))))
    assert.isTrue(Option.isNone(await run(store.get("alice", ["a"], "k"))))
    assert.isFalse(await run(store.remove("carol", ["a", "b"], "k")))
    assert.isTrue(await run(store.remove("alice", ["a", "b"], "k")))
    assert.isFalse(await run(store.remove("alice", ["a", "b"], "k")))
    assert.isTrue(Option.isNone(await run(store.get("alice", ["a", "b"], "k"))))
    assert.deepStrictEqual(Option.getOrThrow(await run(store.get("bob", ["a", "b"], "k"))).value, { v: 9 })
  })

  it("searches by labels, filter, query and pages, the most recently updated first", async () => {
    const { store } = await open()
    await run(store.put("u", ["docs", "é😀", "deep"], "0", { kind: "z" }, at(0)))
    await run(store.put("u", ["docs", "é😀"], "1", { kind: "x", text: "Alpha" }, at(1)))
    await run(store.put("u", ["docs"], "2", { kind: "y", nested: { b: 2, a: 1 } }, at(2)))
    await run(store.put("u", ["docsx"], "3", { kind: "x" }, at(3)))
    await run(store.put("u", ["docs", "é😀x"], "4", { kind: "x", text: "beta" }, at(4)))
    await run(store.put("other", ["docs"], "5", { kind: "x" }, at(5)))
    const keys = async (s: Partial<StoreItems.Search>) => (await run(store.search("u", search(s)))).map((i) => i.key)
    assert.deepStrictEqual(await keys({ prefix: ["docs"] }), ["4", "2", "1", "0"])
    assert.deepStrictEqual(await keys({ prefix: ["docs", "é😀"] }), ["1", "0"])
    assert.deepStrictEqual(await keys({}), ["4", "3", "2", "1", "0"])
    assert.deepStrictEqual(await keys({ prefix: ["docs"], filter: { kind: "x" } }), ["4", "1"])
    assert.deepStrictEqual(await keys({ filter: { nested: { a: 1, b: 2 } } }), ["2"])
    assert.deepStrictEqual(await keys({ filter: { missing: null } }), [])
    assert.deepStrictEqual(await keys({ query: "ALPHA" }), ["1"])
    assert.deepStrictEqual(await keys({ limit: 2, offset: 1 }), ["3", "2"])
    assert.deepStrictEqual(await keys({ filter: { kind: "x" }, limit: 1, offset: 1 }), ["3"])
  })

  it("filters past many pages of rows, in order, also among items updated at the same time", async () => {
    const { store } = await open()
    const count = 450
    const key = (i: number) => `k${String(i).padStart(3, "0")}`
    // three items at each time: the rows a page ends with are often tied with the next page's
    for (let i = 0; i < count; i++) {
      await run(store.put("u", ["bulk"], key(i), { kind: i % 2 === 0 ? "even" : "odd" }, at(Math.floor(i / 3))))
    }
    const ordered = Array.from({ length: count }, (_, i) => i)
      .sort((a, b) => Math.floor(b / 3) - Math.floor(a / 3) || a - b)
    const even = ordered.filter((i) => i % 2 === 0).map(key)
    const keys = async (s: Partial<StoreItems.Search>) => (await run(store.search("u", search(s)))).map((i) => i.key)
    assert.deepStrictEqual(await keys({ filter: { kind: "even" }, limit: 100, offset: 120 }), even.slice(120, 220))
    assert.deepStrictEqual(await keys({ query: "EVEN", limit: 1000 }), even)
    assert.deepStrictEqual(await keys({ limit: 5, offset: 300 }), ordered.slice(300, 305).map(key))
  })

  it("counts what each user's items weigh (value's JSON, namespace, key), and the item a put replaces", async () => {
    const { store } = await open()
    const small = { text: "é".repeat(10) }
    const large = { text: "x".repeat(500) }
    await run(store.put("alice", ["a"], "one", small, at(1)))
    await run(store.put("alice", ["a", "b"], "two", large, at(2)))
    await run(store.put("bob", ["a"], "one", large, at(3)))
    // (the address is kept with the item: "a" and "one", "a.b" and "two")
    const size = (value: object, address: string) => Buffer.byteLength(JSON.stringify(value)) + address.length
    assert.deepStrictEqual(await run(store.usage("alice", ["a"], "one")), {
      total: size(small, "aone") + size(large, "a.btwo"),
      item: size(small, "aone")
    })
    assert.deepStrictEqual(await run(store.usage("alice", ["a"], "new")), {
      total: size(small, "aone") + size(large, "a.btwo"),
      item: 0
    })
    // a replaced value counts once, at its new size; a deleted item not at all; another user's never
    await run(store.put("alice", ["a"], "one", large, at(4)))
    await run(store.remove("alice", ["a", "b"], "two"))
    assert.deepStrictEqual(await run(store.usage("alice", ["a"], "one")), {
      total: size(large, "aone"),
      item: size(large, "aone")
    })
    assert.deepStrictEqual(await run(store.usage("carol", ["a"], "one")), { total: 0, item: 0 })
  })

  it("lists namespaces by prefix, suffix and depth, each once, in order", async () => {
    const { store } = await open()
    for (const [i, namespace] of [["b", "x"], ["a", "x", "1"], ["a", "y"], ["a", "x", "2"]].entries()) {
      await run(store.put("u", namespace, "k", {}, at(i)))
      await run(store.put("u", namespace, "k2", {}, at(i)))
    }
    await run(store.put("v", ["c"], "k", {}, at(9)))
    const list = (q: Partial<StoreItems.NamespaceQuery>) => run(store.namespaces("u", listing(q)))
    assert.deepStrictEqual(await list({}), [["a", "x", "1"], ["a", "x", "2"], ["a", "y"], ["b", "x"]])
    assert.deepStrictEqual(await list({ prefix: ["a", "x"] }), [["a", "x", "1"], ["a", "x", "2"]])
    assert.deepStrictEqual(await list({ suffix: ["x"] }), [["b", "x"]])
    assert.deepStrictEqual(await list({ prefix: ["*", "x"], maxDepth: 2 }), [["a", "x"], ["b", "x"]])
    assert.deepStrictEqual(await list({ limit: 2, offset: 1 }), [["a", "x", "2"], ["a", "y"]])
  })
}

describe("StoreItems in memory", () => {
  behaves(() => open(MemoryStoreItems.make))
})

describe("StoreItems in a SQLite file", () => {
  behaves(() => open(SqliteStoreItems.make(Path.join(Support.tempDir("antler-items-"), "antler.db"))))

  it("keeps its items when opened again", async () => {
    const file = Path.join(Support.tempDir("antler-items-"), "antler.db")
    const first = await open(SqliteStoreItems.make(file))
    await run(first.store.put("u", ["kept"], "k", { v: 1 }, at(1)))
    await first.close()
    const second = await open(SqliteStoreItems.make(file))
    assert.deepStrictEqual(Option.getOrThrow(await run(second.store.get("u", ["kept"], "k"))).value, { v: 1 })
  })
})

describe.skipIf("skip" in pg)("StoreItems in PostgreSQL", () => {
  behaves(async () => open(PgStoreItems.make(await (pg as Postgres.Postgres).createDatabase())))

  it("keeps its items when opened again", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const first = await open(PgStoreItems.make(url))
    await run(first.store.put("u", ["kept"], "k", { v: 1 }, at(1)))
    await first.close()
    const second = await open(PgStoreItems.make(url))
    assert.deepStrictEqual(Option.getOrThrow(await run(second.store.get("u", ["kept"], "k"))).value, { v: 1 })
  })
})
