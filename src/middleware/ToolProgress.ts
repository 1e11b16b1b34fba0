/**
 * ToolProgress (SPEC §5.12, lead chain slot 13; `tool_progress.enabled`, default off): a per-(thread, tool)
 * guard against a tool that has stopped producing anything new. Where LoopDetection looks at the calls the
 * model makes, this looks at what comes back.
 *
 * It reads the `deerflow_tool_meta` ToolErrorHandling stamps on every result (so it must stand outside it). A
 * result is a problem when its status is `error` or `partial_success`, or when it is a success whose words
 * (lower-cased words of 3+ letters in its first 8192 characters) overlap one of the tool's last 3 good results
 * with a Jaccard index of at least `jaccard_similarity_threshold` (both with `min_word_count_for_similarity`
 * words or more). Per tool:
 * - a good result resets the count and makes the tool ACTIVE again;
 * - `stagnation_threshold` problems in a row make it WARNED and queue a `[PROGRESS HINT]`;
 * - from `stagnation_threshold + warn_escalation_count` problems, a tool the model can fix by changing its
 *   approach (`recoverable_by_model`) stays WARNED with a hint each time; one it cannot (rate limits, transient
 *   failures) is BLOCKED;
 * - a failure no retry can help (`recoverable_by_model: false` and `recommended_next_action: stop`: auth,
 *   configuration, internal errors) BLOCKS it at once.
 * A BLOCKED tool does not run: its calls get a `[TOOL_BLOCKED]` error result. Hints (deduplicated, at most 3
 * waiting at once) go into the next model request as one hidden `progress_hint` message, request-only; a
 * failed call keeps them for its retry. Every run starts with the thread's tools ACTIVE again. Each change of
 * phase is logged in DeerFlow's words (BLOCKED at warning, WARNED and back to ACTIVE at info), and so is each call
 * a block stops (info), so an operator sees which tool of which thread stopped working and why.
 *
 * The per-thread states belong to the agent, in an LRU of `max_tracked_threads` threads. Exempt tools
 * (`exempt_tools`: ask_clarification, write_todos, present_files, task) are never tracked.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { ToolProgressConfig } from "../services/AppConfig.js"
import { RunContext } from "../services/RunContext.js"
import type { ToolResult } from "../services/ToolService.js"
import type { ToolCall, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as HardStop from "./HardStop.js"
import * as Middleware from "./Middleware.js"
import type { ToolMeta } from "./ToolErrorHandling.js"
import { TOOL_META_KEY } from "./ToolErrorHandling.js"
import * as Chain from "./Chain.js"

/** The `name` of the request-only message that carries hints. */
export const HINT_NAME = "progress_hint"
/** Starts every hint. */
export const HINT_MARKER = "[PROGRESS HINT]"
/** Starts the result of a blocked call. */
export const BLOCKED_MARKER = "[TOOL_BLOCKED]"
/** The most hints waiting for one model request. */
export const MAX_PENDING_HINTS = 3
/** How much of a result its word set is taken from. */
export const MAX_CONTENT_FOR_WORDSET = 8192

/** DeerFlow's defaults (off; stagnation 3, escalation 2, Jaccard 0.8, 10 words, 100 threads). */
export const defaultConfig = (): ToolProgressConfig => Schema.decodeSync(ToolProgressConfig)({})

// ---------------------------------------------------------------------------------------------------------
// Words

/** The lower-cased words of 3 or more letters or digits in the first 8192 characters of a result. */
export const wordSet = (content: string): ReadonlySet<string> => {
  const words = new Set<string>()
  for (const match of content.slice(0, MAX_CONTENT_FOR_WORDSET).toLowerCase().matchAll(/[\p{L}\p{N}_]+/gu)) {
    if ([...match[0]].length >= 3) words.add(match[0])
  }
  return words
}

