/**
 * SubagentLimit (SPEC §5.27, lead chain slot 28) and the `task` tool it contributes (SPEC §8.2).
 *
 * `task(description, prompt, subagent_type)` hands a sub-task to a subagent through the `SubagentRunner` port
 * and answers with the subagent status contract: the text the model reads (`Task Succeeded. Result: ...`)
 * and the structured facts in `additional_kwargs` (see `state/SubagentStatus.ts`). The result also settles
 * the task's delegation-ledger entry, so the ledger knows the outcome even when no model call follows; a task
 * cancelled with its run is recorded `cancelled`.
 *
 * After each model response, the limit keeps at most `max_concurrent_subagents` (clamped to 1-4) `task` calls,
 * and no more than the run has left of `max_total_subagents` (clamped to 1-50; the ledger's entries of this
 * run count as used). The excess calls are removed from the message (other tool calls are untouched), the
 * model is told on its next request which ones did not run and why, and a `subagent_limit` event says so.
 * When the run has no delegations left, the message says so (`[SUBAGENT LIMIT REACHED]`) and the run's stop
 * reason is `subagent_limit_capped`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ModelResponse } from "../services/ModelService.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext, RunState } from "../services/RunContext.js"
import { RunEvents } from "../services/RunEvents.js"
import type * as SubagentRunner from "../services/SubagentRunner.js"
import * as Tool from "../services/Tool.js"
import type { AIMessage, JsonObject, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Redactor } from "../state/Redact.js"
import * as SubagentStatus from "../state/SubagentStatus.js"
import * as DelegationLedger from "./DelegationLedger.js"
import * as HardStop from "./HardStop.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"
import * as TaskToolText from "./TaskToolText.js"

/** The name of the tool. */
export const TASK_TOOL = DelegationLedger.TASK_TOOL

/** Name of the custom event (and of the hidden warning message) sent when task calls are cut. */
export const LIMIT_EVENT = "subagent_limit"

/** The marker appended to the message when the run has no delegations left (protocol, SPEC §5.27). */
export const LIMIT_REACHED_MARKER = "[SUBAGENT LIMIT REACHED]"

/** The notice appended when the run has no delegations left ("subagent delegation limit" is DeerFlow's). */
export const LIMIT_REACHED_NOTICE = `${LIMIT_REACHED_MARKER} The subagent delegation limit for this run has been ` +
  "reached: it may not start any more subagents. Work with the results the subagents already returned, do what " +
  "remains yourself, or sum up what is left."

/** `max_concurrent_subagents` as DeerFlow applies it: 1 to 4. */
export const clampConcurrent = (n: number): number => Math.min(4, Math.max(1, Math.floor(n)))

/** `max_total_subagents` as DeerFlow applies it: 1 to 50. */
export const clampTotal = (n: number): number => Math.min(50, Math.max(1, Math.floor(n)))

/** How many task calls a response may keep: at most `maxConcurrent`, and no more than the run has left. */
export const allowedCalls = (maxConcurrent: number, maxTotal: number, used: number): {
  readonly allowed: number
  readonly remaining: number
} => {
  const remaining = Math.max(0, clampTotal(maxTotal) - used)
  return { allowed: Math.min(clampConcurrent(maxConcurrent), remaining), remaining }
}

/** The delegations this run already made: distinct ledger ids tagged with its run id. */
export const usedByRun = (
  delegations: ReadonlyArray<{ readonly id: string; readonly run_id?: string | undefined }>,
  runId: string
): number => new Set(delegations.filter((e) => e.run_id === runId).map((e) => e.id)).size

const isTask = (call: ToolCall) => call.name === TASK_TOOL

/**
 * The message with only its first `allowed` task calls (other tool calls kept, in order), the raw provider
 * calls kept in step, and a `tool_calls` finish reason turned into `stop` when no call is left; and the calls
 * removed. The same message when nothing is removed.
 */
