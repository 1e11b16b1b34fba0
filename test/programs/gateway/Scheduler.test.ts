/**
 * When scheduled tasks run, on Effect's TestClock (no waiting on real time): the scheduler over a real task store
 * (the SQLite file, and PostgreSQL when installed) and a launcher that records the runs it is asked to start.
 * A cron task's tick runs when the clock reaches it, once; a paused task's ticks do not; after a restart a tick
 * already run is not run again, and the ticks missed while no scheduler ran are run once, the next counted from
 * then; a `once` task runs once and ends `completed`. Two schedulers sharing one database (two gateway
 * processes) run each tick once between them.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as Path from "node:path"
import * as PgTasks from "../../../src/programs/gateway/scheduler/PgTasks.js"
import * as Scheduler from "../../../src/programs/gateway/scheduler/Scheduler.js"
import * as Schedules from "../../../src/programs/gateway/scheduler/Schedules.js"
import * as SqliteTasks from "../../../src/programs/gateway/scheduler/SqliteTasks.js"
import type { Service as Store, Task, TaskRun } from "../../../src/programs/gateway/scheduler/TaskStore.js"
import { TaskStore } from "../../../src/programs/gateway/scheduler/TaskStore.js"
import * as Postgres from "../../support/postgres.js"
import * as Support from "./support.js"

const pg = await Postgres.start()
if ("skip" in pg) console.warn(`[scheduler Postgres] skipped: ${pg.skip}`)
afterAll(async () => {
  if (!("skip" in pg)) await pg.stop()
})

/** 2026-01-01T00:00:00Z */
const T0 = Date.UTC(2026, 0, 1)
const MINUTE = 60_000

/**
 * A launcher recording what it starts (under the ids it is asked for); each run ends when the test completes its
 * `end`. A run of ids it started before is followed, not started (nor recorded) again, as the gateway's launcher
 * adopts it.
 */
const recording = Effect.gen(function*() {
  const started = yield* Queue.unbounded<{ readonly task: string; readonly runId: string }>()
  const ends = new Map<string, Deferred.Deferred<Scheduler.Outcome>>()
  let n = 0
  const launcher: Scheduler.Launcher = {
    start: (task, ids) =>
      Effect.gen(function*() {
        ++n
        const runId = ids.runId
        const known = ends.get(runId)
        if (known !== undefined) return { runId, threadId: task.thread_id ?? `thread-${n}`, done: Deferred.await(known) }
        const end = yield* Deferred.make<Scheduler.Outcome>()
        ends.set(runId, end)
        yield* Queue.offer(started, { task: task.id, runId })
        return { runId, threadId: task.thread_id ?? `thread-${n}`, done: Deferred.await(end) }
      }),
    // the thread store knows how a run ended once it did
    outcome: (runId) => {
      const end = ends.get(runId)
      if (end === undefined) return Effect.succeedNone
      return Effect.flatMap(Deferred.poll(end), Option.match({ onNone: () => Effect.succeedNone, onSome: Effect.asSome }))
    }
  }
  const end = (runId: string, outcome: Scheduler.Outcome = { status: "success", error: null }) =>
    Deferred.succeed(ends.get(runId)!, outcome)
  return { launcher, started, end }
})

/** A run of task `taskId` admitted (`queued`) at `at` for the tick of `at`, by a process that went no further. */
const admittedRun = (id: string, taskId: string, at: number, trigger: TaskRun["trigger"]): TaskRun => ({
  id,
  task_id: taskId,
  user_id: "alice",
  thread_id: "",
  run_id: null,
  scheduled_for: new Date(at).toISOString(),
  trigger,
  status: "queued",
  error: null,
  started_at: null,
  finished_at: null,
  created_at: new Date(at).toISOString()
})

const task = (id: string, type: Task["schedule_type"], spec: Record<string, unknown>, now: number): Task => ({
  id,
  user_id: "alice",
  thread_id: null,
  context_mode: "fresh_thread_per_run",
  assistant_id: "lead_agent",
  title: id,
  prompt: `Run ${id}`,
  schedule_type: type,
  schedule_spec: spec,
  timezone: "UTC",
  status: "enabled",
  next_run_at: Effect.runSync(Effect.orDie(Schedules.nextRun(type, spec, "UTC", now))),
  last_run_at: null,
  last_run_id: null,
  last_thread_id: null,
  last_error: null,
  run_count: 0,
  created_at: new Date(now).toISOString(),
  updated_at: new Date(now).toISOString()
})

