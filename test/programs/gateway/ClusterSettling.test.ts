/**
 * A cluster's run between its last turn and its end (its settling: the goal evaluator, the delivery check, its
 * receipt): two `antler serve` processes (real child processes) are runners of one cluster on one PostgreSQL
 * database. The thread has a goal, so once the run's turn answered, the goal evaluator is asked; the scripted model
 * holds that request open. Meanwhile the run's runner keeps the thread's lease (the thread reads as busy from every
 * process), and:
 *
 * - killed (SIGKILL), the run is not run again by the thread's next runner (the model sees no second answer turn,
 *   and no second evaluation): it ends `error` (`orphan_recovered`, an error saying the runner stopped after its last
 *   turn and the run was not run again), its thread holds the answer once, its journal ends with the error and a
 *   receipt, and the thread takes a new run;
 * - stopped (SIGTERM, a drain shorter than the evaluator's wait), it settles the run itself as its turn ended
 *   (`success`), without handing it over, and exits 0; the other runner runs no turn of it.
 *
 * The thread is made once both runners are healthy and hold every shard between them, unchanged over a shard lock
 * refresh (a shard moving just after the runners start would hand the run over). Skipped, saying why, without
 * PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody, Turn } from "../../../src/layers/ScriptedChatServer.js"
import * as Cluster from "../../support/cluster.js"
import { isEvaluator, verdict } from "../../support/goalScript.js"
import { until } from "../../support/poll.js"
import * as Postgres from "../../support/postgres.js"
import { psql } from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster settling] skipped: ${pg.skip}`)

// the answer turn; the evaluator's first request (the run's) held open, a later one (another run's) met
const script = (body: ChatRequestBody): Turn => {
  if (isEvaluator(body)) {
    const before = scripted.filter(isEvaluator).length
    return before <= 1 ? { hang: true } : verdict(true)
  }
  return "Here is the report."
}
// (the requests of the current test's model server)
let scripted: ReadonlyArray<ChatRequestBody> = []

const suite = Cluster.suite(pg)
type Started = Cluster.Runner

/** Two runners of one cluster on a fresh database, sharing a data directory; their model holds the evaluator. */
const cluster = async (drainSeconds: number) => {
  const dbUrl = await (pg as Postgres.Postgres).createDatabase()
  const model = await suite.model(script)
  scripted = model.requests
  const home = Support.tempDir("antler-cluster-settling-")
  const start = () =>
    suite.runner({
      dbUrl,
      home,
      modelUrl: model.url,
      cluster: { health_check_seconds: 1, drain_seconds: drainSeconds }
    })
  const a = await start()
  const b = await start()
  await settled(dbUrl)
  return { dbUrl, model, a, b }
}

/** The shard locks (PostgreSQL advisory locks, one per shard) held on the database, by the runner holding them. */
const SHARD_LOCKS = "SELECT pid || ':' || count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted " +
  "AND classid = 0 AND objid > 1000000 " +
  "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY pid ORDER BY pid"

/**
 * Until both runners are registered and healthy, and hold every shard between them the same over a shard lock
 * refresh (3 s): the thread made then stays on its runner (a shard moving after would hand its run over).
 */
const settled = async (dbUrl: string) => {
  await until(() => psql(dbUrl, "SELECT count(*) FROM cluster_runners WHERE healthy") === "2", "both runners")
  let last = ""
  await until(() => {
    const held = psql(dbUrl, SHARD_LOCKS)
    const counts = held.split("\n").filter((line) => line !== "").map((line) => Number(line.split(":")[1]))
    const total = counts.reduce((sum, n) => sum + n, 0)
    const stable = counts.length === 2 && total > 0 && total % 300 === 0 && held === last
    last = held
    return stable
  }, () => `the shards settled on both runners (${last})`, 60, 4000)
}

const send = (base: string, method: string, path: string, body?: unknown) =>
  fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })

const answers = () => scripted.filter((body) => !isEvaluator(body)).length
const evaluations = () => scripted.filter(isEvaluator).length

/**
 * A thread with a goal and a background run on it, accepted by `via`; returns once the run's turn answered and the
 * evaluator is asked (held open), with which runner holds the thread's lease (the run's runner) and the other.
 */
const settlingRun = async (dbUrl: string, via: Started, a: Started, b: Started) => {
  const thread = await (await send(via.url, "POST", "/threads", {})).json() as any
  const goal = await send(via.url, "PUT", `/api/threads/${thread.thread_id}/goal`, { objective: "Write the report" })
  assert.strictEqual(goal.status, 200, await goal.text())
  const started = await send(via.url, "POST", `/threads/${thread.thread_id}/runs`, {
    assistant_id: "lead_agent",
    input: { messages: [{ type: "human", content: "Write the report" }] }
  })
  assert.strictEqual(started.status, 200, await started.clone().text())
  const run = await started.json() as any
  await until(async () => evaluations() > 0, "the goal evaluator asked")
  // the run's turn is over, its end not recorded yet: its runner still holds the thread, under the run's id
  const { leased, holder: runner, other } = Cluster.holderOf(dbUrl, thread.thread_id, a, b)
  assert.strictEqual(leased.runId, run.run_id, `the thread's lease: ${JSON.stringify(leased)}`)
  const record = await (await fetch(`${via.url}/threads/${thread.thread_id}/runs/${run.run_id}`)).json() as any
  assert.strictEqual(record.status, "running", JSON.stringify(record))
  // and the thread reads as busy from the other process too (not `error`, as a thread whose runner died)
  const seen = await (await fetch(`${other.url}/threads/${thread.thread_id}`)).json() as any
  assert.strictEqual(seen.status, "busy", JSON.stringify(seen))
  return { threadId: thread.thread_id as string, runId: run.run_id as string, runner, other }
}

