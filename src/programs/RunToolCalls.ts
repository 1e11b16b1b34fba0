/**
 * A step's tool calls: each run through the run's wrapped ports (concurrently, bounded), their results applied in
 * the calls' order, and the calls that have no result closed: a call of a tool the run does not have, one whose
 * arguments are not JSON, one that failed outside ToolErrorHandling, and one a cancellation or a crash left open
 * (answered "interrupted", so the model decides whether to repeat it). Every result is masked for the process's own
 * secrets as it lands (`Calls.process`), before the model reads it.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as RunFrame from "../middleware/internal/RunFrame.js"
import { describeFailure, truncateDetail } from "../middleware/ToolErrorHandling.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import type { RunOptions, RunServices } from "../services/RunContext.js"
import * as Tool from "../services/Tool.js"
import type { Interrupt, ToolResult } from "../services/ToolService.js"
import type { AIMessage, Message, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Redactor } from "../state/Redact.js"
import * as Redact from "../state/Redact.js"
import type { ReducerError } from "../state/Reducers.js"
import type { StateUpdate } from "../state/ThreadState.js"
import type * as RunStateHolder from "./RunStateHolder.js"

/** The content of the synthetic result written for a tool call that started and never returned. */
export const INTERRUPTED_TOOL_RESULT =
  "[Tool call was interrupted before it returned a result (the run was cancelled or its process stopped). " +
  "It may have partly run: check its effects before repeating it.]"

/** Tool calls of the last AI message that have no result after it. */
export const danglingCalls = (messages: ReadonlyArray<Message>): ReadonlyArray<ToolCall> => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type !== "ai") continue
    const calls = M.toolCalls(message)
    if (calls.length === 0) return []
    const answered = new Set<string>()
    for (let j = i + 1; j < messages.length; j++) {
      const later = messages[j]!
      if (later.type === "tool") answered.add(later.tool_call_id)
    }
    return calls.filter((call) => !answered.has(call.id))
  }
  return []
}

/** The tool results that close calls left open (by a crash, or a cancellation), marked interrupted. */
export const interruptedResults = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> =>
  danglingCalls(messages).map((call) => M.tool(INTERRUPTED_TOOL_RESULT, call.id, { name: call.name, status: "error" }))

const invalidCallResult = (
  call: M.InvalidToolCall,
  index: number,
  message: AIMessage,
  hide: Redactor
): ToolResult => ({
  message: M.tool(
    call.error
      ? `Error: The arguments of this tool call are not valid JSON (${hide.text(call.error).slice(0, 500)}). ` +
        `Nothing was run. ` +
        `Send the call again with a JSON object as arguments.`
      : `Error: The arguments of this tool call are not valid JSON. Nothing was run. ` +
        `Send the call again with a JSON object as arguments.`,
    M.invalidCallId(message, call, index),
    { name: call.name || "unknown_tool", status: "error" }
  )
})

// The last resort when no ToolErrorHandling is in the chain: the same description, without its metadata.
const failedCallResult = (call: ToolCall, cause: Cause.Cause<unknown>, hide: Redactor): ToolResult => {
  const failure = Cause.failureOption(cause)
  const { type, detail } = describeFailure(Option.isSome(failure) ? failure.value : Cause.squash(cause))
  return Tool.errorResult(call, `Error: Tool '${call.name}' failed with ${type}: ${truncateDetail(hide.text(detail))}`)
}

/** What a step's tool calls go through. */
export interface Calls {
  /** The names of the run's tools (fixed for the run). */
  readonly known: ReadonlySet<string>
  readonly unknownTool: ((name: string) => string | undefined) | undefined
  readonly holder: RunStateHolder.Holder
  readonly options: Pick<RunOptions, "toolConcurrency">
  /**
   * The process's secrets (`ProcessSecrets`), masked whole in every result before it is applied: a tool saying one
   * back (a file holding a configured key read with `read_file`, an MCP server sharing another's credential) put it
   * before the model, which reads the run's state, where the stream's and the store's masks come after. (The run's
   * request secrets are masked in every result by SkillActivation; the cuts mask both before them.)
   */
  readonly process?: Redactor | undefined
}

// (no stack trace: capturing one for every tool call costs more than the rest of the span)
const toolSpan = (call: ToolCall) => ({
  attributes: { "tool.name": call.name, "tool.call_id": call.id },
  captureStackTrace: false
})

/** A tool call in its `Tool.call` span (when the app traces). */
const traced = <A, E, R>(call: ToolCall, effect: Effect.Effect<A, E, R>) =>
  Effect.withSpan(effect, "Tool.call", toolSpan(call))

