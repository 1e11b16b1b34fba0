/**
 * The writes other than runs that add to threads (state updates, copies, threads made with metadata) reserve what
 * they add as runs do, through the same admission (`QuotaReservations`), shared by gateway processes on one
 * PostgreSQL database. Before, each checked the shared counters without reserving: a burst of them from one user
 * across two processes (or in one) was admitted against the counters as they were before any of them wrote, so
 * together they passed `max_thread_bytes_per_user` by all but one of them. Two gateways (two layers) on one
 * database; the clients speak HTTP. Skipped, saying why, without PostgreSQL (see test/support/postgres.ts).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE } = Support
const KiB = 1024

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuota25Writes] PostgreSQL skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const script = (_body: ChatRequestBody): Turn => ({ content: "done" })

const LIMIT = 150 * KiB
// (what one write may keep beyond what it was admitted for: its message's id and type, a checkpoint's framing)
const SLACK = 2 * KiB

/** Two gateways on a fresh database with the per-user limit. */
const twoGateways = async () => {
  const url = await (pg as Postgres.Postgres).createDatabase()
  const config = {
    database: { url },
    gateway: { ...Support.twoUsers, quotas: { max_user_bytes: 0, max_thread_bytes_per_user: LIMIT } }
  }
  const home = Support.tempDir("antler-gw-quota25-pg-")
  const a = await Support.start({ script, config, home })
  gateways.push(a)
  const b = await Support.start({ script, config, home })
  gateways.push(b)
  const alice = (i: number) => Requests.as(() => (i % 2 === 0 ? a : b), ALICE)
  const kept = () => Number(Postgres.psql(url, `SELECT COALESCE(SUM(bytes), 0) FROM antler_owner_bytes`))
  return { url, alice, kept }
}

/** Every answer a 200 or the quota's refusal; how many were admitted. */
const admittedOf = (answers: ReadonlyArray<Requests.Answer>) => {
  for (const answer of answers) {
    assert.include([200, 403], answer.status, answer.text)
    if (answer.status === 403) assert.include(answer.json().detail, "max_thread_bytes_per_user")
  }
  const admitted = answers.filter((answer) => answer.status === 200).length
  assert.isAtLeast(admitted, 1, "some are admitted")
  assert.isBelow(admitted, answers.length, "some are refused")
  return admitted
}

describe.skipIf("skip" in pg)("storage quota: writes reserve what they add, across processes", () => {
  it("a burst of state updates across two gateways keeps the user within max_thread_bytes_per_user", async () => {
    const { alice, kept } = await twoGateways()
    const tried = 16
    const threads = await Promise.all(Array.from({ length: tried }, async (_, i) =>
      (await alice(i)("POST", "/threads", {})).json().thread_id as string
    ))
    const answers = await Promise.all(threads.map((threadId, i) =>
      alice(i)("POST", `/threads/${threadId}/state`, {
        values: { messages: [{ type: "human", content: "u".repeat(20 * KiB) }] }
      })
    ))
    const admitted = admittedOf(answers)
    const stored = kept()
    assert.isAtMost(stored, LIMIT + admitted * SLACK, `${admitted} of ${tried} kept ${stored} bytes`)
    // nothing stays reserved once they are done: what is left under the limit is admitted
    const left = LIMIT - stored
    if (left > 4 * KiB) {
      const fits = await alice(0)("POST", `/threads/${threads[0]}/state`, {
        values: { messages: [{ type: "human", content: "f".repeat(left - 3 * KiB) }] }
      })
      assert.strictEqual(fits.status, 200, fits.text)
    }
  })

  it("a burst of copies across two gateways keeps the user within max_thread_bytes_per_user", async () => {
    const { alice, kept } = await twoGateways()
    const source = (await alice(0)("POST", "/threads", {})).json().thread_id as string
    const seeded = await alice(0)("POST", `/threads/${source}/state`, {
      values: { messages: [{ type: "human", content: "s".repeat(25 * KiB) }] }
    })
    assert.strictEqual(seeded.status, 200, seeded.text)
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      alice(i)("POST", `/threads/${source}/copy`, {})
    ))
    const admitted = admittedOf(answers)
    const stored = kept()
    assert.isAtMost(stored, LIMIT + (admitted + 1) * SLACK, `${admitted} copies kept ${stored} bytes`)
  })

  it("a burst of branches across two gateways keeps the user within max_thread_bytes_per_user", async () => {
    const { alice, kept } = await twoGateways()
    const trunk = (await alice(0)("POST", "/threads", {})).json().thread_id as string
    const ran = await alice(0)("POST", `/threads/${trunk}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "t".repeat(8 * KiB) }] }
    })
    assert.strictEqual(ran.status, 200, ran.text.slice(0, 300))
    const messages: Array<any> = (await alice(0)("GET", `/threads/${trunk}/state`)).json().values.messages
    const answer = messages.findLast((m) => m.type === "ai")
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      alice(i)("POST", `/api/threads/${trunk}/branches`, { message_id: answer.id })
    ))
    const admitted = admittedOf(answers)
    const stored = kept()
    assert.isAtMost(stored, LIMIT + (admitted + 1) * SLACK, `${admitted} branches kept ${stored} bytes`)
  })

  it("a burst of threads made with metadata across two gateways keeps the user within the limit", async () => {
    const { alice, kept } = await twoGateways()
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) =>
      alice(i)("POST", "/threads", { metadata: { note: "n".repeat(20 * KiB) } })
    ))
    const admitted = admittedOf(answers)
    const stored = kept()
    assert.isAtMost(stored, LIMIT + admitted * SLACK, `${admitted} threads kept ${stored} bytes`)
  })
})

describe("storage quota: writes reserve what they add, in one process (SQLite)", () => {
  it("a burst of state updates keeps the user within max_thread_bytes_per_user", async () => {
    const home = Support.tempDir("antler-gw-quota25-sqlite-")
    const config = { gateway: { ...Support.twoUsers, quotas: { max_user_bytes: 0, max_thread_bytes_per_user: LIMIT } } }
    const gateway = await Support.start({ script, config, home })
    gateways.push(gateway)
    const alice = Requests.as(() => gateway, ALICE)
    const threads = await Promise.all(Array.from({ length: 16 }, async () =>
      (await alice("POST", "/threads", {})).json().thread_id as string
    ))
    const answers = await Promise.all(threads.map((threadId) =>
      alice("POST", `/threads/${threadId}/state`, {
        values: { messages: [{ type: "human", content: "u".repeat(20 * KiB) }] }
      })
    ))
    const admitted = admittedOf(answers)
    // what the threads keep, as the gateway counts them: each admitted one's, and no more
    const kept = await Promise.all(threads.map(async (threadId) =>
      ((await alice("GET", `/threads/${threadId}/state`)).json().values.messages ?? []).length
    ))
    assert.strictEqual(kept.filter((n: number) => n > 0).length, admitted, "only the admitted ones were kept")
    assert.isAtMost(admitted * 20 * KiB, LIMIT)
  })
})
