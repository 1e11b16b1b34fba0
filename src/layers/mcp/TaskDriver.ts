/**
 * DeerFlow's "ordinary" MCP task driver: a server's three tools of a `task_toolsets` entry as a task contract.
 * The submit tool answers `{task_id, status: "running"}`; the status and cancel tools take `{task_id}` and answer
 * the task's state. Only `structuredContent` is read (text is not parsed), decoded with Schema and bounded; a
 * result that breaks the contract is a permanent failure of the task, a failed call (the server down, `isError`)
 * one to try again.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { MAX_REMOTE_TASK_ID } from "../../services/Extensions.js"
import type { Mcp, McpResult, SessionScope } from "../../services/Mcp.js"
import type { TaskState, TaskStatus } from "../../services/McpTasks.js"
import { SUBMITTED } from "../../services/McpTasks.js"
import type { JsonObject } from "../../state/Message.js"

/** The driver's name in a task record. */
export const ORDINARY = "ordinary-tools"

/** The most characters of a failed call's first text block kept as its diagnostic. */
const MAX_TOOL_ERROR_DETAIL = 500
/** The most characters of an error kept in a record. */
export const MAX_ERROR_CHARS = 4_000
/** The largest `input_required` and `result_artifact` payloads (JSON bytes). */
const MAX_INPUT_REQUIRED_BYTES = 65_536
const MAX_ARTIFACT_BYTES = 65_536
/** The longest wait a server may ask for before the next poll (seconds). */
export const MAX_POLL_AFTER_SECONDS = 86_400

/** A failed driver call: `permanent` when the server broke the contract (the task fails), else to try again. */
export class DriverError extends Data.TaggedError("DriverError")<{
  readonly permanent: boolean
  readonly message: string
}> {}

/** One normalized state of a task, as a status or cancel call reports it. */
export interface Snapshot extends TaskState {
  readonly poll_after_seconds: number | null
}

/** Where a task lives: its server, its remote id, its tools' raw names, its user's session scope. */
export interface TaskRef {
  readonly server: string
  readonly remoteTaskId: string
  readonly driverData: Readonly<Record<string, string>>
  readonly scope: SessionScope
}

const RemoteId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_REMOTE_TASK_ID))
const Artifact = Schema.Struct({ uri: Schema.NonEmptyString, mime_type: Schema.NonEmptyString })
const Payload = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** DeerFlow's `TaskSubmission`: a blank remote id could never be polled. */
const SubmitPayload = Schema.Struct({
  task_id: RemoteId.pipe(Schema.filter((id) => id.trim() !== "" || "remote_task_id must not be empty")),
  status: Schema.Literal("running")
})

const StatusPayload = Schema.Struct({
  task_id: RemoteId,
  status: Schema.Literal("running", "input_required", "completed", "failed", "cancelled"),
  result: Schema.optional(Schema.Unknown),
  result_artifact: Schema.optional(Schema.NullOr(Artifact)),
  error: Schema.optional(Schema.NullOr(Schema.String)),
  error_code: Schema.optional(Schema.NullOr(Schema.String)),
  input_required: Schema.optional(Schema.NullOr(Payload)),
  poll_after_seconds: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.finite(), Schema.positive())))
})

const CancelPayload = Schema.Struct({
  task_id: RemoteId,
  status: Schema.Literal("cancelled", "completed", "failed"),
  result: Schema.optional(Schema.Unknown),
  result_artifact: Schema.optional(Schema.NullOr(Artifact)),
  error: Schema.optional(Schema.NullOr(Schema.String))
})

const LOCAL: Record<string, TaskStatus> = {
  running: "working",
  input_required: "input_required",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled"
}

const permanent = (message: string) => new DriverError({ permanent: true, message })

const toolOf = (data: Readonly<Record<string, string>>, role: string): Effect.Effect<string, DriverError> => {
  const name = data[role]
  return typeof name === "string" && name !== ""
    ? Effect.succeed(name)
    : Effect.fail(permanent(`Task driver_data is missing required '${role}'`))
}

