/**
 * The MCP task runtime (DeerFlow's `McpTaskService` with its ordinary driver): submits a task tool's work and
 * records the task before the model hears of it, then, in the background, polls each active task on its server
 * until it ends and carries out the cancels asked for. A failed poll or cancel is tried again later, the wait
 * doubling up to `max_poll_backoff_seconds`; a server that breaks the contract fails the task. Results are kept
 * bounded (`TaskDriver.bounded`) and without the app's secrets (a server may echo its env), nor the request secrets
 * of the run that started the task (`TaskSecrets`: sealed in its record while it is active).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import * as TaskDriver from "../../../layers/mcp/TaskDriver.js"
import type { McpTasksConfig } from "../../../services/AppConfig.js"
import { Mcp } from "../../../services/Mcp.js"
import type { Service, TaskRecord } from "../../../services/McpTasks.js"
import { ACTIVE, McpTaskError, McpTasks, submitted, TERMINAL } from "../../../services/McpTasks.js"
import type { StoreError } from "../../../services/RunContext.js"
import * as SkillSecrets from "../../../services/SkillSecrets.js"
import * as Redact from "../../../state/Redact.js"
import * as Records from "./Records.js"
import * as TaskSecrets from "./TaskSecrets.js"

const storeFailed = (error: StoreError) => new McpTaskError({ reason: "store", message: error.message, cause: error })

const driverFailed = (error: TaskDriver.DriverError) =>
  new McpTaskError({ reason: error.permanent ? "protocol" : "call", message: error.message })

const refOf = (record: TaskRecord): TaskDriver.TaskRef => ({
  server: record.server_name,
  remoteTaskId: record.remote_task_id,
  driverData: record.driver_data,
  scope: { userId: record.user_id, threadId: record.thread_id }
})

/**
 * The runtime over its store and the app's MCP servers, and the pass the poller makes (`pass`). `key`: what tasks'
 * request secrets are sealed under (`TaskSecrets.keyOf`: the cluster's, else one of this runtime's own).
 */
