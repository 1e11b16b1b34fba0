/**
 * Shared pieces of the guard rails (loop detection, token budget, safety finish reason, model length):
 *
 * - `hardStop`: the one way a guard ends a run. The last AI message is rewritten in place (same id) without
 *   any tool-call intent and with a notice appended, so the loop ends naturally with it as the final answer
 *   (SPEC-deerflow §14 item 3). Guards never raise.
 * - `WarningQueue`: warnings are never written to state (that would split an AI message from its tool
 *   results, §14 item 2). A guard queues them and the next model request carries them as one hidden human
 *   message appended after all messages. The queue is drained only when the inner call succeeds, so a retry by
 *   LLMErrorHandling (outer) re-runs the wrapper with the warning still queued (§14 item 16).
 * - Readers of provider metadata shared by the finish-reason detectors.
 */
import * as Effect from "effect/Effect"
import type { ModelError, ModelRequest, ModelResponse } from "../services/ModelService.js"
import type { AIMessage, HumanMessage, JsonObject } from "../state/Message.js"
import * as M from "../state/Message.js"
import type * as Hooks from "./internal/ModelHooks.js"

// ---------------------------------------------------------------------------------------------------------
// Hard stop

/** Options of `stripToolCalls` / `hardStop`. */
export interface StripOptions {
  /**
   * Keep `finish_reason` as the provider sent it (safety keeps `content_filter` for the record). By default a
   * `tool_calls` / `function_call` finish reason becomes `stop`, since the message no longer calls tools.
   */
  readonly keepFinishReason?: boolean
}

const TOOL_FINISH_REASONS: ReadonlySet<string> = new Set(["tool_calls", "function_call"])

const withoutRawCalls = (kwargs: JsonObject | undefined, keepFinishReason: boolean): JsonObject | undefined => {
  if (kwargs === undefined) return undefined
  const finish = kwargs.finish_reason
  const rewriteFinish = !keepFinishReason && typeof finish === "string" && TOOL_FINISH_REASONS.has(finish)
  if (!("tool_calls" in kwargs) && !("function_call" in kwargs) && !rewriteFinish) return kwargs
  const { tool_calls: _calls, function_call: _call, ...rest } = kwargs
  return rewriteFinish ? { ...rest, finish_reason: "stop" } : rest
}

const withStopFinish = (metadata: JsonObject | undefined, keepFinishReason: boolean): JsonObject | undefined => {
  if (metadata === undefined || keepFinishReason) return metadata
  const finish = metadata.finish_reason
  if (typeof finish !== "string" || !TOOL_FINISH_REASONS.has(finish)) return metadata
  return { ...metadata, finish_reason: "stop" }
}

/**
 * The message without any tool-call intent: no structured or invalid tool calls, no raw `tool_calls` /
 * `function_call` in `additional_kwargs`, and (unless kept) a `tool_calls` finish reason turned into `stop`.
 * Same id, so writing it replaces the original.
 */
export const stripToolCalls = (message: AIMessage, options: StripOptions = {}): AIMessage => {
  const keep = options.keepFinishReason === true
  const { tool_calls: _calls, invalid_tool_calls: _invalid, additional_kwargs, response_metadata, ...rest } = message
  const kwargs = withoutRawCalls(additional_kwargs, keep)
  const metadata = withStopFinish(response_metadata, keep)
  return {
    ...rest,
    tool_calls: [],
    invalid_tool_calls: [],
    ...(kwargs !== undefined ? { additional_kwargs: kwargs } : {}),
    ...(metadata !== undefined ? { response_metadata: metadata } : {})
  }
}

/** A hard stop: the message without tool calls (see `stripToolCalls`) and with `notice` appended to its content. */
export const hardStop = (message: AIMessage, notice: string, options: StripOptions = {}): AIMessage => {
  const stripped = stripToolCalls(message, options)
  return { ...stripped, content: M.appendText(stripped.content, notice) }
}

/** The response with its message replaced (the same object when the message did not change). */
export const replaceMessage = (response: ModelResponse, message: AIMessage): ModelResponse =>
  message === response.message ? response : { ...response, message }

// ---------------------------------------------------------------------------------------------------------
// Readers

/**
 * A string field of the provider's metadata: `response_metadata` first, then `additional_kwargs` (adapters
 * disagree on where stop signals go). Only non-empty strings count.
 */
export const metadataString = (message: AIMessage, field: string): string | undefined => {
  const fromMetadata = message.response_metadata?.[field]
  if (typeof fromMetadata === "string" && fromMetadata !== "") return fromMetadata
  const fromKwargs = message.additional_kwargs?.[field]
  if (typeof fromKwargs === "string" && fromKwargs !== "") return fromKwargs
  return undefined
}

