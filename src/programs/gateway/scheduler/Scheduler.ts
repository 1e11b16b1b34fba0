/**
 * The scheduler of the gateway: it runs each scheduled task's prompt as an ordinary run of the agent (a
 * `run_end`, the thread readable as any other) when its schedule says, and when its user triggers it.
 *
 * Every `pollSeconds` (on Effect's `Clock`, so a test moves it with `TestClock`) it takes the tasks whose tick is due
 * and claims each tick (`TaskStore.claim`: one process of those sharing the database wins it), then starts its run (in
 * the scheduler's scope: a poller stopped meanwhile does not lose it). In a cluster one runner polls (`ClusterTicks`).
 * A tick missed while no gateway was running is run once when one starts, and the next is counted from then, as
 * DeerFlow does (missed ticks are not run one by one). A `once` task runs once and ends `completed` or `failed`; a
 * paused task's ticks are not run. A task has one run at a time, whichever process asks: a run is admitted (recorded
 * `queued`, a unique index allowing one such row per task) before it starts; a tick that comes while the previous run
 * is going is recorded `skipped`, a manual trigger then is refused (409). A run an earlier process left going is
 * settled as the thread store recorded its end (or `interrupted`, when it never started).
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

/**
 * The ids a task run's launch asks for: its run's, and its new thread's (for `fresh_thread_per_run`). Made from the
 * task run's id, so a run started again after its process stopped (see `STALE_QUEUED_MS`) is the same run.
 */
export interface LaunchIds {
  readonly runId: string
  readonly threadId: string
}

/** How the gateway starts a task's run, and reads how a run of an earlier process ended. */
export interface Launcher {
  /**
   * Starts the task's prompt as a run on its thread (a new thread of its user for `fresh_thread_per_run`), under
   * `ids` (a launcher that cannot choose them may give others). A run of `ids.runId` started before (by a process
   * that stopped before recording it) is not started again: it is followed, and made to go on.
   */
  readonly start: (task: Task, ids: LaunchIds) => Effect.Effect<Launched, LaunchError>
  /** How run `runId` ended, or none while it has not (or is not known). */
  readonly outcome: (runId: string) => Effect.Effect<Option.Option<Outcome>>
}

/** A uuid (version 4's layout) made of 32 hex digits. */
const uuidOf = (hex: string) =>
  `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-` +
  `${((parseInt(hex[16]!, 16) & 3) | 8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`

/** The ids of task run `taskRunId`'s launch: the same every time. */
export const launchIds = (taskRunId: string): LaunchIds => {
  const digest = Crypto.createHash("sha256").update(`antler task run\u0000${taskRunId}`).digest("hex")
  return { runId: uuidOf(digest.slice(0, 32)), threadId: uuidOf(digest.slice(32, 64)) }
}

/**
 * Why a run could not start; `refused` when the user's own limits refused it (a quota), not a fault; `busy` when its
 * thread has a run going (a `reuse_thread` task's thread, busy with a run of another's starting).
 */
export interface LaunchError {
  readonly message: string
  readonly refused?: boolean | undefined
  readonly busy?: boolean | undefined
}

