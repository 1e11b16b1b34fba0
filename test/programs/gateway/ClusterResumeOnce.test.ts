/**
 * A run's durable message (`Execute`) delivered twice to its thread's runner while no process runs the run (its
 * runner died; a scheduled run adopted as well): the run is resumed once, and its model asked once. The two
 * deliveries are held where the first has found the thread free and is resuming the run (reading the thread) until
 * the second has found it free too; the first's run then ends before the second goes on. A second delivery must not
 * run the run again once it ended (the model asked a second time, a second answer in the thread).
 * One gateway of a cluster on PostgreSQL, the model a SCRIPTED Chat Completions server. Skipped, saying why, without
 * PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { RunRequest } from "../../../src/programs/gateway/RunModel.js"
import type { ThreadStore } from "../../../src/services/ThreadStore.js"
import { gate } from "../../support/gate.js"
import { until } from "../../support/poll.js"
import { freePort } from "../../support/ports.js"
import * as Postgres from "../../support/postgres.js"
import { as } from "../../support/requests.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster resume once] skipped: ${pg.skip}`)

let gateway: TestGateway | undefined
const holds = [gate(), gate()] as const
afterAll(async () => {
  for (const hold of holds) hold.release()
  await gateway?.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

describe.skipIf("skip" in pg)("a run's durable message delivered twice", () => {
  it("resumes the run once: the model asked once, one answer in the thread", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    // the thread's reads by the resumes of the run, once armed: the first two wait at their gates
    let watched: string | undefined
    let reads = 0
    const wrap = (store: ThreadStore["Type"]): ThreadStore["Type"] => ({
      ...store,
      load: (threadId) =>
        threadId !== watched || reads >= holds.length
          ? store.load(threadId)
          : Effect.zipRight(holds[reads++]!.wait, store.load(threadId))
    })
    gateway = await Support.start({
      script: () => "Report ready.",
      home: Support.tempDir("antler-gw-cluster-resume-once-"),
      wrapStore: wrap,
      config: {
        database: { url },
        gateway: { cluster: { runner_port: await freePort(), health_check_seconds: 1 } }
      }
    })
    const api = async (method: string, path: string, body?: unknown) =>
      (await as(() => gateway!)(method, path, body)).json()
    const thread = (await api("POST", "/threads", {})).thread_id as string
    // what a dead runner left: the run recorded running, no message of it in the thread, no lease
    const runId = "run-left-by-a-dead-runner"
    Postgres.psql(url, "INSERT INTO antler_runs (run_id, thread_id, status, stop_reason, started_at, ended_at, error, " +
      `metadata) VALUES ('${runId}', '${thread}', 'running', NULL, '${new Date().toISOString()}', NULL, NULL, '{}')`)
    const request: RunRequest = {
      threadId: thread,
      userId: "default",
      assistantId: "lead_agent",
      messages: [{ type: "human", id: `${runId}-input`, content: "Write the yearly report" }],
      settings: {},
      modes: ["values"],
      multitaskStrategy: "reject",
      metadata: {}
    }
    // its durable message sent twice (`Runs.adopt`)
    watched = thread
    const adopt = gateway.runs.adopt!
    await Effect.runPromise(Effect.all([adopt(request, runId), adopt(request, runId)], { concurrency: 2 }))
    // both deliveries found the thread free and resume the run; the first goes on and its run ends
    await holds[0].entered
    await holds[1].entered
    holds[0].release()
    const statusOf = () => Postgres.psql(url, `SELECT status FROM antler_runs WHERE run_id = '${runId}'`)
    await until(() => statusOf() === "success", () => `the run ended: ${statusOf()}`)
    // then the second goes on; both deliveries answered
    holds[1].release()
    const answered = () =>
      Postgres.psql(url, "SELECT count(*) FROM cluster_messages WHERE tag = 'Execute' AND processed")
    await until(() => answered() === "2", () => `both deliveries answered: ${answered()}`)

    const state = await api("GET", `/threads/${thread}/state`)
    assert.deepStrictEqual(
      Support.visible(state.values.messages).map((m: any) => [m.type, m.content]),
      [["human", "Write the yearly report"], ["ai", "Report ready."]]
    )
    const asked = gateway.scripted.requests
      .filter((r) => JSON.stringify(r.messages).includes("Write the yearly report"))
    assert.strictEqual(asked.length, 1)
    assert.strictEqual(statusOf(), "success")
  }, 120_000)
})
