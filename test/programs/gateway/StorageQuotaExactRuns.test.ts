/**
 * What a user's runs add to their threads past the checks of the storage quotas (`gateway.quotas`). Before: runs of
 * one user started together were each admitted against the counters as they were before any of them wrote its
 * input (its messages are kept with its first step), so N of them passed the limit by N inputs; and a run's recorded
 * events (up to 1 MB of them) were kept after its last step's check, whatever the quota. Now a run's input is
 * reserved from its acceptance to its end, and a new run is admitted against what the others will add; a run's
 * events are kept as they grow only while they fit, and past a quota its last save keeps its end and receipt
 * only, so the run still ends readable. On SQLite and PostgreSQL (skipped, saying why, without one); the model is
 * SCRIPTED, the clients speak HTTP.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Postgres from "../../support/postgres.js"
import * as Requests from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const { ALICE, BOB, lastUserText, twoUsers } = Support
const KiB = 1024

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[StorageQuotaExactRuns PostgreSQL] skipped: ${pg.skip}`)
afterAll(() => ("stop" in pg ? pg.stop() : undefined))

/** "slow": an answer streamed slowly (the run is still running when the next starts); else a short answer. */
const script = (body: ChatRequestBody) => lastUserText(body).includes("slow") ? `${"word ".repeat(80)}done` : "ok"

const human = (content: string) => ({ messages: [{ type: "human", content }] })

const CAROL = "carol-token-0123456789abcdef0"
const users = {
  ...twoUsers,
  auth: { tokens: [...twoUsers.auth.tokens, { token: CAROL, user: "carol" }] }
}

