/**
 * A long-running MCP task started by a run given request secrets, in a cluster of two gateways on one PostgreSQL
 * sharing `gateway.cluster.secret`: the task is started on the process that ran the run, which stops before the task
 * ends; the other process polls its result and opens the run's sealed secrets (the cluster's key), so what the task
 * says is masked, not withheld, in its record, its notification run and the database. The database holds the task
 * table as the build before `sealed_secrets` made it (the gateways add the column as they start). Skipped, saying
 * why, without PostgreSQL.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Path from "node:path"
import { INSTRUCTION } from "../../../src/programs/gateway/mcptasks/Notifier.js"
import * as Records from "../../../src/programs/gateway/mcptasks/Records.js"
import { allowNodeServers, reportTaskServer, TASKS_IN_FILE, writeTaskExtensions } from "../../support/mcpTaskServer.js"
import { eventually } from "../../support/poll.js"
import { freePort } from "../../support/ports.js"
import * as Postgres from "../../support/postgres.js"
import type { TestGateway } from "./support.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[request secrets of an MCP task in a cluster] skipped: ${pg.skip}`)
const gateways: Array<TestGateway> = []
afterAll(async () => {
  for (const gateway of gateways) await gateway.stop().catch(() => {})
  if ("stop" in pg) await pg.stop()
})

const SLOW = 240_000
const MARK = "DO-NOT-LEAK"
const SECRET = `erp-cluster-task-5e1d-${MARK}`
const B64 = Buffer.from(SECRET).toString("base64")
const CLUSTER_SECRET = "s3cret-of-the-task-runners-0123456789"

/** Tasks kept in a file both processes' servers read; a task says its topic back after 6 s, also base64-encoded. */
const SERVER = reportTaskServer({
  prelude: TASKS_IN_FILE,
  status: `if (task === undefined) return answer({ task_id: args.task_id, status: "failed", error: "no such task" })
    const { topic, at } = task
    if (Date.now() - at < 6000) return answer({ task_id: args.task_id, status: "running" })
    return answer({ task_id: args.task_id, status: "completed",
      result: { report: "Report on " + topic, key: Buffer.from(topic).toString("base64") } })`
})

allowNodeServers()

const isNotification = (body: any) => Support.lastUserText(body).startsWith(INSTRUCTION)

const script = (body: any) => {
  if (isNotification(body)) return "Your task is done."
  if (body.messages.at(-1)?.role === "tool") return "Started."
  return { toolCalls: [{ name: "tasks_start_report", arguments: { topic: SECRET } }] }
}

const call = (gateway: TestGateway, path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${gateway.url}${path}`, {
    method: init.method ?? "GET",
    headers: { "content-type": "application/json" },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
  })

const hidden = (text: string, where: string) => {
  assert.notInclude(text, MARK, where)
  assert.notInclude(text, B64.slice(4, 24), where)
}

describe.skipIf("skip" in pg)("Secrets25b: an MCP task's request secrets across a cluster's processes", () => {
  it("the process polling the task after its starter stopped opens the sealed secrets: masked, not withheld",
    async () => {
      const url = await (pg as Postgres.Postgres).createDatabase()
      // (the task table as the build before sealed_secrets made it)
      Postgres.psql(url, Records.MIGRATIONS[0]!.replace(/,\s*sealed_secrets TEXT\s*\)$/, "\n  )"))
      const dir = Support.tempDir("antler-s25b-cluster-task-")
      const source = writeTaskExtensions(dir, SERVER, { env: { TASKS_FILE: Path.join(dir, "tasks.json") } })
      for (let i = 0; i < 2; i++) {
        gateways.push(await Support.start({
          script,
          source,
          home: Support.tempDir(`antler-s25b-cluster-home-${i}-`),
          config: {
            database: { url },
            mcp_tasks: { enabled: true, poll_interval_seconds: 1 },
            gateway: {
              heartbeat_seconds: 1,
              cluster: { runner_port: await freePort(), health_check_seconds: 1, drain_seconds: 1,
                secret: CLUSTER_SECRET }
            }
          }
        }))
      }
      const [a, b] = gateways
      const column = Postgres.psql(url, "SELECT column_name FROM information_schema.columns WHERE " +
        "table_name = 'antler_mcp_tasks' AND column_name = 'sealed_secrets'")
      assert.strictEqual(column, "sealed_secrets")
      const thread = await (await call(a!, "/threads", { method: "POST", body: {} })).json() as any
      const answer = await call(a!, `/threads/${thread.thread_id}/runs/wait`, {
        method: "POST",
        body: {
          assistant_id: "lead_agent",
          input: Support.userInput("file the report"),
          context: { secrets: { ERP_TOKEN: SECRET } }
        }
      })
      assert.strictEqual(answer.status, 200, await answer.clone().text())
      // the process that ran the run started the task; it stops before the task ends
      const [starter, other] = a!.scripted.requests.length > 0 ? [a!, b!] : [b!, a!]
      assert.isAbove(starter.scripted.requests.length, 0)
      const sealed = Postgres.psql(url, "SELECT sealed_secrets FROM antler_mcp_tasks")
      assert.match(sealed, /^antler-sealed-v1\./, "the task's record holds the run's secrets sealed")
      const taskId = Postgres.psql(url, "SELECT id FROM antler_mcp_tasks")
      await starter.stop()
      gateways.splice(gateways.indexOf(starter), 1)
      const task = await eventually(async () => {
        const read = await call(other, `/api/threads/${thread.thread_id}/mcp-tasks/${taskId}`)
        const body = read.status === 200 ? await read.json() as any : undefined
        return body?.status === "completed" ? body : undefined
      }, "the task completed, polled by the other process", { tries: 400, everyMs: 100 })
      assert.deepStrictEqual(task.result, { report: "Report on [redacted]", key: "[redacted]" })
      assert.notInclude(JSON.stringify(task), "[withheld")
      await eventually(async () => {
        const runs = await (await call(other, `/threads/${thread.thread_id}/runs?limit=50`)).json() as any
        const told = runs.filter((run: any) => run.metadata?.mcp_task_notification !== undefined)
        return told.length === 1 && told[0].status === "success" ? told : undefined
      }, "the notification run", { tries: 400, everyMs: 100 })
      const told = other.scripted.requests.filter(isNotification)
      assert.isAtLeast(told.length, 1)
      assert.include(JSON.stringify(told), "Report on [redacted]")
      hidden(JSON.stringify(told), "the notification run's model request")
      const state = await (await call(other, `/threads/${thread.thread_id}/state`)).text()
      hidden(state, "the thread's state")
      hidden(JSON.stringify(task), "the task's record")
      const dump = Postgres.psql(url, "SELECT string_agg(t::text, ' ') FROM antler_mcp_tasks t")
      hidden(dump, "the task table")
      assert.strictEqual(Postgres.psql(url, "SELECT count(sealed_secrets) FROM antler_mcp_tasks"), "0",
        "the record drops the sealed secrets when the task ends")
    }, SLOW)
})
