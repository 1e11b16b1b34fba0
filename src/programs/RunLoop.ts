/**
 * The loop of a run: request ← project(state) ; response ← ModelService.generate(request) ; apply(response) ; if no
 * tool calls → done ; results ← the tool calls (`RunToolCalls`) ; apply(results) ; checkpoint. The model's message is
 * durable before a tool that may change something runs, so a crash never makes the run execute a call twice.
 */
import * as Effect from "effect/Effect"
import * as RunFrame from "../middleware/internal/RunFrame.js"
import type { ModelService } from "../services/ModelService.js"
import type { RunOptions, StoreError } from "../services/RunContext.js"
import { RecursionLimitReached, RunContext } from "../services/RunContext.js"
import type { RunEndEvent, StopReason } from "../services/RunEvents.js"
import type { Interrupt, ToolService } from "../services/ToolService.js"
import * as Tracing from "../services/Tracing.js"
import type { AIMessage, Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import { extend } from "../state/internal/Objects.js"
import * as RunToolCalls from "./RunToolCalls.js"

/** What the loop's steps go through (fixed for the run). */
export interface Step extends RunToolCalls.Calls {
  readonly model: ModelService["Type"]
  readonly tools: ToolService["Type"]
  /** The names of the run's read-only tools (their calls need no durable record before they run). */
  readonly readOnly: ReadonlySet<string>
  readonly context: RunContext["Type"]
  readonly checkpoint: Effect.Effect<void, StoreError>
  /** Fails as `checkpoint` does when the run no longer owns its thread (its lease lost, or lapsed): writes nothing. */
  readonly owned: Effect.Effect<void, StoreError>
  readonly systemPrompt: string | undefined
  readonly options: RunOptions
  /** The tool-call ids of the thread so far (every new call gets an id of its own). */
  readonly callIds: Set<string>
}

/** The ids of every tool call in a history. */
export const callIdsOf = (messages: ReadonlyArray<Message>): Set<string> => {
  const ids = new Set<string>()
  for (const message of messages) if (message.type === "ai") recordCallIds(message, ids)
  return ids
}

/** Records the ids of a message's tool calls (valid and invalid) in `seen`. */
const recordCallIds = (message: AIMessage, seen: Set<string>): AIMessage => {
  for (const call of M.toolCalls(message)) seen.add(call.id)
  message.invalid_tool_calls?.forEach((call, i) => seen.add(M.invalidCallId(message, call, i)))
  return message
}

const finish = (step: Step, interrupt?: Interrupt): Effect.Effect<RunEndEvent> =>
  Effect.gen(function*() {
    if (interrupt !== undefined) {
      const payload = interrupt.payload
      return { type: "run_end", status: "interrupted", stop_reason: "interrupted", interrupt: payload } as const
    }
    const reason: StopReason = (yield* step.context.stopReason) ?? "completed"
    return { type: "run_end", status: "success", stop_reason: reason } as const
  })

/** Runs the loop to the run's end (or its first failure). */
export const loop = (step: Step) =>
  Effect.gen(function*() {
    const settings = {
      modelName: step.options.modelName,
      thinkingEnabled: step.options.thinkingEnabled,
      reasoningEffort: step.options.reasoningEffort,
      ...(step.options.temperature !== undefined ? { temperature: step.options.temperature } : {}),
      ...(step.options.maxTokens !== undefined ? { maxTokens: step.options.maxTokens } : {})
    }
    // the run's wrappers, resolved once: every call of the loop goes straight through them
    const ports = yield* RunFrame.resolve(step.model, step.tools)
    // whether the app traces, read once: the tool calls' spans are made only then
    const tracing = yield* Tracing.traced
    for (let calls = 0;; calls++) {
      yield* step.checkpoint
      if (calls >= step.options.recursionLimit) {
        const error = new RecursionLimitReached({ limit: step.options.recursionLimit })
        return {
          type: "run_end",
          status: "error",
          stop_reason: "recursion_limit",
          error: { name: error._tag, message: error.message }
        } as RunEndEvent
      }
      const state = step.holder.current()
      const response = yield* ports.generate({
        systemPrompt: step.systemPrompt,
        messages: state.messages,
        tools: step.tools.definitions,
        settings
      })
      // every call under an id of its own in the thread, so each runs once and is answered once
      const message = recordCallIds(M.uniqueToolCallIds(response.message, step.callIds), step.callIds)
      const extra = response.update
      const failed = step.holder.apply(
        extra === undefined
          ? { messages: [message] }
          : extend(extra, { messages: [...(extra.messages ?? []), message] })
      )
      if (failed !== undefined) return yield* Effect.fail(failed)
      if (response.failure !== undefined) {
        yield* step.checkpoint
        return { type: "run_end", status: "error", stop_reason: "error", error: response.failure } as RunEndEvent
      }
      if (!M.hasToolCalls(message)) {
        yield* step.checkpoint
        return yield* finish(step)
      }
      // The model's message, with its tool calls, is durable before a tool that may change something runs:
      // a crash then never makes the run execute a call twice. Calls of read-only tools need no such record.
      // (and no tool starts once the run no longer owns its thread: its lease taken, or its life ran out)
      if (!M.toolCalls(message).every((call) => step.readOnly.has(call.name))) yield* step.checkpoint
      else yield* step.owned
      const interrupt = yield* RunToolCalls.callTools(step, ports, message, tracing)
      if (interrupt !== undefined) {
        yield* step.checkpoint
        return yield* finish(step, interrupt)
      }
    }
  })
