/**
 * The notifier of MCP tasks (DeerFlow's `McpTaskService._run_notifications` / `_notify_one`): each pass takes the
 * task events due (`Notifications.claim`: at most `max_concurrent_polls`, one per thread, none of a thread whose
 * notification run still goes), launches the run that tells each one on its thread as the task's user
 * (`Launcher`), and follows the runs launched earlier: a success delivers the event, a failure is tried again (the
 * wait doubling up to `max_poll_backoff_seconds`), the fifth failure in a row gives it up. A thread that is gone,
 * or is not the user's, gives the event up at once (a deleted chat is never made again); a busy thread (another
 * process's run holds it) is tried again after `poll_interval_seconds`, with the task's latest event. Past
 * `max_notifications_per_task` events of a task, only its end is told (a hostile server's stream of new questions
 * is not a stream of runs).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { frameUntrustedText } from "../../../middleware/InputSanitization.js"
import { canonicalJson } from "../../../middleware/LoopDetection.js"
import type { McpTasksConfig } from "../../../services/AppConfig.js"
import { TERMINAL, type TaskRecord } from "../../../services/McpTasks.js"
import type { JsonObject } from "../../../state/Message.js"
import * as TaskDriver from "../../../layers/mcp/TaskDriver.js"
import * as Notifications from "./Notifications.js"

/** Why a notification run was not launched. */
export interface LaunchFailure {
  /** `gone`: the thread is not there (or not the user's); `busy`: another run holds it; else a fault. */
  readonly reason: "gone" | "busy" | "failed"
  readonly message: string
}

/** How a notification run ended, as its record says (none while it goes). */
export type RunOutcome = "success" | "failed" | "running" | "missing"

/** What launches and follows notification runs (the gateway's run manager: `Launch`). */
export interface Launcher {
  /**
   * Starts the run telling `event` of `task` on its thread, under `key` (the same key, the same run: a launch
   * retried after a crash finds it); its id.
   */
  readonly launch: (task: TaskRecord, event: JsonObject, key: string) => Effect.Effect<string, LaunchFailure>
  /** How run `runId` (of the task's user) stands. */
  readonly outcome: (runId: string, task: TaskRecord) => Effect.Effect<RunOutcome>
}

/** The instruction of a notification run (DeerFlow's, word for word), outside the untrusted event's frame. */
export const INSTRUCTION = "A durable background MCP task has an update that requires the user's attention. " +
  "Explain the update clearly and concisely. Do not expose or ask for a remote task ID. " +
  "When status is input_required, show the question but explain that this MCP integration " +
  "cannot resume the remote task with user input yet. When tracking_degraded is true, explain " +
  "that DeerFlow will continue retrying at a lower frequency."

/**
 * The user turn of a notification run (DeerFlow's `_mcp_task_notification_prompt`): the instruction, then the
 * event as JSON (sorted keys) framed as untrusted text (its tags neutralised: a result cannot close the frame).
 */
export const prompt = (event: JsonObject): string => `${INSTRUCTION}\n\n${frameUntrustedText(canonicalJson(event))}`

/** A notification run's idempotency key (DeerFlow's): the task, the event's version, the launch attempt. */
export const keyOf = (task: TaskRecord): string =>
  `mcp-task:${task.id}:${task.dispatch_version ?? 0}:${task.dispatch_attempt}`

const bound = (text: string) => text.slice(0, TaskDriver.MAX_ERROR_CHARS)

/** Why an event of a task was not told: the task's events told reached `limit`. */
export const tooMany = (limit: number): string =>
  `Notification not sent: this task's updates were told ${limit} times already ` +
  "(mcp_tasks.max_notifications_per_task); only its end will be told."

/** The notifier's pass for `owner` (a process's lease owner), over the records' notifications and `launcher`. */
export const make = (config: McpTasksConfig, notifications: Notifications.Service, launcher: Launcher,
  owner: string) =>
{
  const leaseMs = config.lease_seconds * 1000
  const pollMs = config.poll_interval_seconds * 1000
  const retryMs = (task: TaskRecord) =>
    Math.min(
      config.poll_interval_seconds * 2 ** Math.min(Math.max(0, task.notification_attempt_count), 16),
      config.max_poll_backoff_seconds
    ) * 1000

  const notifyOne = (task: TaskRecord) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const version = task.dispatch_version ?? 0
      if (task.notification_attempt_count >= Notifications.MAX_ATTEMPTS) {
        const previous = task.notification_error ?? "delivery failed"
        const error =
          `Notification delivery stopped after ${task.notification_attempt_count} failed attempts: ${previous}`
        yield* notifications.deadLetter(task.id, owner, version, bound(error), false, now)
        return
      }
      if (task.notification_status === "dispatched") {
        const runId = task.notification_run_id ?? ""
        const outcome = yield* launcher.outcome(runId, task)
        switch (outcome) {
          case "success":
            yield* notifications.finish(task.id, owner, version, true, null, null, now)
            return
          case "missing":
          case "failed": {
            const error = outcome === "missing"
              ? `Notification run '${runId}' was not found`
              : `Notification run '${runId}' did not succeed`
            yield* notifications.finish(task.id, owner, version, false, now + retryMs(task), error, now)
            return
          }
          case "running":
            yield* notifications.defer(task.id, owner, version, now + pollMs, now)
            return
        }
      }
      // (a server that keeps making new events does not get a run of the user's model for each: past the limit,
      // only the task's end is told)
      if (version > config.max_notifications_per_task && !TERMINAL.includes(task.status)) {
        yield* notifications.deadLetter(task.id, owner, version, bound(tooMany(config.max_notifications_per_task)),
          false, now)
        return
      }
      if (task.dispatch_event === null) {
        // (nothing to tell after all: its event went away; given up quietly)
        yield* notifications.deadLetter(task.id, owner, version, "The task has no event to tell", false, now)
        return
      }
      const launched = yield* Effect.either(launcher.launch(task, task.dispatch_event, keyOf(task)))
      if (Either.isLeft(launched)) {
        const { reason, message } = launched.left
        const error = bound(message)
        if (reason === "gone") yield* notifications.deadLetter(task.id, owner, version, error, true, now)
        else if (reason === "busy") yield* notifications.release(task.id, owner, now + pollMs, error, true, false)
        else yield* notifications.release(task.id, owner, now + retryMs(task), error, true, true)
        return
      }
      yield* notifications.dispatched(task.id, owner, version, launched.right, now)
    })

  /** One pass: the events due, each told or followed (a failure is the event's: its lease is released). */
  return Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const claimed = yield* notifications.claim(
      now,
      owner,
      leaseMs,
      config.max_concurrent_polls,
      config.tracking_degraded_after_errors
    )
    yield* Effect.forEach(claimed, (task) =>
      notifyOne(task).pipe(
        // (its lease ends, and the event is taken up again then)
        Effect.catchAllCause((cause) => Effect.logError(`MCP task ${task.id}: its notification failed`, cause))
      ), { concurrency: config.max_concurrent_polls, discard: true })
    return claimed.length
  })
}