/** Whether the content shows the user any text: a non-blank string, or a non-blank `text` / `output_text` block. */
export const hasVisibleText = (message: AIMessage): boolean => {
  const content = message.content
  if (typeof content === "string") return content.trim() !== ""
  for (const block of content) {
    if ((block.type === "text" || block.type === "output_text") && typeof block.text === "string") {
      if (block.text.trim() !== "") return true
    }
  }
  return false
}

/**
 * Whether the message asks for a tool in any form: structured or invalid tool calls, raw `tool_calls` /
 * `function_call` in `additional_kwargs`, or a `tool_calls` / `function_call` finish reason.
 */
export const hasToolCallIntent = (message: AIMessage): boolean => {
  if ((message.tool_calls?.length ?? 0) > 0 || (message.invalid_tool_calls?.length ?? 0) > 0) return true
  const kwargs = message.additional_kwargs
  if (kwargs !== undefined) {
    const raw = kwargs.tool_calls
    if (Array.isArray(raw) ? raw.length > 0 : raw != null) return true
    if (kwargs.function_call != null) return true
  }
  const finish = metadataString(message, "finish_reason")
  return finish !== undefined && TOOL_FINISH_REASONS.has(finish.toLowerCase())
}

// ---------------------------------------------------------------------------------------------------------
// Warnings for the next request

/** The request-only message that carries queued warnings: hidden, named, appended after every message. */
export const warningMessage = (name: string, warnings: ReadonlyArray<string>): HumanMessage =>
  M.human(warnings.join("\n\n"), { name, additional_kwargs: { hide_from_ui: true } })

/** Warnings waiting for the next model request. One per middleware instance, i.e. per run. */
export interface WarningQueue {
  /**
   * Queues a warning (ignored when the same text is already queued). A full queue drops its oldest warning:
   * the newest describe what the model is doing now.
   */
  readonly push: (warning: string) => void
  /** The warnings queued now. */
  readonly pending: () => ReadonlyArray<string>
  /**
   * Calls `next` with the queued warnings appended as one message, and removes exactly those warnings once
   * `next` succeeds. A failed call leaves them queued, so a retry of the same request carries them again.
   * With nothing queued, `next` receives the request unchanged (the same object).
   */
  readonly inject: <R>(
    request: ModelRequest,
    next: (request: ModelRequest) => Effect.Effect<ModelResponse, ModelError, R>
  ) => Effect.Effect<ModelResponse, ModelError, R>
  /**
   * `inject` as model hooks (`Middleware.ModelHooks`) for the thread's calls, internal ones passing untouched:
   * `before` appends the queued warnings (the same request when none is queued), `after` removes exactly the
   * warnings its request carried once the call succeeded, then answers what `then` makes of the response (the
   * guard's own after_model, which may queue new warnings).
   */
  readonly hooks: (then: (response: ModelResponse) => Hooks.Now<ModelResponse>) => Hooks.Hooks
}

/**
 * A warning queue whose message is named `name` (`loop_warning`, `budget_warning`). Holds the newest `max`
 * warnings.
 */
export const warningQueue = (name: string, max = 4): WarningQueue => {
  let queued: ReadonlyArray<string> = []
  // the warnings each request sent with them carried (kept while the request lives)
  const carried = new WeakMap<ModelRequest, ReadonlyArray<string>>()
  const before = (request: ModelRequest): ModelRequest => {
    const taken = queued
    if (taken.length === 0) return request
    const injected: ModelRequest = { ...request, messages: [...request.messages, warningMessage(name, taken)] }
    carried.set(injected, taken)
    return injected
  }
  const after = (response: ModelResponse, _request: ModelRequest, sent: ModelRequest): ModelResponse => {
    const taken = carried.get(sent)
    if (taken !== undefined) queued = queued.filter((warning) => !taken.includes(warning))
    return response
  }
  return {
    push: (warning) => {
      if (max <= 0 || queued.includes(warning)) return
      queued = [...queued.slice(Math.max(0, queued.length - max + 1)), warning]
    },
    pending: () => queued,
    inject: (request, next) => {
      const sent = before(request)
      return sent === request ? next(request) : Effect.map(next(sent), (response) => after(response, request, sent))
    },
    hooks: (then) => ({
      before: (request) => request.internal !== undefined ? request : before(request),
      after: (response, request, sent) =>
        request.internal !== undefined ? response : then(after(response, request, sent))
    })
  }
}
