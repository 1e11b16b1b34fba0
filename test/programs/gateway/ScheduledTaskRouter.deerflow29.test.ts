/**
 * DeerFlow's `test_scheduled_task_router.py` and `test_scheduled_task_router_behavior.py`, through a real gateway:
 * the routes are there, and each router case as the user sees it (status, fields, the 409s of a running task, the
 * 422s of a thread id no thread can have and of a once task sooner than `scheduler.min_once_delay_seconds`).
 * Differs on purpose: a thread id may have dots and up to 114 characters (docs/deerflow.md, "Thread ids a client
 * gives may be longer, and have dots"); a task answers no `user_id` (DeerFlow's app does not read it).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { eventually } from "../../support/poll.js"
import { as } from "../../support/requests.js"
import * as Support from "./support.js"

let gateway: Support.TestGateway
beforeAll(async () => {
  gateway = await Support.start({ script: Support.echoOrHang, config: { gateway: Support.twoUsers } })
})
afterAll(() => gateway.stop())

const alice = as(() => gateway, Support.ALICE)

const cron = (fields: Record<string, unknown> = {}) => ({
  title: "Daily summary",
  prompt: "Summarize thread",
  schedule_type: "cron",
  schedule_spec: { cron: "0 9 * * *" },
  timezone: "UTC",
  ...fields
})

const created = async (body: Record<string, unknown>) => {
  const answer = await alice("POST", "/api/scheduled-tasks", body)
  assert.strictEqual(answer.status, 200, answer.text)
  return answer.json()
}

const runsOf = async (taskId: string) => (await alice("GET", `/api/scheduled-tasks/${taskId}/runs`)).json()

/** The task's runs once `check` holds of them. */
const runsWhen = (taskId: string, check: (runs: Array<any>) => boolean, what: string) =>
  eventually(async () => {
    const runs = await runsOf(taskId)
    return check(runs) ? runs : undefined
  }, what, { tries: 800, everyMs: 25 })

/** Stops the task's run that is going (its thread's run cancelled), and waits until the task records its end. */
const stopRun = async (taskId: string) => {
  const [run] = await runsWhen(taskId, (runs) => runs[0]?.status === "running", "the task's run goes")
  const cancelled = await alice("POST", `/api/threads/${run.thread_id}/runs/${run.run_id}/cancel`)
  assert.include([200, 202, 204], cancelled.status, cancelled.text)
  await runsWhen(taskId, (runs) => runs[0]?.status === "interrupted", "the task's run is recorded interrupted")
}

describe("test_scheduled_task_router.py", () => {
  it("test_router_registers_list_endpoint", async () => {
    const listed = await alice("GET", "/api/scheduled-tasks")
    assert.strictEqual(listed.status, 200, listed.text)
    assert.isArray(listed.json())
  })

  it("test_router_registers_trigger_route", async () => {
    // the route answers for the task it names (none here), not as a path nothing serves
    const unknown = await alice("POST", "/api/scheduled-tasks/task-1/trigger")
    assert.strictEqual(unknown.status, 404, unknown.text)
    assert.strictEqual(unknown.json().detail, "Scheduled task not found.")
  })

  it("test_router_registers_create_route", async () => {
    const answer = await alice("POST", "/api/scheduled-tasks", { ...cron(), thread_id: "thread-1" })
    assert.strictEqual(answer.status, 200, answer.text)
  })
})

