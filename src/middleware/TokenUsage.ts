/**
 * TokenUsage (SPEC-deerflow §5.20): keeps the thread's token totals and tells the UI what each step spent
 * its tokens on.
 *
 * After each model call:
 * - the call's `usage_metadata` (set by the model layer) is added to the thread totals through a
 *   `token_usage` state update (reducer `addTokenUsage`: a grand total and one total per model; the model is
 *   `response_metadata.model_name`, else the request's model, else the run's, else `"unknown"`);
 * - subagent usage is rolled up: each ToolMessage just before the new response that carries
 *   `additional_kwargs.subagent_token_usage` and is not yet marked `subagent_token_usage_attributed` adds
 *   its tokens to the `usage_metadata` of the AI message that issued the call, is marked attributed (both are
 *   replaced by id, so a replayed checkpoint never counts twice), and is added to the totals under the model the
 *   subagent ran on (`subagent_model_name`; the lead's when it is not given), unless the result says it was
 *   counted when the task ended (`subagent_token_usage_recorded`, the runner's): then it is only moved;
 * - the response gets `additional_kwargs.token_usage_attribution = { version: 1, kind, shared_attribution,
 *   tool_call_ids, actions }`, the UI's label for the step (`todo_update`, `subagent_dispatch`, `tool_batch`,
 *   `final_answer`, `thinking`).
 *
 * Internal calls (`request.internal`: summaries and the like) cost money too: their usage is added to the
 * totals under their model. They are not thread messages, so they get no attribution and trigger no roll-up.
 */
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import { TokenUsageConfig } from "../services/AppConfig.js"
import type { ModelRequest, ModelResponse } from "../services/ModelService.js"
import { withUpdate } from "../services/ModelService.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { AIMessage, JsonObject, Message, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as SubagentStatus from "../state/SubagentStatus.js"
import type { TokenUsageDelta } from "../state/ThreadState.js"
import * as HardStop from "./HardStop.js"
import * as Middleware from "./Middleware.js"
import { atOnce } from "./internal/StateRead.js"
import * as Chain from "./Chain.js"

/** `additional_kwargs` key of the step attribution. */
export const ATTRIBUTION_KEY = "token_usage_attribution"
/** `additional_kwargs` key of a ToolMessage carrying a subagent's usage. */
export const SUBAGENT_USAGE_KEY = "subagent_token_usage"
/** `additional_kwargs` key marking that usage as already added to its dispatch message. */
export const SUBAGENT_ATTRIBUTED_KEY = "subagent_token_usage_attributed"

// ---------------------------------------------------------------------------------------------------------
// Attribution

/** What a step spent its tokens on. */
export type StepKind = "todo_update" | "subagent_dispatch" | "tool_batch" | "final_answer" | "thinking"

/** `additional_kwargs.token_usage_attribution`. */
export interface Attribution {
  readonly version: 1
  readonly kind: StepKind
  /** More than one action shares the step's tokens. */
  readonly shared_attribution: boolean
  readonly tool_call_ids: ReadonlyArray<string>
  readonly actions: ReadonlyArray<JsonObject>
}

/** A todo as read from untrusted `write_todos` arguments: either field may be missing. */
export interface LooseTodo {
  readonly content?: string
  readonly status?: "pending" | "in_progress" | "completed"
}

const nonBlank = (value: unknown): string | null => {
  if (typeof value !== "string") return null
  const trimmed = value.trim()
  return trimmed === "" ? null : trimmed
}

const STATUSES: ReadonlySet<string> = new Set(["pending", "in_progress", "completed"])

/** Reads a todo list from tool arguments or state; malformed entries keep only what is valid. */
export const normalizeTodos = (value: unknown): ReadonlyArray<LooseTodo> => {
  if (!Array.isArray(value)) return []
  const out: Array<LooseTodo> = []
  for (const item of value) {
    if (typeof item !== "object" || item === null || Array.isArray(item)) continue
    const content = nonBlank((item as Record<string, unknown>).content)
    const status = (item as Record<string, unknown>).status
    out.push({
      ...(content !== null ? { content } : {}),
      ...(typeof status === "string" && STATUSES.has(status) ? { status: status as LooseTodo["status"] & string } : {})
    })
  }
  return out
}

const todoKind = (previous: LooseTodo | undefined, current: LooseTodo): string => {
  if (previous !== undefined && previous.content !== current.content) return "todo_update"
  if (current.status === "completed") return "todo_complete"
  if (current.status === "in_progress") return "todo_start"
  return "todo_update"
}

/**
 * The changes from one todo list to the next: `todo_start` / `todo_complete` / `todo_update` for new or changed
 * items (matched by content, else by position when the content is new), `todo_remove` for items that are gone.
 * Unchanged items give no action.
 */
