/**
 * The lead agent: the documented middleware order, one line per entry with the reason it stands there.
 * The first entry is the outermost wrapper: its `before` work runs first and its `after` work last; model
 * and tool wrappers run outer → inner on the way in and inner → outer on the way out (SPEC-deerflow §4.1).
 * Numbers are DeerFlow's slots; slots Antler does not have yet are left out (see README, "Status").
 */
import type * as Layer from "effect/Layer"
import * as ClarificationMW from "../middleware/Clarification.js"
import * as DanglingToolCall from "../middleware/DanglingToolCall.js"
import * as DurableContext from "../middleware/DurableContext.js"
import * as GuardrailMW from "../middleware/Guardrail.js"
import * as InputSanitization from "../middleware/InputSanitization.js"
import * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import * as LoopDetection from "../middleware/LoopDetection.js"
import type { Middleware, Ports } from "../middleware/Middleware.js"
import * as MW from "../middleware/Middleware.js"
import * as ModelLengthFinishReason from "../middleware/ModelLengthFinishReason.js"
import * as SafetyFinishReason from "../middleware/SafetyFinishReason.js"
import * as SandboxMW from "../middleware/Sandbox.js"
import * as SandboxAudit from "../middleware/SandboxAudit.js"
import * as Summarization from "../middleware/Summarization.js"
import * as SystemMessageCoalescing from "../middleware/SystemMessageCoalescing.js"
import * as ThreadData from "../middleware/ThreadData.js"
import * as Title from "../middleware/Title.js"
import * as TokenBudget from "../middleware/TokenBudget.js"
import * as TokenUsage from "../middleware/TokenUsage.js"
import * as ToolErrorHandling from "../middleware/ToolErrorHandling.js"
import * as ToolOutputBudget from "../middleware/ToolOutputBudget.js"
import * as Uploads from "../middleware/Uploads.js"
import type { AppConfig, ModelConfig, TokenBudgetConfig } from "../services/AppConfig.js"
import type { Service as GuardrailService } from "../services/Guardrail.js"