/** A scheduler (its own scope: closing it is the process stopping) over `store`. */
const schedulerOn = (store: Store, launcher: Scheduler.Launcher, pollSeconds = 0) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const scheduler = yield* Scheduler.make(launcher, { pollSeconds }).pipe(
      Effect.provideService(TaskStore, store),
      Scope.extend(scope)
    )
    return { scheduler, stop: Scope.close(scope, Exit.void) }
  })

const sqliteStore = (file: string) => Effect.flatMap(Scope.Scope, (scope) => Scope.extend(SqliteTasks.make(file), scope))

const get = (store: Store, id: string) => Effect.map(store.get(id, "alice"), Option.getOrThrow)

describe("the scheduler on TestClock", () => {
  it.scoped("a cron task's tick runs when the clock reaches it (the poller), once; paused, its ticks do not run", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      yield* store.create(task("every-5", "cron", { cron: "*/5 * * * *" }, T0))
      const { end, launcher, started } = yield* recording
      yield* schedulerOn(store, launcher, 10)

      // nothing is due before 00:05
      yield* TestClock.adjust("4 minutes")
      assert.strictEqual(yield* Queue.size(started), 0)
      yield* TestClock.adjust("1 minute")
      const first = yield* Queue.take(started)
      assert.strictEqual(first.task, "every-5")
      yield* end(first.runId)
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(yield* Queue.size(started), 0)
      const after = yield* get(store, "every-5")
      assert.strictEqual(after.next_run_at, T0 + 10 * MINUTE)
      assert.strictEqual(after.run_count, 1)
      const runs = yield* store.runs("every-5", 10, 0)
      assert.deepStrictEqual(runs.map((r) => [r.trigger, r.status, r.run_id, r.scheduled_for]), [
        ["scheduled", "success", first.runId, new Date(T0 + 5 * MINUTE).toISOString()]
      ])

      // paused: 00:10 and 00:15 pass without a run
      yield* store.update("every-5", "alice", { status: "paused" }, new Date(T0).toISOString())
      yield* TestClock.adjust("10 minutes")
      assert.strictEqual(yield* Queue.size(started), 0)
      assert.strictEqual((yield* store.runs("every-5", 10, 0)).length, 1)
    }))

  it.scoped("a poller stopped while a tick's run is starting (a singleton moving away) does not lose the tick", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      yield* store.create(task("hourly", "cron", { cron: "0 * * * *" }, T0))
      const { launcher, started } = yield* recording
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const slow: Scheduler.Launcher = {
        ...launcher,
        start: (t, ids) =>
          Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Deferred.await(gate)), Effect.zipRight(launcher.start(t, ids)))
      }
      const { scheduler } = yield* schedulerOn(store, slow)
      yield* TestClock.setTime(T0 + 60 * MINUTE)
      const poller = yield* Effect.fork(Scheduler.poll(scheduler.tick, 10))
      yield* Deferred.await(entered)
      // the poller is stopped (at once) while the tick it took is starting its run; the start goes on
      yield* Fiber.interrupt(poller)
      yield* Deferred.succeed(gate, undefined)
      for (let i = 0; i < 200 && (yield* Queue.size(started)) === 0; i++) yield* Effect.yieldNow()
      const ran = Option.getOrThrowWith(yield* Queue.poll(started), () => new Error("the tick's run was not started"))
      assert.strictEqual(ran.task, "hourly")
      for (let i = 0; i < 200 && (yield* store.runs("hourly", 10, 0))[0]?.status !== "running"; i++) {
        yield* Effect.yieldNow()
      }
      const runs = yield* store.runs("hourly", 10, 0)
      assert.deepStrictEqual(runs.map((r) => [r.trigger, r.status, r.run_id]), [["scheduled", "running", ran.runId]])
      const after = yield* get(store, "hourly")
      assert.strictEqual(after.run_count, 1)
      assert.strictEqual(after.next_run_at, T0 + 120 * MINUTE)
    }))

  it.scoped("after a restart a tick already run is not run again; missed ticks run once, the next from then", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const file = Path.join(Support.tempDir("antler-sched-"), "antler.sqlite")
      const { end, launcher, started } = yield* recording
      const firstStore = yield* sqliteStore(file)
      yield* firstStore.create(task("hourly", "cron", { cron: "0 * * * *" }, T0))
      const first = yield* schedulerOn(firstStore, launcher)
      yield* TestClock.setTime(T0 + 60 * MINUTE)
      yield* first.scheduler.tick
      const ran = yield* Queue.take(started)
      yield* end(ran.runId)
      yield* first.stop

      // a new process on the same file, at the same time: the 01:00 tick was run
      const second = yield* schedulerOn(yield* sqliteStore(file), launcher)
      yield* second.scheduler.tick
      assert.strictEqual(yield* Queue.size(started), 0)
      yield* second.stop

      // down from 01:00 to 05:30 (four ticks missed): one run when it starts, the next at 06:00
      yield* TestClock.setTime(T0 + 330 * MINUTE)
      const store = yield* sqliteStore(file)
      const third = yield* schedulerOn(store, launcher)
      yield* third.scheduler.tick
      yield* third.scheduler.tick
      const caughtUp = yield* Queue.take(started)
      assert.strictEqual(yield* Queue.size(started), 0)
      yield* end(caughtUp.runId)
      const after = yield* get(store, "hourly")
      assert.strictEqual(after.next_run_at, T0 + 360 * MINUTE)
      assert.strictEqual(after.run_count, 2)
      const runs = yield* store.runs("hourly", 10, 0)
      assert.deepStrictEqual(runs.map((r) => r.scheduled_for), [
        new Date(T0 + 120 * MINUTE).toISOString(),
        new Date(T0 + 60 * MINUTE).toISOString()
      ])
    }))

  it.scoped("a once task runs once and ends completed; a tick while its run goes is skipped", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      const { end, launcher, started } = yield* recording
      const { scheduler } = yield* schedulerOn(store, launcher)
      yield* store.create(task("once", "once", { run_at: new Date(T0 + 30 * MINUTE).toISOString() }, T0))
      yield* store.create(task("minutely", "cron", { cron: "* * * * *" }, T0))
      yield* TestClock.setTime(T0 + 30 * MINUTE)
      yield* scheduler.tick
      const a = yield* Queue.take(started)
      const b = yield* Queue.take(started)
      const runOf = (id: string) => (a.task === id ? a : b).runId
      assert.strictEqual((yield* get(store, "once")).status, "running")
      // the minutely task's run is still going at 00:31: that tick is skipped, not run beside it
      yield* TestClock.setTime(T0 + 31 * MINUTE)
      yield* scheduler.tick
      assert.strictEqual(yield* Queue.size(started), 0)
      assert.deepStrictEqual((yield* store.runs("minutely", 10, 0)).map((r) => [r.status, r.error]), [
        ["skipped", Scheduler.ACTIVE_RUN],
        ["running", null]
      ])
      yield* end(runOf("once"))
      yield* end(runOf("minutely"), { status: "failed", error: "model unavailable" })
      // the watchers record the ends (they run as the test yields)
      for (let i = 0; i < 100 && (yield* get(store, "once")).status === "running"; i++) yield* Effect.yieldNow()
      const once = yield* get(store, "once")
      assert.strictEqual(once.status, "completed")
      assert.isNull(once.next_run_at)
      assert.strictEqual((yield* get(store, "minutely")).last_error, "model unavailable")
      yield* TestClock.setTime(T0 + 600 * MINUTE)
      yield* scheduler.tick
      const next = yield* Queue.take(started)
      assert.strictEqual(next.task, "minutely")
      assert.strictEqual(yield* Queue.size(started), 0)
    }))

  for (const how of ["its run's end", "its run's failure to start"] as const) {
    it.scoped(`a process stopping between the writes that record ${how} leaves nothing another cannot finish`, () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(T0)
        const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
        // the first process's store: once armed, its first write goes through and the next never returns (the
        // process is stopped, SIGTERM or SIGKILL, between the two writes that record how a run went)
        let armed = false
        let writes = 0
        const stopped = yield* Deferred.make<void>()
        const write = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
          Effect.suspend(() =>
            !armed || writes++ === 0 ? effect : Effect.zipRight(Deferred.succeed(stopped, undefined), Effect.never)
          )
        const stopping: Store = {
          ...store,
          update: (...args) => write(store.update(...args)),
          updateRun: (...args) => write(store.updateRun(...args))
        }
        const { end, launcher, started } = yield* recording
        const refusing: Scheduler.Launcher = { ...launcher, start: () => Effect.fail({ message: "no such assistant" }) }
        const first = yield* schedulerOn(stopping, how === "its run's end" ? launcher : refusing)
        yield* store.create(task("once", "once", { run_at: new Date(T0 + 30 * MINUTE).toISOString() }, T0))
        yield* TestClock.setTime(T0 + 30 * MINUTE)
        let runId: string | null = null
        if (how === "its run's end") {
          yield* first.scheduler.tick
          runId = (yield* Queue.take(started)).runId
          armed = true
          yield* end(runId)
        } else {
          armed = true
          yield* Effect.fork(first.scheduler.tick)
        }
        yield* Deferred.await(stopped)
        yield* first.stop
        // another process starts (settling what the first left): the task ends as its run did
        yield* schedulerOn(store, launcher)
        const once = yield* get(store, "once")
        const runs = (yield* store.runs("once", 10, 0)).map((r) => [r.status, r.run_id, r.error])
        if (how === "its run's end") {
          assert.strictEqual(once.status, "completed")
          assert.isNull(once.last_error)
          assert.deepStrictEqual(runs, [["success", runId, null]])
        } else {
          assert.strictEqual(once.status, "failed")
          assert.strictEqual(once.last_error, "no such assistant")
          assert.deepStrictEqual(runs, [["failed", null, "no such assistant"]])
        }
        assert.strictEqual(yield* Queue.size(started), 0)
      }))
  }

  it.scoped("of two triggers at once (two processes), one starts a run and the other is refused", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const file = Path.join(Support.tempDir("antler-sched-"), "antler.sqlite")
      const one = yield* sqliteStore(file)
      const two = yield* sqliteStore(file)
      yield* one.create(task("report", "cron", { cron: "0 9 * * *" }, T0))
      const { end, launcher, started } = yield* recording
      // the runs take a while to start: both triggers are past their checks before either has started one
      const gate = yield* Deferred.make<void>()
      const slow: Scheduler.Launcher = { ...launcher, start: (t, ids) => Effect.zipRight(Deferred.await(gate), launcher.start(t, ids)) }
      const a = yield* schedulerOn(one, slow)
      const b = yield* schedulerOn(two, slow)
      const report = yield* get(one, "report")
      const both = yield* Effect.fork(Effect.all([a.scheduler.trigger(report), b.scheduler.trigger(report)], { concurrency: 2 }))
      for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      const outcomes = yield* Effect.flatMap(Effect.fromFiber(both), (results) => Effect.succeed(results.map((r) => r.outcome)))
      assert.deepStrictEqual([...outcomes].sort(), ["conflict", "launched"])
      const runs = yield* Queue.takeAll(started)
      assert.strictEqual(runs.length, 1)
      assert.deepStrictEqual((yield* one.runs("report", 10, 0)).map((r) => [r.trigger, r.status, r.run_id]), [
        ["manual", "running", [...runs][0]!.runId]
      ])
      yield* end([...runs][0]!.runId)
    }))

  it.scoped("a run its process admitted but never started is started by another process after STALE_QUEUED_MS, once", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      yield* store.create(task("report", "cron", { cron: "0 9 * * *" }, T0))
      const admitted = admittedRun("task-run-left", "report", T0, "manual")
      assert.isTrue(yield* store.addRun(admitted))
      const { launcher, started } = yield* recording
      const { scheduler } = yield* schedulerOn(store, launcher)
      const report = yield* get(store, "report")
      // a moment later its process may still be starting it
      yield* TestClock.setTime(T0 + 10_000)
      assert.deepStrictEqual(yield* scheduler.trigger(report), { outcome: "conflict", error: Scheduler.ACTIVE_RUN })
      // then it is started here, under the ids its own process would have given it; a trigger meanwhile is refused
      yield* TestClock.setTime(T0 + Scheduler.STALE_QUEUED_MS + 1)
      assert.deepStrictEqual(yield* scheduler.trigger(report), { outcome: "conflict", error: Scheduler.ACTIVE_RUN })
      const run = yield* Queue.take(started)
      assert.deepStrictEqual(run, { task: "report", runId: Scheduler.launchIds(admitted.id).runId })
      // another poll (another process) neither starts it again nor records anything else
      yield* scheduler.tick
      assert.strictEqual(yield* Queue.size(started), 0)
      const runs = yield* store.runs("report", 10, 0)
      assert.deepStrictEqual(runs.map((r) => [r.id, r.status, r.run_id]), [[admitted.id, "running", run.runId]])
    }))

  it.scoped("a tick admitted by a process that stopped before taking it is taken and run once by another", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      yield* store.create(task("minutely", "cron", { cron: "* * * * *" }, T0))
      // the stopped process admitted the 00:01 tick's run, and did not take the tick (it is still due)
      const admitted = admittedRun("task-run-untaken", "minutely", T0 + MINUTE, "scheduled")
      assert.isTrue(yield* store.addRun(admitted))
      const { end, launcher, started } = yield* recording
      const { scheduler } = yield* schedulerOn(store, launcher)
      // a moment later: the tick is that process's, neither run nor skipped here
      yield* TestClock.setTime(T0 + MINUTE + 10_000)
      yield* scheduler.tick
      assert.strictEqual(yield* Queue.size(started), 0)
      assert.deepStrictEqual((yield* store.runs("minutely", 10, 0)).map((r) => r.status), ["queued"])
      assert.strictEqual((yield* get(store, "minutely")).next_run_at, T0 + MINUTE)
      // past STALE_QUEUED_MS: taken and run here, once; the next tick counts from then
      yield* TestClock.setTime(T0 + MINUTE + Scheduler.STALE_QUEUED_MS + 1)
      yield* scheduler.tick
      yield* scheduler.tick
      const run = yield* Queue.take(started)
      assert.strictEqual(yield* Queue.size(started), 0)
      assert.strictEqual(run.runId, Scheduler.launchIds(admitted.id).runId)
      assert.strictEqual((yield* get(store, "minutely")).next_run_at, T0 + 2 * MINUTE)
      yield* end(run.runId)
      yield* TestClock.setTime(T0 + 2 * MINUTE)
      yield* scheduler.tick
      assert.strictEqual((yield* Queue.take(started)).task, "minutely")
      const runs = yield* store.runs("minutely", 10, 0)
      assert.deepStrictEqual(runs.map((r) => [r.scheduled_for, r.status]), [
        [new Date(T0 + 2 * MINUTE).toISOString(), "running"],
        [new Date(T0 + MINUTE).toISOString(), "success"]
      ])
    }))

  it.scoped("an admitted run whose process started it and stopped before recording it is followed, not started again", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      yield* store.create(task("report", "cron", { cron: "0 9 * * *" }, T0))
      const admitted = admittedRun("task-run-started", "report", T0, "manual")
      assert.isTrue(yield* store.addRun(admitted))
      const { end, launcher, started } = yield* recording
      // the process that admitted it started it (the thread store has its run), then stopped
      yield* launcher.start(yield* get(store, "report"), Scheduler.launchIds(admitted.id))
      const first = yield* Queue.take(started)
      const { scheduler } = yield* schedulerOn(store, launcher)
      yield* TestClock.setTime(T0 + Scheduler.STALE_QUEUED_MS + 1)
      yield* scheduler.tick
      assert.strictEqual(yield* Queue.size(started), 0)
      assert.deepStrictEqual((yield* store.runs("report", 10, 0)).map((r) => [r.status, r.run_id]), [["running", first.runId]])
      // its end, once the thread store has it, is recorded at the next poll
      yield* end(first.runId)
      yield* scheduler.tick
      assert.deepStrictEqual((yield* store.runs("report", 10, 0)).map((r) => r.status), ["success"])
    }))

  it.scoped("a run recorded going whose process stopped before counting it is counted when another records its end", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      yield* store.create(task("report", "cron", { cron: "0 9 * * *" }, T0))
      const admitted = admittedRun("task-run-counted", "report", T0, "manual")
      assert.isTrue(yield* store.addRun(admitted))
      const { end, launcher, started } = yield* recording
      // the process that admitted it started it and recorded the run going, then stopped before the task's write
      yield* launcher.start(yield* get(store, "report"), Scheduler.launchIds(admitted.id))
      const first = yield* Queue.take(started)
      yield* store.updateRun(admitted.id, {
        status: "running",
        run_id: first.runId,
        thread_id: "thread-1",
        started_at: new Date(T0).toISOString()
      })
      assert.strictEqual((yield* get(store, "report")).run_count, 0)
      const { scheduler } = yield* schedulerOn(store, launcher)
      yield* end(first.runId)
      yield* scheduler.tick
      assert.deepStrictEqual((yield* store.runs("report", 10, 0)).map((r) => r.status), ["success"])
      assert.strictEqual((yield* get(store, "report")).run_count, 1)
    }))

  it.scoped("one user's tasks have at most maxActivePerUser runs going; another user's are not held by them", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T0)
      const store = yield* sqliteStore(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite"))
      for (let i = 0; i < 4; i++) yield* store.create(task(`alice-${i}`, "cron", { cron: "* * * * *" }, T0))
      yield* store.create({ ...task("bob-0", "cron", { cron: "* * * * *" }, T0), user_id: "bob" })
      const { end, launcher, started } = yield* recording
      const { scheduler } = yield* schedulerOn(store, launcher)
      yield* TestClock.setTime(T0 + MINUTE)
      yield* scheduler.tick
      const runs = [...(yield* Queue.takeAll(started))]
      assert.deepStrictEqual(runs.map((r) => r.task).sort(), ["alice-0", "alice-1", "alice-2", "bob-0"])
      // alice's fourth waits, still due at 00:01; a trigger of it is refused
      assert.deepStrictEqual(yield* store.runs("alice-3", 10, 0), [])
      assert.strictEqual((yield* get(store, "alice-3")).next_run_at, T0 + MINUTE)
      assert.deepStrictEqual(yield* scheduler.trigger(yield* get(store, "alice-3")), {
        outcome: "conflict",
        error: Scheduler.USER_LIMIT
      })
      // one of alice's runs ends: the waiting tick runs at the next poll, late, and the next counts from then
      yield* end(runs.find((r) => r.task === "alice-0")!.runId)
      for (let i = 0; i < 100 && (yield* store.activeOfUser("alice")) === 3; i++) yield* Effect.yieldNow()
      yield* TestClock.setTime(T0 + MINUTE + 10_000)
      yield* scheduler.tick
      assert.deepStrictEqual([...(yield* Queue.takeAll(started))].map((r) => r.task), ["alice-3"])
      assert.deepStrictEqual((yield* store.runs("alice-3", 10, 0)).map((r) => r.scheduled_for), [
        new Date(T0 + MINUTE).toISOString()
      ])
      assert.strictEqual((yield* get(store, "alice-3")).next_run_at, T0 + 2 * MINUTE)
    }))

  for (const kind of ["SQLite", "PostgreSQL"] as const) {
    it.scoped.skipIf(kind === "PostgreSQL" && "skip" in pg)(
      `two schedulers sharing one ${kind} database (two gateway processes) run each tick once`,
      () =>
        Effect.gen(function*() {
          yield* TestClock.setTime(T0)
          const open = kind === "SQLite"
            ? Effect.succeed(Path.join(Support.tempDir("antler-sched-"), "antler.sqlite")).pipe(
              Effect.map((file) => () => sqliteStore(file))
            )
            : Effect.map(Effect.promise(() => (pg as Postgres.Postgres).createDatabase()), (url) => () =>
              Effect.flatMap(Scope.Scope, (scope) => Scope.extend(PgTasks.make(url), scope)))
          const opener = yield* open
          const one = yield* opener()
          const two = yield* opener()
          // (each of its own user: a user has at most three runs going)
          for (let i = 0; i < 10; i++) {
            yield* one.create({ ...task(`t${i}`, "cron", { cron: "* * * * *" }, T0), user_id: `user-${i}` })
          }
          const { end, launcher, started } = yield* recording
          const a = yield* schedulerOn(one, launcher)
          const b = yield* schedulerOn(two, launcher)
          for (let minute = 1; minute <= 3; minute++) {
            yield* TestClock.setTime(T0 + minute * MINUTE)
            yield* Effect.all([a.scheduler.tick, b.scheduler.tick], { concurrency: 2 })
            const runs = yield* Queue.takeAll(started)
            assert.deepStrictEqual([...runs].map((r) => r.task).sort(), Array.from({ length: 10 }, (_, i) => `t${i}`).sort())
            for (const run of runs) yield* end(run.runId)
            // every run's end recorded before the next minute's tick
            for (let i = 0; i < 200; i++) {
              const unfinished = yield* one.unfinishedRuns
              if (unfinished.length === 0) break
              yield* Effect.yieldNow()
            }
          }
          for (let i = 0; i < 10; i++) assert.strictEqual((yield* one.runs(`t${i}`, 10, 0)).length, 3)
        })
    )
  }
})
