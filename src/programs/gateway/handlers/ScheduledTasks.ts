/**
 * The scheduled tasks endpoints (declared in `api/ScheduledTasks.ts`), over the task store and the scheduler.
 * Schedules are checked here, at the boundary (`Schedules.check`): an unknown time zone, a cron expression that
 * is not five valid fields or a `once` time less than `scheduler.min_once_delay_seconds` ahead (60 by default, as
 * DeerFlow's) is refused (422) saying which. A `thread_id` given that no thread can have is a 422 naming it, in
 * either mode (DeerFlow's `ThreadId` field); a `reuse_thread` task's thread must be one of its user's. A task's
 * thread ids are the ids its user's client knows.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Crypto from "node:crypto"
import { AppConfigService } from "../../../services/AppConfig.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import { fail, GatewayError, notFound, problem } from "../api/Problem.js"
import * as Api from "../api/ScheduledTasks.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Body from "../Body.js"
import * as Schedules from "../scheduler/Schedules.js"
import * as ThreadIds from "../ThreadIds.js"
import { Scheduler } from "../scheduler/Scheduler.js"
import type { Task, TaskPatch, TaskRun } from "../scheduler/TaskStore.js"
import { neverRun, TaskStore } from "../scheduler/TaskStore.js"
import * as Access from "./Access.js"
import { json, type QueryValue } from "./Http.js"

/** The most tasks a user has. */
export const MAX_TASKS_PER_USER = 100

const iso = (millis: number | null) => (millis === null ? null : new Date(millis).toISOString())

/** A task as DeerFlow's app reads it. */
export const taskObject = (task: Task): typeof Api.TaskObject.Type => ({
  id: task.id,
  thread_id: task.thread_id,
  context_mode: task.context_mode,
  assistant_id: task.assistant_id,
  title: task.title,
  prompt: task.prompt,
  schedule_type: task.schedule_type,
  schedule_spec: task.schedule_spec,
  timezone: task.timezone,
  status: task.status,
  next_run_at: iso(task.next_run_at),
  last_run_at: task.last_run_at,
  last_run_id: task.last_run_id,
  last_thread_id: task.last_thread_id,
  last_error: task.last_error,
  run_count: task.run_count,
  created_at: task.created_at,
  updated_at: task.updated_at
})

const runObject = ({ user_id: _user, ...run }: TaskRun): typeof Api.TaskRunObject.Type => run

/** A count from the query (`name`), within `min`..`max`; `fallback` when absent. */
const countParam = (value: QueryValue, name: string, fallback: number, min: number, max: number) => {
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined) return Effect.succeed(fallback)
  const n = Number(text)
  return Number.isInteger(n) && n >= min && n <= max
    ? Effect.succeed(n)
    : Effect.fail(fail(
      "unprocessable",
      `${name} must be a whole number from ${min} to ${max}, not ${JSON.stringify(text.slice(0, 40))}.`
    ))
}

