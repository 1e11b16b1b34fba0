/**
 * The tool port: the tool definitions the model may see, and the execution of one tool call. A result is
 * a ToolMessage plus, optionally, a state update (LangGraph's `Command(update=...)`).
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ToolCall } from "../state/Message.js"
import { ToolMessage } from "../state/Message.js"
import { StateUpdate } from "../state/ThreadState.js"
import type { ToolDefinition } from "./ModelService.js"
import type { RunServices } from "./RunContext.js"

/** What a tool call produced. `update` carries state changes other than the message (artifacts, todos...). */
export const ToolResult = Schema.Struct({
  message: ToolMessage,
  update: Schema.optional(StateUpdate)
})
export type ToolResult = typeof ToolResult.Type

/** A tool that failed in a way the tool itself did not turn into a readable result. */
export class ToolError extends Schema.TaggedError<ToolError>()("ToolError", {
  tool: Schema.String,
  toolCallId: Schema.String,
  /** The error class, shown to the model (`TimeoutError`, `FileSystemError`...). */
  errorType: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/**
 * A tool asks the run to stop and wait for someone (a clarification question). The run writes `result`,
 * saves the thread and ends as `interrupted`, carrying `payload` in its end event.
 */
export class Interrupt extends Schema.TaggedError<Interrupt>()("Interrupt", {
  reason: Schema.String,
  payload: Schema.Unknown,
  result: ToolResult
}) {}

/** The tool port. */
export class ToolService extends Context.Tag("antler/ToolService")<
  ToolService,
  {
    /** The tools that exist in this run, in a stable order. Visibility per model call is decided by wrappers. */
    readonly definitions: ReadonlyArray<ToolDefinition>
    readonly call: (call: ToolCall) => Effect.Effect<ToolResult, ToolError | Interrupt, RunServices>
  }
>() {}
