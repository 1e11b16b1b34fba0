/**
 * DeerFlow's `test_scheduled_task_service.py`, through a real gateway (its poller every second, DeerFlow's 60 s least
 * delay of a once task shortened to 1 s): the cases of its scheduler service a user sees in the tasks and their runs.
 * A run stopped is `interrupted` with DeerFlow's words and ends its once task `cancelled` (it was `failed`, with the
 * words `the run ended interrupted`); a tick whose thread is busy with another run is `skipped` (it was `failed`).
 * Its fakes' internals (leases, bookkeeping writes that fail, legacy rows) are docs/deerflow.md's lines.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChatRequestBody } from "../../../src/layers/ScriptedChatServer.js"
import { eventually } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

/** Echoes, stalls on "hang", and fails (a provider's 401, which no retry helps) on "refuse". */
const script = (body: ChatRequestBody) =>
  Support.lastUserText(body).includes("refuse")
    ? { status: 401, body: { error: { message: "boom: the key was revoked", type: "invalid_request_error" } } }
    : Support.echoOrHang(body)

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({
    script,
    config: {
      gateway: { ...Support.twoUsers, scheduler_poll_seconds: 1 },
      scheduler: { min_once_delay_seconds: 1 }
    }
  })
})
afterAll(() => gateway.stop())

const alice = as(() => gateway, Support.ALICE)

const cron = (fields: Record<string, unknown> = {}) => ({
  title: "Summary",
  prompt: "Summarize thread",
  schedule_type: "cron",
  schedule_spec: { cron: "0 9 * * *" },
  timezone: "UTC",
  ...fields
})

const once = (fields: Record<string, unknown> = {}, inMs = 3_600_000) =>
  cron({ schedule_type: "once", schedule_spec: { run_at: new Date(Date.now() + inMs).toISOString() }, ...fields })

const created = async (body: Record<string, unknown>) => {
  const answer = await alice("POST", "/api/scheduled-tasks", body)
  assert.strictEqual(answer.status, 200, answer.text)
  return answer.json()
}

const taskOf = async (id: string) => (await alice("GET", `/api/scheduled-tasks/${id}`)).json()
const runsOf = async (id: string) => (await alice("GET", `/api/scheduled-tasks/${id}/runs`)).json()

const until = <A>(check: () => Promise<A | undefined | false>, what: string) =>
  eventually(async () => (await check()) || undefined, what, { tries: 800, everyMs: 25 })

const settledRuns = (id: string, count: number) =>
  until(async () => {
    const runs = await runsOf(id)
    return runs.length === count && runs.every((r: any) => r.status !== "queued" && r.status !== "running") && runs
  }, `${count} runs of ${id} end`)

/** Stops the task's run that is going (its thread's run cancelled). */
const stopRun = async (id: string) => {
  const run = await until(async () => (await runsOf(id)).find((r: any) => r.status === "running"), "a run goes")
  const cancelled = await alice("POST", `/api/threads/${run.thread_id}/runs/${run.run_id}/cancel`)
  assert.include([200, 202, 204], cancelled.status, cancelled.text)
  return run
}

