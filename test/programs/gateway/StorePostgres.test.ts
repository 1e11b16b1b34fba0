/**
 * LangGraph's store on gateways sharing one PostgreSQL database (`database.url`), through the SDK: an item put
 * through one is read, found and listed through the other, deleted through the other it is gone from both, and a
 * gateway started afterwards on the same database has the items kept. Skipped, saying why, without PostgreSQL.
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Postgres from "../../support/postgres.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[store on PostgreSQL] skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const script = () => "Nothing to do."

describe.skipIf("skip" in pg)("LangGraph's store on gateways sharing a PostgreSQL database", () => {
  it("an item put through one is read, found, listed and deleted through the other, and kept for the next", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const config = { database: { url }, gateway: { heartbeat_seconds: 1 } }
    const a = await Support.start({ script, config })
    gateways.push(a)
    const b = await Support.start({ script, config })
    gateways.push(b)
    const onA = new Client({ apiUrl: a.url, apiKey: null })
    const onB = new Client({ apiUrl: b.url, apiKey: null })

    await onA.store.putItem(["team", "notes"], "plan", { step: 1, text: "Ship the store" })
    await onA.store.putItem(["team", "notes"], "gone", { step: 2 })
    const written = (await onA.store.getItem(["team", "notes"], "plan"))!
    assert.deepStrictEqual(await onB.store.getItem(["team", "notes"], "plan"), written)
    assert.deepStrictEqual(
      (await onB.store.searchItems(["team"], { query: "ship" })).items.map((i) => i.key),
      ["plan"]
    )
    assert.deepStrictEqual((await onB.store.listNamespaces({ prefix: ["team"] })).namespaces, [["team", "notes"]])
    await onB.store.deleteItem(["team", "notes"], "gone")
    assert.isNull(await onA.store.getItem(["team", "notes"], "gone"))

    await a.stop()
    await b.stop()
    const c = await Support.start({ script, config })
    gateways.push(c)
    const onC = new Client({ apiUrl: c.url, apiKey: null })
    assert.deepStrictEqual(await onC.store.getItem(["team", "notes"], "plan"), written)
    assert.deepStrictEqual((await onC.store.searchItems(["team"])).items.map((i) => i.key), ["plan"])
  }, 120_000)
})
