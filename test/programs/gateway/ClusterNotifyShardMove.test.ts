/**
 * A thread's stream opened while the thread's shard moves (its runner stopped with SIGTERM and draining, the shard
 * already the other runner's, the run not yet handed over): no runner answers for the thread's active run at that
 * moment. The stream does not take it for followed: once the other runner resumes the run, the stream follows it
 * to its end. `antler serve` processes (real child processes) on one PostgreSQL database. Skipped, saying why,
 * without PostgreSQL.
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
if ("skip" in pg) console.warn(`[gateway cluster shard move stream] skipped: ${pg.skip}`)

const suite = Cluster.suite(pg)
const serve = (name: string, dbUrl: string, home: string) =>
  Handover.serve(suite, { name, dbUrl, home, drainSeconds: 30 })

const runOf = (event: SseEvent) => event.id!.slice(0, event.id!.lastIndexOf(":"))

describe.skipIf("skip" in pg)("a thread's stream opened while the thread's shard moves", () => {
  it("follows the thread's active run once its next runner resumed it, to its end", async () => {
    const dbUrl = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-cluster-move-stream-")
    const a = await serve("A", dbUrl, home)
    const b = await serve("B", dbUrl, home)
    await until(() => healthy(dbUrl) === "2", "two runners")
    // (the shards settle: assignments are refreshed every 3 s)
    await new Promise((resolve) => setTimeout(resolve, 8000))

    // a run going on on A (its model does not answer): threads asked through B until one's runner is A
    let held: { thread: string; runId: string } | undefined
    for (let i = 0; i < 30 && held === undefined; i++) {
      const thread = (await post(b.url, "/threads", {})).thread_id as string
      const run = await post(b.url, `/threads/${thread}/runs`, {
        assistant_id: "lead_agent",
        input: { messages: [{ type: "human", content: `Please do hold-${i}` }] }
      })
      const label = `hold-${i}`
      await until(
        async () =>
          a.scripted.requests.some((r) => labelOf(r) === label) ||
          (await runStatus(b.url, thread, run.run_id)) === "success",
        `run ${label} under way`
      )
      if (a.scripted.requests.some((r) => labelOf(r) === label)) held = { thread, runId: run.run_id }
    }
    assert.isDefined(held, "a thread run by A")
    const { thread, runId } = held!

    // A stopped: it leaves the runners at once and drains (30 s); its shards go to B, which cannot answer for the
    // run while A still runs it
    a.child.kill("SIGTERM")
    await until(() => healthy(dbUrl) === "1", "A left the runners")
    await new Promise((resolve) => setTimeout(resolve, 6000))
    assert.notInclude(a.output(), "handed over", "A still runs the run")
    assert.strictEqual(await runStatus(b.url, thread, runId), "running")

    // the thread's stream opened at B now
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new Error("the run's end not seen in 120 s")), 120_000)
    const response = await fetch(`${b.url}/threads/${thread}/stream`, { signal: controller.signal })
    assert.strictEqual(response.status, 200)
    const read = Support.readSse(response, (event) => event.event === "end")
    // (the stream began in the window: A had not handed the run over yet)
    await new Promise((resolve) => setTimeout(resolve, 2000))
    assert.notInclude(a.output(), "handed over", "the stream began before the run was handed over")
    let events: ReadonlyArray<SseEvent>
    try {
      events = (await read).events.filter((e) => e.id !== undefined)
    } finally {
      clearTimeout(timer)
      controller.abort()
    }

    // the resumed run, from its first event (its second attempt) to its end, answered by B; no id twice
    assert.deepStrictEqual([...new Set(events.map(runOf))], [runId])
    assert.strictEqual(events[0]!.event, "metadata")
    assert.strictEqual((events[0]!.data as any).attempt, 2)
    assert.strictEqual(events.at(-1)!.event, "end")
    const ids = events.map((e) => e.id!)
    assert.strictEqual(new Set(ids).size, ids.length)
    const values = events.filter((e) => e.event === "values").at(-1)!.data as any
    assert.include(JSON.stringify(values.messages.at(-1)), "answered by B")
    assert.strictEqual(await runStatus(b.url, thread, runId), "success")
    assert.strictEqual(await a.exited, 0)
  }, 240_000)
})
