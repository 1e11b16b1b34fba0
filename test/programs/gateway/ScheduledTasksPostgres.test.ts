/**
 * Two gateways sharing one PostgreSQL database (two `antler serve` processes), both polling for due scheduled
 * tasks: tasks made on one are seen and controlled on the other, and each task's tick runs once between them
 * (one run, one model request), on whichever gateway took it.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Postgres from "../../support/postgres.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[scheduled tasks Postgres] skipped: ${pg.skip}`)

const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const call = async (gateway: TestGateway, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  })
  return response.json() as Promise<any>
}

describe.skipIf("skip" in pg)("scheduled tasks on gateways sharing a PostgreSQL database", () => {
  it("a task made on one is seen on the other, and each tick runs once between them", async () => {
    const url = await (pg as Postgres.Postgres).createDatabase()
    const config = {
      database: { url },
      gateway: { heartbeat_seconds: 1, scheduler_poll_seconds: 1 },
      scheduler: { min_once_delay_seconds: 1 }
    }
    const a = await Support.start({ script: () => "Scheduled answer.", config })
    gateways.push(a)
    const b = await Support.start({ script: () => "Scheduled answer.", config })
    gateways.push(b)

    const runAt = new Date(Date.now() + 2000).toISOString()
    const ids: Array<string> = []
    for (let i = 0; i < 4; i++) {
      const task = await call(a, "POST", "/api/scheduled-tasks", {
        title: `Task ${i}`,
        prompt: `Report ${i}`,
        schedule_type: "once",
        schedule_spec: { run_at: runAt },
        timezone: "UTC"
      })
      ids.push(task.id)
    }
    assert.deepStrictEqual((await call(b, "GET", "/api/scheduled-tasks")).map((t: any) => t.id).sort(), [...ids].sort())

    for (let i = 0; i < 1200; i++) {
      const tasks = await call(b, "GET", "/api/scheduled-tasks")
      if (tasks.every((t: any) => t.status === "completed")) break
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    for (const id of ids) {
      const task = await call(a, "GET", `/api/scheduled-tasks/${id}`)
      assert.strictEqual(task.status, "completed")
      assert.strictEqual(task.run_count, 1)
      const runs = await call(b, "GET", `/api/scheduled-tasks/${id}/runs`)
      assert.deepStrictEqual(runs.map((r: any) => [r.trigger, r.status]), [["scheduled", "success"]])
      const threadRuns = await call(a, "GET", `/api/threads/${runs[0].thread_id}/runs`)
      assert.deepStrictEqual(threadRuns.map((r: any) => r.run_id), [runs[0].run_id])
    }
    // one model request per task, whichever gateway ran it
    assert.strictEqual(a.scripted.requests.length + b.scripted.requests.length, ids.length)
  })
})
