/**
 * Tools with Schema-typed arguments. The Schema is the single source of truth: it becomes the JSON Schema
 * the model sees, and it decodes the arguments the model sends (untrusted input) before the handler runs.
 */
import * as Effect from "effect/Effect"
import * as JSONSchema from "effect/JSONSchema"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { Content, JsonObject, ToolCall } from "../state/Message.js"
import { tool as toolMessage } from "../state/Message.js"
import type { ToolDefinition } from "./ModelService.js"
import type { RunServices } from "./RunContext.js"
import type { Interrupt, ToolResult } from "./ToolService.js"
import { ToolError } from "./ToolService.js"

/** What a handler may return: plain content, or a full result with a state update. */
export type HandlerOutput = string | { readonly content: Content; readonly status?: "success" | "error" } | ToolResult

/** What a handler may do: run inside the run (its context, state and events), fail readably, or interrupt. */
export type Handler<A> = (args: A, call: ToolCall) => Effect.Effect<HandlerOutput, ToolError | Interrupt, RunServices>

/** A tool whose arguments decode to `A`. */
export interface Tool<A = any> {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, any, never>
  readonly handler: Handler<A>
  /** Whether the tool only reads (see `ToolDefinition.readOnly`). */
  readonly readOnly?: boolean | undefined
  /** Whether its results carry their own read marks (see `ToolDefinition.marksReads`). */
  readonly marksReads?: boolean | undefined
  /** The definition the model sees (computed once by `make`; computed on demand for hand-written tools). */
  readonly definition?: ToolDefinition | undefined
  /**
   * The MCP server the tool calls (an MCP tool's): a role its `mcp_servers` policy denies that server neither sees
   * nor runs it, wherever the tool is given to an agent.
   */
  readonly mcpServer?: string | undefined
}

const toDefinition = (
  tool: Pick<Tool, "name" | "description" | "parameters" | "readOnly" | "marksReads">
): ToolDefinition => {
  const { $schema: _, ...parameters } = JSONSchema.make(tool.parameters) as unknown as JsonObject
  return {
    name: tool.name,
    description: tool.description,
    parameters,
    ...(tool.readOnly === true ? { readOnly: true } : {}),
    ...(tool.marksReads === true ? { marksReads: true } : {})
  }
}

/**
 * Defines a tool. Its JSON Schema is computed the first time the definition is read and kept on the tool, so
 * build tools once (per agent), not per run.
 */
export const make = <A, I>(spec: {
  readonly name: string
  readonly description: string
  readonly parameters: Schema.Schema<A, I, never>
  readonly handler: Handler<A>
  /** The tool only reads: a call run again after a crash changes nothing (see `ToolDefinition.readOnly`). */
  readonly readOnly?: boolean | undefined
  /** Its successful results carry the read mark of what it read (see `ToolDefinition.marksReads`). */
  readonly marksReads?: boolean | undefined
}): Tool<A> => {
  let cached: ToolDefinition | undefined
  return {
    name: spec.name,
    description: spec.description,
    parameters: spec.parameters,
    handler: spec.handler,
    readOnly: spec.readOnly === true,
    marksReads: spec.marksReads === true,
    get definition() {
      return (cached ??= toDefinition(spec))
    }
  }
}

/** The definition the model sees: name, description, and the arguments' JSON Schema. */
export const definition = (tool: Tool): ToolDefinition => tool.definition ?? toDefinition(tool)

/** Renders decoding issues as `path: problem` lines, readable by a model. */
export const formatIssues = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "(arguments)"}: ${issue.message}`)
    .join("; ")

/** Whether a result text reads as an error (`Error: ...`). */
export const isErrorText = (text: string): boolean => text.startsWith("Error:")

/** Builds the ToolMessage for a call from a handler's output. */
export const toResult = (call: ToolCall, output: HandlerOutput): ToolResult => {
  if (typeof output === "string") {
    const status = isErrorText(output) ? "error" : "success"
    return { message: toolMessage(output, call.id, { name: call.name, status }) }
  }
  if ("message" in output) return output
  return { message: toolMessage(output.content, call.id, { name: call.name, status: output.status ?? "success" }) }
}

/** An error result the model can read (the tool did not run, or failed). */
export const errorResult = (call: ToolCall, text: string): ToolResult => ({
  message: toolMessage(text, call.id, { name: call.name || "unknown_tool", status: "error" })
})

/**
 * Runs a tool for a call: arguments are decoded with the tool's Schema first, and arguments that do not
 * match come back as an error result naming each bad field, without running the handler.
 */
export const invoke = (tool: Tool, call: ToolCall): Effect.Effect<ToolResult, ToolError | Interrupt, RunServices> => {
  const decoded = Schema.decodeUnknownEither(tool.parameters, { errors: "all", onExcessProperty: "ignore" })(call.args)
  if (decoded._tag === "Left") {
    return Effect.succeed(
      errorResult(
        call,
        `Error: Invalid arguments for tool '${tool.name}': ${formatIssues(decoded.left)}. Fix the arguments and retry.`
      )
    )
  }
  return Effect.map(tool.handler(decoded.right, call), (output) => toResult(call, output))
}

/** A ToolError for a call, from anything thrown or failed inside a handler. */
export const failure = (call: ToolCall, cause: unknown, errorType?: string): ToolError =>
  new ToolError({
    tool: call.name,
    toolCallId: call.id,
    errorType: errorType ?? (cause instanceof Error ? cause.name : "Error"),
    message: cause instanceof Error ? cause.message : String(cause),
    cause
  })
