/**
 * DeerFlow's endpoints of a thread's durable MCP background tasks (`routers/mcp_tasks.py`), declared: the list,
 * one task with its result, and a cancel request. Owner-scoped: another user's task or thread is, for this user,
 * one nobody has (a thread id a new chat could have lists none; a task answers 404). Without the task runtime
 * (`mcp_tasks.enabled` off) every thread lists none. Implemented in `handlers/McpTasks.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { ThreadId } from "./Ids.js"
import { refusal } from "./Problem.js"
import { Authentication, NoBody } from "./Security.js"
import { QueryValue, ThreadNotFound } from "./Threads.js"

/** A task in a list (DeerFlow's `_list_item`): never its remote id or its tools. */
export const McpTaskItem = Schema.Struct({
  task_id: Schema.String,
  task_name: Schema.String,
  status: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  error: Schema.NullOr(Schema.String),
  tracking_degraded: Schema.Boolean,
  cancel_requested: Schema.Boolean
}).annotations({ identifier: "McpTaskItem" })

/** One task (DeerFlow's `_detail`): its polls, its cancel attempts and its (bounded) result. */
export const McpTaskDetail = Schema.Struct({
  ...McpTaskItem.fields,
  last_polled_at: Schema.NullOr(Schema.String),
  last_poll_error: Schema.NullOr(Schema.String),
  last_cancel_error: Schema.NullOr(Schema.String),
  cancel_attempt_count: Schema.Number,
  notification_status: Schema.NullOr(Schema.String),
  notification_error: Schema.NullOr(Schema.String),
  notification_attempt_count: Schema.Number,
  result: Schema.Unknown,
  result_preview: Schema.NullOr(Schema.String),
  result_truncated: Schema.Boolean,
  result_artifact: Schema.NullOr(Schema.Struct({ uri: Schema.String, mime_type: Schema.String })),
  input_required: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}).annotations({ identifier: "McpTaskDetail" })

const TaskPath = Schema.Struct({ thread_id: ThreadId, task_id: Schema.String })
const TaskNotFound = refusal(404, "No such MCP task (of this user and thread)")

/** The MCP background tasks group (served under `/api`). */
export const group = HttpApiGroup.make("mcpTasks")
  .add(
    HttpApiEndpoint.get("listMcpTasks", "/threads/:thread_id/mcp-tasks")
      .setPath(Schema.Struct({ thread_id: ThreadId }))
      .setUrlParams(Schema.Struct({
        limit: Schema.optional(QueryValue.annotations({ description: "At most this many (1-100, default 50)" }))
      }))
      .addSuccess(Schema.Array(McpTaskItem))
      .addError(ThreadNotFound)
      .addError(refusal(422, "A limit that is not one"))
      .annotate(OpenApi.Summary, "A thread's MCP background tasks, newest first")
  )
  .add(
    HttpApiEndpoint.get("getMcpTask", "/threads/:thread_id/mcp-tasks/:task_id")
      .setPath(TaskPath)
      .addSuccess(McpTaskDetail)
      .addError(TaskNotFound)
      .annotate(OpenApi.Summary, "One MCP background task of a thread, with its result")
  )
  .add(
    HttpApiEndpoint.post("cancelMcpTask", "/threads/:thread_id/mcp-tasks/:task_id/cancel")
      .setPath(TaskPath)
      .addSuccess(McpTaskDetail)
      .addError(TaskNotFound)
      .middleware(NoBody)
      .annotate(OpenApi.Summary, "Ask for an MCP background task to be cancelled (carried out in the background)")
  )
  .middlewareEndpoints(Authentication)
  .annotate(OpenApi.Description, "A thread's durable MCP background tasks (mcp_tasks)")