/** What a trigger did (`refused`: see `LaunchError`). */
export type Dispatched =
  | { readonly outcome: "launched"; readonly run: TaskRun }
  | { readonly outcome: "conflict"; readonly error: string }
  | { readonly outcome: "failed"; readonly error: string; readonly refused?: boolean | undefined }

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
 * How long a run admitted but not started (a moment's work, unless its process stopped in between) waits for its
 * process: after this, another process takes it over and starts it (under the same ids: `launchIds`).
 */
export const STALE_QUEUED_MS = 30_000

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

/** What a `once` task becomes when its run ends so. */
const onceEnd = (status: string) =>
  status === "success" ? "completed" as const : status === "interrupted" ? "cancelled" as const : "failed" as const

/** The scheduler over the task store and a launcher; its poller and run watchers end with its scope. */
export const make = (launcher: Launcher, options: Options = {}) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    const watchers = yield* FiberSet.make()
    const pollSeconds = options.pollSeconds ?? 10
    const batch = options.batch ?? 20
    const maxActivePerUser = options.maxActivePerUser ?? 3
    const now = Clock.currentTimeMillis

    /**
     * Records on the task the end of its last run (a `once` task ends with it: `completed`, or `cancelled` when its
     * run was interrupted, as DeerFlow's, else `failed`).
     */
    // (`run_count` again: the process that launched the run may have stopped before it recorded the count, and the
    // run's end is then recorded by another, which must not leave the task ended with no run counted)
    const ended = (task: Task, outcome: Pick<Outcome, "error"> & { readonly status: string }, at: string) =>
      Effect.flatMap(store.launched(task.id), (count) =>
        store.update(task.id, task.user_id, {
          last_error: outcome.status === "success" ? null : outcome.error,
          run_count: count,
          ...(task.schedule_type === "once" && task.status === "running"
            ? { status: onceEnd(outcome.status) }
            : {})
        }, at))

    /**
     * Records a run's end, and then the task's (a `once` task's end with it): a client that sees the task ended
     * finds its run ended. Two writes: a process stopped between them (SIGTERM interrupting this, SIGKILL) leaves
     * the run ended beside its task still `running`, which `reconcile` ends (`stranded`).
     */
    const finish = (task: Task, runId: string, outcome: Outcome) =>
      Effect.gen(function*() {
        const at = iso(yield* now)
        yield* store.updateRun(runId, { status: outcome.status, error: outcome.error, finished_at: at })
        const current = yield* store.get(task.id, task.user_id)
        if (Option.isNone(current)) return
        yield* ended(current.value, outcome, at)
      })

    /** The next tick of `task` after `at` (none for a `once` task). */
    const nextOf = (task: Task, at: number) =>
      task.schedule_type === "once"
        ? null
        : Either.getOrElse(Schedules.nextRun(task.schedule_type, task.schedule_spec, task.timezone, at), () => null)

    /**
     * Starts admitted run `run` of `task` (`queued`, the tick already taken) and records it going, or failed; its
     * end is recorded when it comes.
     */
    const launch = (task: Task, run: TaskRun, started: number) =>
      Effect.gen(function*() {
        const launched = yield* Effect.either(launcher.start(task, launchIds(run.id)))
        if (Either.isLeft(launched)) {
          const error = launched.left.message
          // its thread busy, as DeerFlow's overlap: a tick is skipped (a once task's one tick lost: failed), a
          // trigger refused (409) with its run recorded failed
          const skipped = launched.left.busy === true && run.trigger === "scheduled"
          yield* store.updateRun(run.id, { status: skipped ? "skipped" : "failed", error, finished_at: iso(started) })
          yield* store.update(task.id, task.user_id, {
            last_error: skipped && task.schedule_type === "cron" ? null : error,
            ...(skipped ? {} : { last_run_at: iso(started) }),
            ...(task.schedule_type === "once" && run.trigger === "scheduled" ? { status: "failed" as const } : {})
          }, iso(started))
          if (launched.left.busy === true) return { outcome: "conflict", error } as Dispatched
          return { outcome: "failed", error, refused: launched.left.refused } as Dispatched
        }
        const { done, runId, threadId } = launched.right
        const going: TaskRun = {
          ...run,
          thread_id: threadId,
          run_id: runId,
          status: "running",
          error: null,
          started_at: iso(started),
          finished_at: null
        }
        yield* store.updateRun(run.id, {
          status: "running",
          thread_id: threadId,
          run_id: runId,
          started_at: going.started_at
        })
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
          Effect.flatMap(done, (outcome) => finish(task, going.id, outcome)).pipe(
            Effect.catchAllCause((cause) =>
              Effect.logWarning(`scheduled task ${task.id}: recording its run's end failed`, cause)
            )
          )
        )
        return { outcome: "launched", run: going } as Dispatched
      })

    /**
     * Settles a run recorded as going: whether it still goes. One the thread store says ended is recorded so. One
     * admitted and not recorded started after `STALE_QUEUED_MS` (its process stopped in between) is launched now by
     * the one process that takes it over, under the ids it would have had (a run its process did start is followed
     * and made to go on, not started again: see `Launcher.start`); its tick is taken with it if it was not yet.
     * Without its task, it is recorded interrupted.
     */
    const settle = (run: TaskRun, task: Option.Option<Task>) =>
      Effect.gen(function*() {
        const runId = run.run_id
        if (runId === null) {
          const at = yield* now
          if (at - Date.parse(run.created_at) <= STALE_QUEUED_MS) {
            return true
          } else if (Option.isNone(task)) {
            yield* store.updateRun(run.id, { status: "interrupted", error: INTERRUPTED, finished_at: iso(at) })
            return false
          } else {
            if (!(yield* store.retake(run.id, run.created_at, iso(at)))) return true
            const current = task.value
            if (
              current.status === "enabled" && current.next_run_at !== null &&
              iso(current.next_run_at) === run.scheduled_for
            ) {
              const status = current.schedule_type === "once" ? "running" : "enabled"
              yield* store.claim(current, nextOf(current, at), status, iso(at))
            }
            yield* Effect.logWarning(
              `scheduled task ${current.id}: a run its process did not record started is launched now`
            )
            return (yield* launch(current, run, at)).outcome === "launched"
          }
        }
        const ended = yield* launcher.outcome(runId)
        if (Option.isNone(ended)) return true
        if (Option.isSome(task)) {
          yield* finish(task.value, run.id, ended.value)
        } else {
          yield* store.updateRun(run.id, {
            status: ended.value.status,
            error: ended.value.error,
            finished_at: iso(yield* now)
          })
        }
        return false
      })

    /** The task's run still going, if it has one (settled first: see `settle`). */
    const going = (task: Task) =>
      Effect.gen(function*() {
        const found = yield* store.active(task.id)
        return Option.isSome(found) && (yield* settle(found.value, Option.some(task))) ? found : Option.none<TaskRun>()
      })

    /** Whether the task has a run still going. */
    const busy = (task: Task) => Effect.map(going(task), Option.isSome)

    /**
     * Runs the task now (`manual`), or its tick due at `scheduledFor` (`scheduled`). A tick's run is admitted (a
     * `queued` row, the task's one active run) before the tick is taken, so a tick taken always has its row: if
     * this process stops before starting it, another starts it (`settle`).
     */
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
        const take = trigger === "scheduled"
          ? store.claim(
            task,
            nextOf(task, started),
            task.schedule_type === "once" ? "running" : "enabled",
            iso(started)
          )
          : Effect.succeed(true)
        /**
         * A run refused: a trigger says why; a cron tick is taken and recorded `skipped`; a `once` task's one tick
         * stays due, to run at a later poll.
         */
        const notRun = (error: string) =>
          Effect.gen(function*() {
            if (trigger === "scheduled" && task.schedule_type !== "once" && (yield* take)) {
              yield* store.addRun({ ...base, ...skippedFields(task, started), error })
            }
            return { outcome: "conflict", error } as Dispatched
          })
        /**
         * Refused as the task's run goes. When that run is this very tick's (admitted by another process a moment
         * ago), the tick is that process's to take: it is not taken (and skipped) here.
         */
        const running = (other: Option.Option<TaskRun>) =>
          Option.isSome(other) && other.value.trigger === "scheduled" && trigger === "scheduled" &&
            other.value.scheduled_for === base.scheduled_for
            ? Effect.succeed({ outcome: "conflict", error: ACTIVE_RUN } as Dispatched)
            : notRun(ACTIVE_RUN)
        const before = yield* going(task)
        if (Option.isSome(before)) return yield* running(before)
        if ((yield* store.activeOfUser(task.user_id)) >= maxActivePerUser) return yield* notRun(USER_LIMIT)
        // admitted as the task's one active run before it starts: of two processes asking at once, one is
        const run: TaskRun = {
          ...base,
          thread_id: task.thread_id ?? "",
          run_id: null,
          status: "queued",
          error: null,
          started_at: null,
          finished_at: null
        }
        if (!(yield* store.addRun(run))) return yield* running(yield* store.active(task.id))
        // then the tick is taken; taken first by another process (or the task changed meanwhile): not run here
        if (!(yield* take)) {
          yield* store.removeRun(run.id)
          return { outcome: "conflict", error: "the tick was taken by another process" } as Dispatched
        }
        return yield* launch(task, run, started)
      })

    /**
     * A task left `running` without a run going (a `once` task is `running` only while it has one): the process
     * recording its run's end, or its run's failure to start, stopped after the run's write and before the task's.
     * It is ended as its last run ended.
     */
    const stranded = (task: Task) =>
      Effect.gen(function*() {
        if (Option.isSome(yield* store.active(task.id))) return
        const last = (yield* store.runs(task.id, 1, 0))[0]
        if (
          last === undefined || last.status === "queued" || last.status === "running" || last.status === "skipped"
        ) return
        yield* Effect.logWarning(
          `scheduled task ${task.id}: its last run ended ${last.status}, recorded on the task now`
        )
        yield* ended(task, last, iso(yield* now))
      })

    /**
     * The runs recorded as going, settled (`settle`): ended ones recorded, stale admitted ones started; then the
     * tasks left `running` after their run ended (`stranded`).
     */
    const reconcile = Effect.gen(function*() {
      for (const run of yield* store.unfinishedRuns) {
        yield* settle(run, yield* store.get(run.task_id, run.user_id))
      }
      for (const task of yield* store.runningTasks) yield* stranded(task)
    })

    const tick: Service["tick"] = Effect.gen(function*() {
      // (runs whose watcher was lost with the process that started them, and runs admitted and never started)
      yield* reconcile
      const at = yield* now
      for (const task of yield* store.due(at, batch)) {
        // a user at their limit: the tick stays due, and runs at a poll after one of their runs ended (late, as
        // DeerFlow's queue runs it); so does a `once` task's while a trigger's run of it goes
        if ((yield* store.activeOfUser(task.user_id)) >= maxActivePerUser) continue
        if (task.schedule_type === "once" && (yield* busy(task))) continue
        // a tick admitted by a process that stopped before taking it: `settle` starts it
        const active = yield* store.active(task.id)
        if (Option.isSome(active) && active.value.status === "queued" && active.value.trigger === "scheduled" &&
          active.value.scheduled_for === iso(task.next_run_at ?? at)) continue
        // taken and started in the scheduler's scope, not the poller's: a poller stopped meanwhile (in a cluster,
        // its singleton moving to another runner) does not lose the tick; the process stopping does stop it
        const taken = yield* FiberSet.run(watchers, Effect.asVoid(dispatch(task, "scheduled", task.next_run_at ?? at)))
        yield* Fiber.join(taken)
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