const firstErrorText = (result: McpResult): string | undefined => {
  for (const block of result.content) {
    if (block.type === "text" && block.text.trim() !== "") return block.text.trim().slice(0, MAX_TOOL_ERROR_DETAIL)
  }
  return undefined
}

/** The deepest `structuredContent` kept (the gateway's own bodies' bound, `Body.MAX_JSON_DEPTH`). */
export const MAX_DEPTH = 100

/**
 * Whether a value nests arrays and objects deeper than `limit`, walked without recursion: what reads it later (the
 * redactor, `JSON.stringify`, the store) recurses, and a server's deep enough value exhausted their stack, so a poll
 * failed with a defect each time and its task was polled for ever.
 */
const deeperThan = (value: unknown, limit: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (typeof node !== "object" || node === null) continue
    if (depth >= limit) return true
    for (const item of Array.isArray(node) ? node : Object.values(node)) stack.push([item, depth + 1])
  }
  return false
}

/** Calls one of the task's tools and decodes its `structuredContent` with `schema`. */
const call = <A, I>(
  mcp: Mcp["Type"],
  server: string,
  tool: string,
  args: JsonObject,
  scope: SessionScope,
  schema: Schema.Schema<A, I, never>
): Effect.Effect<A, DriverError> =>
  mcp.call(server, tool, args, scope).pipe(
    Effect.mapError((error) => new DriverError({ permanent: false, message: error.message })),
    Effect.flatMap((result) => {
      if (result.isError) {
        const detail = firstErrorText(result)
        const message = `MCP task tool '${tool}' returned an error${detail === undefined ? "" : `: ${detail}`}`
        return Effect.fail(new DriverError({ permanent: false, message }))
      }
      if (result.structuredContent === undefined || result.structuredContent === null) {
        return Effect.fail(
          permanent(`MCP task tool '${tool}' must return structuredContent; text content is not parsed`)
        )
      }
      if (deeperThan(result.structuredContent, MAX_DEPTH)) {
        return Effect.fail(
          permanent(`MCP task tool '${tool}' returned structuredContent nested deeper than ${MAX_DEPTH} levels`)
        )
      }
      const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore" })(result.structuredContent)
      return Either.match(decoded, {
        onLeft: (error) =>
          Effect.fail(permanent(
            `Invalid structuredContent from MCP task tool '${tool}': ${
              ParseResult.ArrayFormatter.formatErrorSync(error)
                .map((i) => `${i.path.join(".") || "(value)"}: ${i.message}`)
                .join("; ").slice(0, MAX_TOOL_ERROR_DETAIL)
            }`
          )),
        onRight: Effect.succeed
      })
    })
  )

const matching = (actual: string, expected: string) =>
  actual === expected
    ? Effect.void
    : Effect.fail(permanent(
      `MCP task response task_id does not match the persisted remote task: expected '${expected}', got '${
        actual.slice(0, 100)
      }'`
    ))

const snapshotOf = (
  payload: typeof StatusPayload.Type | typeof CancelPayload.Type
): Effect.Effect<Snapshot, DriverError> => {
  const input = "input_required" in payload ? payload.input_required ?? null : null
  if ("error_code" in payload && payload.error_code === "task_not_found") {
    return Effect.succeed({ ...EMPTY, status: "failed", error: payload.error ?? "Remote MCP task was not found" })
  }
  if (payload.status === "input_required" && input === null) {
    return Effect.fail(permanent("Invalid structuredContent: input_required status requires input_required"))
  }
  return Effect.succeed({
    status: LOCAL[payload.status]!,
    result: payload.result ?? null,
    result_preview: null,
    result_truncated: false,
    result_artifact: payload.result_artifact ?? null,
    error: payload.error ?? null,
    input_required: input as JsonObject | null,
    poll_after_seconds: "poll_after_seconds" in payload ? payload.poll_after_seconds ?? null : null
  })
}

