/**
 * TokenBudget (SPEC-deerflow §5.29): a per-run ceiling on model tokens.
 *
 * After each model response it adds the response's tokens (input and output) and the tokens of subagents whose
 * results just came in (`additional_kwargs.subagent_token_usage` on the tool results before the response, each
 * charged once). The fraction used is the highest of total/`max_tokens` and, when set, input/`max_input_tokens`
 * and output/`max_output_tokens`. At `warn_threshold` a `[TOKEN BUDGET WARNING]` is queued once for the next
 * request (`budget_warning`, hidden, never in state); at `hard_stop_threshold` the response is rewritten by
 * `HardStop.hardStop` with a `[TOKEN BUDGET EXCEEDED]` notice and the stop reason becomes `token_capped`.
 *
 * Only this run's responses and subagent results are counted, so earlier runs never count. DeerFlow gets the same
 * totals by snapshotting every old AI message at run start and re-summing the whole thread after every response
 * to catch subagent usage that TokenUsage folds into the dispatch message later; charging the subagent results
 * directly costs O(last step) instead of O(thread), charges the spend one step earlier, and does not depend on
 * TokenUsage being enabled. Results already marked `subagent_token_usage_attributed` are skipped: in SPEC order
 * TokenUsage (outer) marks them only after this middleware charged them, so a marked result was charged before
 * (or by an earlier run). Internal calls (summaries, titles) are not charged.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { TokenBudgetConfig } from "../services/AppConfig.js"
import type { ModelResponse } from "../services/ModelService.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { AIMessage, Message } from "../state/Message.js"
import * as HardStop from "./HardStop.js"
import * as Middleware from "./Middleware.js"
import { normalizeUsage, SUBAGENT_ATTRIBUTED_KEY, SUBAGENT_USAGE_KEY } from "./TokenUsage.js"
import * as Chain from "./Chain.js"
import { atOnce } from "./internal/StateRead.js"

/** Tokens used so far in the run. */
export interface Used {
  readonly input: number
  readonly output: number
  readonly total: number
}

/** The most used of the configured budgets. */
export interface BudgetCheck {
  readonly reason: "total" | "input" | "output"
  readonly used: number
  readonly budget: number
  /** `used / budget`. */
  readonly fraction: number
}

/** The highest of the configured fractions (total always; input and output when their limits are set). */
export const check = (used: Used, config: TokenBudgetConfig): BudgetCheck => {
  const budget = config.max_tokens
  let best: BudgetCheck = { reason: "total", used: used.total, budget, fraction: used.total / budget }
  const consider = (reason: "input" | "output", amount: number, budget: number | null | undefined) => {
    if (budget == null || budget <= 0) return
    const fraction = amount / budget
    if (fraction > best.fraction) best = { reason, used: amount, budget, fraction }
  }
  consider("input", used.input, config.max_input_tokens)
  consider("output", used.output, config.max_output_tokens)
  return best
}

