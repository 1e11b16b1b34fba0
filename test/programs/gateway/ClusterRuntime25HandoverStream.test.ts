/**
 * A thread's stream (`GET /threads/{id}/stream`) opened at the runner that runs the thread's run, when that runner
 * hands the thread's shard over to a runner that joined: the run is handed over (its buffer here ends without its
 * `end`) and resumed by the new runner. Before, the stream took the run for followed and waited for the thread's
 * next run; now it is carried over as a stream following another runner's run is: it goes on with the resumed run
 * (its second attempt, ids above the ones it saw) to its end. `antler serve` processes (real child processes) on
 * one PostgreSQL database. Skipped, saying why, without PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import { until } from "../../support/poll.js"
import * as Cluster from "../../support/cluster.js"
import * as Handover from "../../support/clusterHandover.js"
import { healthy, labelOf, post, runStatus } from "../../support/clusterHandover.js"
import * as Postgres from "../../support/postgres.js"
import type { SseEvent } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster handover stream] skipped: ${pg.skip}`)

const suite = Cluster.suite(pg)
const serve = (name: string, dbUrl: string, home: string) =>
  Handover.serve(suite, { name, dbUrl, home, drainSeconds: 2 })

const runOf = (event: SseEvent) => event.id!.slice(0, event.id!.lastIndexOf(":"))
const idOf = (event: SseEvent) => Number(event.id!.slice(event.id!.lastIndexOf(":") + 1))

describe.skipIf("skip" in pg)("a thread's stream at the runner that hands the thread's shard over", () => {
  it("goes on with the run resumed by the runner that joined, to its end", async () => {
    const dbUrl = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-cluster-handover-stream-")
    const a = await serve("A", dbUrl, home)
    await until(() => healthy(dbUrl) === "1", "A registered")
    // (A takes every shard: assignments are refreshed every 3 s)
    await new Promise((resolve) => setTimeout(resolve, 6000))

    // runs going on on A (its model does not answer), each thread's stream opened at A
    const runs: Array<{ thread: string; runId: string; read: Promise<ReadonlyArray<SseEvent>> }> = []
    const controller = new AbortController()
    for (let i = 0; i < 8; i++) {
      const thread = (await post(a.url, "/threads", {})).thread_id as string
      const run = await post(a.url, `/threads/${thread}/runs`, {
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: `Please do hold-${i}` }] }
      })
      await until(() => a.scripted.requests.some((r) => labelOf(r) === `hold-${i}`), `run hold-${i} under way`)
      const response = await fetch(`${a.url}/threads/${thread}/stream`, { signal: controller.signal })
      assert.strictEqual(response.status, 200)
      const read = Support.readSse(response, (event) => event.event === "end").then(
        (r) => r.events.filter((e) => e.id !== undefined),
        () => [] as ReadonlyArray<SseEvent>
      )
      runs.push({ thread, runId: run.run_id, read })
    }
    // (the streams listen)
    await new Promise((resolve) => setTimeout(resolve, 1000))

    // B joins: the shards are spread over both; the runs of the threads whose shards move are handed over (after
    // drain_seconds) and resumed on B, whose model answers them
    const b = await serve("B", dbUrl, home)
    await until(() => healthy(dbUrl) === "2", "B registered")
    await until(() => /handed over/.test(a.output()), "a run handed over to B", 1200)
    const moved = async () => {
      const ended: Array<(typeof runs)[number]> = []
      for (const run of runs) if ((await runStatus(b.url, run.thread, run.runId)) === "success") ended.push(run)
      return ended
    }
    await until(async () => (await moved()).length > 0, "a handed-over run ended on B", 1200)
    // (every run handed over by now resumed and ended)
    await new Promise((resolve) => setTimeout(resolve, 5000))
    const resumed = await moved()
    const timer = setTimeout(() => controller.abort(new Error("no end in 60 s")), 60_000)
    try {
      for (const run of resumed) {
        assert.include(a.output(), `run ${run.runId}: handed over to the thread's next runner`)
        const events = await run.read
        const resumedEvents = events.filter((e) => (e.data as any)?.attempt === 2)
        assert.lengthOf(resumedEvents, 1, `${run.runId}: the stream at A went on with the resumed run`)
        assert.deepStrictEqual([...new Set(events.map(runOf))], [run.runId])
        assert.strictEqual(events.at(-1)!.event, "end", `${run.runId}: to its end`)
        const ids = events.map(idOf)
        assert.deepStrictEqual(ids, [...ids].sort((x, y) => x - y), "ids go on, none twice")
        assert.strictEqual(new Set(ids).size, ids.length)
        const values = events.filter((e) => e.event === "values").at(-1)!.data as any
        assert.include(JSON.stringify(values.messages.at(-1)), "answered by B")
      }
    } finally {
      clearTimeout(timer)
      controller.abort()
    }
    assert.isAbove(resumed.length, 0)
  }, 240_000)
})
