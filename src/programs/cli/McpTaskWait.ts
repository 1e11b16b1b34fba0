/**
 * `antler run`'s long-running MCP tasks (`task_toolsets`, with `mcp_tasks.enabled`): the CLI has the gateway's
 * task runtime while it runs (the model's submit tool records the task, the poller follows it on its server), and
 * after the turn it waits for the tasks the run submitted and shows how each ended (a line each, or with `--json`
 * a `background_task` object), where `antler serve` would tell the thread with a run; what it shows is recorded as
 * told (a later `antler serve` does not tell it again). A task that asks for input is shown as such and not waited
 * for (nobody can answer it: DeerFlow cannot either), and so is one whose server failed
 * `tracking_degraded_after_errors` polls in a row. The wait is bounded (`--wait-tasks`): past it, or at Ctrl-C, the
 * CLI stops waiting and ends, with its stdio MCP servers (a task a server holds in its process ends with it); the
 * records stay beside the threads, and a later `antler run` or `antler serve` follows them.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { AppConfigService } from "../../services/AppConfig.js"
import type { Mcp } from "../../services/Mcp.js"
import { ACTIVE, McpTasks, type TaskRecord } from "../../services/McpTasks.js"
import type { StoreError } from "../../services/RunContext.js"
import { clipChars } from "../../state/Chars.js"
import type * as Redact from "../../state/Redact.js"
import * as Render from "./Render.js"

/**
 * The gateway's MCP task runtime for a run of `app` (its records beside the threads, its poller), loaded only when
 * `mcp_tasks.enabled`; none otherwise (a submit tool then answers DeerFlow's "not initialized" error).
 */
export const runtimeLayer = (
  app: AppConfigService["Type"],
  redact: Redact.Redactor
): Layer.Layer<McpTasks, StoreError, Mcp> | undefined =>
  app.config.mcp_tasks.enabled
    ? Layer.unwrapEffect(Effect.map(
      Effect.promise(() => import("../gateway/mcptasks/Wiring.js")),
      (Wiring) => Wiring.layer(app, redact)!
    ))
    : undefined

/** The user of the CLI's runs (a run without a user is DeerFlow's `default`). */
const CLI_USER = "default"

/** The most tasks of one run followed (a model that submitted more has the rest listed by its tools). */
const MAX_FOLLOWED = 20

/** Whether a task is still to wait for: going, not asking for input. */
const going = (task: TaskRecord) => ACTIVE.includes(task.status) && task.status !== "input_required"

/** What a task gave, in one line: its error, its preview, or its result. */
const gave = (task: TaskRecord): string =>
  task.error !== null
    ? task.error
    : task.status === "input_required"
    ? `it asks for input: ${Render.preview(task.input_required, 300)}`
    : task.result_preview !== null
    ? task.result_preview
    : task.result === null
    ? ""
    : typeof task.result === "string"
    ? task.result
    : Render.preview(task.result, 500)

/** How a task ended (or that it can no longer be followed: `degraded`), as printed. */
const show = (task: TaskRecord, degraded: boolean, json: boolean, redact: Redact.Redactor): Effect.Effect<void> => {
  if (json) {
    return Render.writeJson(redact.value({
      type: "background_task",
      task_id: task.id,
      task_name: task.task_name,
      status: task.status,
      tracking_degraded: degraded,
      last_poll_error: task.last_poll_error,
      result: task.result,
      result_preview: task.result_preview,
      result_truncated: task.result_truncated,
      result_artifact: task.result_artifact,
      error: task.error,
      input_required: task.input_required,
      thread_id: task.thread_id,
      run_id: task.run_id
    }))
  }
  const s = Render.style(Render.useColor())
  const color = task.status === "completed" ? s.green : task.status === "input_required" || degraded ? s.yellow : s.red
  const said = degraded ? `its server does not answer: ${task.last_poll_error ?? ""}` : gave(task)
  const what = clipChars(Render.safeText(said, redact).replace(/\s+/g, " ").trim(), 2000)
  const name = Render.safeText(task.task_name, redact)
  const status = degraded ? `${task.status}, no longer followed here` : task.status
  return Render.write(`${color(`background task ${name} ${status}`)}${what === "" ? "" : `: ${what}`}\n`)
}