describe("test_scheduled_task_router_behavior.py", () => {
  it("test_scheduled_task_models_reject_invalid_thread_ids", async () => {
    const task = await created(cron({ title: "To change" }))
    for (const threadId of ["", "../escape"]) {
      for (const mode of ["fresh_thread_per_run", "reuse_thread"]) {
        const made = await alice("POST", "/api/scheduled-tasks", cron({ thread_id: threadId, context_mode: mode }))
        assert.strictEqual(made.status, 422, `${mode} ${threadId}: ${made.text}`)
        assert.match(made.json().detail, /^thread_id: ids are 1-114 letters/)
        const changed = await alice("PATCH", `/api/scheduled-tasks/${task.id}`, { thread_id: threadId, context_mode: mode })
        assert.strictEqual(changed.status, 422, `${mode} ${threadId}: ${changed.text}`)
      }
    }
    // deliberate: dots and up to 114 characters name a thread (none of alice's here: 404 for a reused one)
    for (const threadId of ["thread.with.dot", "x".repeat(65)]) {
      const fresh = await alice("POST", "/api/scheduled-tasks", cron({ thread_id: threadId }))
      assert.strictEqual(fresh.status, 200, fresh.text)
      assert.isNull(fresh.json().thread_id)
      const reused = await alice("POST", "/api/scheduled-tasks", cron({ thread_id: threadId, context_mode: "reuse_thread" }))
      assert.strictEqual(reused.status, 404, reused.text)
    }
    assert.strictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).json().context_mode, "fresh_thread_per_run")
  })

  it("test_create_scheduled_task_uses_repo", async () => {
    const year = new Date().getUTCFullYear() + 1
    const task = await created(cron({
      thread_id: "thread-1",
      schedule_type: "once",
      schedule_spec: { run_at: `${year}-01-01T01:00:00+00:00` }
    }))
    assert.strictEqual(task.title, "Daily summary")
    assert.strictEqual(task.next_run_at, `${year}-01-01T01:00:00.000Z`)
    assert.deepStrictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).json(), task)
  })

  it("test_create_fresh_thread_task_does_not_require_thread_id", async () => {
    const task = await created(cron({ context_mode: "fresh_thread_per_run", thread_id: null, title: "Fresh task" }))
    assert.strictEqual(task.context_mode, "fresh_thread_per_run")
    assert.isNull(task.thread_id)
  })

  it("test_trigger_scheduled_task_dispatches_manual_run", async () => {
    const task = await created(cron())
    const triggered = await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    assert.deepStrictEqual([triggered.status, triggered.json()], [200, { id: task.id, triggered: true }])
    const runs = await runsWhen(task.id, (runs) => runs[0]?.status === "success", "the run ends")
    assert.deepStrictEqual(runs.map((run: any) => run.trigger), ["manual"])
  })

  it("test_trigger_scheduled_task_returns_conflict_when_dispatch_conflicts", async () => {
    await alice("POST", "/api/threads", { thread_id: "busy-thread" })
    const busy = await alice("POST", "/api/threads/busy-thread/runs", {
      assistant_id: "lead_agent",
      input: Support.userInput("hang on")
    })
    assert.strictEqual(busy.status, 200, busy.text)
    const task = await created(cron({ context_mode: "reuse_thread", thread_id: "busy-thread" }))
    const refused = await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    assert.strictEqual(refused.status, 409, refused.text)
    assert.match(refused.json().detail, /^Scheduled task task-[0-9a-f]+: Thread busy-thread already has a run in progress/)
    // as DeerFlow's: the trigger's run recorded failed, saying why; the task as it was
    const [run] = await runsOf(task.id)
    assert.deepStrictEqual([run.trigger, run.status, run.run_id], ["manual", "failed", null])
    assert.match(run.error, /already has a run in progress/)
    assert.strictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).json().status, "enabled")
    const cancelled = await alice("POST", `/api/threads/busy-thread/runs/${busy.json().run_id}/cancel`)
    assert.include([200, 202, 204], cancelled.status, cancelled.text)
  })

  it("test_update_scheduled_task_writes_repo", async () => {
    const task = await created(cron())
    const updated = await alice("PATCH", `/api/scheduled-tasks/${task.id}`, { title: "Updated title" })
    assert.strictEqual(updated.status, 200, updated.text)
    assert.strictEqual(updated.json().title, "Updated title")
    assert.strictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).json().title, "Updated title")
  })

  it("test_delete_scheduled_task_deletes_repo_row", async () => {
    const task = await created(cron())
    const deleted = await alice("DELETE", `/api/scheduled-tasks/${task.id}`)
    assert.deepStrictEqual([deleted.status, deleted.json()], [200, { id: task.id, deleted: true }])
    assert.notInclude((await alice("GET", "/api/scheduled-tasks")).json().map((t: any) => t.id), task.id)
    assert.strictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).status, 404)
  })

  it("test_pause_and_resume_scheduled_task_update_status", async () => {
    const task = await created(cron())
    assert.strictEqual((await alice("POST", `/api/scheduled-tasks/${task.id}/pause`)).json().status, "paused")
    assert.strictEqual((await alice("POST", `/api/scheduled-tasks/${task.id}/resume`)).json().status, "enabled")
  })

  it("test_pause_rejects_running_task and test_update_rejects_running_task", async () => {
    const soon = new Date(Date.now() + 3_600_000).toISOString()
    const task = await created(cron({ prompt: "hang here", schedule_type: "once", schedule_spec: { run_at: soon } }))
    assert.strictEqual((await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)).status, 200)
    await runsWhen(task.id, (runs) => runs[0]?.status === "running", "the once task's run goes")
    assert.strictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).json().status, "running")
    for (const [method, path, body] of [
      ["POST", `/api/scheduled-tasks/${task.id}/pause`, undefined],
      ["PATCH", `/api/scheduled-tasks/${task.id}`, { title: "Updated title" }]
    ] as const) {
      const refused = await alice(method, path, body)
      assert.strictEqual(refused.status, 409, refused.text)
      assert.match(refused.json().detail, /currently running/)
    }
    assert.strictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).json().title, "Daily summary")
    await stopRun(task.id)
  })

  it("test_list_thread_scheduled_tasks_filters_by_thread_id", async () => {
    await alice("POST", "/api/threads", { thread_id: "thread-one" })
    await alice("POST", "/api/threads", { thread_id: "thread-two" })
    const one = await created(cron({ context_mode: "reuse_thread", thread_id: "thread-one", title: "Thread one task" }))
    await created(cron({ context_mode: "reuse_thread", thread_id: "thread-two", title: "Thread two task" }))
    const listed = await alice("GET", "/api/threads/thread-one/scheduled-tasks")
    assert.deepStrictEqual(listed.json().map((t: any) => t.id), [one.id])
  })

  it("test_list_scheduled_task_runs_returns_persisted_rows_without_side_effects", async () => {
    const task = await created(cron({ prompt: "hang there" }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    const first = await runsWhen(task.id, (runs) => runs[0]?.status === "running", "the run goes")
    // reading the runs changes nothing: the same rows, the task as it was
    const taskBefore = (await alice("GET", `/api/scheduled-tasks/${task.id}`)).json()
    assert.deepStrictEqual(await runsOf(task.id), first)
    assert.deepStrictEqual((await alice("GET", `/api/scheduled-tasks/${task.id}`)).json(), taskBefore)
    assert.strictEqual(first[0].status, "running")
    await stopRun(task.id)
  })

  it("test_create_once_task_enforces_minimum_delay", async () => {
    const soon = new Date(Date.now() + 30_000).toISOString()
    const refused = await alice("POST", "/api/scheduled-tasks", cron({ schedule_type: "once", schedule_spec: { run_at: soon } }))
    assert.strictEqual(refused.status, 422, refused.text)
    assert.strictEqual(
      refused.json().detail,
      "A once schedule must be at least 60 seconds in the future (scheduler.min_once_delay_seconds)."
    )
    // moving a once task that soon is refused too, as DeerFlow's PATCH
    const later = await created(cron({ schedule_type: "once", schedule_spec: { run_at: new Date(Date.now() + 3_600_000).toISOString() } }))
    const moved = await alice("PATCH", `/api/scheduled-tasks/${later.id}`, { schedule_spec: { run_at: soon } })
    assert.strictEqual(moved.status, 422, moved.text)
    assert.match(moved.json().detail, /at least 60 seconds/)
  })

  it("test_update_terminal_once_task_with_future_run_at_rearms_it", async () => {
    const task = await created(cron({
      schedule_type: "once",
      schedule_spec: { run_at: new Date(Date.now() + 3_600_000).toISOString() }
    }))
    await alice("POST", `/api/scheduled-tasks/${task.id}/trigger`)
    await eventually(async () =>
      (await alice("GET", `/api/scheduled-tasks/${task.id}`)).json().status === "completed" || undefined,
      "the once task completes", { tries: 800, everyMs: 25 })
    const future = new Date(Date.now() + 7_200_000).toISOString()
    const rearmed = await alice("PATCH", `/api/scheduled-tasks/${task.id}`, { schedule_spec: { run_at: future } })
    assert.strictEqual(rearmed.status, 200, rearmed.text)
    assert.strictEqual(rearmed.json().status, "enabled")
    assert.strictEqual(rearmed.json().next_run_at, future)
  })
})