export const make = (
  config: McpTasksConfig,
  records: Records.Service,
  mcp: Mcp["Type"],
  redact: Redact.Redactor = Redact.none,
  key: TaskSecrets.Key = TaskSecrets.keyOf(undefined)
) =>
  Effect.gen(function*() {
    const owner = `${Os.hostname()}:${Crypto.randomUUID().replace(/-/g, "")}`
    const leaseMs = config.lease_seconds * 1000
    const limits = { maxResultBytes: config.max_result_bytes, previewChars: config.result_preview_max_chars }
    // (a cancel asked for wakes the poller: it is carried out now, not at the next pass)
    const wake = yield* Queue.sliding<void>(1)

    const backoffMs = (failures: number) =>
      Math.min(config.poll_interval_seconds * 2 ** Math.min(failures, 16), config.max_poll_backoff_seconds) * 1000

    const nextPollAt = (snapshot: TaskDriver.Snapshot, now: number): number | null => {
      if (!ACTIVE.includes(snapshot.status)) return null
      let seconds = snapshot.poll_after_seconds ?? config.poll_interval_seconds
      if (snapshot.status === "input_required") seconds = Math.max(seconds, config.input_required_poll_interval_seconds)
      return now + Math.min(seconds, TaskDriver.MAX_POLL_AFTER_SECONDS) * 1000
    }

    const submit: Service["submit"] = (request) =>
      Effect.gen(function*() {
        const { submit_tool, status_tool, cancel_tool } = request.toolset
        const driverData = { submit_tool, status_tool, cancel_tool }
        const scope = { userId: request.userId, threadId: request.threadId }
        // (a server's error text is cut by the driver, maybe inside a secret of the run: its beginning is hidden too)
        const hide = SkillSecrets.runRedactor(redact, request.secrets)
        const remote = yield* Effect.mapError(
          TaskDriver.submit(mcp, request.server, driverData, request.arguments, scope),
          (error) => driverFailed(new TaskDriver.DriverError({ ...error, message: hide.last(error.message) }))
        )
        // (the handle is kept as it came, as every poll and cancel sends it back: one holding a secret of the run, or
        // of the process, is not kept, its task cancelled)
        if (hide.test(remote)) {
          const ref = { server: request.server, remoteTaskId: remote, driverData, scope }
          yield* Effect.ignore(TaskDriver.cancel(mcp, ref))
          return yield* new McpTaskError({
            reason: "protocol",
            message: `MCP server '${request.server}' answered with a task id that holds a secret (the run's or the ` +
              "gateway's): the task was cancelled and is not tracked"
          })
        }
        const now = yield* Clock.currentTimeMillis
        const id = `mcp-task-${Crypto.randomUUID().replace(/-/g, "")}`
        const whose = { id, user_id: request.userId, thread_id: request.threadId }
        const sealed = TaskSecrets.seal(key, whose, request.secrets)
        const made = submitted({
          id,
          user_id: request.userId,
          thread_id: request.threadId,
          run_id: request.runId,
          tool_call_id: request.toolCallId,
          server_name: request.server,
          driver_name: TaskDriver.ORDINARY,
          remote_task_id: remote,
          task_name: request.toolset.name,
          driver_data: driverData,
          next_poll_at: now + config.poll_interval_seconds * 1000
        }, now)
        const record: TaskRecord = sealed === null ? made : { ...made, sealed_secrets: sealed }
        yield* records.create(record).pipe(
          Effect.catchTags({
            // (that remote task has a record already: cancelling it would end the task that record tracks)
            Duplicate: () =>
              Effect.fail(new McpTaskError({
                reason: "duplicate",
                message: `Remote MCP task '${remote.slice(0, 100)}' is already tracked for server '${request.server}'`
              })),
            // (not recorded: the remote task is cancelled rather than left running untracked)
            StoreError: (error) =>
              Effect.zipRight(
                Effect.ignore(TaskDriver.cancel(mcp, refOf(record))),
                Effect.fail(storeFailed(error))
              )
          })
        )
        return record
      })

    const cancel: Service["cancel"] = (id, threadId, userId) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const record = yield* Effect.mapError(records.requestCancel(id, threadId, userId, now), storeFailed)
        yield* wake.offer(undefined)
        return record
      })

    const list: Service["list"] = (threadId, userId, options) =>
      Effect.mapError(records.list(threadId, userId, options.limit, options.activeOnly), storeFailed)

    const cancelMatching: Service["cancelMatching"] = (threadId, userId, task) =>
      Effect.gen(function*() {
        const active = yield* list(threadId, userId, { limit: 50, activeOnly: true })
        const wanted = task?.trim().toLowerCase()
        const matches = task === undefined || task === ""
          ? active
          : active.filter((item) => item.id === task || item.task_name.toLowerCase() === wanted)
        if (matches.length === 0) {
          return yield* new McpTaskError({
            reason: "not_found",
            message: "No active background task matches this request"
          })
        }
        if (matches.length > 1) {
          const names = matches.slice(0, 5).map((item) => item.task_name || item.id).join(", ")
          return yield* new McpTaskError({
            reason: "ambiguous",
            message: `More than one active background task matches; specify one task name: ${names}`
          })
        }
        const cancelled = yield* cancel(matches[0]!.id, threadId, userId)
        if (Option.isNone(cancelled)) {
          return yield* new McpTaskError({
            reason: "not_found",
            message: "The selected background task no longer exists"
          })
        }
        return cancelled.value
      })

    const pollOne = (record: TaskRecord) =>
      Effect.gen(function*() {
        const guard = TaskSecrets.guardOf(key, record, redact)
        const answer = yield* Effect.either(
          Effect.flatMap(TaskDriver.status(mcp, refOf(record)), (snapshot) =>
            TaskDriver.bounded(TaskSecrets.guarded(guard, snapshot), limits))
        )
        const now = yield* Clock.currentTimeMillis
        if (Either.isLeft(answer) && !answer.left.permanent) {
          const failures = record.consecutive_poll_error_count
          const error = TaskSecrets.guardedText(guard, answer.left.message).slice(0, TaskDriver.MAX_ERROR_CHARS)
          yield* records.releasePoll(
            record,
            owner,
            now + backoffMs(failures),
            error,
            now,
            config.tracking_degraded_after_errors
          )
          return
        }
        const snapshot: TaskDriver.Snapshot = Either.isRight(answer)
          ? answer.right
          : {
            ...FAILED,
            error: TaskSecrets.guardedText(guard, answer.left.message).slice(0, TaskDriver.MAX_ERROR_CHARS)
          }
        yield* records.applySnapshot(record, owner, snapshot, nextPollAt(snapshot, now), now)
      })

    const cancelOne = (record: TaskRecord) =>
      Effect.gen(function*() {
        const guard = TaskSecrets.guardOf(key, record, redact)
        const answer = yield* Effect.either(
          Effect.flatMap(TaskDriver.cancel(mcp, refOf(record)), (snapshot) =>
            Either.flatMap(TaskDriver.bounded(TaskSecrets.guarded(guard, snapshot), limits), (bounded) =>
              TERMINAL.includes(bounded.status)
                ? Either.right(bounded)
                : Either.left(
                  new TaskDriver.DriverError({
                    permanent: true,
                    message: "MCP task cancellation must return a terminal status"
                  })
                )))
        )
        const now = yield* Clock.currentTimeMillis
        if (Either.isLeft(answer)) {
          const attempts = Math.max(0, record.cancel_attempt_count - 1)
          const error = TaskSecrets.guardedText(guard, answer.left.message).slice(0, TaskDriver.MAX_ERROR_CHARS)
          yield* records.releaseCancel(record.id, owner, now + backoffMs(attempts), error, now)
          return
        }
        yield* records.applyCancel(record, owner, answer.right, now)
      })

    // a claimed task whose poll or cancel is interrupted (this process stopping: a Ctrl-C of `antler run`) is given
    // back at once, not held by its lease (`lease_seconds`, two minutes by default) from the next process's polls
    const given = (record: TaskRecord, work: Effect.Effect<void, unknown>) =>
      Effect.ignoreLogged(work).pipe(Effect.onInterrupt(() => Effect.ignore(records.unclaim(record.id, owner))))

    /** One pass: the cancels due, then the polls due (each failure is the task's, never the pass's). */
    const pass = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const cancels = yield* records.claimCancels(now, owner, leaseMs, config.max_concurrent_polls)
      yield* Effect.forEach(cancels, (record) => given(record, cancelOne(record)), {
        concurrency: config.max_concurrent_polls,
        discard: true
      })
      const due = yield* records.claimDue(yield* Clock.currentTimeMillis, owner, leaseMs, config.max_concurrent_polls)
      yield* Effect.forEach(due, (record) => given(record, pollOne(record)), {
        concurrency: config.max_concurrent_polls,
        discard: true
      })
    })

    const service: Service = {
      submit,
      list,
      get: (id, userId) => Effect.mapError(records.get(id, userId), storeFailed),
      told: (id, userId, version) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.mapError(records.notifications.told(id, userId, version, now), storeFailed)),
      cancel,
      cancelMatching,
      trackingDegradedAfter: config.tracking_degraded_after_errors
    }
    return { service, pass, wake: Queue.take(wake) }
  })

const FAILED: TaskDriver.Snapshot = { ...TaskDriver.EMPTY, status: "failed" }

/**
 * The runtime as a layer, its poller running until the layer is released: a pass at once (tasks a stopped
 * process left are taken up when their leases end), then one every `poll_interval_seconds` or when a cancel is
 * asked for.
 */
export const layer = (
  config: McpTasksConfig,
  redact?: Redact.Redactor,
  key?: TaskSecrets.Key
): Layer.Layer<McpTasks, never, Records.Records | Mcp> =>
  Layer.scoped(
    McpTasks,
    Effect.gen(function*() {
      const runtime = yield* make(config, yield* Records.Records, yield* Mcp, redact, key)
      const pause = Effect.race(Effect.sleep(`${config.poll_interval_seconds} seconds`), runtime.wake)
      yield* Effect.forkScoped(Effect.forever(Effect.zipRight(
        runtime.pass.pipe(Effect.catchAllCause((cause) => Effect.logWarning("MCP task poll failed; retrying", cause))),
        pause
      )))
      return runtime.service
    })
  )
