/**
 * Fixtures of the MCP task records' tests (`mcptasks/Records`, on SQLite and PostgreSQL): a task of alice's as a
 * run submits it, a poll's answer, and stores opened in a scope of their own (two: two processes on one database).
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { Snapshot } from "../../src/layers/mcp/TaskDriver.js"
import type * as Records from "../../src/programs/gateway/mcptasks/Records.js"
import type { TaskRecord } from "../../src/services/McpTasks.js"
import * as McpTasks from "../../src/services/McpTasks.js"

/** The tests' clock: every record is submitted at this time. */
export const NOW = 1_800_000_000_000

/** Task `id` of alice's on thread `t1`, submitted at `NOW` (and `fields` over it). */
export const taskRecord = (id: string, fields: Partial<TaskRecord> = {}): TaskRecord => ({
  ...McpTasks.submitted({
    id,
    user_id: "alice",
    thread_id: "t1",
    run_id: "r1",
    tool_call_id: "c1",
    server_name: "tasks",
    driver_name: "ordinary-tools",
    remote_task_id: `remote-${id}`,
    task_name: "Report",
    driver_data: { submit_tool: "s", status_tool: "t", cancel_tool: "c" },
    next_poll_at: NOW
  }, NOW),
  ...fields
})

/** A poll's answer: `completed` with nothing else, and `fields` over it. */
export const snapshot = (fields: Partial<Snapshot> = {}): Snapshot => ({
  status: "completed",
  result: null,
  result_preview: null,
  result_truncated: false,
  result_artifact: null,
  error: null,
  input_required: null,
  poll_after_seconds: null,
  ...fields
})

const opened = async <E>(make: () => Effect.Effect<Records.Service, E, Scope.Scope>, count: number) => {
  const scope = Effect.runSync(Scope.make())
  const stores: Array<Records.Service> = []
  for (let i = 0; i < count; i++) stores.push(await Effect.runPromise(Scope.extend(make(), scope)))
  return { stores, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** One store of `make`'s, and what closes it. */
export const oneOf = async <E>(make: () => Effect.Effect<Records.Service, E, Scope.Scope>) => {
  const { close, stores } = await opened(make, 1)
  return [stores[0]!, close] as const
}

/** Two stores of `make`'s (two processes on one database), and what closes them. */
export const twoOf = async <E>(make: () => Effect.Effect<Records.Service, E, Scope.Scope>) => {
  const { close, stores } = await opened(make, 2)
  return [stores[0]!, stores[1]!, close] as const
}
