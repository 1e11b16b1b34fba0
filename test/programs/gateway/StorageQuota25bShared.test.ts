/**
 * `gateway.quotas.max_threads_per_user` and `max_user_bytes` across gateway processes sharing PostgreSQL (and one
 * data directory). Before, each process checked them under locks of its own: a burst of new threads, or of uploads,
 * from one user across two processes was admitted against the count (the files) as it was before any of them was
 * made, so together they passed the limit. Now a thread's count and its making hold a lock of the user's in the
 * database, and an upload's files are reserved there until written. Two gateways (two layers) on one database;
 * the clients speak HTTP. Skipped, saying why, without PostgreSQL (see test/support/postgres.ts).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Path from "node:path"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import { bytesUnder, formOf } from "../../support/uploadForms.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE } = Support
const KiB = 1024

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuota25bShared] PostgreSQL skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const script = (_body: ChatRequestBody): Turn => ({ content: "done" })

// bursts per test: each one's overlap across the two processes is a matter of timing
const ROUNDS = 4

/** Two gateways on a fresh database and one data directory, with these quotas. */
const twoGateways = async (quotas: Record<string, number>) => {
  const url = await (pg as Postgres.Postgres).createDatabase()
  const config = { database: { url }, gateway: { ...Support.twoUsers, quotas } }
  const home = Support.tempDir("antler-gw-quota25b-pg-")
  const a = await Support.start({ script, config, home })
  gateways.push(a)
  const b = await Support.start({ script, config, home })
  gateways.push(b)
  const alice = (i: number) => Requests.as(() => (i % 2 === 0 ? a : b), ALICE)
  return { url, home, alice }
}

/** Every answer a 200 or the quota's refusal naming `key`; how many were admitted. */
const admittedOf = (answers: ReadonlyArray<Requests.Answer>, key: string) => {
  for (const answer of answers) {
    assert.include([200, 403], answer.status, answer.text)
    if (answer.status === 403) assert.include(answer.json().detail, key)
  }
  const admitted = answers.filter((answer) => answer.status === 200).length
  assert.isAtLeast(admitted, 1, "some are admitted")
  assert.isBelow(admitted, answers.length, "some are refused")
  return admitted
}