/** Whether `current` overlaps one of the last 3 of `recent` by at least `threshold` (Jaccard), both large enough. */
export const isNearDuplicate = (
  current: ReadonlySet<string>,
  recent: ReadonlyArray<ReadonlySet<string>>,
  threshold: number,
  minWords: number
): boolean => {
  if (current.size < minWords) return false
  for (const previous of recent.slice(-3)) {
    if (previous.size < minWords) continue
    let shared = 0
    for (const word of current) if (previous.has(word)) shared++
    const union = current.size + previous.size - shared
    if (union > 0 && shared / union >= threshold) return true
  }
  return false
}

// ---------------------------------------------------------------------------------------------------------
// Texts: DeerFlow's `_format_hint` and `_block_reason`, word for word

const HINT_BASE: Readonly<Record<string, string>> = {
  no_results: "Your search returned no results.",
  not_found: "The resource was not found repeatedly.",
  rate_limited: "The tool is being rate-limited.",
  transient: "The tool encountered repeated transient failures.",
  partial_success: "The tool has returned incomplete results multiple times.",
  success: "The tool is returning duplicate results."
}

const HINT_ACTION: Readonly<Record<string, string>> = {
  rewrite_query: "Try rephrasing your search query with different keywords or approach.",
  try_alternative: "Consider using a different tool or strategy.",
  summarize: "Consider summarizing your current findings and moving forward.",
  stop: "Do not retry this operation — it is not recoverable.",
  continue: "Try rephrasing your query or using a different search term."
}

/** The hint for a tool whose results keep being problems like this one (DeerFlow's `_format_hint`). */
export const hintText = (meta: ToolMeta): string => {
  const base = HINT_BASE[meta.error_type || meta.status] ?? "The tool is not producing new information."
  const action = HINT_ACTION[meta.recommended_next_action]
  return `${HINT_MARKER} ${base}${action === undefined ? "" : ` ${action}`}`
}

const BLOCK_REASONS: Readonly<Record<string, string>> = {
  no_results: "Repeated no-results — rewrite your query or try a different tool.",
  not_found: "Repeated not-found — rewrite your query or try a different resource.",
  rate_limited: "Repeated rate-limiting — summarize current findings and proceed.",
  transient: "Repeated transient failures — try a different approach.",
  auth: "Authentication failure — this tool cannot be used.",
  config: "Tool is not configured — this tool cannot be used.",
  internal: "Repeated internal errors — this tool is unavailable."
}

/** Why a tool is blocked, for a result like this one (DeerFlow's `_block_reason`). */
export const blockReason = (meta: ToolMeta): string =>
  BLOCK_REASONS[meta.error_type || ""] ??
    "Tool has not produced new information after multiple attempts — summarize and move on."

/** The result of a call to a blocked tool (it does not run). */
export const blockedResult = (call: ToolCall, reason: string): ToolResult => ({
  message: M.tool(`${BLOCKED_MARKER} ${reason}`, call.id, {
    name: call.name,
    status: "error",
    additional_kwargs: {
      [TOOL_META_KEY]: {
        status: "error",
        error_type: "blocked_by_progress_guard",
        recoverable_by_model: true,
        recommended_next_action: "summarize",
        source: "progress_middleware"
      } satisfies ToolMeta
    }
  })
})

// ---------------------------------------------------------------------------------------------------------
// The state machine

/** Where one tool of one thread stands. */
export interface PhaseState {
  readonly phase: "active" | "warned" | "blocked"
  readonly problems: number
  readonly blockReason: string | undefined
  /** Word sets of the last 3 good results. */
  readonly recent: ReadonlyArray<ReadonlySet<string>>
}

/** A tool nothing is known about yet. */
export const ACTIVE: PhaseState = { phase: "active", problems: 0, blockReason: undefined, recent: [] }

/** The limits of the state machine. */
export type Limits = Pick<
  ToolProgressConfig,
  "stagnation_threshold" | "warn_escalation_count" | "jaccard_similarity_threshold" | "min_word_count_for_similarity"
>

