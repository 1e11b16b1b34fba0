/**
 * The scheduler of the gateway: it runs each scheduled task's prompt as an ordinary run of the agent (a
 * `run_end`, the thread readable as any other) when its schedule says, and when its user triggers it.
 *
 * Every `pollSeconds` (on Effect's `Clock`, so a test moves it with `TestClock`) it takes the tasks whose tick is
 * due and claims each tick (`TaskStore.claim`: one process of those sharing the database wins it), then starts
 * its run (in the scheduler's scope: a poller stopped meanwhile does not lose it). In a cluster one runner polls
 * (`ClusterTicks`). A tick missed while no gateway was running is run once when one starts, and the next is counted from
 * then, as DeerFlow does (missed ticks are not run one by one). A `once` task runs once and ends `completed` or
 * `failed`; a paused task's ticks are not run. A task has one run at a time, whichever process asks: a run is
 * admitted (recorded `queued`, a unique index allowing one such row per task) before it starts; a tick that comes
 * while the previous run is going is recorded `skipped`, a manual trigger then is refused (409). A run an earlier
 * process left going is settled as the thread store recorded its end (or `interrupted`, when it never started).
 *
 * How a run is started and how its end is read is the gateway's (`Launcher`); what is recorded is the store's.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Crypto from "node:crypto"
import type { StoreError } from "../../../services/RunContext.js"
import * as Schedules from "./Schedules.js"
import type { Task, TaskRun } from "./TaskStore.js"
import { TaskStore } from "./TaskStore.js"

/** How a run of a task ended. */
export interface Outcome {
  readonly status: "success" | "failed" | "interrupted"
  readonly error: string | null
}

/** A run the launcher started: its id, its thread (as the task's user's client names it), and its end. */
export interface Launched {
  readonly runId: string
  readonly threadId: string
  readonly done: Effect.Effect<Outcome>
}

/** How the gateway starts a task's run, and reads how a run of an earlier process ended. */
export interface Launcher {
  /** Starts the task's prompt as a run on its thread (a new thread of its user for `fresh_thread_per_run`). */
  readonly start: (task: Task) => Effect.Effect<Launched, { readonly message: string }>
  /** How run `runId` ended, or none while it has not (or is not known). */
  readonly outcome: (runId: string) => Effect.Effect<Option.Option<Outcome>>
}

/** What a trigger did. */
export type Dispatched =
  | { readonly outcome: "launched"; readonly run: TaskRun }
  | { readonly outcome: "conflict"; readonly error: string }
  | { readonly outcome: "failed"; readonly error: string }

/** The scheduler. */
export interface Service {
  /** Runs the user's task now (DeerFlow's trigger). */
  readonly trigger: (task: Task) => Effect.Effect<Dispatched, StoreError>
  /** Claims and starts every due tick once (what each poll does). */
  readonly tick: Effect.Effect<void, StoreError>
}

/** The scheduler service. */
export class Scheduler extends Context.Tag("antler/gateway/Scheduler")<Scheduler, Service>() {}

/** Options of the scheduler. */
export interface Options {
  /** Seconds between polls (default 10); 0 turns the poller off (triggers still run). */
  readonly pollSeconds?: number | undefined
  /** Ticks taken per poll at most (default 20). */
  readonly batch?: number | undefined
  /**
   * Runs of one user's tasks going at once at most (default 3): a tick beyond it waits (stays due) until one of
   * them ends, a trigger is refused (409), so one user's tasks cannot take the server. Counted before each start:
   * processes starting runs of one user at the same moment may pass it by one each.
   */
  readonly maxActivePerUser?: number | undefined
}

/** The error of a tick or trigger refused because the user's tasks have `maxActivePerUser` runs going. */
export const USER_LIMIT = "the user's scheduled tasks have as many runs going as they may"

/** The error of a tick that came while the task's previous run was still going. */
export const ACTIVE_RUN = "task already has an active run"

/**
 * How long a run admitted but not started (its process stopped in between, a moment's work) holds its task: after
 * this it is recorded interrupted.
 */
export const STALE_QUEUED_MS = 60_000

/** The error of a run a previous gateway process started and did not see end. */
export const INTERRUPTED = "the gateway stopped before the run ended"

const iso = (millis: number) => new Date(millis).toISOString()