/** `1234567` → `"1,234,567"`. */
export const formatCount = (n: number): string => String(Math.trunc(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",")

/** Starts the budget warning. */
export const WARNING_MARKER = "[TOKEN BUDGET WARNING]"
/** Starts the hard-stop notice. */
export const EXCEEDED_MARKER = "[TOKEN BUDGET EXCEEDED]"

/**
 * A percentage as Python's `{percent:.0f}` prints it: to the nearest whole number, an exact half to the even one
 * (`80.5` → `80`, `81.5` → `82`).
 */
export const formatPercent = (percent: number): string => {
  const floor = Math.floor(percent)
  const rounded = percent - floor === 0.5 ? (floor % 2 === 0 ? floor : floor + 1) : Math.round(percent)
  return String(rounded)
}

/** The warning queued when the warn threshold is crossed: DeerFlow's `_BUDGET_WARNING_MSG`, word for word. */
export const warningText = (c: BudgetCheck): string =>
  `${WARNING_MARKER} You have used ${formatCount(c.used)} of your ${formatCount(c.budget)} ${c.reason} token ` +
  `budget (${formatPercent(c.fraction * 100)}%). Wrap up your current work and produce a final answer. Avoid ` +
  "starting new tool calls unless absolutely necessary."

/** The notice appended at the hard stop: DeerFlow's `_BUDGET_EXCEEDED_MSG`, word for word. */
export const exceededText = (c: BudgetCheck): string =>
  `${EXCEEDED_MARKER} The ${c.reason} token usage (${formatCount(c.used)}) has exceeded the safety limit ` +
  `(${formatCount(c.budget)}). Producing final answer with results collected so far.`

/** The name of the request-only message that carries the budget warning. */
export const WARNING_NAME = "budget_warning"

/**
 * Charges usage by the id of the message that carries it: each id counts once, and a later increase of the same
 * message's usage counts as it appears (a decrease is ignored). `charge` returns the running totals.
 */
export const ledger = () => {
  const seen = new Map<string, { input: number; output: number }>()
  let used: Used = { input: 0, output: 0, total: 0 }
  const charge = (id: string, input: number, output: number): Used => {
    const previous = seen.get(id)
    const addInput = Math.max(0, input - (previous?.input ?? 0))
    const addOutput = Math.max(0, output - (previous?.output ?? 0))
    if (previous === undefined || addInput > 0 || addOutput > 0) {
      seen.set(id, { input: Math.max(input, previous?.input ?? 0), output: Math.max(output, previous?.output ?? 0) })
    }
    if (addInput > 0 || addOutput > 0) {
      used = { input: used.input + addInput, output: used.output + addOutput, total: used.total + addInput + addOutput }
    }
    return used
  }
  return {
    /** Charges an AI message's `usage_metadata`. */
    charge: (message: AIMessage): Used =>
      charge(message.id, message.usage_metadata?.input_tokens ?? 0, message.usage_metadata?.output_tokens ?? 0),
    /** Charges usage carried by another message (a subagent's result). */
    chargeUsage: (id: string, input: number, output: number): Used => charge(id, input, output),
    /** Whether a message id was charged. */
    has: (id: string): boolean => seen.has(id),
    used: (): Used => used
  }
}

/**
 * The subagent results among the tool results that end `messages` (the answers to the previous step's calls)
 * that still need charging: valid `subagent_token_usage`, not yet attributed by TokenUsage.
 */
export const pendingSubagentUsage = (
  messages: ReadonlyArray<Message>
): Array<{ readonly id: string; readonly input: number; readonly output: number }> => {
  const out: Array<{ id: string; input: number; output: number }> = []
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type !== "tool") break
    const kwargs = message.additional_kwargs
    if (kwargs === undefined || kwargs[SUBAGENT_ATTRIBUTED_KEY] === true) continue
    const usage = normalizeUsage(kwargs[SUBAGENT_USAGE_KEY])
    if (usage !== undefined) out.push({ id: message.id, input: usage.input_tokens, output: usage.output_tokens })
  }
  return out
}

/** DeerFlow's lead defaults (disabled; 200,000 tokens, warn 0.8, stop 1.0). */
export const defaultConfig = (): TokenBudgetConfig => Schema.decodeSync(TokenBudgetConfig)({})

/**
 * The TokenBudget middleware (SPEC §4.1 slot 30: just inside LoopDetection, outside TerminalResponse,
 * ModelLength and Safety). Requires `RunContext` (stop reason) and `RunState` (the tool results before the
 * response, for subagent usage). With `enabled: false` it wraps nothing.
 */
export const layer = (config: TokenBudgetConfig = defaultConfig()): Middleware.Middleware => {
  if (!config.enabled) return Middleware.make({})
  return Middleware.make(Effect.gen(function*() {
    const context = yield* RunContext
    const state = yield* RunState
    const charges = ledger()
    const queue = HardStop.warningQueue(WARNING_NAME)
    let warned = false

    const afterModel = (response: ModelResponse): Middleware.Now<ModelResponse> =>
      atOnce(state, (current) => {
        const message = response.message
        for (const sub of pendingSubagentUsage(current.messages)) {
          if (!charges.has(sub.id)) charges.chargeUsage(sub.id, sub.input, sub.output)
        }
        const used = charges.charge(message)
        if (used.total <= 0) return response
        const result = check(used, config)
        if (result.fraction >= config.hard_stop_threshold) {
          const stopped = HardStop.replaceMessage(response, HardStop.hardStop(message, exceededText(result)))
          return Effect.as(context.setStopReason("token_capped"), stopped)
        }
        if (result.fraction >= config.warn_threshold && !warned) {
          warned = true
          queue.push(warningText(result))
        }
        return response
      })

    return {
      modelHooks: queue.hooks(afterModel)
    } satisfies Middleware.Wrappers
  }))
}

/** Its chain entry: inside the retries, so a retried request still carries the budget warning. */
export const entry = (config?: TokenBudgetConfig) =>
  Chain.entry("TokenBudget", () => layer(config), [
    { inside: "LLMErrorHandling", reason: "a retried request still carries the pending budget warning" }
  ])
