/**
 * DeerFlow's `test_scheduled_task_repository.py`, `test_scheduled_task_claims.py` and the store-level case of
 * `test_scheduled_task_dispatch_race.py`, over Antler's task store in a real SQLite file: what is stored and listed,
 * which ticks are due, a tick taken by one caller only, and one `queued` or `running` run a task at a time.
 * Antler takes a tick by moving its `next_run_at` (compare-and-set), not by a lease with an owner.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import * as SqliteTasks from "../../../src/programs/gateway/scheduler/SqliteTasks.js"
import type { Task, TaskRun } from "../../../src/programs/gateway/scheduler/TaskStore.js"
import * as Support from "./support.js"

const T0 = Date.UTC(2026, 6, 2, 1, 0)
const MINUTE = 60_000

const store = Effect.flatMap(
  Scope.Scope,
  (scope) => Scope.extend(SqliteTasks.make(Path.join(Support.tempDir("antler-sched29b-"), "antler.sqlite")), scope)
)

const task = (id: string, next: number | null, fields: Partial<Task> = {}): Task => ({
  id,
  user_id: "user-1",
  thread_id: "thread-1",
  context_mode: "reuse_thread",
  assistant_id: "lead_agent",
  title: id,
  prompt: "Prompt",
  schedule_type: "cron",
  schedule_spec: { cron: "0 9 * * *" },
  timezone: "UTC",
  status: "enabled",
  next_run_at: next,
  last_run_at: null,
  last_run_id: null,
  last_thread_id: null,
  last_error: null,
  run_count: 0,
  created_at: new Date(T0).toISOString(),
  updated_at: new Date(T0).toISOString(),
  ...fields
})

const run = (id: string, taskId: string, status: TaskRun["status"], minute = 0): TaskRun => ({
  id,
  task_id: taskId,
  user_id: "user-1",
  thread_id: "thread-1",
  run_id: null,
  scheduled_for: new Date(T0 + minute * MINUTE).toISOString(),
  trigger: "scheduled",
  status,
  error: null,
  started_at: null,
  finished_at: null,
  created_at: new Date(T0 + minute * MINUTE).toISOString()
})

describe("test_scheduled_task_repository", () => {
  it.scoped("test_scheduled_task_repository_create_and_list", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      yield* tasks.create(task("task-1", T0, { title: "Daily summary", timezone: "Asia/Shanghai" }))
      const listed = yield* tasks.list("user-1")
      assert.deepStrictEqual(listed.map((t) => [t.id, t.title, t.timezone, t.next_run_at]), [
        ["task-1", "Daily summary", "Asia/Shanghai", T0]
      ])
      assert.deepStrictEqual(yield* tasks.list("user-2"), [])
    }))

  it.scoped("test_scheduled_task_run_repository_records_history", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      yield* tasks.create(task("task-1", T0))
      assert.isTrue(yield* tasks.addRun({ ...run("task-run-1", "task-1", "queued"), trigger: "manual" }))
      const history = yield* tasks.runs("task-1", 10, 0)
      assert.deepStrictEqual(history.map((r) => [r.id, r.trigger, r.status]), [["task-run-1", "manual", "queued"]])
    }))

  it.scoped("test_has_active_runs_sees_only_queued_and_running", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      yield* tasks.create(task("task-1", T0))
      assert.isTrue(Option.isNone(yield* tasks.active("task-1")))
      yield* tasks.addRun(run("task-run-active", "task-1", "running"))
      assert.strictEqual(Option.getOrThrow(yield* tasks.active("task-1")).id, "task-run-active")
      yield* tasks.updateRun("task-run-active", { status: "success", run_id: "run-1" })
      assert.isTrue(Option.isNone(yield* tasks.active("task-1")))
    }))

  it.scoped("test_list_by_task_paginates", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      yield* tasks.create(task("task-1", T0))
      for (let i = 0; i < 5; i++) yield* tasks.addRun(run(`task-run-${i}`, "task-1", "success", i))
      assert.strictEqual(yield* tasks.activeOfUser("user-1"), 0)
      const page1 = (yield* tasks.runs("task-1", 2, 0)).map((r) => r.id)
      const page2 = (yield* tasks.runs("task-1", 2, 2)).map((r) => r.id)
      // newest first
      assert.deepStrictEqual(page1, ["task-run-4", "task-run-3"])
      assert.deepStrictEqual(page2, ["task-run-2", "task-run-1"])
    }))

  it.scoped("test_list_by_user_and_thread_filters_in_sql", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      for (const [id, thread] of [["task-a", "thread-1"], ["task-b", "thread-2"], ["task-c", "thread-1"]] as const) {
        yield* tasks.create(task(id, null, { thread_id: thread }))
      }
      assert.deepStrictEqual((yield* tasks.list("user-1", "thread-1")).map((t) => t.id).sort(), ["task-a", "task-c"])
      assert.deepStrictEqual(yield* tasks.list("user-2", "thread-1"), [])
    }))
})

describe("test_scheduled_task_claims", () => {
  it.scoped("test_claim_due_tasks_claims_only_due_rows", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      const now = T0 + 60 * MINUTE
      yield* tasks.create(task("due-1", now - MINUTE))
      yield* tasks.create(task("future-1", now + 60 * MINUTE))
      const due = yield* tasks.due(now, 10)
      assert.deepStrictEqual(due.map((t) => t.id), ["due-1"])
      assert.isTrue(yield* tasks.claim(due[0]!, now + 24 * 60 * MINUTE, "enabled", new Date(now).toISOString()))
      assert.deepStrictEqual(yield* tasks.due(now, 10), [])
    }))

  it.scoped("test_claim_skips_task_with_active_lease: a tick taken is not taken again by another caller", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      const now = T0 + 60 * MINUTE
      yield* tasks.create(task("active-1", now - 5 * MINUTE))
      const [seen] = yield* tasks.due(now, 10)
      // two processes saw the same tick due: one takes it
      const taken = yield* Effect.all(
        [
          tasks.claim(seen!, now + MINUTE, "enabled", new Date(now).toISOString()),
          tasks.claim(seen!, now + MINUTE, "enabled", new Date(now + 10_000).toISOString())
        ],
        { concurrency: 2 }
      )
      assert.deepStrictEqual([...taken].sort(), [false, true])
    }))

  it.scoped("test_claim_reclaims_task_stuck_in_running_with_expired_lease: an admitted run never started is taken over", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      yield* tasks.create(task("stuck-1", T0))
      assert.isTrue(yield* tasks.addRun(run("admitted", "stuck-1", "queued")))
      const createdAt = new Date(T0).toISOString()
      const later = new Date(T0 + 2 * MINUTE).toISOString()
      // the process that admitted it stopped; two others try to take it over: one does
      const retaken = yield* Effect.all(
        [tasks.retake("admitted", createdAt, later), tasks.retake("admitted", createdAt, later)],
        { concurrency: 2 }
      )
      assert.deepStrictEqual([...retaken].sort(), [false, true])
      assert.strictEqual(Option.getOrThrow(yield* tasks.active("stuck-1")).id, "admitted")
    }))
})

describe("test_scheduled_task_dispatch_race", () => {
  it.scoped("test_partial_unique_index_enforces_one_active_run_per_task", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      yield* tasks.create(task("t1", T0))
      yield* tasks.create(task("t2", T0))
      assert.isTrue(yield* tasks.addRun(run("r1", "t1", "queued")))
      // queued -> running keeps the one active slot
      yield* tasks.updateRun("r1", { status: "running", run_id: "run-1" })
      assert.isTrue(Option.isSome(yield* tasks.active("t1")))
      // a second active run of the same task is refused
      assert.isFalse(yield* tasks.addRun({ ...run("r2", "t1", "queued"), trigger: "manual" }))
      // ended runs are outside the rule; another task's active run is its own
      assert.isTrue(yield* tasks.addRun(run("r3", "t1", "skipped")))
      assert.isTrue(yield* tasks.addRun(run("r4", "t2", "queued")))
      // ending the active run frees the slot
      yield* tasks.updateRun("r1", { status: "success" })
      assert.isTrue(Option.isNone(yield* tasks.active("t1")))
      assert.isTrue(yield* tasks.addRun(run("r5", "t1", "queued")))
      assert.deepStrictEqual((yield* tasks.runs("t1", 10, 0)).map((r) => r.id).sort(), ["r1", "r3", "r5"])
    }))

  it.scoped("test_two_concurrent_manual_dispatches_launch_exactly_once: one of two admissions at once is recorded", () =>
    Effect.gen(function*() {
      const tasks = yield* store
      yield* tasks.create(task("task-race-manual", T0))
      const added = yield* Effect.all(
        [
          tasks.addRun({ ...run("a", "task-race-manual", "queued"), trigger: "manual" }),
          tasks.addRun({ ...run("b", "task-race-manual", "queued"), trigger: "manual" })
        ],
        { concurrency: 2 }
      )
      assert.deepStrictEqual([...added].sort(), [false, true])
      assert.lengthOf(yield* tasks.runs("task-race-manual", 10, 0), 1)
    }))
})
