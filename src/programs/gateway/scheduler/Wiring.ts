/**
 * The gateway's scheduler as a layer: the task store in the thread store's database (PostgreSQL at
 * `database.url`, else the SQLite file under the data directory), and a launcher that starts a task's run
 * through the gateway's run manager, as a run a client starts: on the task's thread (or a new thread of the
 * task's user), by that user, streamed, recorded and readable as every run.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { AppConfigService } from "../../../services/AppConfig.js"
import { StoreError } from "../../../services/RunContext.js"
import type { RunRecord } from "../../../services/ThreadStore.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import * as M from "../../../state/Message.js"
import { fail, GatewayError } from "../api/Problem.js"
import * as Crons from "../Crons.js"
import * as OwnerRole from "../OwnerRole.js"
import * as Protocol from "../Protocol.js"
import { launchError, Quotas } from "../Quotas.js"
import { type ActiveRun, type RunRequest, Runs } from "../Runs.js"
import { besideThreads } from "../StoreBackend.js"
import * as ThreadIds from "../ThreadIds.js"
import * as Scheduler from "./Scheduler.js"
import { TaskStore } from "./TaskStore.js"

/** The task store a configuration chooses: beside its threads (see `StoreBackend`). */
export const storeLayer = (app: AppConfigService["Type"]): Layer.Layer<TaskStore, StoreError> =>
  besideThreads(app, {
    sqlite: (file) => import("./SqliteTasks.js").then((SqliteTasks) => SqliteTasks.layer(file)),
    postgres: (url) => import("./PgTasks.js").then((PgTasks) => PgTasks.layer(url))
  })

/** How a run record's end reads for a task. */
export const outcomeOf = (record: RunRecord): Option.Option<Scheduler.Outcome> => {
  switch (record.status) {
    case "pending":
    case "running":
      return Option.none()
    case "success":
      return Option.some({ status: "success", error: null })
    case "error":
      return Option.some({ status: "failed", error: record.error ?? "the run failed" })
    default:
      // (a run stopped, cancelled or cut off by a stopping gateway: no failure of its own, as DeerFlow's interrupt)
      return Option.some({ status: "interrupted", error: record.error ?? "run was interrupted before completion" })
  }
}

/** Seconds between looks in the thread store for the end of a task's run. */
const ENDED_POLL_SECONDS = 2