/**
 * The next state of a tool after a result, and the hint to queue (if any). A BLOCKED tool stays as it is (its
 * calls do not run, so this is reached only by a call that was already running when it was blocked).
 */
export const assess = (
  state: PhaseState,
  meta: ToolMeta,
  content: string,
  limits: Limits,
  tool: string
): { readonly state: PhaseState; readonly hint?: string | undefined } => {
  if (state.phase === "blocked") return { state }
  const problems = state.problems + 1
  if (!meta.recoverable_by_model && meta.recommended_next_action === "stop") {
    return { state: { ...state, phase: "blocked", problems, blockReason: blockReason(meta) } }
  }
  const words = meta.status === "success" ? wordSet(content) : new Set<string>()
  const problem = meta.status !== "success" ||
    isNearDuplicate(words, state.recent, limits.jaccard_similarity_threshold, limits.min_word_count_for_similarity)
  if (!problem) return { state: { ...state, phase: "active", problems: 0, recent: [...state.recent, words].slice(-3) } }
  if (problems >= limits.stagnation_threshold + limits.warn_escalation_count && !meta.recoverable_by_model) {
    return { state: { ...state, phase: "blocked", problems, blockReason: blockReason(meta) } }
  }
  if (problems >= limits.stagnation_threshold) {
    return { state: { ...state, phase: "warned", problems }, hint: hintText(meta) }
  }
  return { state: { ...state, problems } }
}

/** What recording one result did to its tool: the state before and after, and the hint to queue (if any). */
export interface Observation {
  readonly before: PhaseState
  readonly after: PhaseState
  readonly hint?: string | undefined
}

/** The states of the tools of recently active threads, for one agent. */
export interface Tracker {
  /** A new run of the thread: every tool of it is ACTIVE again, with nothing remembered. */
  readonly startRun: (threadId: string) => void
  /** Why the tool is blocked in the thread, if it is (does not make the thread more recent). */
  readonly blocked: (threadId: string, tool: string) => string | undefined
  /** Records a result. */
  readonly observe: (threadId: string, tool: string, meta: ToolMeta, content: string) => Observation
  /** The threads tracked now. */
  readonly threads: () => number
}

/** A tracker keeping at most `max_tracked_threads` threads (the least recently updated are dropped). */
export const tracker = (config: Limits & Pick<ToolProgressConfig, "max_tracked_threads">): Tracker => {
  const threads = new Map<string, Map<string, PhaseState>>()
  const touch = (threadId: string): Map<string, PhaseState> => {
    let tools = threads.get(threadId)
    if (tools === undefined) tools = new Map()
    else threads.delete(threadId)
    threads.set(threadId, tools)
    while (threads.size > config.max_tracked_threads) threads.delete(threads.keys().next().value!)
    return tools
  }
  return {
    startRun: (threadId) => threads.get(threadId)?.clear(),
    blocked: (threadId, tool) => {
      const state = threads.get(threadId)?.get(tool)
      return state?.phase === "blocked" ? state.blockReason : undefined
    },
    observe: (threadId, tool, meta, content) => {
      const tools = touch(threadId)
      const before = tools.get(tool) ?? ACTIVE
      const next = assess(before, meta, content, config, tool)
      tools.set(tool, next.state)
      return { before, after: next.state, hint: next.hint }
    },
    threads: () => threads.size
  }
}

// ---------------------------------------------------------------------------------------------------------
// The middleware

const MetaSchema = Schema.Struct({
  status: Schema.Literal("success", "error", "partial_success"),
  error_type: Schema.NullOr(Schema.String),
  recoverable_by_model: Schema.Boolean,
  recommended_next_action: Schema.Literal("continue", "rewrite_query", "try_alternative", "summarize", "stop"),
  source: Schema.Literal("exception", "tool_return", "content_analysis", "progress_middleware")
})
const decodeMeta = Schema.decodeUnknownOption(MetaSchema)

