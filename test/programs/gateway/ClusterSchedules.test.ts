/**
 * Scheduled tasks in a cluster (issue 30 item 3): three `antler serve` processes (real child processes) are runners
 * of one cluster on one PostgreSQL database. The scheduler's polls are the cluster's singleton: exactly one process
 * polls (it says so in its log at `--log-level info`), and no tick runs twice (one task run, one thread, one model
 * request). The polling process is killed with SIGKILL: the engine moves the poller to one of the others and the
 * ticks go on there, none doubled; then all three are stopped, a tick comes while none runs, and once they are
 * started again that tick runs once and the ticks go on. Every tick due runs exactly once: one the killed process
 * had admitted and not started is started by another, one whose run a process was executing is resumed where it
 * runs next. The ticks are `once` tasks a few seconds apart (a cron
 * schedule's shortest period is a minute) and a cron task every minute. The runners share a secret
 * (`gateway.cluster.secret`), as on a real network. Skipped, saying why, without PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import * as Scheduler from "../../../src/programs/gateway/scheduler/Scheduler.js"
import type { ServeProcess as Server } from "../../support/cli.js"
import * as Cluster from "../../support/cluster.js"
import { until } from "../../support/poll.js"
import * as Postgres from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[gateway cluster schedules] skipped: ${pg.skip}`)

/** Whether the process polls for due ticks now: its last word on it (in its log) is that it does. */
const polling = (server: Server) => {
  const text = server.output()
  return text.lastIndexOf(Scheduler.POLLING) > text.lastIndexOf(Scheduler.STOPPED_POLLING)
}

const call = async (base: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  })
  return response.json() as Promise<any>
}

const suite = Cluster.suite(pg)

const TICKS = 25
const SPACING_MS = 4000
const promptOf = (body: ChatRequestBody) =>
  JSON.stringify(body.messages.filter((m) => m.role === "user").map((m) => m.content))

