/**
 * The model's side of DeerFlow's durable MCP tasks: the submit tool of a server's `task_toolsets` entry in place
 * of the MCP tool (its status and cancel tools are hidden), which submits the work and answers at once with the
 * task's id; and `list_background_tasks` / `cancel_background_task`, which read and cancel the thread's tasks.
 * Names, arguments and texts are DeerFlow's. Task names and errors come from servers: their tags are neutralised.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Decode from "../layers/mcp/Decode.js"
import * as FunctionSchema from "../layers/mcp/FunctionSchema.js"
import { neutralizeUntrustedTags } from "../middleware/InputSanitization.js"
import type { McpServerConfig, McpTaskToolset } from "../services/Extensions.js"
import { MAX_TASK_SERVER_NAME } from "../services/Extensions.js"
import type { McpTool } from "../services/Mcp.js"
import type { McpTasks, TaskRecord } from "../services/McpTasks.js"
import { RunContext } from "../services/RunContext.js"
import * as Tool from "../services/Tool.js"
import type { JsonObject } from "../state/Message.js"

/** DeerFlow's refusal when a task tool is called without the task runtime. */
export const NOT_INITIALIZED = "The MCP task runtime is not initialized. Run this tool through the Gateway with " +
  "mcp_tasks.enabled=true and a SQL database backend."