export const todoActions = (
  previous: ReadonlyArray<LooseTodo>,
  next: ReadonlyArray<LooseTodo>
): Array<{ kind: string; content: string }> => {
  const byContent = new Map<string, Array<number>>()
  previous.forEach((todo, index) => {
    if (todo.content === undefined) return
    const list = byContent.get(todo.content)
    if (list === undefined) byContent.set(todo.content, [index])
    else list.push(index)
  })
  const matched = new Set<number>()
  const actions: Array<{ kind: string; content: string }> = []
  next.forEach((todo, index) => {
    const content = todo.content
    if (content === undefined) return
    let match: LooseTodo | undefined
    const candidates = byContent.get(content)
    if (candidates !== undefined) {
      while (candidates.length > 0 && matched.has(candidates[0]!)) candidates.shift()
      const first = candidates.shift()
      if (first !== undefined) {
        matched.add(first)
        match = previous[first]
      }
    } else if (index < previous.length && !matched.has(index)) {
      matched.add(index)
      match = previous[index]
    }
    if (match !== undefined && match.content === content && match.status === todo.status) return
    actions.push({ kind: todoKind(match, todo), content })
  })
  previous.forEach((todo, index) => {
    if (!matched.has(index) && todo.content !== undefined) actions.push({ kind: "todo_remove", content: todo.content })
  })
  return actions
}

const SEARCH_TOOLS: ReadonlySet<string> = new Set(["web_search", "image_search"])

/** The actions one tool call stands for (a `write_todos` call may stand for several). */
export const describeCall = (call: ToolCall, todos: ReadonlyArray<LooseTodo>): ReadonlyArray<JsonObject> => {
  const name = nonBlank(call.name) ?? "unknown"
  const args = call.args
  const id = nonBlank(call.id)
  if (name === "write_todos") {
    const actions = todoActions(todos, normalizeTodos(args.todos))
    if (actions.length === 0) return [{ kind: "tool", tool_name: name, tool_call_id: id }]
    return actions.map((action) => ({ ...action, tool_call_id: id }))
  }
  if (name === "task") {
    return [{
      kind: "subagent",
      description: nonBlank(args.description),
      subagent_type: nonBlank(args.subagent_type),
      tool_call_id: id
    }]
  }
  if (SEARCH_TOOLS.has(name)) {
    return [{ kind: "search", tool_name: name, query: nonBlank(args.query), tool_call_id: id }]
  }
  if (name === "present_files") return [{ kind: "present_files", tool_call_id: id }]
  if (name === "ask_clarification") return [{ kind: "clarification", tool_call_id: id }]
  return [{ kind: "tool", tool_name: name, description: nonBlank(args.description), tool_call_id: id }]
}

const TODO_KINDS: ReadonlySet<unknown> = new Set(["todo_start", "todo_complete", "todo_update", "todo_remove"])

/** The attribution of an AI message, given the todos in state before it. */
export const attribution = (message: AIMessage, todos: ReadonlyArray<LooseTodo>): Attribution => {
  const calls = message.tool_calls ?? []
  const actions: Array<JsonObject> = []
  const ids: Array<string> = []
  let current = todos
  for (const call of calls) {
    actions.push(...describeCall(call, current))
    if (call.name === "write_todos") current = normalizeTodos(call.args.todos)
    const id = nonBlank(call.id)
    if (id !== null) ids.push(id)
  }
  let kind: StepKind
  if (actions.length === 1 && TODO_KINDS.has(actions[0]!.kind)) kind = "todo_update"
  else if (actions.length === 1 && actions[0]!.kind === "subagent") kind = "subagent_dispatch"
  else if (actions.length > 0) kind = "tool_batch"
  else kind = HardStop.hasVisibleText(message) ? "final_answer" : "thinking"
  return { version: 1, kind, shared_attribution: actions.length > 1, tool_call_ids: ids, actions }
}

// ---------------------------------------------------------------------------------------------------------
// Usage

/** A validated token count triple (plus the model that spent it, when known). */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly total_tokens: number
  readonly model?: string | undefined
}

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined

/**
 * Reads usage from untrusted metadata: non-negative integer input and output tokens are required; a missing
 * total is their sum. Anything else is `undefined`.
 */
export const normalizeUsage = (value: unknown): Usage | undefined => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
  const record = value as Record<string, unknown>
  const input = count(record.input_tokens)
  const output = count(record.output_tokens)
  if (input === undefined || output === undefined) return undefined
  const total = record.total_tokens == null ? input + output : count(record.total_tokens)
  if (total === undefined) return undefined
  const model = nonBlank(record.model_name) ?? nonBlank(record.model)
  return { input_tokens: input, output_tokens: output, total_tokens: total, ...(model !== null ? { model } : {}) }
}