/** A run record of a tick that was not run. */
const skippedFields = (task: Task, at: number) => ({
  thread_id: task.thread_id ?? "",
  run_id: null,
  status: "skipped" as const,
  started_at: null,
  finished_at: iso(at)
})

/** The line a process logs (at Info) when it starts polling for due ticks, and when it stops. */
export const POLLING = "scheduled tasks: this process polls for due ticks"
export const STOPPED_POLLING = "scheduled tasks: this process stopped polling"

/**
 * The poller: the scheduler's `tick` every `pollSeconds`, a failed poll logged and the next one made, until
 * interrupted. Run by each process without a cluster, by one runner (a singleton of the engine) in a cluster.
 */
export const poll = (tick: Service["tick"], pollSeconds: number): Effect.Effect<never> =>
  Effect.logInfo(`${POLLING} every ${pollSeconds} s`).pipe(
    Effect.zipRight(tick.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("scheduled tasks: a poll failed", cause)),
      Effect.repeat(Schedule.spaced(`${pollSeconds} seconds`)),
      Effect.zipRight(Effect.never)
    )),
    Effect.onInterrupt(() => Effect.logInfo(STOPPED_POLLING))
  )

/** The scheduler over the task store and a launcher; its poller and run watchers end with its scope. */
export const make = (launcher: Launcher, options: Options = {}) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    const watchers = yield* FiberSet.make()
    const pollSeconds = options.pollSeconds ?? 10
    const batch = options.batch ?? 20
    const maxActivePerUser = options.maxActivePerUser ?? 3
    const now = Clock.currentTimeMillis

    /** Records a run's end, and a `once` task's end with it. */
    const finish = (task: Task, runId: string, outcome: Outcome) =>
      Effect.gen(function*() {
        const at = iso(yield* now)
        yield* store.updateRun(runId, { status: outcome.status, error: outcome.error, finished_at: at })
        const current = yield* store.get(task.id, task.user_id)
        if (Option.isNone(current)) return
        yield* store.update(task.id, task.user_id, {
          last_error: outcome.status === "success" ? null : outcome.error,
          ...(current.value.schedule_type === "once" && current.value.status === "running"
            ? { status: outcome.status === "success" ? "completed" : "failed" }
            : {})
        }, at)
      })

    /**
     * How a run recorded as going has ended, if it has: as the thread store says, or interrupted when its process
     * never started it (admitted over `STALE_QUEUED_MS` ago and still without a run).
     */
    const endOf = (run: TaskRun) =>
      Effect.gen(function*() {
        if (run.run_id !== null) return yield* launcher.outcome(run.run_id)
        const stale = (yield* now) - Date.parse(run.created_at) > STALE_QUEUED_MS
        return stale ? Option.some<Outcome>({ status: "interrupted", error: INTERRUPTED }) : Option.none<Outcome>()
      })

    /**
     * Whether the task has a run still going. A run recorded as going whose end the thread store knows (its
     * process stopped before recording it) is recorded now, and is not going.
     */
    const busy = (task: Task) =>
      Effect.gen(function*() {
        const found = yield* store.active(task.id)
        if (Option.isNone(found)) return false
        const ended = yield* endOf(found.value)
        if (Option.isNone(ended)) return true
        yield* finish(task, found.value.id, ended.value)
        return false
      })

    const dispatch = (task: Task, trigger: TaskRun["trigger"], scheduledFor: number) =>
      Effect.gen(function*() {
        const started = yield* now
        const base = {
          id: `task-run-${Crypto.randomUUID().replace(/-/g, "")}`,
          task_id: task.id,
          user_id: task.user_id,
          scheduled_for: iso(scheduledFor),
          trigger,
          created_at: iso(started)
        }
        /**
         * A run refused: a trigger says why; a cron tick is recorded `skipped`; a `once` task's one tick is given
         * back (due again at its time), to run at a later poll.
         */
        const notRun = (error: string) =>
          Effect.gen(function*() {
            if (trigger === "scheduled" && task.schedule_type === "once") {
              yield* store.update(task.id, task.user_id, { status: "enabled", next_run_at: scheduledFor }, iso(started))
            } else if (trigger === "scheduled") {
              yield* store.addRun({ ...base, ...skippedFields(task, started), error })
            }
            return { outcome: "conflict", error } as Dispatched
          })
        if (yield* busy(task)) return yield* notRun(ACTIVE_RUN)
        if ((yield* store.activeOfUser(task.user_id)) >= maxActivePerUser) return yield* notRun(USER_LIMIT)
        // admitted as the task's one active run before it starts: of two processes asking at once, one is
        const admitted = yield* store.addRun({
          ...base,
          thread_id: task.thread_id ?? "",
          run_id: null,
          status: "queued",
          error: null,
          started_at: null,
          finished_at: null
        })
        if (!admitted) return yield* notRun(ACTIVE_RUN)
        const launched = yield* Effect.either(launcher.start(task))
        if (Either.isLeft(launched)) {
          const error = launched.left.message
          yield* store.updateRun(base.id, { status: "failed", error, finished_at: iso(started) })
          yield* store.update(task.id, task.user_id, {
            last_error: error,
            last_run_at: iso(started),
            ...(task.schedule_type === "once" && trigger === "scheduled" ? { status: "failed" as const } : {})
          }, iso(started))
          return { outcome: "failed", error } as Dispatched
        }
        const { done, runId, threadId } = launched.right
        const run: TaskRun = {
          ...base,
          thread_id: threadId,
          run_id: runId,
          status: "running",
          error: null,
          started_at: iso(started),
          finished_at: null
        }
        yield* store.updateRun(run.id, { status: "running", thread_id: threadId, run_id: runId, started_at: run.started_at })
        yield* store.update(task.id, task.user_id, {
          last_run_at: iso(started),
          last_run_id: runId,
          last_thread_id: threadId,
          last_error: null,
          run_count: yield* store.launched(task.id),
          ...(task.schedule_type === "once" ? { status: "running" as const, next_run_at: null } : {})
        }, iso(started))
        yield* FiberSet.run(
          watchers,
          Effect.flatMap(done, (outcome) => finish(task, run.id, outcome)).pipe(
            Effect.catchAllCause((cause) => Effect.logWarning(`scheduled task ${task.id}: recording its run's end failed`, cause))
          )
        )
        return { outcome: "launched", run } as Dispatched
      })

    const tick: Service["tick"] = Effect.gen(function*() {
      const at = yield* now
      for (const task of yield* store.due(at, batch)) {
        // a user at their limit: the tick stays due, and runs at a poll after one of their runs ended (late, as
        // DeerFlow's queue runs it); so does a `once` task's while a trigger's run of it goes
        if ((yield* store.activeOfUser(task.user_id)) >= maxActivePerUser) continue
        if (task.schedule_type === "once" && (yield* busy(task))) continue
        const next = task.schedule_type === "once"
          ? null
          : Either.getOrElse(Schedules.nextRun(task.schedule_type, task.schedule_spec, task.timezone, at), () => null)
        // a `once` task is taken as running; a cron task stays enabled with its next tick. Taken and started in
        // the scheduler's scope, not the poller's: a poller stopped meanwhile (in a cluster, its singleton moving to
        // another runner) does not lose the tick; the process stopping does stop it
        const taken = yield* FiberSet.run(watchers, Effect.gen(function*() {
          const claimed = yield* store.claim(task, next, task.schedule_type === "once" ? "running" : "enabled", iso(at))
          if (claimed) yield* dispatch(task, "scheduled", task.next_run_at ?? at)
        }))
        yield* Fiber.join(taken)
      }
    })

    /** The runs an earlier process left going: recorded as they ended (the thread store knows), or interrupted. */
    const reconcile = Effect.gen(function*() {
      for (const run of yield* store.unfinishedRuns) {
        const ended = yield* endOf(run)
        if (Option.isNone(ended)) continue
        const task = yield* store.get(run.task_id, run.user_id)
        if (Option.isSome(task)) yield* finish(task.value, run.id, ended.value)
        else yield* store.updateRun(run.id, { status: ended.value.status, error: ended.value.error, finished_at: iso(yield* now) })
      }
    })

    yield* reconcile.pipe(Effect.catchAll((error) => Effect.logWarning(`scheduled tasks: ${error.message}`)))
    if (pollSeconds > 0) yield* Effect.forkScoped(poll(tick, pollSeconds))

    const trigger: Service["trigger"] = (task) => Effect.flatMap(now, (at) => dispatch(task, "manual", at))
    return Scheduler.of({ trigger, tick })
  })

/** The scheduler layer. */
export const layer = (launcher: Launcher, options: Options = {}): Layer.Layer<Scheduler, never, TaskStore> =>
  Layer.scoped(Scheduler, make(launcher, options))
