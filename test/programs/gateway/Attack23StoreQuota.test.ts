/**
 * Attack round 23 on `gateway.quotas.max_store_bytes_per_user`, as a user who wants to fill the database: an item's
 * namespace (16 labels of 256 characters) and key (1024 characters) are kept with it, but only its value's JSON was
 * counted, so items of an empty value (`{}`, 2 bytes) each kept some 5 KB while the quota saw 2 bytes: a 20,000
 * byte quota held 10,000 such items, 50 MB. An item now weighs its namespace and key too. Through real HTTP
 * requests to a test gateway (SQLite store).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const LIMIT = 20_000
let gateway: TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script: () => "Hello.",
    config: { gateway: { ...Support.twoUsers, quotas: { max_store_bytes_per_user: LIMIT } } }
  })
}, 60_000)
afterAll(async () => {
  await gateway?.stop().catch(() => {})
})

const alice = Requests.as(() => gateway, Support.ALICE)
const bob = Requests.as(() => gateway, Support.BOB)

// (the longest address an item may have: 16 labels of 256 characters, a key of 1024)
const namespace = Array.from({ length: 16 }, (_, i) => `${i}`.padEnd(256, "n"))
const keyOf = (i: number) => `${i}`.padEnd(1024, "k")
const ADDRESS_BYTES = 16 * 256 + 15 + 1024

describe("a store item's namespace and key count against max_store_bytes_per_user", () => {
  it("items of an empty value but the longest address are refused once their addresses pass it", async () => {
    const answers = []
    for (let i = 0; i < 10; i++) {
      answers.push(await alice("PUT", "/store/items", { namespace, key: keyOf(i), value: {} }))
    }
    const kept = answers.filter((answer) => answer.status === 204).length
    const refused = answers.find((answer) => answer.status !== 204)
    assert.isDefined(refused, "every item was kept")
    assert.strictEqual(refused!.status, 403, refused!.text)
    assert.include(refused!.text, "gateway.quotas.max_store_bytes_per_user")
    assert.isAtMost(kept * ADDRESS_BYTES, LIMIT)
    assert.strictEqual(kept, Math.floor(LIMIT / (ADDRESS_BYTES + 2)))
    // a refused item is not there; a kept one is
    const missing = await alice("GET", `/store/items?namespace=${namespace.join(".")}&key=${keyOf(9)}`)
    assert.strictEqual(missing.status, 200, missing.text)
    assert.isNull(missing.json())
    // bob's quota is his own
    const his = await bob("PUT", "/store/items", { namespace, key: keyOf(0), value: {} })
    assert.strictEqual(his.status, 204, his.text)
    // a deleted item frees its room: the next one fits
    const deleted = await alice("DELETE", "/store/items", { namespace, key: keyOf(0) })
    assert.strictEqual(deleted.status, 204, deleted.text)
    const next = await alice("PUT", "/store/items", { namespace, key: keyOf(9), value: {} })
    assert.strictEqual(next.status, 204, next.text)
  })
})
