/**
 * Attack round 24 on a thread's metadata (at most 64 KiB of JSON, counted against the storage quotas): PATCHes sent
 * together, each with keys of its own. Each was checked against the metadata as read before the others' writes,
 * then merged into what they had written: on PostgreSQL, 30 PATCHes of 60 KB each left more than 64 KiB on one
 * thread, past the bound one PATCH cannot pass, and the thread then failed to read. On SQLite here, and on
 * PostgreSQL (skipped, saying why, without one).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[Attack24Metadata PostgreSQL] skipped: ${pg.skip}`)
afterAll(async () => {
  if (!("skip" in pg)) await pg.stop()
})

const perBackend = (name: string, database: () => Promise<Record<string, unknown> | undefined>) =>
  describe(`Attack24: a thread's metadata grown by PATCHes sent together (${name})`, () => {
    let gateway: TestGateway | undefined
    const alice = Requests.as(() => gateway!, Support.ALICE)
    afterAll(() => gateway?.stop())

    it("stays within 64 KiB: the PATCHes past it are refused, the thread readable", async (context) => {
      const db = await database()
      if (db === undefined) return context.skip()
      gateway = await Support.start({ script: () => "ok", config: { gateway: Support.twoUsers, ...db } })
      assert.strictEqual((await alice("POST", "/threads", { thread_id: "t-meta" })).status, 200)
      const answers = await Promise.all(Array.from({ length: 30 }, (_, i) =>
        alice("PATCH", "/threads/t-meta", { metadata: { [`k${i}`]: "x".repeat(60_000) } })))
      const statuses = answers.map((a) => a.status)
      assert.includeMembers(statuses, [200])
      assert.includeMembers(statuses, [422], statuses.join(","))
      for (const answer of answers.filter((a) => a.status !== 200)) {
        assert.strictEqual(answer.status, 422, answer.text)
        assert.include(answer.text, "more than 65536 (64 KiB), the most metadata may hold")
      }
      const read = await alice("GET", "/threads/t-meta")
      assert.strictEqual(read.status, 200, read.text.slice(0, 300))
      const metadata = read.json().metadata as Record<string, unknown>
      assert.isAtMost(Buffer.byteLength(JSON.stringify(metadata)), 64 * 1024)
      // as many keys as PATCHes answered 200
      const kept = Object.keys(metadata).filter((key) => /^k\d+$/.test(key))
      assert.strictEqual(kept.length, statuses.filter((s) => s === 200).length)
      assert.strictEqual((await alice("POST", "/threads/search", {})).status, 200)
    }, 120_000)
  })

perBackend("SQLite", async () => ({}))
perBackend("PostgreSQL", async () => ("skip" in pg ? undefined : { database: { url: await pg.createDatabase() } }))
