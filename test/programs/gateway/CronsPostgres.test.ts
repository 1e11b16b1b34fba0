/**
 * LangGraph's crons on two gateways sharing one PostgreSQL database (two `antler serve` processes), both polling:
 * crons made through one are seen and deleted through the other, and each cron's tick runs once between them
 * (one run, one model request), on whichever gateway claimed it. The schedule is the shortest five cron fields
 * allow (each minute), ending half a minute after its first tick, so the test waits for one minute boundary and
 * each cron runs once. The gateways share a clock moved to just before a minute's end (test/support/minuteClock.ts).
 */
import { Client } from "@langchain/langgraph-sdk"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Layer from "effect/Layer"
import * as MinuteClock from "../../support/minuteClock.js"
import * as Postgres from "../../support/postgres.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"
import { eventually } from "../../support/poll.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[crons Postgres] skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const until = <A>(check: () => Promise<A | undefined>, what: string) => eventually(check, what, { tries: 4000 })

describe.skipIf("skip" in pg)("LangGraph crons on gateways sharing a PostgreSQL database", () => {
  it("a cron made on one is seen on the other, and each tick runs once between them", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const config = { database: { url }, gateway: { heartbeat_seconds: 1, scheduler_poll_seconds: 1 } }
    const minute = MinuteClock.make()
    const references = Layer.setClock(minute.clock)
    const a = await Support.start({ script: () => "Scheduled answer.", config, references })
    gateways.push(a)
    const b = await Support.start({ script: () => "Scheduled answer.", config, references })
    gateways.push(b)
    const onA = new Client({ apiUrl: a.url, apiKey: null })
    const onB = new Client({ apiUrl: b.url, apiKey: null })

    // all crons made within one minute, so that they share a tick, 15 s on
    minute.nearMinuteEnd(15)
    // each cron ends half a minute after its first tick: it runs once, ever
    const tick = Math.floor(minute.now() / 60_000) * 60_000 + 60_000
    const endTime = new Date(tick + 30_000).toISOString()
    const thread = await onA.threads.create()
    const onThread = await onA.crons.createForThread(thread.thread_id, "lead_agent", {
      schedule: "* * * * *",
      endTime,
      input: { messages: [{ role: "user", content: "Thread report" }] }
    })
    // (three crons ticking at once: a user has at most three runs of crons and tasks going, see docs/gateway.md)
    const stateless = []
    for (let i = 0; i < 2; i++) {
      stateless.push(await onA.crons.create("lead_agent", {
        schedule: "* * * * *",
      endTime,
        input: { messages: [{ role: "user", content: `Stateless report ${i}` }] },
        onRunCompleted: "keep"
      }))
    }
    const doomed = await onA.crons.create("lead_agent", {
      schedule: "* * * * *",
      endTime,
      input: { messages: [{ role: "user", content: "Doomed report" }] },
      onRunCompleted: "keep"
    })
    assert.sameMembers(
      (await onB.crons.search({ limit: 100 })).map((c) => c.cron_id),
      [onThread, ...stateless, doomed].map((c) => c.cron_id)
    )
    // deleted through the other gateway: it never runs
    await onB.crons.delete(doomed.cron_id)
    assert.strictEqual(await onA.crons.count(), 3)
    assert.strictEqual(Date.parse(onThread.next_run_date), tick)

    await until(async () => {
      const runs = await onB.runs.list(thread.thread_id)
      return runs.some((r) => r.status === "success") ? true : undefined
    }, "the thread cron's run")
    for (const cron of stateless) {
      const own = await until(async () => {
        const found = await onA.threads.search({ metadata: { cron_id: cron.cron_id } })
        return found.length > 0 && (await onA.runs.list(found[0]!.thread_id)).some((r) => r.status === "success")
          ? found
          : undefined
      }, `the run of cron ${cron.cron_id}`)
      // one thread, one run: the tick ran once between the two gateways
      assert.strictEqual(own.length, 1)
      assert.strictEqual((await onB.runs.list(own[0]!.thread_id)).length, 1)
    }
    assert.strictEqual((await onA.runs.list(thread.thread_id)).length, 1)
    assert.deepStrictEqual(await onA.threads.search({ metadata: { cron_id: doomed.cron_id } }), [])
    // past their end: no next run
    for (const cron of await onB.crons.search()) assert.strictEqual(cron.next_run_date, null)
    // one model request per cron, whichever gateway ran it
    assert.strictEqual(a.scripted.requests.length + b.scripted.requests.length, 3)
  }, 180_000)
})