const ended = async (url: string, threadId: string, runId: string, output: () => string) => {
  await until(async () => {
    const record = await (await fetch(`${url}/threads/${threadId}/runs/${runId}`)).json() as any
    return record.status !== "running" && record.status !== "pending"
  }, () => `the run ended: ${output()}`)
  return await (await fetch(`${url}/threads/${threadId}/runs/${runId}`)).json() as any
}

const visibleMessages = async (url: string, threadId: string) => {
  const state = await (await fetch(`${url}/threads/${threadId}/state`)).json() as any
  return Support.visible(state.values.messages).map((m: any) => [m.type, m.content])
}

describe.skipIf("skip" in pg)("a cluster's run whose runner stops while it settles", () => {
  it("killed: the run is ended on the survivor, never run again; its thread readable and free", async () => {
    const { a, b, dbUrl } = await cluster(20)
    const { other: survivor, runId, runner: victim, threadId } = await settlingRun(dbUrl, a, a, b)
    assert.strictEqual(answers(), 1)
    const exited = new Promise((resolve) => victim.server.child.once("exit", resolve))
    victim.server.child.kill("SIGKILL")
    await exited

    // once the dead runner's lease lapsed, the survivor ends the run: it ran no turn of it, and asked no evaluator
    const record = await ended(survivor.url, threadId, runId, survivor.server.output)
    assert.strictEqual(record.status, "error", JSON.stringify(record))
    assert.strictEqual(record.stop_reason, "orphan_recovered", JSON.stringify(record))
    assert.include(record.error, "stopped after the run's last turn", JSON.stringify(record))
    assert.include(record.error, "it was not run again", JSON.stringify(record))
    assert.strictEqual(answers(), 1, "a second answer turn")
    assert.strictEqual(evaluations(), 1, "a second evaluation")
    assert.deepStrictEqual(await visibleMessages(survivor.url, threadId), [
      ["human", "Write the report"],
      ["ai", "Here is the report."]
    ])
    // its journal says how it ended, with a receipt (nothing presented)
    const list = await (await fetch(`${survivor.url}/api/threads/${threadId}/runs/${runId}/events`)).json() as any[]
    const types = list.map((event) => event.event_type)
    assert.deepStrictEqual(types.slice(-2), ["run.error", "run.delivery"], JSON.stringify(list))
    assert.strictEqual(list.at(-1).content.presented, 0)
    assert.strictEqual(list.at(-2).metadata.stop_reason, "orphan_recovered")

    // the thread is free: a new run on it runs (its evaluator, asked again, finds the goal met)
    const next = await send(survivor.url, "POST", `/threads/${threadId}/runs/wait`, {
      assistant_id: "lead_agent",
      input: { messages: [{ type: "human", content: "And a summary" }] }
    })
    assert.strictEqual(next.status, 200, await next.clone().text())
    assert.strictEqual(answers(), 2)
    const runs = await (await fetch(`${survivor.url}/threads/${threadId}/runs`)).json() as any
    assert.deepStrictEqual(runs.map((r: any) => r.status).sort(), ["error", "success"], JSON.stringify(runs))
    assert.notInclude(survivor.server.output(), `run ${runId}: resumed here`)
  }, 240_000)

  it("stopped (SIGTERM): the run settles where it is, as its turn ended, not handed over; exit 0", async () => {
    const { a, b, dbUrl } = await cluster(1)
    const { other, runId, runner, threadId } = await settlingRun(dbUrl, b, a, b)
    runner.server.child.kill("SIGTERM")
    assert.strictEqual(await runner.server.exited, 0, runner.server.output())

    const record = await ended(other.url, threadId, runId, other.server.output)
    assert.strictEqual(record.status, "success", JSON.stringify(record))
    assert.strictEqual(record.stop_reason, "completed", JSON.stringify(record))
    // the other runner, given the thread, ran no turn of it
    assert.strictEqual(answers(), 1, "a second answer turn")
    assert.strictEqual(evaluations(), 1, "a second evaluation")
    assert.notInclude(other.server.output(), `run ${runId}: resumed here`)
    assert.deepStrictEqual(await visibleMessages(other.url, threadId), [
      ["human", "Write the report"],
      ["ai", "Here is the report."]
    ])
    // the lease was released with the run's end
    assert.strictEqual(psql(dbUrl, `SELECT count(*) FROM antler_leases WHERE thread_id = '${threadId}'`).trim(), "0")
  }, 240_000)
})
