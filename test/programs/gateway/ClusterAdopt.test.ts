/**
 * A scheduled run its process started and did not make durable (the process died between the two messages that
 * start a run in a cluster): the run is recorded `running` in the thread store, no durable message exists for it,
 * and the task's run is still `queued`. After `Scheduler.STALE_QUEUED_MS` the poller takes the task's run over,
 * finds its run started, and adopts it (`Runs.adopt`: its durable message sent again): the thread's runner resumes
 * it, once, and the task's run ends `success`. Two gateways of one cluster on one PostgreSQL database, the model a
 * SCRIPTED Chat Completions server. Skipped, saying why, without PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Logger from "effect/Logger"
import * as Scheduler from "../../../src/programs/gateway/scheduler/Scheduler.js"
import * as Postgres from "../../support/postgres.js"
import { eventually } from "../../support/poll.js"
import { freePort } from "../../support/ports.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster adopt] skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

/** Each gateway's log lines, with their times and levels: what a failure shows, to tell its causes apart. */
const logs: Array<Array<string>> = []
const logger = (lines: Array<string>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ date, logLevel, message }) =>
      lines.push(`${date.toISOString()} ${logLevel.label} ${(Array.isArray(message) ? message : [message]).join(" ")}`)
    )
  )

const api = async (gateway: TestGateway, method: string, path: string, body?: unknown) =>
  (await as(() => gateway)(method, path, body)).json()

describe.skipIf("skip" in pg)("a scheduled run started and not made durable, in a cluster", () => {
  it("is adopted by the poller after STALE_QUEUED_MS and runs once", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const home = Support.tempDir("antler-gw-cluster-adopt-")
    for (let i = 0; i < 2; i++) {
      const lines: Array<string> = []
      logs.push(lines)
      gateways.push(await Support.start({
        script: () => "Report ready.",
        home,
        logger: logger(lines),
        config: {
          database: { url },
          gateway: { scheduler_poll_seconds: 1, cluster: { runner_port: await freePort(), health_check_seconds: 1 } }
        }
      }))
    }
    const [a] = gateways as [TestGateway, TestGateway]
    const thread = (await api(a, "POST", "/threads", {})).thread_id as string
    // a task whose next tick is far away: its one run is the one the dead process left
    const task = await api(a, "POST", "/api/scheduled-tasks", {
      title: "Yearly",
      prompt: "Write the yearly report",
      context_mode: "reuse_thread",
      thread_id: thread,
      schedule_type: "cron",
      schedule_spec: { cron: "0 0 1 1 *" },
      timezone: "UTC"
    })
    assert.isString(task.id, JSON.stringify(task))
    // what the dead process left: the task's run admitted (queued) over STALE_QUEUED_MS ago, and its run recorded
    // running under the ids the task's run gives it, no message of it in the thread and no durable message
    const left = Date.now() - Scheduler.STALE_QUEUED_MS - 5000
    const at = new Date(left).toISOString()
    const rowId = "task-run-left-by-a-dead-process"
    const { runId } = Scheduler.launchIds(rowId)
    Postgres.psql(url, "INSERT INTO antler_scheduled_task_runs (id, task_id, user_id, thread_id, run_id, scheduled_for, " +
      `trigger_kind, status, error, started_at, finished_at, created_at) VALUES ('${rowId}', '${task.id}', 'default', ` +
      `'${thread}', NULL, '${at}', 'manual', 'queued', NULL, NULL, NULL, '${at}')`)
    Postgres.psql(url, "INSERT INTO antler_runs (run_id, thread_id, status, stop_reason, started_at, ended_at, error, " +
      `metadata) VALUES ('${runId}', '${thread}', 'running', NULL, '${at}', NULL, NULL, '{}')`)

    // (what a failure shows: the run's records and the thread's lease in the database, each gateway's log and the
    // model's requests)
    const evidence = () =>
      [
        `runs: ${Postgres.psql(url, `SELECT run_id, status, started_at, ended_at, metadata FROM antler_runs ` +
          `WHERE thread_id = '${thread}'`)}`,
        `lease: ${Postgres.psql(url, `SELECT run_id, owner, expires_at FROM antler_leases WHERE thread_id = ` +
          `'${thread}'`)}`,
        ...gateways.map((g, i) =>
          `--- gateway ${i} (${g.url}), asked ${g.scripted.requests.length} times:\n${logs[i]!.join("\n")}`
        )
      ].join("\n")
    const runs = await eventually(async () => {
      const found = await api(a, "GET", `/api/scheduled-tasks/${task.id}/runs`)
      return Array.isArray(found) && found[0]?.status === "success" ? found : undefined
    }, () => `the task's run ended\n${evidence()}`, { tries: 1800 })
    assert.deepStrictEqual(runs.map((r: any) => [r.id, r.run_id, r.status]), [[rowId, runId, "success"]])
    const record = await api(a, "GET", `/threads/${thread}/runs/${runId}`)
    assert.strictEqual(record.status, "success", evidence())
    // the run ran once: its prompt and its answer once in the thread, the model asked once
    const state = await api(a, "GET", `/threads/${thread}/state`)
    assert.deepStrictEqual(
      Support.visible(state.values.messages).map((m: any) => [m.type, m.content]),
      [["human", "Write the yearly report"], ["ai", "Report ready."]],
      evidence()
    )
    const asked = gateways.flatMap((g) => g.scripted.requests)
      .filter((r) => JSON.stringify(r.messages).includes("Write the yearly report"))
    assert.strictEqual(asked.length, 1, evidence())
  }, 180_000)
})