const perBackend = (name: string, database: () => Promise<Record<string, unknown> | undefined>) =>
  describe(`${name}: a user's runs within max_thread_bytes_per_user`, () => {
    const gateways: Array<TestGateway> = []
    afterAll(() => Promise.all(gateways.map((g) => g.stop())))
    /** A gateway of alice, bob and carol with this per-user limit (and these `gateway` settings besides). */
    const start = async (limit: number, more: Record<string, unknown> = {}) => {
      const extra = await database()
      if (extra === undefined) return undefined
      const gateway = await Support.start({
        script,
        server: { delayMs: 10 },
        config: {
          ...extra,
          gateway: { ...users, ...more, quotas: { max_user_bytes: 0, max_thread_bytes_per_user: limit } }
        }
      })
      gateways.push(gateway)
      return gateway
    }
    const client = (gateway: TestGateway, token: string) => {
      const request = Requests.as(() => gateway, token)
      const newThread = async () => (await request("POST", "/threads", {})).json().thread_id as string
      const runsOf = async (threadId: string) => (await request("GET", `/threads/${threadId}/runs`)).json() as any[]
      const waitEnded = async (threadId: string) => {
        for (let i = 0; i < 600; i++) {
          const runs = await runsOf(threadId)
          if (runs.length > 0 && runs.every((r) => r.status !== "pending" && r.status !== "running")) return runs
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        return assert.fail(`the runs of ${threadId} did not end`)
      }
      return { request, newThread, runsOf, waitEnded }
    }
    const usedBy = (gateway: TestGateway, user: string) => Effect.runPromise(gateway.store.bytesOwned(user, false))

    it("started together, are admitted against what the others will add, not all against what was", async (context) => {
      const LIMIT = 1000 * KiB
      // one place: carol's slow run holds it, alice's runs wait for it, accepted (their records kept, no message yet)
      const gateway = await start(LIMIT, { max_active_runs: 1 })
      if (gateway === undefined) return context.skip()
      const alice = client(gateway, ALICE)
      const carol = client(gateway, CAROL)
      const carolThread = await carol.newThread()
      const holding = await carol.request("POST", `/threads/${carolThread}/runs`, {
        assistant_id: "lead_agent",
        input: human("slow, please")
      })
      assert.strictEqual(holding.status, 200)
      // (a run is admitted for its first step, its messages about three times over and 4 KiB, and its record's copy of
      // them: 2 × 404 KiB fit in 1000 KiB, 3 do not)
      const input = "i".repeat(100 * KiB)
      const threads = [await alice.newThread(), await alice.newThread(), await alice.newThread()]
      const started = []
      for (const threadId of threads) {
        started.push(await alice.request("POST", `/threads/${threadId}/runs`, {
          assistant_id: "lead_agent",
          input: human(input)
        }))
      }
      // (before: all three accepted, each against the counters as they were before any of them wrote)
      assert.deepStrictEqual(started.map((r) => r.status), [200, 200, 403])
      assert.match(started[2]!.json().detail, /past gateway\.quotas\.max_thread_bytes_per_user/)
      assert.isBelow(await usedBy(gateway, "alice"), 2 * 100 * KiB + 10 * KiB, "their records only: no message yet")
      await carol.waitEnded(carolThread)
      for (const threadId of threads.slice(0, 2)) {
        const [ended] = await alice.waitEnded(threadId)
        assert.include(["success", "error"], ended.status)
        assert.strictEqual((await alice.request("GET", `/threads/${threadId}/state`)).status, 200)
      }
      assert.deepStrictEqual(await alice.runsOf(threads[2]!), [], "nothing of the refused run kept")
    }, 120_000)

    it("a run whose events would take its user past the limit keeps its end and receipt only, and ends readable",
      async (context) => {
        const question = human("q".repeat(100 * KiB))
        // what the same run keeps without a limit: its events, and all of it
        const free = await start(0)
        if (free === undefined) return context.skip()
        const measured = client(free, BOB)
        const measuredThread = await measured.newThread()
        const first = await measured.request("POST", `/threads/${measuredThread}/runs/wait`, {
          assistant_id: "lead_agent",
          input: question
        })
        assert.strictEqual(first.status, 200)
        const [firstRun] = await measured.runsOf(measuredThread)
        const all = await usedBy(free, "bob")
        const events = Buffer.byteLength(
          (await measured.request("GET", `/api/threads/${measuredThread}/runs/${firstRun.run_id}/events`)).text
        )
        assert.isAbove(events, 30 * KiB, "its question is in its events")
        // a limit its checkpoints and record fit in, and its events do not
        // (its events hold its question's first 32,000 characters; its end and receipt, a few hundred bytes)
        const limit = all - 20 * KiB
        const gateway = (await start(limit))!
        const bob = client(gateway, BOB)
        const threadId = await bob.newThread()
        const ran = await bob.request("POST", `/threads/${threadId}/runs/wait`, {
          assistant_id: "lead_agent",
          input: question
        })
        assert.strictEqual(ran.status, 200, ran.text)
        const [record] = await bob.runsOf(threadId)
        assert.strictEqual(record.status, "success", record.error)
        // (before: its events kept whole, the user past the limit by them)
        assert.isAtMost(await usedBy(gateway, "bob"), limit)
        // (kept in the store: what another process, or this one once the run is forgotten, serves)
        const kept = await Effect.runPromise(Effect.gen(function*() {
          const [stored] = yield* gateway.store.runs({ runId: record.run_id })
          return yield* gateway.store.runEvents(stored!.thread_id, record.run_id)
        }))
        assert.deepStrictEqual(kept.map((e) => e.event_type), ["run.end", "run.delivery"])
        const state = await bob.request("GET", `/threads/${threadId}/state`)
        assert.strictEqual(state.status, 200)
        assert.deepStrictEqual(Support.visible(state.json().values.messages).map((m: any) => m.type), ["human", "ai"])
        // at the limit, a run that would pass it is refused
        const next = await bob.request("POST", `/threads/${threadId}/runs/wait`, {
          assistant_id: "lead_agent",
          input: human("q".repeat(events))
        })
        assert.strictEqual(next.status, 403)
      },
      120_000)
  })

perBackend("SQLite", async () => ({}))
perBackend("PostgreSQL", async () => ("skip" in pg ? undefined : { database: { url: await pg.createDatabase() } }))