/** What the lead agent's chain is built from. App-level pieces (breaker, guardrail) are built once and shared. */
export interface Options {
  readonly config: AppConfig
  /** The run's model entry, when it comes from config. */
  readonly modelConfig?: ModelConfig | undefined
  /** Whether someone can answer `ask_clarification` (false for non-interactive runs). Default true. */
  readonly interactive?: boolean | undefined
  /** The configured guardrail provider, resolved once at start-up; none when guardrails are off. */
  readonly guardrail?: GuardrailService | undefined
  /** A circuit breaker shared by every run of the process; without one, each run has its own. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
}

const when = <A>(condition: boolean, entry: () => A): ReadonlyArray<A> => (condition ? [entry()] : [])

/**
 * The runtime base shared by the lead agent and its subagents (DeerFlow's `build_*_runtime_middlewares`):
 * slots 1–14, outermost first. Only the lead agent reads uploads.
 */
const runtimeBase = (options: Options, lead: boolean) => {
  const c = options.config
  return [
    // 1: sanitise the latest user input before any other wrapper or the model reads the request
    InputSanitization.layer(),
    // 2: outermost tool wrap, so budgeting is the last transformation of every tool result
    ToolOutputBudget.layer(c.tool_output),
    // 4: before_agent: the thread's directories, and run id / timestamp on the new user message
    ThreadData.layer(),
    // 5 (lead only): before_agent, after ThreadData (it needs the uploads dir): the <current_uploads> block
    ...when(lead, () => Uploads.layer()),
    // 6: lazy sandbox: records the id a tool acquired, releases it after the run
    SandboxMW.layer(),
    // 7: repairs dangling / orphan tool results in the request, outside the retry loop (done once per call)
    DanglingToolCall.layer(),
    // 8: the retry loop and circuit breaker; everything inside is re-run per attempt
    LLMErrorHandling.layer({ llmCall: c.llm_call, circuitBreaker: c.circuit_breaker, breaker: options.breaker }),
    // 10: configured guardrail, before the audit so a denied tool is never audited as run
    ...when(options.guardrail !== undefined, () =>
      GuardrailMW.layerWith(options.guardrail!, {
        failClosed: c.guardrails.fail_closed,
        passport: c.guardrails.passport
      })),
    // 11: bash audit: blocks high-risk commands, warns on medium-risk ones
    SandboxAudit.layer(),
    // 14: turns tool failures into results the model can read; inner short-circuits still get metadata
    ToolErrorHandling.layer({
      skillReadToolNames: c.summarization.skill_file_read_tool_names,
      skillsRoot: c.skills.container_path
    })
  ]
}

/** The lead agent's middlewares, outermost first. Fresh layer values on every call (layers memoise by reference). */
export const middlewares = (options: Options) => {
  const c = options.config
  return [
    ...runtimeBase(options, true),
    // 18: projects the summary and loaded skills into every request (request-only)
    DurableContext.layer(),
    // 19: right inside DurableContext, so a request after a compaction carries the new summary
    Summarization.layer(),
    // 21: after_model after the guards below, so it stamps the final form of the message
    TokenUsage.layer(c.token_usage),
    // 22: names the thread after its first exchange
    Title.layer(c.title),
    // 27: one leading system prompt for providers that accept only one
    SystemMessageCoalescing.layer(),
    // 29: counts repeated tool calls after Safety stripped suppressed ones; warns, then stops
    LoopDetection.layer(c.loop_detection),
    // 30: per-run token budget (off by default for the lead agent)
    TokenBudget.layer(c.token_budget),
    // 34: notes a response cut by the length limit (stop reason only)
    ModelLengthFinishReason.layer(),
    // 35: innermost model guard: its after_model runs first and suppresses tool calls of a safety stop
    SafetyFinishReason.layer({ config: c.safety_finish_reason }),
    // 36: last, so every tool wrapper sees ask_clarification; the run then waits for the user
    ClarificationMW.layer()
  ]
}

/** The subagent chain's token budget: on by default, 1M tokens with summarisation, else 2M (SPEC §4.2). */
export const subagentBudget = (config: AppConfig): TokenBudgetConfig => ({
  ...config.token_budget,
  enabled: true,
  warn_threshold: 0.7,
  hard_stop_threshold: 1.0,
  max_tokens: config.summarization.enabled ? 1_000_000 : 2_000_000
})

/** A subagent's middlewares (SPEC §4.2): no uploads, title, usage, clarification; a budget by default. */
export const subagentMiddlewares = (options: Options) => {
  const c = options.config
  return [
    ...runtimeBase(options, false),
    LoopDetection.layer(c.loop_detection),
    TokenBudget.layer(subagentBudget(c)),
    SafetyFinishReason.layer({ config: c.safety_finish_reason }),
    DurableContext.layer(),
    Summarization.layer(),
    SystemMessageCoalescing.layer()
  ]
}

type Entry = ReturnType<typeof middlewares>[number] | ReturnType<typeof subagentMiddlewares>[number]

/** What the lead agent's chain needs from the app and the run. */
export type Requirements = Entry extends Middleware<infer R, any> ? R : never
/** How building the chain can fail (a bad configuration). */
export type BuildError = Entry extends Middleware<any, infer E> ? E : never

/** The lead agent's stack over a base (the real model and tools). */
export const stack = <E, R>(
  options: Options,
  base: Layer.Layer<Ports, E, R>
): Layer.Layer<Ports, E | BuildError, R | Requirements> =>
  MW.stack(middlewares(options) as ReadonlyArray<Middleware<Requirements, BuildError>>, base)

/** A subagent's stack over a base. */
export const subagentStack = <E, R>(
  options: Options,
  base: Layer.Layer<Ports, E, R>
): Layer.Layer<Ports, E | BuildError, R | Requirements> =>
  MW.stack(subagentMiddlewares(options) as ReadonlyArray<Middleware<Requirements, BuildError>>, base)