describe("test_scheduled_task_service.py", () => {
  it("test_service_claims_and_dispatches_due_task", async () => {
    const task = await created(once({}, 2500))
    const [run] = await settledRuns(task.id, 1)
    assert.deepStrictEqual([run.trigger, run.status], ["scheduled", "success"])
    const after = await taskOf(task.id)
    assert.deepStrictEqual([after.status, after.next_run_at, after.run_count], ["completed", null, 1])
  })

  it("test_manual_trigger_keeps_paused_cron_task_paused", async () => {
    const task = await created(cron())
    await alice("POST", `/api/scheduled-tasks/${task.id}/pause`)
    const triggered = await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    assert.strictEqual(triggered.status, 200, triggered.text)
    const [run] = await settledRuns(task.id, 1)
    assert.strictEqual(run.status, "success")
    assert.strictEqual((await taskOf(task.id)).status, "paused")
  })

  it("test_fresh_thread_per_run_creates_new_execution_thread", async () => {
    const task = await created(cron({ context_mode: "fresh_thread_per_run" }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    await settledRuns(task.id, 1)
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    const runs = await settledRuns(task.id, 2)
    const threads = runs.map((r: any) => r.thread_id)
    assert.notStrictEqual(threads[0], threads[1])
    const after = await taskOf(task.id)
    assert.isNull(after.thread_id)
    assert.strictEqual(after.last_thread_id, threads[0])
    for (const thread of threads) {
      assert.strictEqual((await alice("GET", `/api/threads/${thread}/runs`)).json().length, 1)
    }
  })

  it("test_scheduled_overlap_conflict_is_recorded_as_skip", async () => {
    await alice("POST", "/api/threads", { thread_id: "overlap-thread" })
    const busy = (await alice("POST", "/api/threads/overlap-thread/runs", {
      assistant_id: "lead_agent",
      input: Support.userInput("hang on")
    })).json()
    const task = await created(once({ context_mode: "reuse_thread", thread_id: "overlap-thread" }, 2500))
    const [run] = await settledRuns(task.id, 1)
    assert.deepStrictEqual([run.trigger, run.status, run.run_id], ["scheduled", "skipped", null])
    assert.match(run.error, /already has a run in progress/)
    // a once task's one tick is lost: failed, as DeerFlow's (not completed: no run of it happened)
    const after = await taskOf(task.id)
    assert.strictEqual(after.status, "failed")
    assert.strictEqual(after.run_count, 0)
    await alice("POST", `/api/threads/overlap-thread/runs/${busy.run_id}/cancel`)
  })

  it("test_handle_run_completion_persists_success", async () => {
    const task = await created(cron())
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    const [run] = await settledRuns(task.id, 1)
    assert.deepStrictEqual([run.status, run.error], ["success", null])
    assert.isNull((await taskOf(task.id)).last_error)
  })

  it("test_once_task_completes_only_via_completion_hook", async () => {
    const task = await created(once({ prompt: "hang until stopped" }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    await until(async () => (await runsOf(task.id))[0]?.status === "running", "the run goes")
    // going, it is not completed
    assert.strictEqual((await taskOf(task.id)).status, "running")
    const next = await created(once())
    await alice("POST", `/api/scheduled-tasks/${next.id}/trigger`)
    await settledRuns(next.id, 1)
    assert.strictEqual((await taskOf(next.id)).status, "completed")
    await stopRun(task.id)
  })

  it("test_once_task_failed_run_marks_task_failed", async () => {
    const task = await created(once({ prompt: "refuse this one" }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    const [run] = await settledRuns(task.id, 1)
    assert.strictEqual(run.status, "failed", JSON.stringify(run))
    assert.isString(run.error)
    const after = await taskOf(task.id)
    assert.strictEqual(after.status, "failed")
    assert.strictEqual(after.last_error, run.error)
  })

  it("test_interrupted_run_is_distinct_and_cancels_once_task", async () => {
    const task = await created(once({ prompt: "hang here" }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    await stopRun(task.id)
    const [run] = await settledRuns(task.id, 1)
    assert.deepStrictEqual([run.status, run.error], ["interrupted", "run was interrupted before completion"])
    await until(async () => (await taskOf(task.id)).status !== "running", "the task records its run's end")
    assert.strictEqual((await taskOf(task.id)).status, "cancelled")
  })

  it("test_interrupted_cron_run_keeps_task_enabled", async () => {
    const task = await created(cron({ prompt: "hang there" }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    await stopRun(task.id)
    const [run] = await settledRuns(task.id, 1)
    assert.strictEqual(run.status, "interrupted")
    assert.strictEqual((await taskOf(task.id)).status, "enabled")
  })

  it("test_manual_trigger_with_active_run_returns_conflict_without_launching", async () => {
    const task = await created(cron({ prompt: "hang a while" }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    await until(async () => (await runsOf(task.id))[0]?.status === "running", "the run goes")
    const refused = await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    assert.strictEqual(refused.status, 409, refused.text)
    assert.match(refused.json().detail, /task already has an active run/)
    // nothing was to happen: no run recorded for the refused trigger
    assert.strictEqual((await runsOf(task.id)).length, 1)
    await stopRun(task.id)
  })

  it("test_manual_trigger_rejected_when_global_budget_exhausted, then proceeds when budget available", async () => {
    // (Antler's budget is per user, three runs of their tasks at once; DeerFlow's is the process's)
    const tasks = await Promise.all([1, 2, 3, 4].map((k) => created(cron({ prompt: `hang number ${k}` }))))
    for (const task of tasks.slice(0, 3)) {
      assert.strictEqual((await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)).status, 200)
    }
    const refused = await alice("POST", `/api/scheduled-tasks/${tasks[3].id}/trigger`)
    assert.strictEqual(refused.status, 409, refused.text)
    assert.match(refused.json().detail, /have as many runs going as they may/)
    // bob's tasks are not held by alice's runs
    const bob = as(() => gateway, Support.BOB)
    const bobs = (await bob("POST", "/api/scheduled-tasks", cron())).json()
    assert.strictEqual((await bob("POST", `/api/scheduled-tasks/${bobs.id}/trigger`)).status, 200)
    await stopRun(tasks[0].id)
    await settledRuns(tasks[0].id, 1)
    const proceeds = await alice("POST", `/api/scheduled-tasks/${tasks[3].id}/trigger`)
    assert.strictEqual(proceeds.status, 200, proceeds.text)
    for (const task of [tasks[1], tasks[2], tasks[3]]) await stopRun(task.id)
  })
})