/** The launcher over the gateway's run manager and thread store. */
export const launcher = (app: AppConfigService["Type"]) => Effect.gen(function*() {
  const runs = yield* Runs
  const store = yield* ThreadStore
  const quotas = yield* Quotas
  const roleOf = yield* OwnerRole.ofApp(app)

  const outcome: Scheduler.Launcher["outcome"] = (runId) =>
    store.runs({ runId }).pipe(
      Effect.map((records) => Option.flatMap(Option.fromNullable(records[0]), outcomeOf)),
      Effect.orElseSucceed(() => Option.none())
    )

  /** A run's end as the thread store records it (looked for every few seconds). */
  const recorded = (runId: string): Effect.Effect<Scheduler.Outcome> =>
    outcome(runId).pipe(
      Effect.delay(`${ENDED_POLL_SECONDS} seconds`),
      Effect.repeat({ until: Option.isSome }),
      Effect.map(Option.getOrThrow)
    )

  /**
   * A run's end as the run manager says it, or as the thread store records it: in a cluster a run executing on
   * another runner is followed over the network, which breaks when its thread's shard moves or its runner dies
   * (the run goes on, or is resumed, elsewhere).
   */
  const ended = (run: ActiveRun): Effect.Effect<Scheduler.Outcome> =>
    Effect.race(
      Effect.flatMap(Deferred.await(run.done), (record) =>
        Option.match(outcomeOf(record), { onNone: () => Effect.never, onSome: Effect.succeed })),
      recorded(run.runId)
    )

  const started = (runId: string) =>
    Effect.map(Effect.orElseSucceed(store.runs({ runId }), () => []), (records) => records.length > 0)

  /**
   * Starts a run under its id. A failure of the run manager's own (in a cluster: the thread's runner unreachable
   * for a moment) is tried again. A run of that id started already (by this tick's earlier launch, whose process
   * stopped) is adopted (`Runs.adopt`: in a cluster it goes on, resumed if its runner died before making it
   * durable) or, without a cluster, followed as recorded (none: undefined).
   */
  const startRun = (given: RunRequest & { readonly runId: string }) =>
    Effect.flatMap(roleOf(given.userId), (role) => {
      // (the run is its user's role's, as their own requests are: see OwnerRole)
      if (Either.isLeft(role)) return Effect.fail(fail("forbidden", `The run was not started: ${role.left}.`))
      const request = role.right === undefined ? given : { ...given, role: role.right }
      return runs.start(request).pipe(
        Effect.retry({
          times: 3,
          schedule: Schedule.spaced("1 second"),
          while: (error) => error.reason === "internal"
        }),
        Effect.catchAll((error) =>
          Effect.flatMap(started(request.runId), (known): Effect.Effect<ActiveRun | undefined, typeof error> =>
            !known
              ? Effect.fail(error)
              : runs.adopt === undefined
              ? Effect.succeed(undefined)
              : runs.adopt(request, request.runId))
        )
      )
    })

  /** A DeerFlow task's run: its prompt, on its thread or a new one (made the first time: `ids.threadId`). */
  const startTask: Scheduler.Launcher["start"] = (task, ids) =>
    Effect.gen(function*() {
      const reuse = task.context_mode === "reuse_thread" && task.thread_id !== null
      const publicId = reuse ? task.thread_id! : ids.threadId
      const thread = yield* ThreadIds.forRun(
        store,
        quotas,
        task.user_id,
        publicId,
        reuse ? undefined : { scheduled_task_id: task.id, title: task.title }
      )
      const run = yield* startRun({
        runId: ids.runId,
        threadId: thread.thread_id,
        publicThreadId: publicId,
        userId: task.user_id,
        assistantId: task.assistant_id,
        // (under an id of the run's: a run adopted again is given the same message, not a second one)
        messages: [M.human(task.prompt, { id: `${ids.runId}-input` })],
        settings: {
          recursion_limit: Protocol.recursionLimit(
            undefined,
            app.config.recursion_limit,
            app.config.max_recursion_limit
          )
        },
        modes: ["values"],
        multitaskStrategy: "reject",
        metadata: { scheduled_task_id: task.id }
      })
      return { runId: ids.runId, threadId: publicId, done: run === undefined ? recorded(ids.runId) : ended(run) }
    }).pipe(Effect.mapError((error) => ({
      ...launchError(error),
      busy: error instanceof GatewayError && error.reason === "conflict"
    })))

  const start: Scheduler.Launcher["start"] = (task, ids) =>
    task.cron == null
      ? startTask(task, ids)
      // a LangGraph cron: its run as its payload says (`Crons.ts`)
      : Effect.map(Crons.launch({ start: startRun, store, quotas, app }, task, ids), (launched) => ({
        runId: ids.runId,
        threadId: launched.threadId,
        done: launched.run === undefined ? recorded(ids.runId) : ended(launched.run)
      }))

  return { start, outcome } satisfies Scheduler.Launcher
})

const schedulerLayer = (
  app: AppConfigService["Type"],
  pollSeconds: number
): Layer.Layer<Scheduler.Scheduler | TaskStore, StoreError, Runs | ThreadStore | Quotas> =>
  Layer.unwrapEffect(Effect.map(launcher(app), (launch) => Scheduler.layer(launch, { pollSeconds }))).pipe(
    Layer.provideMerge(storeLayer(app))
  )

/** Seconds between the polls for due ticks; 0 (none: triggers only) with DeerFlow's `scheduler.enabled: false`. */
const pollSecondsOf = (app: AppConfigService["Type"]): number =>
  app.config.scheduler.enabled ? app.config.gateway.scheduler_poll_seconds : 0

/**
 * The scheduler of a gateway (after its run manager settled what a previous process left): every process polls
 * for due ticks (each tick claimed in the database by one of them).
 */
export const layer = (
  app: AppConfigService["Type"]
): Layer.Layer<Scheduler.Scheduler | TaskStore, StoreError, Runs | ThreadStore | Quotas> =>
  schedulerLayer(app, pollSecondsOf(app))

/**
 * The scheduler of a runner of a cluster: triggers and the settling of earlier runs as in `layer`, the polls for
 * due ticks on one runner only, the cluster's singleton (`ClusterTicks`).
 */
export const clusterLayer = (
  app: AppConfigService["Type"]
): Layer.Layer<Scheduler.Scheduler | TaskStore, StoreError, Runs | ThreadStore | Quotas> =>
  Layer.unwrapEffect(Effect.map(
    Effect.promise(() => import("./ClusterTicks.js")),
    (ClusterTicks) => ClusterTicks.layer(pollSecondsOf(app))
  )).pipe(Layer.provideMerge(schedulerLayer(app, 0)))