describe.skipIf("skip" in pg)("scheduled tasks in a cluster of three runners", () => {
  it("no tick runs twice, on the engine's one poller; it moves when its runner dies; a restart goes on", async () => {
    const dbUrl = await (pg as Postgres.Postgres).createDatabase()
    const scripted = await suite.model(() => "Scheduled answer.")
    const home = Support.tempDir("antler-cluster-schedules-")
    /** Every process the test started, as it ended (killed, stopped) or still running: its log belongs in a failure. */
    const started: Array<{ readonly server: Server; fate: string }> = []
    const start = async () => {
      const server = (await suite.runner({
        dbUrl,
        home,
        modelUrl: scripted.url,
        gateway: { scheduler_poll_seconds: 1 },
        // (the ticks are seconds apart: DeerFlow's 60 s least delay of a once task is shortened)
        config: { scheduler: { min_once_delay_seconds: 1 } },
        cluster: { health_check_seconds: 1, secret: "schedules-cluster-secret-0123456789" },
        args: ["--log-level", "info"]
      })).server
      started.push({ server, fate: "running" })
      return server
    }
    const fateOf = (server: Server, fate: string) => {
      const entry = started.find((s) => s.server === server)
      if (entry !== undefined) entry.fate = fate
    }
    /** The logs of every process that ran (the killed one and the stopped ones too), in the order they started. */
    const allLogs = () =>
      started.map((s, i) => `--- process ${i} (pid ${s.server.child.pid}, ${s.fate})\n${s.server.output()}`).join("\n")
    /** The one process of `group` polling, once exactly one does (the singleton may move while runners join). */
    const poller = async (group: ReadonlyArray<Server>) => {
      await until(() => group.filter(polling).length === 1, () => `exactly one process polling:\n${allLogs()}`)
      return group.find(polling)!
    }

    let live = [await start(), await start(), await start()]
    await poller(live)

    // the ticks: `once` tasks a few seconds apart, and a cron task every minute
    const base = live[0]!
    const url = await base.url
    const t0 = Date.now()
    const ticks: Array<{ id: string; at: number; prompt: string }> = []
    for (let k = 1; k <= TICKS; k++) {
      const at = t0 + k * SPACING_MS
      const prompt = `Tick ${k} report`
      const task = await call(url, "POST", "/api/scheduled-tasks", {
        title: `Tick ${k}`,
        prompt,
        schedule_type: "once",
        schedule_spec: { run_at: new Date(at).toISOString() },
        timezone: "UTC"
      })
      assert.isString(task.id, JSON.stringify(task))
      ticks.push({ id: task.id, at, prompt })
    }
    const cron = await call(url, "POST", "/api/scheduled-tasks", {
      title: "Every minute",
      prompt: "Minute report",
      schedule_type: "cron",
      schedule_spec: { cron: "* * * * *" },
      timezone: "UTC"
    })
    assert.isString(cron.id, JSON.stringify(cron))

    const completed = async (from: string, tick: { id: string }) =>
      (await call(from, "GET", `/api/scheduled-tasks/${tick.id}`)).status === "completed"
    /** Waits until the first tick due after `since` ran (on the processes of `group`). */
    const tickAfter = async (group: ReadonlyArray<Server>, since: number) => {
      const tick = ticks.find((t) => t.at > since)
      assert.isDefined(tick, "a tick left to come")
      const from = await group[0]!.url
      await until(() => completed(from, tick!), () => `tick ${tick!.prompt} ran:\n${allLogs()}`)
      return tick!
    }

    // all three up: ticks run, one process polls
    await tickAfter(live, t0)
    assert.strictEqual(live.filter(polling).length, 1)

    // the polling process is killed: the engine starts the poller on another, and the ticks go on there
    const victim = (await poller(live))
    fateOf(victim, "killed with SIGKILL")
    victim.child.kill("SIGKILL")
    await new Promise((resolve) => victim.child.once("exit", resolve))
    const killedAt = Date.now()
    live = live.filter((s) => s !== victim)
    await poller(live)
    await tickAfter(live, killedAt)

    // a full restart: every process stops, three start again, and the ticks go on
    for (const server of live) {
      fateOf(server, `stopped with SIGTERM at ${new Date().toISOString()}`)
      server.child.kill("SIGTERM")
      await until(() => server.child.exitCode !== null || server.child.signalCode !== null, () =>
        `a process stopped on SIGTERM:\n${server.output()}`)
    }
    // a tick comes while none runs: it runs once when they are back
    const stoppedAt = Date.now()
    const missed = ticks.find((t) => t.at > stoppedAt)!
    await new Promise((resolve) => setTimeout(resolve, missed.at - Date.now() + 500))
    live = [await start(), await start(), await start()]
    await poller(live)
    await tickAfter(live, missed.at)
    // the ticks due by now are waited for, the others deleted (the test ends on a slow machine too)
    const last = await live[1]!.url
    const cut = Date.now()
    const due = ticks.filter((t) => t.at <= cut)
    for (const tick of ticks) if (tick.at > cut) await call(last, "DELETE", `/api/scheduled-tasks/${tick.id}`)
    let pending = ""
    /** A tick's task runs, and the thread store's record of each of their runs (what its thread's runs say). */
    const runsOf = async (tick: { readonly id: string; readonly prompt: string }) => {
      const runs: Array<any> = await call(last, "GET", `/api/scheduled-tasks/${tick.id}/runs`)
      const threads = await Promise.all(runs.map(async (r: any) =>
        typeof r.thread_id === "string" && r.thread_id !== ""
          ? JSON.stringify(await call(last, "GET", `/api/threads/${r.thread_id}/runs`))
          : "no thread"
      ))
      return `${tick.prompt}: ${JSON.stringify(runs)} thread runs: ${threads.join(" | ")}`
    }
    // (a tick whose run the killed process had admitted and not started is started by another after
    // STALE_QUEUED_MS; a run the stopping processes handed over is resumed once they are back)
    await until(async () => {
      for (const tick of due) {
        if (await completed(last, tick)) continue
        pending = (await runsOf(tick)) + " cron: " +
          JSON.stringify(await call(last, "GET", `/api/scheduled-tasks/${cron.id}/runs`)) + " tasks: " +
          JSON.stringify((await call(last, "GET", "/api/scheduled-tasks")).map((t: any) => [t.title, t.status]))
        return false
      }
      return true
    }, () => `every tick due ran (the first not: ${pending}):\n${allLogs()}`)

    // every tick due ran exactly once: one run (success), one thread with one run, one model request (a failure says
    // what each tick not ended `success` left, in the task store and the thread store, and what every process logged)
    const notSucceeded: Array<string> = []
    for (const tick of due) {
      const runs = await call(last, "GET", `/api/scheduled-tasks/${tick.id}/runs`)
      if (runs.length !== 1 || runs[0].status !== "success") notSucceeded.push(await runsOf(tick))
    }
    const story = `\nticks not ended success: ${notSucceeded.join("\n") || "none"}\n${allLogs()}`
    for (const tick of due) {
      const runs = await call(last, "GET", `/api/scheduled-tasks/${tick.id}/runs`)
      const asked = scripted.requests.filter((body) => promptOf(body).includes(tick.prompt))
      const task = await call(last, "GET", `/api/scheduled-tasks/${tick.id}`)
      assert.strictEqual(task.run_count, 1, tick.prompt + story)
      assert.deepStrictEqual(
        runs.map((r: any) => [r.trigger, r.status]),
        [["scheduled", "success"]],
        tick.prompt + story
      )
      const threadRuns = await call(last, "GET", `/api/threads/${runs[0].thread_id}/runs`)
      assert.deepStrictEqual(threadRuns.map((r: any) => r.run_id), [runs[0].run_id], tick.prompt + story)
      assert.strictEqual(asked.length, 1, `${tick.prompt}: model requests${story}`)
    }
    const late = (await call(last, "GET", `/api/scheduled-tasks/${missed.id}/runs`))[0]
    assert.isAbove(Date.parse(late.started_at), missed.at + 500, "the missed tick ran after the restart")
    // the cron task's ticks (one a minute, as many as the test lasted): each once (a tick that fell due just now
    // is let finish first: its run is recorded before it asks the model)
    let cronRuns: Array<any> = []
    await until(async () => {
      cronRuns = await call(last, "GET", `/api/scheduled-tasks/${cron.id}/runs`)
      return cronRuns.every((r: any) => r.status !== "queued" && r.status !== "running")
    }, () => `the cron's runs ended: ${JSON.stringify(cronRuns)}\n${allLogs()}`)
    const scheduledFor = cronRuns.map((r: any) => r.scheduled_for)
    assert.strictEqual(new Set(scheduledFor).size, scheduledFor.length, JSON.stringify(cronRuns))
    const minuteAsked = scripted.requests.filter((body) => promptOf(body).includes("Minute report")).length
    assert.strictEqual(minuteAsked, cronRuns.filter((r: any) => r.status !== "skipped").length)
    // one process polls after the restart (once the singleton settled on one)
    await poller(live)
  }, 240_000)
})