const Args = Schema.Record({ key: Schema.String, value: Schema.Unknown })

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** A task as the model reads it (DeerFlow's `_public_task`): never its remote id. */
export const publicTask = (record: TaskRecord) => ({
  task_id: record.id,
  task_name: neutralizeUntrustedTags(record.task_name || "Background task"),
  status: record.status,
  created_at: iso(record.created_at),
  updated_at: iso(record.updated_at),
  error: record.error ? neutralizeUntrustedTags(record.error) : null,
  cancel_requested: record.cancel_requested_at !== null
})

const text = (value: unknown) => JSON.stringify(value)

/**
 * The submit tool of `toolset` (the MCP tool `spec`): its description says it runs in the background, its call
 * submits through `tasks` (none: DeerFlow's "not initialized" error) and answers with the task's id.
 */
export const submitTool = (
  tasks: Option.Option<McpTasks["Type"]>,
  spec: McpTool,
  toolset: McpTaskToolset
): Tool.Tool => {
  const contract = `Submitted as durable background task '${toolset.name}'; returns a DeerFlow task ID immediately ` +
    "and status polling is handled automatically."
  const description = spec.description ? `${spec.description}\n\n${contract}` : contract
  return {
    name: spec.name,
    description,
    parameters: Args,
    definition: FunctionSchema.definition(spec.name, description, spec.inputSchema, Decode.description),
    mcpServer: spec.server,
    handler: (args, call) =>
      Option.isNone(tasks)
        ? Effect.succeed(`Error: ${NOT_INITIALIZED}`)
        : Effect.flatMap(RunContext, (run) =>
          tasks.value.submit({
            userId: run.userId,
            threadId: run.threadId,
            runId: run.runId,
            toolCallId: call.id,
            server: spec.server,
            toolset,
            arguments: args as JsonObject,
            secrets: run.options.secrets
          })).pipe(
            Effect.map((created) =>
              text({
                task_id: created.id,
                task_name: toolset.name,
                status: created.status,
                message: "Task is running in the background."
              })
            ),
            Effect.catchTag("McpTaskError", (error) =>
              Effect.succeed(`Error: ${spec.name} could not start: ${neutralizeUntrustedTags(error.message)}`))
          )
  }
}

/** The most tasks `list_background_tasks` shows (DeerFlow's default limit). */
const LIST_LIMIT = 20

/** `list_background_tasks(active_only)`: the thread's current and recent tasks. */
export const listTool = (tasks: McpTasks["Type"]): Tool.Tool =>
  Tool.make({
    name: "list_background_tasks",
    description: "List current and recent durable background tasks for this chat.",
    parameters: Schema.Struct({
      active_only: Schema.optionalWith(Schema.Boolean, { default: () => false, nullable: true }).annotations({
        description: "Return only tasks that are still active."
      })
    }),
    readOnly: true,
    handler: (args) =>
      Effect.flatMap(RunContext, (run) =>
        tasks.list(run.threadId, run.userId, { limit: LIST_LIMIT, activeOnly: args.active_only })).pipe(
          Effect.map((records) => {
            const listed = records.map(publicTask)
            return text({ tasks: listed, count: listed.length })
          }),
          Effect.catchTag("McpTaskError", (error) => Effect.succeed(`Error: ${error.message}`))
        )
  })

/** `cancel_background_task(task)`: cancels one active task of the thread. */
export const cancelTool = (tasks: McpTasks["Type"]): Tool.Tool =>
  Tool.make({
    name: "cancel_background_task",
    // DeerFlow's docstring as LangChain's @tool hands it on under Python 3.12: the later lines' indentation kept
    description: "Cancel one active background task in this chat.\n\n    If several tasks are active, provide the " +
      "exact task name shown by\n    list_background_tasks. Remote MCP task handles are never needed or exposed.",
    parameters: Schema.Struct({
      task: Schema.optionalWith(Schema.String, { nullable: true }).annotations({
        description: "Optional exact task name or DeerFlow task ID. Omit it only when one active task exists."
      })
    }),
    handler: (args) =>
      Effect.flatMap(RunContext, (run) => tasks.cancelMatching(run.threadId, run.userId, args.task)).pipe(
        Effect.map((record) => {
          const task = publicTask(record)
          return text({
            cancelled: task.status === "cancelled",
            task,
            message: "Cancellation requested. DeerFlow will keep retrying safely if the remote server is temporarily " +
              "unavailable."
          })
        }),
        Effect.catchTag("McpTaskError", (error) =>
          Effect.succeed(
            error.reason === "not_found" || error.reason === "ambiguous"
              ? text({ cancelled: false, message: neutralizeUntrustedTags(error.message) })
              : `Error: ${error.message}`
          ))
      )
  })

/** What a catalog's tool is to the task runtime: a toolset's submit tool, hidden, or (undefined) a plain tool. */
export interface Roles {
  readonly of: (spec: McpTool) => McpTaskToolset | "hidden" | undefined
  /** Why a server's toolsets were left out (a raw tool it does not list, too long a server name). */
  readonly problems: ReadonlyArray<string>
}

/**
 * The roles of the catalog's tools under the servers' `task_toolsets`. A server whose toolsets name a tool it does
 * not list, or whose name is too long to record, has its toolsets' tools left out (with a problem): they are never
 * run as plain, synchronous tools.
 */
export const rolesOf = (
  servers: Readonly<Record<string, McpServerConfig>>,
  catalog: ReadonlyArray<McpTool>
): Roles => {
  const roles = new Map<string, Map<string, McpTaskToolset | "hidden">>()
  const problems: Array<string> = []
  for (const [server, config] of Object.entries(servers)) {
    const toolsets = config.task_toolsets ?? []
    if (toolsets.length === 0 || config.enabled === false) continue
    const own = new Map<string, McpTaskToolset | "hidden">()
    for (const toolset of toolsets) {
      own.set(toolset.submit_tool, toolset)
      own.set(toolset.status_tool, "hidden")
      own.set(toolset.cancel_tool, "hidden")
    }
    const listed = new Set(catalog.filter((spec) => spec.server === server).map((spec) => spec.original))
    const missing = [...own.keys()].filter((name) => !listed.has(name)).sort()
    const tooLong = server.trim() === "" || server.length > MAX_TASK_SERVER_NAME
    if (listed.size > 0 && missing.length > 0) {
      problems.push(`MCP server '${server}' task_toolsets reference missing raw tool(s): ${missing.join(", ")}`)
    }
    if (tooLong) problems.push(`MCP task server name must contain 1 to ${MAX_TASK_SERVER_NAME} characters`)
    if ((listed.size > 0 && missing.length > 0) || tooLong) for (const name of own.keys()) own.set(name, "hidden")
    roles.set(server, own)
  }
  return { of: (spec) => roles.get(spec.server)?.get(spec.original), problems }
}
