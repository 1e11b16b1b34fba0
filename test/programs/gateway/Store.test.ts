/**
 * LangGraph's store through the real `@langchain/langgraph-sdk` Client (`client.store`) against a gateway with two
 * token users: items put, read, replaced (`updated_at` moves, `created_at` stays) and deleted; a missing item
 * reads as null; searches by namespace prefix (labels, not characters), filter, query, limit and offset;
 * namespaces listed by prefix, suffix and depth; bodies out of bounds refused with a 422 saying what and where;
 * one user never sees nor changes the other's items; items outlive a restart of the gateway on its SQLite file.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Support from "./support.js"

const script = () => "Nothing to do."

let gateway: Support.TestGateway
let alice: Client
let bob: Client
beforeAll(async () => {
  ;({ alice, bob, gateway } = await Support.startTwoUsers(script))
})
const stopped: Array<Support.TestGateway> = []
afterAll(async () => {
  await gateway?.stop()
  for (const other of stopped) await other.stop().catch(() => {})
})

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A request as any HTTP client sends it (the SDK checks some of what the gateway refuses before sending). */
const raw = async (method: string, path: string, body?: unknown, token = Support.ALICE) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
}

/** The error an SDK call failed with. */
const errorOf = (call: Promise<unknown>): Promise<{ status?: number; message: string }> =>
  call.then(() => assert.fail("the call succeeded"), (error) => error)

