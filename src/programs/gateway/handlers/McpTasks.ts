/**
 * A thread's MCP background tasks (declared in `api/McpTasks.ts`), over the task runtime when the gateway has one
 * (`services/McpTasks`): listed, read and cancelled by their user only, on the thread as the user's client calls
 * it. The thread's stored id is what tasks are recorded under; another user's thread of the same id is, for this
 * user, a new chat's (no tasks), and their task is one nobody has (404). Errors are clipped to 500 characters.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { TaskRecord } from "../../../services/McpTasks.js"
import { McpTasks } from "../../../services/McpTasks.js"
import type { DeerFlowApi } from "../api/GatewayApi.js"
import * as Api from "../api/McpTasks.js"
import { fail, GatewayError, notFound } from "../api/Problem.js"
import { CurrentIdentity } from "../api/Security.js"
import * as Access from "./Access.js"
import { json, type QueryValue } from "./Http.js"

const MAX_PUBLIC_ERROR = 500

const short = (value: string | null) => (value === null ? null : value.slice(0, MAX_PUBLIC_ERROR))
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** A task as a list shows it (DeerFlow's `_list_item`). */
export const itemOf = (record: TaskRecord, degradedAfter: number): typeof Api.McpTaskItem.Type => ({
  task_id: record.id,
  task_name: record.task_name,
  status: record.status,
  created_at: iso(record.created_at)!,
  updated_at: iso(record.updated_at)!,
  error: short(record.error),
  tracking_degraded: record.consecutive_poll_error_count >= degradedAfter,
  cancel_requested: record.cancel_requested_at !== null
})

/** A task as its own endpoint shows it (DeerFlow's `_detail`, with where its notification stands). */
export const detailOf = (record: TaskRecord, degradedAfter: number): typeof Api.McpTaskDetail.Type => ({
  ...itemOf(record, degradedAfter),
  last_polled_at: iso(record.last_polled_at),
  last_poll_error: short(record.last_poll_error),
  last_cancel_error: short(record.last_cancel_error),
  cancel_attempt_count: record.cancel_attempt_count,
  notification_status: record.notification_status,
  notification_error: short(record.notification_error),
  notification_attempt_count: record.notification_attempt_count,
  result: record.result,
  result_preview: record.result_preview,
  result_truncated: record.result_truncated,
  result_artifact: record.result_artifact,
  input_required: record.input_required
})

/** `limit` from the query: 1-100, default 50 (DeerFlow's bounds). */
const limitOf = (value: QueryValue | undefined) => {
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined) return Effect.succeed(50)
  const n = Number(text)
  return Number.isInteger(n) && n >= 1 && n <= 100
    ? Effect.succeed(n)
    : Effect.fail(
      fail("unprocessable", `limit must be a whole number from 1 to 100, not ${JSON.stringify(text.slice(0, 40))}.`)
    )
}

const failed = (error: { readonly message: string }) =>
  new GatewayError({ reason: "internal", message: error.message, cause: error })

/** The MCP tasks endpoints of `api` (DeerFlow's, under `/api`). */
export const layer = (api: DeerFlowApi) =>
  HttpApiBuilder.group(api, "mcpTasks", (handlers) =>
    Effect.gen(function*() {
      const access = yield* Access.make
      const tasks = yield* Effect.serviceOption(McpTasks)

      /** The user's task of the thread (as stored), or 404. */
      const owned = (user: string, threadId: string, taskId: string) =>
        Effect.gen(function*() {
          const thread = yield* access.chatOf(user, threadId)
          if (thread === undefined || Option.isNone(tasks)) return yield* notFound("MCP task")
          const found = yield* Effect.mapError(tasks.value.get(taskId, user), failed)
          if (Option.isNone(found) || found.value.thread_id !== thread.stored) return yield* notFound("MCP task")
          return { record: found.value, runtime: tasks.value, stored: thread.stored }
        })

      return handlers
        .handleRaw("listMcpTasks", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const limit = yield* limitOf(urlParams.limit)
            // (a new chat's thread, before its first run, has none; DeerFlow answers it so)
            const thread = yield* access.chatOf(user, path.thread_id)
            if (thread === undefined || Option.isNone(tasks)) return json(Schema.Array(Api.McpTaskItem), [])
            const records = yield* Effect.mapError(
              tasks.value.list(thread.stored, user, { limit, activeOnly: false }),
              failed
            )
            const after = tasks.value.trackingDegradedAfter
            return json(Schema.Array(Api.McpTaskItem), records.map((record) => itemOf(record, after)))
          }))
        .handleRaw("getMcpTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const { record, runtime } = yield* owned(user, path.thread_id, path.task_id)
            return json(Api.McpTaskDetail, detailOf(record, runtime.trackingDegradedAfter))
          }))
        .handleRaw("cancelMcpTask", ({ path }) =>
          Effect.gen(function*() {
            const { user } = yield* CurrentIdentity
            const { record, runtime, stored } = yield* owned(user, path.thread_id, path.task_id)
            const cancelled = yield* Effect.mapError(runtime.cancel(record.id, stored, user), failed)
            if (Option.isNone(cancelled)) return yield* notFound("MCP task")
            return json(Api.McpTaskDetail, detailOf(cancelled.value, runtime.trackingDegradedAfter))
          }))
    }))