/** The model a response's tokens are booked under. */
export const modelOf = (message: AIMessage, ...fallbacks: ReadonlyArray<string | undefined>): string => {
  const fromProvider = nonBlank(message.response_metadata?.model_name)
  if (fromProvider !== null) return fromProvider
  for (const name of fallbacks) if (name !== undefined && name.trim() !== "") return name
  return "unknown"
}

/** The totals delta of one response (none when it reported no usage). */
export const usageDelta = (message: AIMessage, model: string): TokenUsageDelta | undefined => {
  const usage = message.usage_metadata
  if (usage === undefined) return undefined
  return {
    model,
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
    total_tokens: usage.total_tokens
  }
}

/** What one model call is booked as: the model its tokens go under, and its usage record (none: it reported none). */
export interface CallUsage {
  readonly model: string
  /** The call's record; an internal call's names its purpose (`title`, `summarization`...). */
  readonly delta: TokenUsageDelta | undefined
}

/**
 * The usage of one model call, as TokenUsage and the run's journal (`UsageJournal`) count it: under the model its
 * provider named, else the request's, else the run's (`runModel`).
 */
export const callUsage = (
  request: ModelRequest,
  message: AIMessage,
  runModel: string | undefined
): CallUsage => {
  const model = modelOf(message, request.settings.modelName, runModel)
  const own = usageDelta(message, model)
  if (own === undefined || request.internal === undefined) return { model, delta: own }
  return { model, delta: { ...own, purpose: request.internal } }
}

/** Adds usage records to the run's totals; a failed update is logged, never the run's failure. */
export const recordUsage = (
  state: RunState["Type"],
  deltas: ReadonlyArray<TokenUsageDelta>
): Effect.Effect<void> =>
  state.update({ token_usage: deltas }).pipe(
    Effect.catchAll((error) => Effect.logWarning(`Token usage was not recorded: ${error.message}`))
  )

/**
 * DeerFlow's log line of one model call's usage: `LLM token usage: model=… input=… output=… total=…`, with the
 * provider's token details when it gave any.
 */
export const usageLogLine = (message: AIMessage, model: string): string | undefined => {
  const usage = message.usage_metadata
  if (usage === undefined) return undefined
  const details = [
    ...(usage.input_token_details !== undefined && Object.keys(usage.input_token_details).length > 0
      ? [`input_token_details=${JSON.stringify(usage.input_token_details)}`]
      : []),
    ...(usage.output_token_details !== undefined && Object.keys(usage.output_token_details).length > 0
      ? [`output_token_details=${JSON.stringify(usage.output_token_details)}`]
      : [])
  ]
  return `LLM token usage: model=${model} input=${usage.input_tokens} output=${usage.output_tokens} ` +
    `total=${usage.total_tokens}${details.length > 0 ? ` ${details.join(" ")}` : ""}`
}

/** What the subagent roll-up changes: messages to replace by id, and the usage it adds to the totals. */
export interface RollUp {
  readonly writes: ReadonlyArray<Message>
  readonly usage: ReadonlyArray<Usage>
}

const issues = (message: Message, toolCallId: string): boolean =>
  message.type === "ai" && (message.tool_calls ?? []).some((call) => call.id === toolCallId)

/**
 * The subagent roll-up over the messages before a new response: walks back over the trailing ToolMessages
 * (those answer the previous step's calls) and moves each unattributed `subagent_token_usage` onto the AI
 * message that issued the call. Usage that is malformed or whose dispatch message is not found stays
 * unattributed (a later pass may still place it).
 */
export const rollUp = (messages: ReadonlyArray<Message>): RollUp => {
  let updated: Map<number, Message> | undefined
  const usage: Array<Usage> = []
  for (let i = messages.length - 1; i >= 0; i--) {
    const toolMessage = messages[i]!
    if (toolMessage.type !== "tool" || toolMessage.tool_call_id === "") break
    const kwargs = toolMessage.additional_kwargs
    if (kwargs?.[SUBAGENT_ATTRIBUTED_KEY] === true) continue
    const usageOf = normalizeUsage(kwargs?.[SUBAGENT_USAGE_KEY])
    if (usageOf === undefined) continue
    // booked under the model the subagent ran on (`subagent_model_name`), not the lead's
    const subagentModel = usageOf.model ?? nonBlank(kwargs?.[SubagentStatus.MODEL_NAME_KEY])
    const moved = subagentModel === null ? usageOf : { ...usageOf, model: subagentModel }
    for (let j = i - 1; j >= 0; j--) {
      if (!issues(messages[j]!, toolMessage.tool_call_id)) continue
      const dispatch = (updated?.get(j) ?? messages[j]) as AIMessage
      const before = dispatch.usage_metadata
      ;(updated ??= new Map()).set(j, {
        ...dispatch,
        usage_metadata: {
          ...before,
          input_tokens: (before?.input_tokens ?? 0) + moved.input_tokens,
          output_tokens: (before?.output_tokens ?? 0) + moved.output_tokens,
          total_tokens: (before?.total_tokens ?? 0) + moved.total_tokens
        }
      })
      updated.set(i, { ...toolMessage, additional_kwargs: { ...kwargs, [SUBAGENT_ATTRIBUTED_KEY]: true } })
      // (counted in the run's totals when the task ended: DeerFlow's task tool reports it to the journal then)
      if (kwargs?.[SubagentStatus.USAGE_RECORDED_KEY] !== true) usage.push(moved)
      break
    }
  }
  if (updated === undefined) return { writes: [], usage }
  return { writes: [...updated.entries()].sort(([a], [b]) => a - b).map(([, message]) => message), usage }
}