/** The tasks not waited for (past `--wait-tasks`), and where to see them later. */
const left = (
  tasks: ReadonlyArray<TaskRecord>,
  threadId: string,
  waitSeconds: number,
  options: { readonly json: boolean; readonly redact: Redact.Redactor; readonly antler?: string | undefined }
): Effect.Effect<void> => {
  const names = tasks.map((task) => Render.safeText(task.task_name, options.redact))
  if (options.json) {
    return Render.writeJson(options.redact.value({
      type: "background_tasks_not_waited",
      waited_seconds: waitSeconds,
      thread_id: threadId,
      tasks: tasks.map((task, i) => ({ task_id: task.id, task_name: names[i], status: task.status }))
    }))
  }
  const some = names.length === 1 ? `background task ${names[0]}` : `${names.length} background tasks`
  const s = Render.style(Render.useColor())
  const stopped = waitSeconds === 0
    ? `not waiting for ${some} (--wait-tasks 0)`
    : `stopped waiting for ${some} after ${waitSeconds}s`
  return Render.write(s.yellow(
    `${stopped}: it goes on where its server runs (a stdio server's task ends with this process); a later ` +
      `${options.antler ?? "antler"} run --thread ${threadId} (its task tools) or antler serve follows it\n`
  ))
}

/**
 * Waits for the tasks run `runId` of `threadId` submitted, at most `waitSeconds` (0: not at all), showing each as
 * it ends (every `everyMs`, it reads their records, which the runtime's poller keeps), then the ones still going as
 * not waited for. Nothing without a task runtime or tasks.
 */
export const follow = (
  threadId: string,
  runId: string,
  options: {
    readonly json: boolean
    readonly redact: Redact.Redactor
    readonly waitSeconds: number
    readonly everyMs?: number
    /** How the user runs Antler here (`npx antler`), for the command the tasks left are followed with. */
    readonly antler?: string | undefined
  }
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const tasks = yield* Effect.serviceOption(McpTasks)
    if (Option.isNone(tasks)) return
    const runtime = tasks.value
    const submitted = (yield* runtime.list(threadId, CLI_USER, { limit: 100, activeOnly: false }))
      .filter((task) => task.run_id === runId)
      .slice(0, MAX_FOLLOWED)
      .reverse()
    if (submitted.length === 0) return
    let waiting = submitted
    const s = Render.style(Render.useColor())
    const names = submitted.filter(going).map((task) => Render.safeText(task.task_name, options.redact))
    if (!options.json && names.length > 0 && options.waitSeconds > 0) {
      const some = names.length === 1 ? `background task ${names[0]}` : `${names.length} background tasks`
      yield* Render.write(s.dim(
        `waiting for ${some} (at most ${options.waitSeconds}s; Ctrl-C stops waiting; a later run or antler serve ` +
          `follows it)…\n`
      ))
    }
    const until = (yield* Clock.currentTimeMillis) + options.waitSeconds * 1000
    while (waiting.length > 0) {
      const next: Array<TaskRecord> = []
      for (const task of waiting) {
        const now = Option.getOrElse(yield* runtime.get(task.id, CLI_USER), () => task)
        // (a task whose server fails its polls in a row is not waited for without end: it is shown as such)
        const degraded = going(now) && now.consecutive_poll_error_count >= runtime.trackingDegradedAfter
        if (going(now) && !degraded) next.push(now)
        else {
          yield* show(now, degraded, options.json, options.redact)
          // (what it shows is the event its record keeps: told, as a notification run would have told it, so that
          // a later `antler serve` does not tell it again; a newer event is still told)
          if (now.event_version > now.notified_version) {
            yield* runtime.told(now.id, CLI_USER, now.event_version).pipe(Effect.catchAll((error) =>
              Effect.logWarning(`background task ${now.id} could not be recorded as told: ${error.message}`)
            ))
          }
        }
      }
      waiting = next
      if (waiting.length === 0) break
      const remaining = until - (yield* Clock.currentTimeMillis)
      if (remaining <= 0) {
        yield* left(waiting, threadId, options.waitSeconds, options)
        break
      }
      yield* Effect.sleep(Math.min(options.everyMs ?? 1000, remaining))
    }
  }).pipe(
    Effect.catchTag("McpTaskError", (error) =>
      Effect.logWarning(`the background tasks of this run could not be read: ${error.message}`))
  )