export const keepTaskCalls = (
  message: AIMessage,
  allowed: number
): { readonly message: AIMessage; readonly dropped: ReadonlyArray<ToolCall> } => {
  const calls = message.tool_calls ?? []
  let seen = 0
  const kept: Array<ToolCall> = []
  const dropped: Array<ToolCall> = []
  for (const call of calls) {
    if (!isTask(call)) kept.push(call)
    else if (seen++ < allowed) kept.push(call)
    else dropped.push(call)
  }
  if (dropped.length === 0) return { message, dropped }
  if (kept.length === 0 && (message.invalid_tool_calls?.length ?? 0) === 0) {
    return { message: HardStop.stripToolCalls(message), dropped }
  }
  const droppedIds = new Set(dropped.map((c) => c.id))
  const raw = message.additional_kwargs?.tool_calls
  const kwargs: JsonObject | undefined = Array.isArray(raw)
    ? {
      ...message.additional_kwargs,
      tool_calls: raw.filter((entry) =>
        !(typeof entry === "object" && entry !== null && droppedIds.has(String((entry as { id?: unknown }).id)))
      )
    }
    : message.additional_kwargs
  const rest = kwargs !== undefined ? { additional_kwargs: kwargs } : {}
  return { message: { ...message, tool_calls: kept, ...rest }, dropped }
}

// (a prompt is masked with `hide` before its cut: a cut inside a key would keep its beginning)
const describe = (call: ToolCall, hide: Redactor | undefined): string => {
  const text = (v: unknown) => (typeof v === "string" ? v.replace(/\s+/g, " ").trim() : "")
  const prompt = text(call.args.prompt)
  const shown = prompt.length <= 80 || hide === undefined ? prompt : hide.text(prompt)
  const description = text(call.args.description) || shown.slice(0, 80) || "(no description)"
  const type = text(call.args.subagent_type)
  return type === "" ? `"${description}"` : `"${description}" (${type})`
}

/**
 * What the model is told about calls that did not run (prose for the model); `hide` (the process's secrets and the
 * run's) masks a prompt before it is cut to describe a call.
 */
export const cutWarning = (
  dropped: ReadonlyArray<ToolCall>,
  kept: number,
  limits: { readonly maxConcurrent: number; readonly maxTotal: number; readonly used: number },
  hide?: Redactor
): string => {
  const why = kept < clampConcurrent(limits.maxConcurrent)
    ? `this run may start at most ${clampTotal(limits.maxTotal)} subagents in all and ${limits.used} already ran`
    : `at most ${clampConcurrent(limits.maxConcurrent)} task calls run per response`
  const requested = kept + dropped.length
  return `Only ${kept} of the ${requested} task calls in your last response ran, because ${why}. ` +
    `Not run: ${dropped.map((call) => describe(call, hide)).join("; ")}. If still needed, delegate them in a later ` +
    `response once the running ones have returned, or do that work yourself.`
}

// ---------------------------------------------------------------------------------------------------------
// The task tool

/** The arguments of `task`. */
export const TaskArgs = Schema.Struct({
  description: Schema.String.annotations({ description: TaskToolText.ARGS.description }),
  prompt: Schema.String.annotations({ description: TaskToolText.ARGS.prompt }),
  subagent_type: Schema.String.annotations({ description: TaskToolText.ARGS.subagent_type })
})

/** Options of the `task` tool. */
export interface TaskOptions {
  readonly runner: SubagentRunner.Service
  /** The agent's tool groups, passed on to its subagents. */
  readonly toolGroups?: ReadonlyArray<string> | undefined
  /** The agent's skills allowlist, passed on to its subagents. */
  readonly skills?: ReadonlyArray<string> | undefined
}

const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

/** A subagent's outcome with its result and error masked by `hide`. */
const masked = (outcome: SubagentStatus.Outcome, hide: Redactor): SubagentStatus.Outcome => ({
  ...outcome,
  ...(outcome.result !== undefined ? { result: hide.text(outcome.result) } : {}),
  ...(outcome.error !== undefined ? { error: hide.text(outcome.error) } : {})
})