// ---------------------------------------------------------------------------------------------------------
// Layer

/** The default config (enabled). */
export const defaultConfig = (): TokenUsageConfig => Schema.decodeSync(TokenUsageConfig)({})

/**
 * The TokenUsage middleware (SPEC §4.1 slot 21: outside Title, LoopDetection, TokenBudget and the finish-reason
 * guards, so its after_model runs after theirs and stamps the final form of the message). Requires
 * `RunContext` (run model name) and `RunState` (todos, trailing tool results, totals update). With
 * `enabled: false` it wraps nothing; with `track: false` (`run_events.track_token_usage`) it books no usage in the
 * totals, and still stamps each step and rolls subagent usage up onto the messages, as DeerFlow's middleware does.
 */
export const layer = (config: TokenUsageConfig = defaultConfig(), track = true): Middleware.Middleware => {
  if (!config.enabled) return Middleware.make({})
  return Middleware.make(Effect.gen(function*() {
    const context = yield* RunContext
    const state = yield* RunState
    // (the usage line is made and logged only when the run logs at debug level: most runs do not, and the check is
    // the one the logger makes first; the level is the one the run started with)
    const logging = !LogLevel.greaterThan(yield* FiberRef.get(FiberRef.currentMinimumLogLevel), LogLevel.Debug)

    const afterModel = (request: ModelRequest, response: ModelResponse): Middleware.Now<ModelResponse> => {
      const message = response.message
      const { model, delta: own } = callUsage(request, message, context.options.modelName)
      if (request.internal !== undefined) {
        // The caller (e.g. Summarization) consumes this response itself, so the totals are saved directly.
        if (own === undefined || !track) return response
        return Effect.as(recordUsage(state, [own]), response)
      }
      return atOnce(state, (current) => {
        const rolled = rollUp(current.messages)
        // (not tracked: nothing booked, as DeerFlow's journal then counts neither its calls nor its tasks)
        const deltas: Array<TokenUsageDelta> = !track ? [] : rolled.usage.map((u) => ({
          model: u.model ?? model,
          purpose: "subagent",
          input_tokens: u.input_tokens,
          output_tokens: u.output_tokens,
          total_tokens: u.total_tokens
        }))
        if (own !== undefined && track) deltas.push(own)
        const stamp = attribution(message, current.todos ?? [])
        const stamped = M.withKwargs(message, { [ATTRIBUTION_KEY]: stamp })
        const result = HardStop.replaceMessage(response, stamped)
        if (rolled.writes.length === 0 && deltas.length === 0) return result
        // Written by the loop together with the message: one state update per step.
        return withUpdate(result, {
          ...(rolled.writes.length > 0 ? { messages: rolled.writes } : {}),
          ...(deltas.length > 0 ? { token_usage: deltas } : {})
        })
      })
    }

    // every call's usage is logged, as DeerFlow logs it (an internal call names its purpose)
    const logUsage = (request: ModelRequest, response: ModelResponse): Effect.Effect<void> => {
      const line = usageLogLine(response.message, callUsage(request, response.message, context.options.modelName).model)
      if (line === undefined) return Effect.void
      // at debug: Effect's default logger writes to stdout, which is the app's own (a library's JSON lines...)
      const logged = Effect.logDebug(line)
      return request.internal === undefined ? logged : Effect.annotateLogs(logged, "purpose", request.internal)
    }

    return {
      modelHooks: {
        after: (response, request) =>
          logging
            ? Effect.zipRight(
              logUsage(request, response),
              Effect.suspend(() => Middleware.lift(afterModel(request, response)))
            )
            : afterModel(request, response)
      }
    } satisfies Middleware.Wrappers
  }))
}

/** Its chain entry: its after_model runs after the guards inside it, on the message's final form. */
export const entry = (config?: TokenUsageConfig, track?: boolean) =>
  Chain.entry("TokenUsage", () => layer(config, track), [
    { outside: "SafetyFinishReason", reason: "usage is stamped on the final form of the message" }
  ])