/**
 * Runs the tool calls of `message`, applies their results (closing the calls a cancellation stopped), and returns the
 * first clarification's interrupt, if one asked.
 */
export const callTools = (
  step: Calls,
  ports: RunFrame.Resolved,
  message: AIMessage,
  tracing: boolean
): Effect.Effect<Interrupt | undefined, ReducerError, RunServices> =>
  // (the loop's own cuts, an invalid call's error and a failure's detail at 500 characters each, mask the process's
  // secrets and the run's first: a cut inside one keeps its beginning, which the later masks of whole values miss;
  // the mask of the invalid calls' errors read only when there are any: most steps have none)
  (message.invalid_tool_calls?.length ?? 0) > 0
    ? Effect.flatMap(ProcessSecrets.inRun, (hide) => calling(step, ports, message, tracing, hide))
    : calling(step, ports, message, tracing, Redact.none)

const calling = (
  step: Calls,
  ports: RunFrame.Resolved,
  message: AIMessage,
  tracing: boolean,
  hideInvalid: Redactor
): Effect.Effect<Interrupt | undefined, ReducerError, RunServices> =>
  Effect.suspend(() => {
    const calls = M.toolCalls(message)
    const known = step.known
    const results: Array<ToolResult | undefined> = new Array(calls.length)
    let interrupt: Interrupt | undefined
    // (the result kept in the handler that takes the call's end: one effect step, not a catch and a map)
    const one = (call: ToolCall, index: number): Effect.Effect<void, never, RunServices> => {
      if (!known.has(call.name)) {
        return Effect.sync(() => {
          const why = step.unknownTool?.(call.name)
          results[index] = Tool.errorResult(
            call,
            `Error: Tool '${call.name}' does not exist. Available tools: ${[...known].join(", ") || "(none)"}.` +
              (why === undefined ? "" : ` (${why}.)`)
          )
        })
      }
      return Effect.matchCauseEffect(tracing ? traced(call, ports.call(call)) : ports.call(call), {
        onFailure: (cause) => {
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure) && failure.value._tag === "Interrupt") {
            interrupt ??= failure.value
            results[index] = failure.value.result
            return Effect.void
          }
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
          return Effect.map(ProcessSecrets.inRun, (hide) => {
            results[index] = failedCallResult(call, cause, hide)
          })
        },
        onSuccess: (result) => {
          results[index] = result
          return Effect.void
        }
      })
    }
    // The results, in the calls' order, applied now (the run's own writes); the first failure, if one fails.
    const applyAll = (synthesizeMissing: boolean): ReducerError | undefined => {
      const writes: Array<Message> = []
      let updates: Array<readonly [StateUpdate, string]> | undefined
      const hidden = step.process?.secrets ?? []
      for (let i = 0; i < calls.length; i++) {
        const found = results[i]
        const result = found === undefined || hidden.length === 0 ? found : SkillSecrets.maskValue(found, hidden)
        if (result === undefined) {
          if (synthesizeMissing) {
            writes.push(M.tool(INTERRUPTED_TOOL_RESULT, calls[i]!.id, { name: calls[i]!.name, status: "error" }))
          }
          continue
        }
        writes.push(result.message)
        if (result.update !== undefined) (updates ??= []).push([result.update, calls[i]!.id])
      }
      message.invalid_tool_calls?.forEach((call, i) =>
        writes.push(invalidCallResult(call, i, message, hideInvalid).message)
      )
      const apply = step.holder.apply
      if (writes.length > 0) {
        const failed = apply({ messages: writes })
        if (failed !== undefined) return failed
      }
      if (updates !== undefined) {
        for (const [update, callId] of updates) {
          const failed = apply(update, callId)
          if (failed !== undefined) return failed
        }
      }
      return undefined
    }
    const running = calls.length === 1
      ? one(calls[0]!, 0)
      : Effect.forEach(calls, one, { concurrency: step.options.toolConcurrency, discard: true })
    // (one handler for both endings: `onInterrupt` then `zipRight` cost ten effect steps more, on every step)
    return Effect.uninterruptibleMask((restore) =>
      Effect.matchCauseEffect(restore(running), {
        // cancelled: what completed is saved, the rest answered "interrupted"
        onFailure: (cause) => {
          if (Cause.isInterruptedOnly(cause)) applyAll(true)
          return Effect.failCause(cause)
        },
        onSuccess: () => {
          const failed = applyAll(false)
          return failed === undefined ? Effect.succeed(interrupt) : Effect.fail(failed)
        }
      })
    )
  })