describe("LangGraph's store through the SDK", () => {
  it("puts, reads and replaces an item: the value changes, created_at stays, updated_at moves", async () => {
    await alice.store.putItem(["prefs", "ui"], "theme", { color: "dark", size: 12 })
    const first = await alice.store.getItem(["prefs", "ui"], "theme")
    assert.isNotNull(first)
    assert.deepStrictEqual(first!.namespace, ["prefs", "ui"])
    assert.strictEqual(first!.key, "theme")
    assert.deepStrictEqual(first!.value, { color: "dark", size: 12 })
    assert.strictEqual(first!.createdAt, first!.updatedAt)
    assert.strictEqual(new Date(first!.createdAt).toISOString(), first!.createdAt)

    await pause(10)
    await alice.store.putItem(["prefs", "ui"], "theme", { color: "light" })
    const second = await alice.store.getItem(["prefs", "ui"], "theme")
    assert.deepStrictEqual(second!.value, { color: "light" })
    assert.strictEqual(second!.createdAt, first!.createdAt)
    assert.isAbove(Date.parse(second!.updatedAt), Date.parse(first!.updatedAt))

    // another namespace, the same key: another item; none at all: null (as LangGraph answers)
    assert.isNull(await alice.store.getItem(["prefs"], "theme"))
    assert.isNull(await alice.store.getItem(["prefs", "ui"], "font"))
    // the query as the SDK sends it: the labels joined with "."
    const plain = await raw("GET", "/store/items?namespace=prefs.ui&key=theme")
    assert.strictEqual(plain.status, 200)
    assert.deepStrictEqual(plain.body.value, { color: "light" })
    assert.strictEqual(plain.body.created_at, first!.createdAt)
    // also under the other prefixes of the LangGraph API
    assert.strictEqual((await raw("GET", "/api/langgraph/store/items?namespace=prefs.ui&key=theme")).status, 200)
  })

  it("deletes an item (deleting one that is not there is no error)", async () => {
    await alice.store.putItem(["trash"], "doomed", { n: 1 })
    await alice.store.putItem(["trash"], "kept", { n: 2 })
    await alice.store.deleteItem(["trash"], "doomed")
    assert.isNull(await alice.store.getItem(["trash"], "doomed"))
    assert.deepStrictEqual((await alice.store.getItem(["trash"], "kept"))!.value, { n: 2 })
    await alice.store.deleteItem(["trash"], "doomed")
    const { items } = await alice.store.searchItems(["trash"])
    assert.deepStrictEqual(items.map((i) => i.key), ["kept"])
  })

  it("searches by namespace prefix, filter, query, limit and offset, the most recently updated first", async () => {
    const put = async (namespace: Array<string>, key: string, value: Record<string, unknown>) => {
      await alice.store.putItem(namespace, key, value)
      await pause(3)
    }
    await put(["notes", "work"], "n1", { kind: "todo", text: "Write the REPORT", meta: { a: 1, b: [1, 2] } })
    await put(["notes", "home"], "n2", { kind: "idea", text: "Paint the fence" })
    await put(["notes", "work", "old"], "n3", { kind: "todo", text: "file taxes" })
    await put(["notes"], "n4", { kind: "todo", text: "call mum" })
    // a namespace whose text starts with the prefix's, not its labels
    await put(["notesx"], "n5", { kind: "todo", text: "not a note" })

    const keys = async (prefix: Array<string>, options?: Parameters<Client["store"]["searchItems"]>[1]) =>
      (await alice.store.searchItems(prefix, options)).items.map((i) => i.key)

    assert.deepStrictEqual(await keys(["notes"]), ["n4", "n3", "n2", "n1"])
    assert.deepStrictEqual(await keys(["notes", "work"]), ["n3", "n1"])
    assert.deepStrictEqual(await keys(["notes"], { filter: { kind: "todo" } }), ["n4", "n3", "n1"])
    // values compared whole, objects whatever the order of their keys
    assert.deepStrictEqual(await keys(["notes"], { filter: { meta: { b: [1, 2], a: 1 } } }), ["n1"])
    assert.deepStrictEqual(await keys(["notes"], { filter: { meta: { a: 1 } } }), [])
    assert.deepStrictEqual(await keys(["notes"], { filter: { kind: "todo", text: "file taxes" } }), ["n3"])
    // the query: a case-insensitive substring of the value's JSON
    assert.deepStrictEqual(await keys(["notes"], { query: "report" }), ["n1"])
    assert.deepStrictEqual(await keys(["notes"], { query: "TAXES", filter: { kind: "todo" } }), ["n3"])
    // pages
    assert.deepStrictEqual(await keys(["notes"], { limit: 2 }), ["n4", "n3"])
    assert.deepStrictEqual(await keys(["notes"], { limit: 2, offset: 2 }), ["n2", "n1"])
    assert.deepStrictEqual(await keys(["notes"], { filter: { kind: "todo" }, limit: 1, offset: 1 }), ["n3"])
    assert.deepStrictEqual(await keys(["notes"], { offset: 10 }), [])

    const found = (await alice.store.searchItems(["notes", "home"])).items[0]!
    assert.deepStrictEqual(found.namespace, ["notes", "home"])
    assert.deepStrictEqual(found.value, { kind: "idea", text: "Paint the fence" })
    assert.isString(found.createdAt)
    assert.isString(found.updatedAt)

    // replacing an item makes it the most recent
    await alice.store.putItem(["notes", "work"], "n1", { kind: "done", text: "Write the report" })
    assert.deepStrictEqual(await keys(["notes"], { limit: 1 }), ["n1"])
  })

  it("lists namespaces by prefix (with * for any label), suffix and depth, in order, paged", async () => {
    for (const namespace of [["lib", "a", "x"], ["lib", "a", "y"], ["lib", "b"], ["lab", "a", "x"]]) {
      await alice.store.putItem(namespace, "k", { v: 1 })
    }
    // two items in one namespace: it is listed once
    await alice.store.putItem(["lib", "b"], "k2", { v: 2 })
    const list = async (options: Parameters<Client["store"]["listNamespaces"]>[0]) =>
      (await alice.store.listNamespaces(options)).namespaces

    assert.deepStrictEqual(await list({ prefix: ["lib"] }), [["lib", "a", "x"], ["lib", "a", "y"], ["lib", "b"]])
    assert.deepStrictEqual(await list({ prefix: ["*", "a"] }), [
      ["lab", "a", "x"],
      ["lib", "a", "x"],
      ["lib", "a", "y"]
    ])
    assert.deepStrictEqual(await list({ suffix: ["x"] }), [["lab", "a", "x"], ["lib", "a", "x"]])
    assert.deepStrictEqual(await list({ prefix: ["lib"], suffix: ["a", "*"] }), [["lib", "a", "x"], ["lib", "a", "y"]])
    assert.deepStrictEqual(await list({ prefix: ["lib"], maxDepth: 2 }), [["lib", "a"], ["lib", "b"]])
    assert.deepStrictEqual(await list({ prefix: ["l*"] }), [])
    assert.deepStrictEqual(await list({ prefix: ["lib"], limit: 1, offset: 1 }), [["lib", "a", "y"]])
    const all = await list({})
    assert.includeDeepMembers(all, [["lab", "a", "x"], ["lib", "b"], ["prefs", "ui"]])
    const sorted = [...all].sort((a, b) => (a.join("\u0000") < b.join("\u0000") ? -1 : 1))
    assert.deepStrictEqual(all, sorted)
  })

  it("refuses namespaces, keys, values and filters out of bounds with a 422 saying what and where", async () => {
    const dotted = await raw("PUT", "/store/items", { namespace: ["a", "b.c"], key: "k", value: {} })
    assert.strictEqual(dotted.status, 422)
    assert.include(dotted.body.detail, "namespace.1")
    assert.include(dotted.body.detail, "may not contain \".\"")

    const empty = await raw("PUT", "/store/items", { namespace: [], key: "k", value: {} })
    assert.strictEqual(empty.status, 422)
    assert.include(empty.body.detail, "at least one label")

    const labels17 = Array.from({ length: 17 }, () => "n")
    const deep = await raw("PUT", "/store/items", { namespace: labels17, key: "k", value: {} })
    assert.strictEqual(deep.status, 422)
    assert.include(deep.body.detail, "at most 16 labels")

    const longLabel = await raw("PUT", "/store/items", { namespace: ["n".repeat(257)], key: "k", value: {} })
    assert.include(longLabel.body.detail, "at most 256 characters")

    const longKey = await raw("PUT", "/store/items", { namespace: ["n"], key: "k".repeat(1025), value: {} })
    assert.strictEqual(longKey.status, 422)
    assert.include(longKey.body.detail, "key: a key has at most 1024 characters")

    const notObject = await raw("PUT", "/store/items", { namespace: ["n"], key: "k", value: [1, 2] })
    assert.strictEqual(notObject.status, 422)
    assert.include(notObject.body.detail, "value")

    const reserved = await raw("PUT", "/store/items", { namespace: ["langgraph", "x"], key: "k", value: {} })
    assert.strictEqual(reserved.status, 422)
    assert.include(reserved.body.detail, "langgraph")

    // through the SDK: a value over 1 MiB of JSON
    const big = await errorOf(alice.store.putItem(["big"], "k", { blob: "x".repeat(1024 * 1024) }))
    assert.strictEqual(big.status, 422)
    assert.include(big.message, "value: 1048587 bytes of JSON, more than the 1048576 (1 MiB)")
    assert.isNull(await alice.store.getItem(["big"], "k"))

    const operator = await errorOf(alice.store.searchItems(["notes"], { filter: { n: { $gt: 1 } } }))
    assert.strictEqual(operator.status, 422)
    assert.include(operator.message, "filter.n")
    assert.include(operator.message, "not supported")

    const badLimit = await errorOf(alice.store.searchItems(["notes"], { limit: 5000 }))
    assert.strictEqual(badLimit.status, 422)
    assert.include(badLimit.message, "limit")

    const badPrefix = await raw("POST", "/store/namespaces", { prefix: ["a.b"] })
    assert.strictEqual(badPrefix.status, 422)
    assert.include(badPrefix.body.detail, "prefix.0")

    const badQuery = await raw("GET", "/store/items?namespace=a..b&key=k")
    assert.strictEqual(badQuery.status, 422)
    assert.include(badQuery.body.detail, "namespace.1: a namespace label may not be empty")

    const noKey = await raw("GET", "/store/items?namespace=a")
    assert.strictEqual(noKey.status, 422)
    assert.include(noKey.body.detail, "key")

    const badDelete = await raw("DELETE", "/store/items", { namespace: ["a"] })
    assert.strictEqual(badDelete.status, 422)
    assert.include(badDelete.body.detail, "key")
  })

  it("keeps each user's items apart: the other neither reads, finds, lists, changes nor deletes them", async () => {
    await alice.store.putItem(["shared", "name"], "secret", { owner: "alice" })

    assert.isNull(await bob.store.getItem(["shared", "name"], "secret"))
    assert.deepStrictEqual((await bob.store.searchItems(["shared"])).items, [])
    assert.deepStrictEqual((await bob.store.searchItems([], { query: "alice" })).items, [])
    assert.deepStrictEqual((await bob.store.listNamespaces()).namespaces, [])

    // bob's delete leaves alice's item; bob's put of the same address is his own item
    await bob.store.deleteItem(["shared", "name"], "secret")
    await bob.store.putItem(["shared", "name"], "secret", { owner: "bob" })
    assert.deepStrictEqual((await alice.store.getItem(["shared", "name"], "secret"))!.value, { owner: "alice" })
    assert.deepStrictEqual((await bob.store.getItem(["shared", "name"], "secret"))!.value, { owner: "bob" })
    assert.deepStrictEqual((await bob.store.listNamespaces()).namespaces, [["shared", "name"]])
    assert.deepStrictEqual(
      (await bob.store.searchItems(["shared"])).items.map((i) => i.value),
      [{ owner: "bob" }]
    )

    // and alice's delete, bob's
    await alice.store.deleteItem(["shared", "name"], "secret")
    assert.isNull(await alice.store.getItem(["shared", "name"], "secret"))
    assert.deepStrictEqual((await bob.store.getItem(["shared", "name"], "secret"))!.value, { owner: "bob" })

    // no token: refused, as every endpoint of a gateway with tokens
    const anonymous = await fetch(`${gateway.url}/store/items?namespace=shared.name&key=secret`)
    assert.strictEqual(anonymous.status, 401)
  })
})

describe("LangGraph's store across a restart", () => {
  it("keeps the items in the SQLite file under the data directory", async () => {
    const home = Support.tempDir("antler-store-")
    const first = await Support.start({ script, home })
    stopped.push(first)
    const before = new Client({ apiUrl: first.url, apiKey: null })
    await before.store.putItem(["kept", "here"], "item", { survives: true })
    const written = (await before.store.getItem(["kept", "here"], "item"))!
    await first.stop()

    const second = await Support.start({ script, home })
    stopped.push(second)
    const after = new Client({ apiUrl: second.url, apiKey: null })
    const read = await after.store.getItem(["kept", "here"], "item")
    assert.deepStrictEqual(read, written)
    assert.deepStrictEqual((await after.store.listNamespaces()).namespaces, [["kept", "here"]])
    assert.deepStrictEqual((await after.store.searchItems(["kept"])).items.map((i) => i.key), ["item"])
  })
})