/** A snapshot with nothing given yet (`status` set by its caller). */
export const EMPTY: Snapshot = { ...SUBMITTED, poll_after_seconds: null }

/** Submits the work: the remote task id. */
export const submit = (
  mcp: Mcp["Type"],
  server: string,
  driverData: Readonly<Record<string, string>>,
  args: JsonObject,
  scope: SessionScope
): Effect.Effect<string, DriverError> =>
  Effect.flatMap(toolOf(driverData, "submit_tool"), (tool) =>
    Effect.map(call(mcp, server, tool, args, scope, SubmitPayload), (payload) => payload.task_id))

/** The task's state now. */
export const status = (mcp: Mcp["Type"], task: TaskRef): Effect.Effect<Snapshot, DriverError> =>
  Effect.flatMap(toolOf(task.driverData, "status_tool"), (tool) =>
    call(mcp, task.server, tool, { task_id: task.remoteTaskId }, task.scope, StatusPayload).pipe(
      Effect.tap((payload) => matching(payload.task_id, task.remoteTaskId)),
      Effect.flatMap(snapshotOf)
    ))

/** Cancels the task: its state after (one that ended). */
export const cancel = (mcp: Mcp["Type"], task: TaskRef): Effect.Effect<Snapshot, DriverError> =>
  Effect.flatMap(toolOf(task.driverData, "cancel_tool"), (tool) =>
    call(mcp, task.server, tool, { task_id: task.remoteTaskId }, task.scope, CancelPayload).pipe(
      Effect.tap((payload) => matching(payload.task_id, task.remoteTaskId)),
      Effect.flatMap(snapshotOf)
    ))

/** The bounds of what a record keeps (`mcp_tasks.max_result_bytes`, `result_preview_max_chars`). */
export interface Limits {
  readonly maxResultBytes: number
  readonly previewChars: number
}

const jsonBytes = (value: unknown, field: string): Either.Either<string, DriverError> => {
  try {
    const text = JSON.stringify(value)
    return text === undefined ? Either.left(permanent(`MCP task ${field} is not valid JSON`)) : Either.right(text)
  } catch (cause) {
    return Either.left(permanent(`MCP task ${field} is not valid JSON: ${String(cause)}`))
  }
}

/**
 * The snapshot as a record keeps it: its error clipped, its result replaced by a preview (never a cut JSON)
 * when larger than `maxResultBytes`; too large an `input_required` or `result_artifact` breaks the contract.
 */
export const bounded = (snapshot: Snapshot, limits: Limits): Either.Either<Snapshot, DriverError> =>
  Either.gen(function*() {
    const error = snapshot.error === null ? null : snapshot.error.slice(0, MAX_ERROR_CHARS)
    if (snapshot.result_artifact !== null) {
      const text = yield* jsonBytes(snapshot.result_artifact, "result_artifact")
      if (Buffer.byteLength(text) > MAX_ARTIFACT_BYTES) {
        return yield* Either.left(
          permanent(`MCP task result_artifact payload exceeds the ${MAX_ARTIFACT_BYTES}-byte limit`)
        )
      }
    }
    if (snapshot.input_required !== null) {
      const text = yield* jsonBytes(snapshot.input_required, "input_required")
      if (Buffer.byteLength(text) > MAX_INPUT_REQUIRED_BYTES) {
        return yield* Either.left(
          permanent(`MCP task input_required payload exceeds the ${MAX_INPUT_REQUIRED_BYTES}-byte limit`)
        )
      }
    }
    if (snapshot.result === null || snapshot.result === undefined) return { ...snapshot, result: null, error }
    const text = yield* jsonBytes(snapshot.result, "result")
    if (Buffer.byteLength(text) <= limits.maxResultBytes) return { ...snapshot, error }
    const source = typeof snapshot.result === "string" ? snapshot.result : text
    return {
      ...snapshot,
      error,
      result: null,
      result_preview: Array.from(source).slice(0, limits.previewChars).join(""),
      result_truncated: true
    }
  })
