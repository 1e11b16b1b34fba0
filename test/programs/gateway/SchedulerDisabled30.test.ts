/**
 * DeerFlow's `scheduler.enabled: false` (its config.example.yaml's value): its gateway builds the scheduled task
 * service but never starts its poller, so no task ticks on its schedule, while every route still answers (a task is
 * made, listed, triggered by hand and run). Antler ignored the key and ticked. Two gateways polling every second,
 * each with the same `once` task due 2.5 s after it is made: the one with the key off runs it only when it is
 * triggered, after the other has run its own on its schedule.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Scheduler from "../../../src/programs/gateway/scheduler/Scheduler.js"
import { captureLogs } from "../../support/logs.js"
import { eventually } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

const offLogs = captureLogs()
const onLogs = captureLogs()
let off: Support.TestGateway
let on: Support.TestGateway
const config = (enabled: boolean) => ({
  gateway: { ...Support.twoUsers, scheduler_poll_seconds: 1 },
  scheduler: { enabled, min_once_delay_seconds: 1 }
})
beforeAll(async () => {
  off = await Support.start({ script: Support.echoOrHang, config: config(false), logger: offLogs.capture })
  on = await Support.start({ script: Support.echoOrHang, config: config(true), logger: onLogs.capture })
})
afterAll(async () => {
  await off?.stop()
  await on?.stop()
})

const onceSoon = () => ({
  title: "Summary",
  prompt: "Summarize thread",
  schedule_type: "once",
  schedule_spec: { run_at: new Date(Date.now() + 2_500).toISOString() },
  timezone: "UTC"
})

const settledRuns = (gateway: Support.TestGateway, id: string) =>
  eventually(async () => {
    const runs = (await as(() => gateway, Support.ALICE)("GET", `/api/scheduled-tasks/${id}/runs`)).json()
    return runs.length > 0 && runs.every((r: any) => r.status !== "queued" && r.status !== "running") ? runs : undefined
  }, `the runs of ${id} end`, { tries: 800, everyMs: 25 })

describe("scheduler.enabled: false", () => {
  it("runs no tick on a task's schedule; the routes answer and a trigger runs it", async () => {
    const alice = as(() => off, Support.ALICE)
    const made = await alice("POST", "/api/scheduled-tasks", onceSoon())
    assert.strictEqual(made.status, 200, made.text)
    const task = made.json()
    const control = await as(() => on, Support.ALICE)("POST", "/api/scheduled-tasks", onceSoon())
    assert.strictEqual(control.status, 200, control.text)
    // the other gateway's task, made after it, ran on its schedule
    const [ticked] = await settledRuns(on, control.json().id)
    assert.strictEqual(ticked.trigger, "scheduled")
    assert.isTrue(onLogs.logged.some((line) => line.includes(Scheduler.POLLING)))
    // this one's did not, and this gateway never polled for due ticks
    assert.deepStrictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}/runs`)).json(), [])
    const listed = (await alice("GET", "/api/scheduled-tasks")).json()
    assert.deepStrictEqual(listed.map((t: any) => [t.id, t.status, t.run_count]), [[task.id, "enabled", 0]])
    assert.isFalse(offLogs.logged.some((line) => line.includes(Scheduler.POLLING)))
    // a trigger by hand runs it, as DeerFlow's route does with its service not started
    const triggered = await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    assert.strictEqual(triggered.status, 200, triggered.text)
    assert.deepStrictEqual(triggered.json(), { id: task.id, triggered: true })
    const [run] = await settledRuns(off, task.id)
    assert.deepStrictEqual([run.trigger, run.status], ["manual", "success"])
  }, 60_000)
})
