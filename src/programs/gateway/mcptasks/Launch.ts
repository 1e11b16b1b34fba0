/**
 * The notifier's launcher over the gateway's run manager (DeerFlow's `launch_mcp_task_notification_run`): the run
 * telling a task's event is started on the task's thread, which must still be there and be the task's user's (it
 * is never made again), as that user and their role (`OwnerRole`), with the source run's assistant,
 * non-interactive, its one message hidden from the UI, its metadata naming the task (`mcp_task_notification`).
 * Behind a run of the thread in this process it waits its turn (`enqueue`); a run of another process holding the
 * thread makes it busy (tried again later).
 * Its id is made from the idempotency key: a launch retried after a crash finds the run it started.
 */
import * as Crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { AppConfigService } from "../../../services/AppConfig.js"
import type { TaskRecord } from "../../../services/McpTasks.js"
import type { ThreadStore } from "../../../services/ThreadStore.js"
import * as M from "../../../state/Message.js"
import { DEFAULT_USER } from "../Auth.js"
import * as OwnerRole from "../OwnerRole.js"
import * as Protocol from "../Protocol.js"
import type { Runs } from "../Runs.js"
import * as ThreadIds from "../ThreadIds.js"
import type { Launcher, LaunchFailure, RunOutcome } from "./Notifier.js"
import * as Notifier from "./Notifier.js"

/** A uuid (version 4's layout) made from a key: the same key, the same id. */
export const runIdOf = (key: string): string => {
  const hex = Crypto.createHash("sha256").update(`antler mcp task notification\u0000${key}`).digest("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-` +
    `${((parseInt(hex[16]!, 16) & 3) | 8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

const failure = (reason: LaunchFailure["reason"], message: string): LaunchFailure => ({ reason, message })

/** The launcher over `runs` and `store`; `roleOf`: the role a user's run is given (`OwnerRole`). */
export const make = (
  app: AppConfigService["Type"],
  runs: Runs["Type"],
  store: ThreadStore["Type"],
  roleOf: OwnerRole.Lookup
): Launcher => {
  const outcome = (runId: string): Effect.Effect<RunOutcome> =>
    store.runs({ runId }).pipe(
      Effect.map((records): RunOutcome => {
        const record = records[0]
        if (record === undefined) return "missing"
        const status = Protocol.runStatus(record)
        return status === "success" ? "success" : status === "pending" || status === "running" ? "running" : "failed"
      }),
      // (the store unreadable for now: looked at again later)
      Effect.orElseSucceed((): RunOutcome => "running")
    )

  const launch: Launcher["launch"] = (task: TaskRecord, event, key) =>
    Effect.gen(function*() {
      const read = (message: string) => (error: { readonly message: string }) =>
        failure("failed", `${message}: ${error.message}`)
      const info = yield* Effect.mapError(store.info(task.thread_id), read("The thread could not be read"))
      if (Option.isNone(info) || (info.value.owner ?? DEFAULT_USER) !== task.user_id) {
        return yield* Effect.fail(failure("gone", `Thread for MCP task ${task.id} was not found`))
      }
      const runId = runIdOf(key)
      const known = yield* Effect.mapError(store.runs({ runId }), read("The runs could not be read"))
      if (known.length > 0) return runId
      const source = task.run_id === null
        ? []
        : yield* Effect.orElseSucceed(store.runs({ runId: task.run_id }), () => [])
      const assistant = source[0]?.metadata?.assistant_id
      const assistantId = typeof assistant === "string" && assistant !== "" ? assistant : Protocol.LEAD_AGENT
      const agentName = Protocol.agentNameOf(assistantId)
      // (the run is its user's role's, as their own requests are: never `default_role`'s for a narrower role)
      const role = yield* roleOf(task.user_id)
      if (Either.isLeft(role)) return yield* Effect.fail(failure("failed", `The run was not started: ${role.left}.`))
      yield* runs.start({
        ...(role.right === undefined ? {} : { role: role.right }),
        runId,
        threadId: task.thread_id,
        publicThreadId: ThreadIds.publicIdOf(task.user_id, task.thread_id),
        userId: task.user_id,
        assistantId,
        messages: [
          M.human(Notifier.prompt(event), { id: `${runId}-input`, additional_kwargs: { hide_from_ui: true } })
        ],
        settings: {
          non_interactive: true,
          recursion_limit: Protocol.recursionLimit(
            undefined,
            app.config.recursion_limit,
            app.config.max_recursion_limit
          ),
          ...(agentName === undefined ? {} : { agent_name: agentName })
        },
        modes: ["values"],
        multitaskStrategy: "enqueue",
        metadata: {
          mcp_task_notification: {
            task_id: task.id,
            dispatch_version: task.dispatch_version ?? 0,
            dispatch_attempt: task.dispatch_attempt
          }
        }
      }).pipe(Effect.mapError((error) =>
        failure(
          error.reason === "conflict" ? "busy" : error.reason === "not_found" ? "gone" : "failed",
          error.message
        )
      ))
      return runId
    })

  return { launch, outcome: (runId) => outcome(runId) }
}