/** The `task` tool over a subagent runner. */
export const taskTool = (options: TaskOptions): Tool.Tool<typeof TaskArgs.Type> =>
  Tool.make({
    name: TASK_TOOL,
    // DeerFlow's words (TaskToolText)
    description: TaskToolText.DESCRIPTION,
    parameters: TaskArgs,
    handler: (args, call) =>
      Effect.gen(function*() {
        const context = yield* RunContext
        const state = yield* RunState
        const createdAt = yield* now
        const entry = DelegationLedger.pendingEntry(call, context.runId, createdAt)
        const ended = yield* options.runner.run({
          toolCallId: call.id,
          description: args.description,
          prompt: args.prompt,
          subagentType: args.subagent_type,
          toolGroups: options.toolGroups,
          skills: options.skills
        }).pipe(
          // cancelled with its run: the ledger must not keep it "in progress"
          Effect.onInterrupt(() =>
            Effect.ignore(state.update({
              delegations: [{ ...entry, status: "cancelled", result_brief: "Task cancelled by user." }]
            }))
          )
        )
        // (its answer masked for the process's secrets and the run's before the briefs cut it: head and tail)
        const outcome = masked(ended, yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current))
        const message = M.tool(SubagentStatus.resultText(outcome), call.id, {
          name: TASK_TOOL,
          status: outcome.status === "completed" ? "success" : "error",
          additional_kwargs: SubagentStatus.metadata(outcome)
        })
        return { message, update: { delegations: [DelegationLedger.settle(entry, message)] } }
      })
  })

// ---------------------------------------------------------------------------------------------------------
// The middleware

/** Options of `layer`. */
export interface Options extends TaskOptions {
  /** `max_concurrent_subagents` (default 3; clamped to 1-4). */
  readonly maxConcurrent?: number | undefined
  /** `max_total_subagents` (default 6; clamped to 1-50). */
  readonly maxTotal?: number | undefined
}

/**
 * SubagentLimit with the `task` tool. Requires `RunContext`, `RunState` and `RunEvents`. Internal calls pass
 * through untouched.
 */
export const layer = (options: Options): Middleware =>
  MW.make(
    Effect.gen(function*() {
      const context = yield* RunContext
      const state = yield* RunState
      const events = yield* RunEvents
      const maxConcurrent = options.maxConcurrent ?? 3
      const maxTotal = options.maxTotal ?? 6
      const queue = HardStop.warningQueue(LIMIT_EVENT)
      // (what a dropped call's prompt is masked with before its cut: the process's secrets and the run's)
      const hideOf = ProcessSecrets.ofRun(yield* ProcessSecrets.current)

      // (the task calls over the limits dropped, the model told which)
      const cut = (
        response: ModelResponse,
        counts: { readonly requested: number; readonly used: number; readonly allowed: number },
        remaining: number,
        hide: Redactor
      ): Effect.Effect<ModelResponse> => {
        const { allowed, requested, used } = counts
        const { dropped, message } = keepTaskCalls(response.message, allowed)
        const warning = cutWarning(dropped, allowed, { maxConcurrent, maxTotal, used }, hide)
        const report = events.emit({
          type: "custom",
          name: LIMIT_EVENT,
          data: {
            message: warning,
            requested,
            allowed,
            dropped: dropped.map((c) => ({
              id: c.id,
              description: c.args.description,
              subagent_type: c.args.subagent_type
            }))
          }
        })
        if (remaining === 0) {
          const capped = { ...message, content: M.appendText(message.content, LIMIT_REACHED_NOTICE) }
          return Effect.as(
            Effect.zipRight(report, context.setStopReason("subagent_limit_capped")),
            HardStop.replaceMessage(response, capped)
          )
        }
        queue.push(warning)
        return Effect.as(report, HardStop.replaceMessage(response, message))
      }

      const afterModel = (response: ModelResponse): Effect.Effect<ModelResponse> => {
        const requested = (response.message.tool_calls ?? []).filter(isTask).length
        if (requested === 0) return Effect.succeed(response)
        return Effect.flatMap(state.get, (current) => {
          const used = usedByRun(current.delegations, context.runId)
          const { allowed, remaining } = allowedCalls(maxConcurrent, maxTotal, used)
          if (requested <= allowed) return Effect.succeed(response)
          return Effect.flatMap(hideOf, (hide) => cut(response, { requested, used, allowed }, remaining, hide))
        })
      }

      return {
        model: (request, next) =>
          request.internal !== undefined ? next(request) : Effect.flatMap(queue.inject(request, next), afterModel)
      }
    }),
    { tools: [taskTool(options)], name: "SubagentLimit" }
  )

/** Its chain entry: cuts task calls to the limits after the guards inside it; contributes `task`. */
export const entry = (options: Options) =>
  Chain.entry("SubagentLimit", () => layer(options), [
    { inside: "DurableContext", reason: "the delegation ledger records only the task calls the limit kept" },
    { inside: "ToolErrorHandling", reason: "a task that fails is answered with subagent_status failed" },
    { outside: "LoopDetection", reason: "a loop stop strips every tool call before the limit counts them" }
  ])
