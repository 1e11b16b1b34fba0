/**
 * The storage quotas' reservations shared by gateway processes on one PostgreSQL database (`QuotaReservations`,
 * `PgQuotaReservations`). Before, each process kept its own in memory: runs one user started together in two
 * processes were each admitted against its own process's runs only, so together they passed
 * `max_thread_bytes_per_user` by their messages. Now an admitted run's reservation is a row of the database every
 * admission counts, under a lock of the user's: across two gateways, no more runs are admitted together than fit one
 * after another in one. A row left by a process that crashed (no run deletes it, no lease keeps it) stops counting
 * when it expires; one whose run still holds its thread's lease counts. Two gateways (two layers) on one database;
 * the model is SCRIPTED (its runs hang, their messages not kept yet), the clients speak HTTP. Skipped, saying why,
 * without PostgreSQL (see test/support/postgres.ts).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB } = Support
const KiB = 1024

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuotaShared] PostgreSQL skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

// every run hangs in its first model call
const script = (_body: ChatRequestBody): Turn => ({ content: "working", stall: true })

const CAROL = "carol-token-0123456789abcdef0"
// (names of one length: a run's record, which names its user, is as large for each)
const users = {
  ...Support.twoUsers,
  auth: { tokens: [{ token: ALICE, user: "alice" }, { token: BOB, user: "bobby" }, { token: CAROL, user: "carol" }] }
}

const LIMIT = 400 * KiB
const run = { assistant_id: "lead_agent", input: { messages: [{ type: "human", content: "m".repeat(20 * KiB) }] } }

/**
 * Two gateways on a fresh database with the per-user limit, one place each for a run, held by a run of carol's:
 * the runs admitted after it wait, their records kept, their messages reserved and not kept.
 */
const twoGateways = async () => {
  const url = await (pg as Postgres.Postgres).createDatabase()
  const config = {
    database: { url },
    gateway: { ...users, max_active_runs: 1, quotas: { max_user_bytes: 0, max_thread_bytes_per_user: LIMIT } }
  }
  const home = Support.tempDir("antler-gw-quota-pg-")
  const a = await Support.start({ script, config, home })
  gateways.push(a)
  const b = await Support.start({ script, config, home })
  gateways.push(b)
  for (const gateway of [a, b]) {
    const carol = Requests.as(() => gateway, CAROL)
    const threadId = (await carol("POST", "/threads", {})).json().thread_id as string
    const holding = await carol("POST", `/threads/${threadId}/runs`, { ...run, input: Support.userInput("hold") })
    assert.strictEqual(holding.status, 200, holding.text)
  }
  return { url, a, b }
}

describe.skipIf("skip" in pg)("storage quota reservations shared through PostgreSQL", () => {
  it("runs one user starts together across two gateways: no more admitted than fit one after another", async () => {
    const { a, b } = await twoGateways()
    // one after another on one gateway (bobby): how many such runs fit under the limit
    const bob = Requests.as(() => a, BOB)
    let fit = 0
    for (let i = 0; i < 10; i++) {
      const threadId = (await bob("POST", "/threads", {})).json().thread_id as string
      const started = await bob("POST", `/threads/${threadId}/runs`, run)
      if (started.status === 403) {
        assert.include(started.text, "max_thread_bytes_per_user")
        break
      }
      assert.strictEqual(started.status, 200, started.text)
      fit++
    }
    assert.isAtLeast(fit, 2, "the limit holds a few runs")
    assert.isBelow(fit, 10, "and not ten")

    // together, alternately on each gateway (alice, as much as bobby had before): at most as many admitted
    const tried = 4 * fit
    const threads = await Promise.all(Array.from({ length: tried }, async (_, i) => {
      const gateway = i % 2 === 0 ? a : b
      return { gateway, threadId: (await Requests.as(() => gateway, ALICE)("POST", "/threads", {})).json().thread_id }
    }))
    const answers = await Promise.all(threads.map(({ gateway, threadId }) =>
      Requests.as(() => gateway, ALICE)("POST", `/threads/${threadId}/runs`, run)
    ))
    for (const answer of answers) assert.include([200, 403], answer.status, answer.text)
    const admitted = answers.filter((answer) => answer.status === 200).length
    assert.isAtLeast(admitted, 1, "some are admitted")
    assert.isAtMost(admitted, fit, `${admitted} of ${tried} admitted together, where ${fit} fit one after another`)
    const refused = answers.find((answer) => answer.status === 403)!
    assert.include(refused.json().detail, "max_thread_bytes_per_user")
  })

  it("a crashed process's reservation stops counting once expired; one whose run holds its lease counts", async () => {
    const { url, a, b } = await twoGateways()
    const alice = (gateway: TestGateway) => Requests.as(() => gateway, ALICE)
    const threadId = (await alice(a)("POST", "/threads", {})).json().thread_id as string
    const start = (gateway: TestGateway) => alice(gateway)("POST", `/threads/${threadId}/runs`, run)
    // a process that admitted a run of alice's (the whole limit) and crashed before it took its lease: its row expires
    // 1.5 s from now
    Postgres.psql(url, `INSERT INTO antler_quota_reservations (run_id, owner, thread_id, bytes, expires_at)
      VALUES ('crashed-run', 'alice', 'a-thread', ${LIMIT}, ${Date.now() + 1500})`)
    const refused = await start(b)
    assert.strictEqual(refused.status, 403, refused.text)
    assert.include(refused.json().detail, "max_thread_bytes_per_user")
    await new Promise((resolve) => setTimeout(resolve, 1600))
    const admitted = await start(a)
    assert.strictEqual(admitted.status, 200, `admitted once the crashed one's reservation expired: ${admitted.text}`)
    const left = Postgres.psql(url, `SELECT count(*) FROM antler_quota_reservations WHERE run_id = 'crashed-run'`)
    assert.strictEqual(left, "0", "the expired row is forgotten")

    // a row past its own expiry whose run holds its thread's lease (renewed by its process) still counts
    const other = (await alice(b)("POST", "/threads", {})).json().thread_id as string
    Postgres.psql(url, `INSERT INTO antler_leases (thread_id, run_id, owner, expires_at)
      VALUES ('a-thread', 'leased-run', 'elsewhere:1', ${Date.now() + 60_000})`)
    Postgres.psql(url, `INSERT INTO antler_quota_reservations (run_id, owner, thread_id, bytes, expires_at)
      VALUES ('leased-run', 'alice', 'a-thread', ${LIMIT}, ${Date.now() - 1000})`)
    const held = await alice(b)("POST", `/threads/${other}/runs`, run)
    assert.strictEqual(held.status, 403, held.text)
    // its lease expires (its process gone): the row no longer counts
    Postgres.psql(url, `UPDATE antler_leases SET expires_at = ${Date.now() - 1} WHERE run_id = 'leased-run'`)
    const freed = await alice(a)("POST", `/threads/${other}/runs`, run)
    assert.strictEqual(freed.status, 200, freed.text)
  })
})