describe.skipIf("skip" in pg)("max_threads_per_user and max_user_bytes across processes", () => {
  it("a burst of new threads across two gateways makes no more than max_threads_per_user", async () => {
    const { url, alice } = await twoGateways({ max_threads_per_user: 5, max_user_bytes: 0 })
    // (rounds, the threads deleted after each: without the shared lock a round passed the limit about half the time)
    for (let round = 0; round < ROUNDS; round++) {
      const answers = await Promise.all(Array.from({ length: 32 }, (_, i) => alice(i)("POST", "/threads", {})))
      const admitted = admittedOf(answers, "max_threads_per_user")
      const stored = Number(Postgres.psql(url, `SELECT count(*) FROM antler_threads WHERE owner = 'alice'`))
      assert.strictEqual(stored, 5, `round ${round}`)
      assert.strictEqual(admitted, 5, `round ${round}`)
      const refused = answers.find((answer) => answer.status === 403)!
      assert.strictEqual(
        refused.json().detail,
        "Thread quota reached: user alice has 5 threads, the most gateway.quotas.max_threads_per_user allows (5); " +
          "delete a thread to make another."
      )
      for (const [i, answer] of answers.entries()) {
        if (answer.status !== 200) continue
        const deleted = await alice(i)("DELETE", `/threads/${answer.json().thread_id}`)
        assert.include([200, 204], deleted.status, deleted.text)
      }
    }
  })

  it("a burst of uploads on new threads across two gateways makes no more than max_threads_per_user", async () => {
    const { url, alice } = await twoGateways({ max_threads_per_user: 4, max_user_bytes: 0 })
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) =>
      alice(i)("POST", `/api/threads/up-${i}/uploads`, formOf(`n${i}.txt`, 100))
    ))
    assert.strictEqual(admittedOf(answers, "max_threads_per_user"), 4)
    const stored = Number(Postgres.psql(url, `SELECT count(*) FROM antler_threads WHERE owner = 'alice'`))
    assert.strictEqual(stored, 4)
  })

  it("a burst of uploads across two gateways keeps the user's files within max_user_bytes", async () => {
    const LIMIT = 100 * KiB
    const { home, alice } = await twoGateways({ max_threads_per_user: 0, max_user_bytes: LIMIT })
    const threads = await Promise.all(Array.from({ length: 24 }, async (_, i) =>
      (await alice(i)("POST", "/threads", {})).json().thread_id as string
    ))
    let answers: ReadonlyArray<Requests.Answer> = []
    // (rounds, the files deleted between them: without the reservations a round passed the limit about half the time)
    for (let round = 0; round < ROUNDS; round++) {
      if (round > 0) {
        for (const [i, answer] of answers.entries()) {
          if (answer.status !== 200) continue
          const deleted = await alice(i)("DELETE", `/api/threads/${threads[i]}/uploads/f${i}.txt`)
          assert.strictEqual(deleted.status, 200, deleted.text)
        }
      }
      answers = await Promise.all(threads.map((threadId, i) =>
        alice(i)("POST", `/api/threads/${threadId}/uploads`, formOf(`f${i}.txt`, 20 * KiB))
      ))
      const admitted = admittedOf(answers, "max_user_bytes")
      const files = bytesUnder(Path.join(home, "users", "alice"))
      assert.isAtMost(files, LIMIT, `round ${round}: ${admitted} uploads wrote ${files} bytes`)
      assert.strictEqual(admitted, 5, `round ${round}`)
    }
    // nothing stays reserved once they are written: the user's next upload is measured against the files alone
    const refused = await alice(0)("POST", `/api/threads/${threads[0]}/uploads`, formOf("g.txt", 20 * KiB))
    assert.strictEqual(refused.status, 403)
    assert.include(refused.json().detail, "hold 100.0 KB of files and this would add 20.0 KB")
    const first = answers.findIndex((answer) => answer.status === 200)
    const deleted = await alice(1)("DELETE", `/api/threads/${threads[first]}/uploads/f${first}.txt`)
    assert.strictEqual(deleted.status, 200, deleted.text)
    const fits = await alice(1)("POST", `/api/threads/${threads[0]}/uploads`, formOf("h.txt", 20 * KiB))
    assert.strictEqual(fits.status, 200, fits.text)
  })

  it("a process's reservation of files counts until it lapses (its process died while writing)", async () => {
    const { url, alice } = await twoGateways({ max_threads_per_user: 0, max_user_bytes: 100 * KiB })
    const threadId = (await alice(0)("POST", "/threads", {})).json().thread_id as string
    // (as a process that reserved 90 KiB and died before writing them left it)
    const future = Date.now() + 60_000
    Postgres.psql(url, `INSERT INTO antler_file_reservations VALUES ('dead', 'alice', ${90 * KiB}, ${future})`)
    const refused = await alice(1)("POST", `/api/threads/${threadId}/uploads`, formOf("a.txt", 20 * KiB))
    assert.strictEqual(refused.status, 403, refused.text)
    assert.include(refused.json().detail, "hold 90.0 KB of files and this would add 20.0 KB, past gateway.quotas")
    // another user's reservation is not alice's
    Postgres.psql(url, `UPDATE antler_file_reservations SET owner = 'bob' WHERE id = 'dead'`)
    const others = await alice(0)("POST", `/api/threads/${threadId}/uploads`, formOf("b.txt", 20 * KiB))
    assert.strictEqual(others.status, 200, others.text)
    Postgres.psql(url, `UPDATE antler_file_reservations SET owner = 'alice', expires_at = ${Date.now() - 1}`)
    const lapsed = await alice(1)("POST", `/api/threads/${threadId}/uploads`, formOf("c.txt", 20 * KiB))
    assert.strictEqual(lapsed.status, 200, lapsed.text)
    assert.strictEqual(Postgres.psql(url, `SELECT count(*) FROM antler_file_reservations`).trim(), "0")
  })
})
