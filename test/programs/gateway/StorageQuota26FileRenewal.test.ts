/**
 * An upload's (a copy's, a branch's) reservation of files on PostgreSQL (`antler_file_reservations`) lives as long
 * as its request writes. Before, a row lapsed a fixed 10 minutes after its check, renewed by nothing: a request that
 * wrote longer (a slow conversion, a copy of many files, a store that kept it waiting) lost its reservation
 * mid-way, and another process's check no longer counted it, so a concurrent request passed `max_user_bytes`. Now
 * the row is renewed every third of its life while the request writes and deleted once it is done. The life is
 * shortened for the test (`PgSharedQuotas.ReservationTtl`, 600 ms) so that "longer than its life" is a second; two
 * gateways on one database and one data directory, the clients speak HTTP. Skipped, saying why, without PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import * as PgSharedQuotas from "../../../src/programs/gateway/store/PgSharedQuotas.js"
import type { ThreadStore } from "../../../src/services/ThreadStore.js"
import { gate } from "../../support/gate.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import { bytesUnder, formOf } from "../../support/uploadForms.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE } = Support
const KiB = 1024
const TTL_MS = 600

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuota26FileRenewal] PostgreSQL skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.skipIf("skip" in pg)("a reservation of files across processes, renewed while its request writes", () => {
  it("an upload writing for longer than a reservation's life keeps its bytes reserved until it is done", async () => {
    const LIMIT = 100 * KiB
    const url = await (pg as Postgres.Postgres).createDatabase()
    const config = { database: { url }, gateway: { ...Support.twoUsers, quotas: { max_user_bytes: LIMIT } } }
    const home = Support.tempDir("antler-gw-quota26-renew-")
    const references = Layer.succeed(PgSharedQuotas.ReservationTtl, TTL_MS)
    // gateway a's store keeps the making of the thread "slow" waiting until the test lets it go: the upload's write,
    // within its reservation, lasts as long as the test says
    const held = gate()
    const wrapStore = (store: ThreadStore["Type"]): ThreadStore["Type"] => ({
      ...store,
      ensure: (threadId, options) =>
        threadId.startsWith("slow")
          ? Effect.zipRight(held.wait, store.ensure(threadId, options))
          : store.ensure(threadId, options)
    })
    const a = await Support.start({ script: () => "ok", config, home, references, wrapStore })
    gateways.push(a)
    const b = await Support.start({ script: () => "ok", config, home, references })
    gateways.push(b)
    const aliceA = Requests.as(() => a, ALICE)
    const aliceB = Requests.as(() => b, ALICE)
    const other = (await aliceB("POST", "/threads", {})).json().thread_id as string

    const slow = aliceA("POST", "/api/threads/slow/uploads", formOf("big.txt", 90 * KiB))
    await held.entered
    // three lives of a reservation pass while a writes
    await sleep(3 * TTL_MS)
    // b counts a's 90 KiB: 20 KiB more would pass the limit
    const refused = await aliceB("POST", `/api/threads/${other}/uploads`, formOf("more.txt", 20 * KiB))
    assert.strictEqual(refused.status, 403, refused.text)
    assert.include(refused.json().detail, "hold 90.0 KB of files and this would add 20.0 KB, past gateway.quotas")
    const live = Postgres.psql(url, `SELECT bytes, expires_at FROM antler_file_reservations WHERE owner = 'alice'`)
    const [bytes, expires] = live.trim().split("|").map(Number)
    assert.strictEqual(bytes, 90 * KiB, `a's reservation: ${live}`)
    assert.isAbove(expires!, Date.now(), "renewed: it has not lapsed")
    held.release()
    const done = await slow
    assert.strictEqual(done.status, 200, done.text)
    assert.isAtMost(bytesUnder(Path.join(home, "users", "alice")), LIMIT)
    // freed once written, and not put back by a renewal after: nothing stays reserved
    await sleep(TTL_MS)
    assert.strictEqual(Postgres.psql(url, `SELECT count(*) FROM antler_file_reservations`).trim(), "0")
    const fits = await aliceB("POST", `/api/threads/${other}/uploads`, formOf("fits.txt", 10 * KiB))
    assert.strictEqual(fits.status, 200, fits.text)
  })
})