/** The `deerflow_tool_meta` of a result, when it has a valid one. */
export const metaOf = (message: ToolMessage): ToolMeta | undefined =>
  Option.getOrUndefined(decodeMeta(message.additional_kwargs?.[TOOL_META_KEY]))

/**
 * The log line of a tool changing phase, in DeerFlow's words (so a search of either's logs finds both): BLOCKED
 * at warning, WARNED and the return to ACTIVE at info. Nothing when the phase stays.
 */
export const transitionLog = (threadId: string, tool: string, observation: Observation): Effect.Effect<void> => {
  const { after, before } = observation
  if (after.phase === before.phase) return Effect.void
  const who = `tool_progress: ${threadId}/${tool}`
  switch (after.phase) {
    case "blocked":
      return Effect.logWarning(`${who} -> BLOCKED: ${after.blockReason}`)
    case "warned":
      return Effect.logInfo(`${who} -> WARNED (consecutive_problems=${after.problems})`)
    case "active":
      return Effect.logInfo(`${who} -> ACTIVE (reset after good result)`)
  }
}

/**
 * ToolProgress. Needs `RunContext` per run. With `enabled: false` it wraps nothing. The tracker belongs to the
 * agent (one per built layer); hints belong to the run.
 */
export const layer = (config: ToolProgressConfig = defaultConfig()): Middleware.Middleware => {
  if (!config.enabled) return Middleware.make({})
  const exempt = new Set(config.exempt_tools)
  return Layer.unwrapEffect(Effect.sync(() => {
    const states = tracker(config)
    return Middleware.make(
      Effect.map(RunContext, (context): Middleware.Wrappers => {
        const threadId = context.threadId
        states.startRun(threadId)
        const hints = HardStop.warningQueue(HINT_NAME, MAX_PENDING_HINTS)
        const observe = (call: ToolCall, result: ToolResult): Effect.Effect<ToolResult> => {
          const meta = metaOf(result.message)
          if (meta === undefined) {
            const missing = result.message.additional_kwargs?.[TOOL_META_KEY] === undefined
            return Effect.as(
              Effect.logWarning(
                missing
                  ? `tool_progress: deerflow_tool_meta missing for ${call.name} ` +
                    "(ToolProgress must stand outside ToolErrorHandling)"
                  : `tool_progress: ${call.name}'s deerflow_tool_meta is not valid; the result is not tracked`
              ),
              result
            )
          }
          const content = typeof result.message.content === "string" ? result.message.content : ""
          const observation = states.observe(threadId, call.name, meta, content)
          if (observation.hint !== undefined && config.inject_assessment) hints.push(observation.hint)
          return Effect.as(transitionLog(threadId, call.name, observation), result)
        }
        return {
          tool: (call, next) => {
            if (call.name === "" || exempt.has(call.name)) return next(call)
            const reason = states.blocked(threadId, call.name)
            if (reason !== undefined) {
              return Effect.as(
                Effect.logInfo(`tool_progress: ${threadId}/${call.name} call intercepted (blocked): ${reason}`),
                blockedResult(call, reason)
              )
            }
            return Effect.flatMap(next(call), (result) => observe(call, result))
          },
          model: (request, next) => {
            if (request.internal !== undefined) return next(request)
            const waiting = hints.pending().length
            if (waiting === 0) return hints.inject(request, next)
            return Effect.zipRight(
              Effect.logDebug(`tool_progress: injecting ${waiting} hint(s) for ${threadId}/${context.runId}`),
              hints.inject(request, next)
            )
          }
        }
      }),
      { name: "ToolProgress" }
    )
  }))
}

/** Its chain entry: outside ToolErrorHandling, whose metadata it reads; inside the retries. */
export const entry = (config?: ToolProgressConfig) =>
  Chain.entry("ToolProgress", () => layer(config), [
    { outside: "ToolErrorHandling", reason: "it reads the deerflow_tool_meta ToolErrorHandling stamps on results" },
    { inside: "LLMErrorHandling", reason: "a retried request still carries the pending progress hints" }
  ])