/** The scheduled tasks endpoints of `api` (DeerFlow's endpoints under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "scheduledTasks", (handlers) =>
    Effect.gen(function*() {
      const store = yield* TaskStore
      const scheduler = yield* Scheduler
      const access = yield* Access.make
      const minOnceDelay = (yield* AppConfigService).config.scheduler.min_once_delay_seconds

      const stored = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.mapError(effect, (error) =>
          error instanceof GatewayError ? error : new GatewayError({
            reason: "internal",
            message: String((error as { message?: unknown }).message),
            cause: error
          }))

      /** The user's task `id` (not a LangGraph cron: those are the crons endpoints'), or 404. */
      const owned = (userId: string, id: string) =>
        Effect.flatMap(stored(store.get(id, userId)), (found) =>
          Option.match(Option.filter(found, (task) => task.cron == null), {
            onNone: () => Effect.fail(notFound("Scheduled task")),
            onSome: Effect.succeed
          }))

      /** Refuses to change a task while its `once` run is going (as DeerFlow). */
      const mutable = (task: Task) =>
        task.status === "running"
          ? Effect.fail(
            fail("conflict", "Scheduled task is currently running; retry after the active execution finishes.")
          )
          : Effect.void

      /** The schedule checked, or 422 saying what is wrong with it. */
      const checked = (
        type: Task["schedule_type"],
        spec: Readonly<Record<string, unknown>>,
        timezone: string,
        now: number
      ) =>
        Either.match(Schedules.check(type, spec, timezone, now), {
          onLeft: (message) => Effect.fail(fail("unprocessable", `${message}.`)),
          onRight: (schedule) =>
            type === "once" && schedule.next !== null && schedule.next - now < minOnceDelay * 1000
              ? Effect.fail(fail(
                "unprocessable",
                `A once schedule must be at least ${minOnceDelay} seconds in the future ` +
                  "(scheduler.min_once_delay_seconds)."
              ))
              : Effect.succeed(schedule)
        })

      /** A `thread_id` given: one a thread can have, or 422 naming it (in either mode, as DeerFlow's field). */
      const threadIdGiven = (threadId: string | null | undefined) => {
        const problem = threadId == null ? undefined : ThreadIds.newIdProblem(threadId)
        return problem === undefined ? Effect.void : Effect.fail(fail("unprocessable", `thread_id: ${problem}.`))
      }

      /** The thread a `reuse_thread` task names: one of the user's, or 404. */
      const reusable = (userId: string, threadId: string | null | undefined) =>
        threadId == null || threadId === ""
          ? Effect.fail(fail("unprocessable", "reuse_thread requires thread_id."))
          : Effect.as(access.ownedThread(userId, threadId), threadId)

      const list = (userId: string, threadId?: string) =>
        Effect.map(stored(store.list(userId, threadId)), (tasks) => json(Api.TaskList, tasks.map(taskObject)))

      return handlers
        .handleRaw("listScheduledTasks", () =>
          Effect.flatMap(CurrentIdentity, ({ user }) => list(user)))
        .handleRaw("createScheduledTask", () =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const request = yield* Body.json(Api.TaskCreate)
            yield* threadIdGiven(request.thread_id)
            const mode = request.context_mode ?? "fresh_thread_per_run"
            const threadId = mode === "reuse_thread" ? yield* reusable(user, request.thread_id) : null
            const now = yield* Clock.currentTimeMillis
            const schedule = yield* checked(request.schedule_type, request.schedule_spec, request.timezone, now)
            if ((yield* stored(store.count(user))) >= MAX_TASKS_PER_USER) {
              return yield* fail(
                "conflict",
                `A user has at most ${MAX_TASKS_PER_USER} scheduled tasks; delete one first.`
              )
            }
            const at = new Date(now).toISOString()
            const task: Task = {
              id: `task-${Crypto.randomUUID().replace(/-/g, "")}`,
              user_id: user,
              thread_id: threadId,
              context_mode: mode,
              assistant_id: "lead_agent",
              title: request.title,
              prompt: request.prompt,
              schedule_type: request.schedule_type,
              schedule_spec: schedule.spec,
              timezone: request.timezone,
              status: "enabled",
              next_run_at: schedule.next,
              ...neverRun(at)
            }
            yield* stored(store.create(task))
            return json(Api.TaskObject, taskObject(task))
          }))
        .handleRaw("getScheduledTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            return json(Api.TaskObject, taskObject(yield* owned(user, path.task_id)))
          }))
        .handleRaw("updateScheduledTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const existing = yield* owned(user, path.task_id)
            yield* mutable(existing)
            const request = yield* Body.json(Api.TaskPatch)
            yield* threadIdGiven(request.thread_id)
            const patch: { -readonly [K in keyof TaskPatch]: TaskPatch[K] } = {}
            if (request.title != null) patch.title = request.title
            if (request.prompt != null) patch.prompt = request.prompt
            const mode = request.context_mode ?? existing.context_mode
            patch.context_mode = mode
            patch.thread_id = mode === "reuse_thread"
              ? yield* reusable(user, request.thread_id !== undefined ? request.thread_id : existing.thread_id)
              : null
            if (request.schedule_spec != null || request.timezone != null) {
              const timezone = request.timezone ?? existing.timezone
              const now = yield* Clock.currentTimeMillis
              const schedule = yield* checked(
                existing.schedule_type,
                request.schedule_spec ?? existing.schedule_spec,
                timezone,
                now
              )
              patch.schedule_spec = schedule.spec
              patch.timezone = timezone
              patch.next_run_at = schedule.next
              // an ended task given a future time runs again (else it would show a next run that never comes)
              if (["completed", "failed", "cancelled"].includes(existing.status)) patch.status = "enabled"
            }
            const at = new Date(yield* Clock.currentTimeMillis).toISOString()
            const updated = yield* stored(store.update(existing.id, user, patch, at))
            if (Option.isNone(updated)) return yield* notFound("Scheduled task")
            return json(Api.TaskObject, taskObject(updated.value))
          }))
        .handleRaw("deleteScheduledTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            yield* owned(user, path.task_id)
            if (!(yield* stored(store.remove(path.task_id, user)))) return yield* notFound("Scheduled task")
            return json(Api.Deleted, { id: path.task_id, deleted: true })
          }))
        .handleRaw("pauseScheduledTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            yield* mutable(yield* owned(user, path.task_id))
            const at = new Date(yield* Clock.currentTimeMillis).toISOString()
            const updated = yield* stored(store.update(path.task_id, user, { status: "paused" }, at))
            if (Option.isNone(updated)) return yield* notFound("Scheduled task")
            return json(Api.TaskObject, taskObject(updated.value))
          }))
        .handleRaw("resumeScheduledTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const existing = yield* owned(user, path.task_id)
            yield* mutable(existing)
            const now = yield* Clock.currentTimeMillis
            // a cron task resumes at its next tick after now: the ticks it missed while paused are not run
            const next = existing.schedule_type === "cron"
              ? Either.getOrElse(
                Schedules.nextRun("cron", existing.schedule_spec, existing.timezone, now),
                () => existing.next_run_at
              )
              : existing.next_run_at
            const at = new Date(now).toISOString()
            const updated = yield* stored(
              store.update(path.task_id, user, { status: "enabled", next_run_at: next }, at)
            )
            if (Option.isNone(updated)) return yield* notFound("Scheduled task")
            return json(Api.TaskObject, taskObject(updated.value))
          }))
        .handleRaw("triggerScheduledTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const task = yield* owned(user, path.task_id)
            const dispatched = yield* stored(scheduler.trigger(task))
            switch (dispatched.outcome) {
              case "launched":
                return json(Api.Triggered, { id: task.id, triggered: true })
              case "conflict":
                return yield* fail("conflict", `Scheduled task ${task.id}: ${dispatched.error.replace(/\.$/, "")}.`)
              case "failed":
                // the user's own quota refused the run's thread: theirs to free, not the gateway's fault
                if (dispatched.refused === true) {
                  return yield* fail(
                    "forbidden",
                    `Scheduled task ${task.id} could not start its run: ${dispatched.error}`
                  )
                }
                return problem(
                  502,
                  `Scheduled task ${task.id} could not start its run: ${dispatched.error.replace(/\.$/, "")}.`
                )
            }
          }))
        .handleRaw("listScheduledTaskRuns", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const limit = yield* countParam(urlParams.limit, "limit", 50, 1, 200)
            const offset = yield* countParam(urlParams.offset, "offset", 0, 0, 1_000_000)
            const task = yield* owned(user, path.task_id)
            const runs = yield* stored(store.runs(task.id, limit, offset))
            return json(Api.TaskRunList, runs.map(runObject))
          }))
        .handleRaw("listThreadScheduledTasks", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            // (a new chat's thread, before its first run, has none; DeerFlow answers it so)
            yield* access.chatOf(user, path.thread_id)
            return yield* list(user, path.thread_id)
          }))
    }))
