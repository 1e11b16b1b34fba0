/**
 * The lead agent: the documented middleware chain, and the agent as a service an Effect app provides once and
 * runs turns through.
 *
 * The chain is checked data (`Chain`): one entry per middleware, outermost first, each with a stable name, a
 * line saying why it stands there, and the ordering facts it relies on. The first entry is the outermost
 * wrapper: its `before` work runs first and its `after` work last; model and tool wrappers run outer → inner
 * on the way in and inner → outer on the way out (SPEC-deerflow §4.1). Numbers are DeerFlow's slots; slots
 * Antler does not have yet are left out (see docs/status.md).
 *
 * `layer(options)` builds the chain once, over the app's `ModelService`, the sandbox tools and the app's own
 * tools, and provides `LeadAgent`: `run(input)` streams a turn's events, `turn(input)` waits for its end.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as SandboxTools from "../layers/SandboxTools.js"
import * as Toolkit from "../layers/Toolkit.js"
import * as AllowlistGuardrail from "../layers/AllowlistGuardrail.js"
import type { ConfigError } from "../layers/ConfigFile.js"
import { fromTextFileError } from "../layers/ConfigFile.js"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import * as TextFile from "../layers/TextFile.js"
import * as Chain from "../middleware/Chain.js"
import * as ClarificationMW from "../middleware/Clarification.js"
import * as DanglingToolCall from "../middleware/DanglingToolCall.js"
import * as DeferredToolFilter from "../middleware/DeferredToolFilter.js"
import * as DurableContext from "../middleware/DurableContext.js"
import * as DynamicContext from "../middleware/DynamicContext.js"
import * as GuardrailMW from "../middleware/Guardrail.js"
import * as InputSanitization from "../middleware/InputSanitization.js"
import * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import * as LoopDetection from "../middleware/LoopDetection.js"
import * as McpRouting from "../middleware/McpRouting.js"
import * as MemoryMW from "../middleware/Memory.js"
import type { Ports } from "../middleware/Middleware.js"
import * as MW from "../middleware/Middleware.js"
import * as ModelLengthFinishReason from "../middleware/ModelLengthFinishReason.js"
import * as ReadBeforeWrite from "../middleware/ReadBeforeWrite.js"
import * as SafetyFinishReason from "../middleware/SafetyFinishReason.js"
import * as SandboxMW from "../middleware/Sandbox.js"
import * as SandboxAudit from "../middleware/SandboxAudit.js"
import * as SkillActivation from "../middleware/SkillActivation.js"
import * as SkillToolPolicy from "../middleware/SkillToolPolicy.js"
import * as SubagentLimit from "../middleware/SubagentLimit.js"
import * as Summarization from "../middleware/Summarization.js"
import * as SystemMessageCoalescing from "../middleware/SystemMessageCoalescing.js"
import * as TerminalResponse from "../middleware/TerminalResponse.js"
import * as ThreadData from "../middleware/ThreadData.js"
import * as Title from "../middleware/Title.js"
import * as Todo from "../middleware/Todo.js"
import * as TokenBudget from "../middleware/TokenBudget.js"
import * as TokenUsage from "../middleware/TokenUsage.js"
import * as ToolErrorHandling from "../middleware/ToolErrorHandling.js"
import * as ToolOutputBudget from "../middleware/ToolOutputBudget.js"
import * as ToolProgress from "../middleware/ToolProgress.js"
import * as ToolResultSanitization from "../middleware/ToolResultSanitization.js"
import * as Uploads from "../middleware/Uploads.js"
import * as ViewImage from "../middleware/ViewImage.js"
import type { AppConfig, TokenBudgetConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import * as Guardrail from "../services/Guardrail.js"
import { Memory } from "../services/Memory.js"
import type { ModelService, ToolDefinition } from "../services/ModelService.js"
import type { RunOptions } from "../services/RunContext.js"
import type { RunEndEvent, RunEvent } from "../services/RunEvents.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import type * as Skills from "../services/Skills.js"
import { SubagentRunner, SubagentRunnerMissing } from "../services/SubagentRunner.js"
import { ThreadStore } from "../services/ThreadStore.js"
import type * as Tool from "../services/Tool.js"
import { ToolService } from "../services/ToolService.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { ThreadState } from "../state/ThreadState.js"
import * as CustomAgents from "./CustomAgents.js"
import * as Run from "./Run.js"
import * as Shapes from "./Shapes.js"
import * as SystemPrompt from "./SystemPrompt.js"

// ---------------------------------------------------------------------------------------------------------
// The chain

/** What the lead agent's chain is built from. App-level pieces (breaker, guardrail) are shared by its runs. */
export interface ChainOptions {
  readonly config: AppConfig
  /** The configured guardrail provider; none when guardrails are off. */
  readonly guardrail?: Guardrail.Service | undefined
  /** A circuit breaker to share with other agents of the app; by default the agent has its own. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
  /** MCP tools deferred behind `tool_search` (none: no deferral). */
  readonly deferred?: Deferred | undefined
  /** The app's skills (slash activation, `allowed-tools`); by default none. */
  readonly skills?: Skills.Registry | undefined
  /** The skills this agent may use (a custom agent's list); all when undefined. */
  readonly skillAllowlist?: ReadonlyArray<string> | undefined
  /** The app's long-term memory; none: no memory. */
  readonly memory?: Memory["Type"] | undefined
  /** Plan mode: the todo list (`write_todos`). */
  readonly planMode?: boolean | undefined
  /** The model accepts images: viewed images reach it. */
  readonly vision?: boolean | undefined
  /** A custom agent's name (its own memory). */
  readonly agentName?: string | undefined
  /** Subagents enabled: the `task` tool and its limits (SubagentLimit, slot 28). */
  readonly subagents?: SubagentLimit.Options | undefined
}

/** Tools deferred behind `tool_search` (SPEC §5.24, §5.25, §7.14). */
export interface Deferred {
  /** The deferred tools' definitions (the tools themselves are among the agent's tools). */
  readonly tools: ReadonlyArray<ToolDefinition>
  /** Routing keywords of deferred tools (`mode: prefer`), for McpRouting and the prompt's hints. */
  readonly routes?: ReadonlyArray<McpRouting.Route> | undefined
  /** `tool_search.auto_promote_top_k`. */
  readonly topK?: number | undefined
}

const noSkills: Skills.Registry = {
  catalog: Effect.sync(() => ({
    root: undefined,
    container: "/mnt/skills",
    skills: [],
    rejected: [],
    shadowed: [],
    warnings: []
  })),
  read: () => Effect.die(new Error("no skills"))
}

const when = <A>(condition: boolean, entry: () => A): ReadonlyArray<A> => (condition ? [entry()] : [])

// Entries the lead chain and the subagent chain share, with the same facts.

const sandboxEntry = () =>
  Chain.entry("Sandbox", () => SandboxMW.layer(), [
    { inside: "ThreadData", reason: "the sandbox is made over the thread's directories ThreadData records" }
  ])

const danglingToolCallEntry = () =>
  Chain.entry("DanglingToolCall", () => DanglingToolCall.layer(), [
    { outside: "LLMErrorHandling", reason: "the history is repaired once per call, not once per retry" }
  ])

const llmErrorHandlingEntry = (c: AppConfig, breaker: LLMErrorHandling.CircuitBreaker | undefined) =>
  Chain.entry("LLMErrorHandling", () =>
    LLMErrorHandling.layer({
      llmCall: c.llm_call,
      circuitBreaker: c.circuit_breaker,
      breaker,
      attemptsByModel: LLMErrorHandling.attemptsByModel(c.models)
    }))

const guardrailEntry = (c: AppConfig, guardrail: Guardrail.Service | undefined) =>
  when(guardrail !== undefined, () =>
    Chain.entry("Guardrail", () =>
      GuardrailMW.layerWith(guardrail!, { failClosed: c.guardrails.fail_closed, passport: c.guardrails.passport }), [
      { outside: "SandboxAudit", reason: "a denied tool is never audited as if it ran" }
    ]))

const toolErrorHandlingEntry = (c: AppConfig, facts: ReadonlyArray<Chain.Fact> = []) =>
  Chain.entry("ToolErrorHandling", () =>
    ToolErrorHandling.layer({
      skillReadToolNames: c.summarization.skill_file_read_tool_names,
      skillsRoot: c.skills.container_path
    }), facts)

/** `whose`: whose words start the run (the user's; a subagent's task prompt's). */
const skillActivationEntry = (
  c: AppConfig,
  skills: Skills.Registry,
  allowlist: ReadonlyArray<string> | undefined,
  whose: string
) =>
  Chain.entry("SkillActivation", () =>
    SkillActivation.layer({ registry: skills, allowlist, describeTool: c.skills.deferred_discovery }), [
    { inside: "LLMErrorHandling", reason: "a retried call still carries the activated skill" },
    { inside: "InputSanitization", reason: `it reads ${whose} own words, kept by the sanitiser` }
  ])

const skillToolPolicyEntry = (skills: Skills.Registry, allowlist: ReadonlyArray<string> | undefined) =>
  Chain.entry("SkillToolPolicy", () => SkillToolPolicy.layer({ registry: skills, allowlist }), [
    { inside: "SkillActivation", reason: "the skill activated for the run decides the policy" },
    { inside: "ToolErrorHandling", reason: "its refusals still get tool metadata" }
  ])

/** The deferred tools, when there are any. */
const deferredOf = (options: { readonly deferred?: Deferred | undefined }): Deferred | undefined =>
  options.deferred !== undefined && options.deferred.tools.length > 0 ? options.deferred : undefined

const viewImageEntry = (vision: boolean | undefined) =>
  when(vision === true, () =>
    Chain.entry("ViewImage", () => ViewImage.layer(), [
      { inside: "LLMErrorHandling", reason: "a retried call still carries the images" }
    ]))

const mcpRoutingEntry = (c: AppConfig, deferred: Deferred | undefined) => {
  const routes = deferred?.routes ?? []
  return when(deferred !== undefined && routes.length > 0, () =>
    Chain.entry("McpRouting", () =>
      McpRouting.layer({
        routes,
        catalogHash: DeferredToolFilter.catalogHash(deferred!.tools),
        topK: deferred!.topK ?? c.tool_search.auto_promote_top_k
      }), [
      { outside: "DeferredToolFilter", reason: "promotions it writes before a call must be seen by that call's filter" }
    ]))
}

const deferredToolFilterEntry = (deferred: Deferred | undefined, facts: ReadonlyArray<Chain.Fact> = []) =>
  when(deferred !== undefined, () =>
    Chain.entry("DeferredToolFilter", () => DeferredToolFilter.layer({ deferred: deferred!.tools }), [
      { inside: "ToolErrorHandling", reason: "a refused call to a deferred tool is still a result with tool metadata" },
      { inside: "LLMErrorHandling", reason: "every attempt of a retried call sees the current promotions" },
      ...facts
    ]))

/** The lead agent's chain, outermost first (SPEC §4.1). */
export const chain = (options: ChainOptions): Chain.Chain => {
  const c = options.config
  const guardrail = options.guardrail
  const deferred = deferredOf(options)
  const skills = options.skills ?? noSkills
  const memory = options.memory
  return [
    // 1: sanitise the latest user input before any other wrapper or the model reads the request
    Chain.entry("InputSanitization", () => InputSanitization.layer(), [
      { first: true, reason: "the user's input is sanitised before any other wrapper or the model reads it" }
    ]),
    // 2: outermost tool wrap, so budgeting is the last transformation of every tool result
    Chain.entry("ToolOutputBudget", () => ToolOutputBudget.layer(c.tool_output), [
      { outside: "SandboxAudit", reason: "budgeting is the last transformation of every tool result" },
      { outside: "ToolErrorHandling", reason: "budgeting is the last transformation of every tool result" }
    ]),
    // 3: web tool results are neutralised (framework tags escaped) before the budget previews them
    Chain.entry("ToolResultSanitization", () => ToolResultSanitization.layer(), [
      { inside: "ToolOutputBudget", reason: "the budget previews and saves the neutralised text, as its last step" },
      { outside: "ToolErrorHandling", reason: "a web tool's failure, made a result there, carries page text too" }
    ]),
    // 4: before_agent: the thread's directories, and run id / timestamp on the new user message
    Chain.entry("ThreadData", () => ThreadData.layer()),
    // 5: before_agent, after ThreadData (it needs the uploads dir): the <current_uploads> block
    Chain.entry("Uploads", () => Uploads.layer(), [
      { inside: "ThreadData", reason: "the uploads block needs the thread's directories ThreadData records" }
    ]),
    // 6: lazy sandbox: records the id a tool acquired, releases it after the run
    sandboxEntry(),
    // 7: repairs dangling / orphan tool results in the request, outside the retry loop (done once per call)
    danglingToolCallEntry(),
    // 8: the retry loop and circuit breaker; everything inside is re-run per attempt
    llmErrorHandlingEntry(c, options.breaker),
    // 10: configured guardrail, before the audit so a denied tool is never audited as run
    ...guardrailEntry(c, guardrail),
    // 11: bash audit: blocks high-risk commands, warns on medium-risk ones
    Chain.entry("SandboxAudit", () => SandboxAudit.layer()),
    // 12: a write to an existing file runs only after a read of its current version (marks on read results)
    ...when(c.read_before_write.enabled, () =>
      Chain.entry("ReadBeforeWrite", () => ReadBeforeWrite.layer(), [
        { inside: "Sandbox", reason: "a sandbox it acquires to inspect a file is bound and released with the run's" },
        { inside: "Guardrail", reason: "a call the guardrail denies never has its file read" },
        { outside: "ToolProgress", reason: "a write it refuses never ran, so it never counts as the tool stagnating" }
      ])),
    // 13: per-(thread, tool) stagnation guard: hints, then blocks a tool that stopped producing anything new
    ...when(c.tool_progress.enabled, () =>
      Chain.entry("ToolProgress", () => ToolProgress.layer(c.tool_progress), [
        { outside: "ToolErrorHandling", reason: "it reads the deerflow_tool_meta ToolErrorHandling stamps on results" },
        { inside: "LLMErrorHandling", reason: "a retried request still carries the pending progress hints" }
      ])),
    // 14: turns tool failures into results the model can read; inner short-circuits still get metadata
    toolErrorHandlingEntry(c, [
      { outside: "Clarification", reason: "results of inner short-circuits (a question) still get tool metadata" }
    ]),
    // 15: before_agent: the date (and, first turn, memory) as hidden messages, never in the system prompt
    Chain.entry("DynamicContext", () =>
      DynamicContext.layer({
        timeZone: c.timezone ?? undefined,
        memory: memory?.enabled === true ? memory : undefined,
        injectMemory: c.memory.injection_enabled,
        agentName: options.agentName
      }), [
      { inside: "Uploads", reason: "the user's message is moved after the context with its uploads block" },
      { inside: "ThreadData", reason: "the user's message is moved after the context with its run stamp" }
    ]),
    // 16: a leading /<skill-name> puts that skill in every request of the run (inside the retries)
    skillActivationEntry(c, skills, options.skillAllowlist, "the user's"),
    // 17: an active skill's allowed-tools: the model is offered only those, other calls are refused
    skillToolPolicyEntry(skills, options.skillAllowlist),
    // 18: projects the summary and loaded skills into every request (request-only)
    Chain.entry("DurableContext", () => DurableContext.layer(), [
      { inside: "LLMErrorHandling", reason: "every attempt of a retried call carries the current summary" }
    ]),
    // 19: right inside DurableContext, so a request after a compaction carries the new summary
    Chain.entry("Summarization", () =>
      Summarization.layer(
        memory?.enabled === true
          ? { beforeCommit: MemoryMW.beforeCompaction({ memory, agentName: options.agentName }) }
          : {}
      ), [
      { inside: "DurableContext", reason: "a request made after a compaction must carry the new summary" }
    ]),
    // 20: plan mode: write_todos, and the list reminded when a compaction took it out of view
    ...when(options.planMode === true, () =>
      Chain.entry("Todo", () => Todo.layer(), [
        { inside: "Summarization", reason: "it checks whether the list is still in view after a compaction" }
      ])),
    // 21: after_model after the guards below, so it stamps the final form of the message
    Chain.entry("TokenUsage", () => TokenUsage.layer(c.token_usage), [
      { outside: "SafetyFinishReason", reason: "usage is stamped on the final form of the message" }
    ]),
    // 22: names the thread after its first exchange
    Chain.entry("Title", () => Title.layer(c.title)),
    // 23: after the run, the conversation goes to the app's memory queue (or memory tools, in tool mode)
    ...when(memory?.enabled === true, () =>
      Chain.entry("Memory", () => MemoryMW.layer({ memory: memory!, agentName: options.agentName }))),
    // 24: vision models: the images viewed reach the next request (inside the retries), then are cleared
    ...viewImageEntry(options.vision),
    // 25: promotes deferred MCP tools the user's words route to, before the filter reads the promotions
    ...mcpRoutingEntry(c, deferred),
    // 26: hides deferred MCP tools until tool_search promotes them, and refuses calls to hidden ones
    ...deferredToolFilterEntry(deferred, [
      { outside: "ClarificationMiddleware", reason: "a call to a hidden tool is refused before any tool runs" }
    ]),
    // 27: one leading system prompt for providers that accept only one
    Chain.entry("SystemMessageCoalescing", () => SystemMessageCoalescing.layer(), [
      { inside: "DurableContext", reason: "it merges the system messages the context middlewares add" }
    ]),
    // 28: cuts task calls to the limits after the guards inside it; contributes `task`
    ...when(options.subagents !== undefined, () =>
      Chain.entry("SubagentLimit", () => SubagentLimit.layer(options.subagents!), [
        { inside: "DurableContext", reason: "the delegation ledger records only the task calls the limit kept" },
        { inside: "ToolErrorHandling", reason: "a task that fails is answered with subagent_status failed" },
        { outside: "LoopDetection", reason: "a loop stop strips every tool call before the limit counts them" }
      ])),
    // 29: counts repeated tool calls after Safety stripped suppressed ones; warns, then stops
    Chain.entry("LoopDetection", () => LoopDetection.layer(c.loop_detection), [
      { inside: "LLMErrorHandling", reason: "a retried request still carries the pending loop warning" }
    ]),
    // 30: per-run token budget (off by default for the lead agent)
    Chain.entry("TokenBudget", () => TokenBudget.layer(c.token_budget), [
      { inside: "LLMErrorHandling", reason: "a retried request still carries the pending budget warning" }
    ]),
    // 33: an empty final answer after tool calls is asked again once per run, then ends the run as an error
    Chain.entry("TerminalResponse", () => TerminalResponse.layer(), [
      { inside: "LLMErrorHandling", reason: "a failed re-ask is retried, and the retry still carries the reminder" },
      { outside: "SafetyFinishReason", reason: "its after_model runs after Safety's: a safety notice is an answer" }
    ]),
    // 34: notes a response cut by the length limit (stop reason only)
    Chain.entry("ModelLengthFinishReason", () => ModelLengthFinishReason.layer()),
    // 35: innermost model guard: its after_model runs first and suppresses tool calls of a safety stop
    Chain.entry("SafetyFinishReason", () => SafetyFinishReason.layer({ config: c.safety_finish_reason }), [
      { inside: "LoopDetection", reason: "tool calls it suppresses must never be counted as repeats" },
      { inside: "TokenBudget", reason: "its after_model runs first, before the budget accounts the message" }
    ]),
    // 36: last, so every tool wrapper sees ask_clarification; the run then waits for the user
    Chain.entry("ClarificationMiddleware", () => ClarificationMW.layer(), [
      { last: true, reason: "every tool wrapper must see ask_clarification before the run stops to wait" }
    ])
  ]
}

/** What a subagent's chain is built from. */
export interface SubagentChainOptions {
  readonly config: AppConfig
  readonly guardrail?: Guardrail.Service | undefined
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
  /**
   * The subagent's token budget (slot 20); default: `subagents.token_budget` of the configuration, on unless
   * switched off, 1,000,000 tokens when summarization is on, else 2,000,000.
   */
  readonly tokenBudget?: TokenBudgetConfig | undefined
  /** The app's skills (slash activation in the task prompt, `allowed-tools`); by default none. */
  readonly skills?: Skills.Registry | undefined
  /** The skills the subagent may use (the parent's allowlist ∩ the type's); all when undefined. */
  readonly skillAllowlist?: ReadonlyArray<string> | undefined
  /** The subagent's model accepts images: viewed images reach it. */
  readonly vision?: boolean | undefined
  /** MCP tools deferred behind `tool_search` (none: no deferral). */
  readonly deferred?: Deferred | undefined
}

/**
 * The token budget of a subagent (SPEC §4.2 slot 20): on by default; `max_tokens` 1,000,000 when summarization
 * is on, else 2,000,000; warn at 70%, stop at 100%. `override` (`subagents.agents.<name>.token_budget`) wins
 * field by field over `subagents.token_budget`.
 */
export const subagentTokenBudget = (
  config: AppConfig,
  override?: AppConfig["subagents"]["token_budget"] | null | undefined
): TokenBudgetConfig => {
  const global = config.subagents.token_budget
  const pick = <K extends keyof typeof global>(key: K) => override?.[key] ?? global[key] ?? undefined
  return {
    enabled: pick("enabled") ?? true,
    max_tokens: pick("max_tokens") ?? (config.summarization.enabled ? 1_000_000 : 2_000_000),
    warn_threshold: pick("warn_threshold") ?? 0.7,
    hard_stop_threshold: pick("hard_stop_threshold") ?? 1.0
  }
}

/**
 * A subagent's chain (SPEC §4.2), outermost first: over the same middleware modules as the lead chain, without
 * the lead-only ones (uploads, memory and its date swap, todos, title, token usage, clarification, the subagent
 * limit: subagents cannot delegate), with its own token budget, a date-only reminder, and the system messages
 * coalesced innermost.
 */
export const subagentChain = (options: SubagentChainOptions): Chain.Chain => {
  const c = options.config
  const guardrail = options.guardrail
  const deferred = deferredOf(options)
  const skills = options.skills ?? noSkills
  return [
    // 1: the task prompt is framed as input before anything reads it
    Chain.entry("InputSanitization", () => InputSanitization.layer(), [
      { first: true, reason: "the task prompt is sanitised before any other wrapper or the model reads it" }
    ]),
    // 2: outermost tool wrap: budgeting is the last transformation of every tool result
    Chain.entry("ToolOutputBudget", () => ToolOutputBudget.layer(c.tool_output), [
      { outside: "SandboxAudit", reason: "budgeting is the last transformation of every tool result" },
      { outside: "ToolErrorHandling", reason: "budgeting is the last transformation of every tool result" }
    ]),
    // 4: the parent thread's directories (no uploads block for subagents)
    Chain.entry("ThreadData", () => ThreadData.layer()),
    // 5: the parent thread's sandbox, bound by the first tool that needs it
    sandboxEntry(),
    // 6: repairs the history once per call, outside the retry loop
    danglingToolCallEntry(),
    // 7: the retry loop and circuit breaker; everything inside is re-run per attempt
    llmErrorHandlingEntry(c, options.breaker),
    // 9: the configured guardrail applies to subagents too
    ...guardrailEntry(c, guardrail),
    // 10: bash audit
    Chain.entry("SandboxAudit", () => SandboxAudit.layer()),
    // 13: tool failures become results the subagent can read
    toolErrorHandlingEntry(c),
    // 14: a task prompt starting with /<skill-name> puts that skill in every request of the subagent's run
    skillActivationEntry(c, skills, options.skillAllowlist, "the task prompt's"),
    // 15: an active skill's allowed-tools limit the subagent's tools too
    skillToolPolicyEntry(skills, options.skillAllowlist),
    // 16: vision models: the images the subagent viewed reach its next request
    ...viewImageEntry(options.vision),
    // 17: promotes deferred MCP tools the task prompt routes to, before the filter reads the promotions
    ...mcpRoutingEntry(c, deferred),
    // 18: hides deferred MCP tools until tool_search promotes them
    ...deferredToolFilterEntry(deferred),
    // 19: a subagent that repeats itself is warned, then stopped (`loop_capped`)
    Chain.entry("LoopDetection", () => LoopDetection.layer(c.loop_detection), [
      { inside: "LLMErrorHandling", reason: "a retried request still carries the pending loop warning" }
    ]),
    // 20: the subagent's own token budget (on by default)
    Chain.entry("TokenBudget", () => TokenBudget.layer(options.tokenBudget ?? subagentTokenBudget(c)), [
      { inside: "LLMErrorHandling", reason: "a retried request still carries the pending budget warning" }
    ]),
    // 22: suppresses the tool calls of a safety stop before the loop and budget account the message
    Chain.entry("SafetyFinishReason", () => SafetyFinishReason.layer({ config: c.safety_finish_reason }), [
      { inside: "LoopDetection", reason: "tool calls it suppresses must never be counted as repeats" },
      { inside: "TokenBudget", reason: "its after_model runs first, before the budget accounts the message" }
    ]),
    // 23: the summary and loaded skills survive a compaction of a long subagent run
    Chain.entry("DurableContext", () => DurableContext.layer(), [
      { inside: "LLMErrorHandling", reason: "every attempt of a retried call carries the current summary" }
    ]),
    // 24: compacts with the subagent's own model
    Chain.entry("Summarization", () => Summarization.layer(), [
      { inside: "DurableContext", reason: "a request made after a compaction must carry the new summary" }
    ]),
    // 25: the date, alone, in one hidden reminder per subagent run (no memory)
    Chain.entry("SubagentDateContext", () => DynamicContext.subagentLayer({ timeZone: c.timezone ?? undefined }), [
      { inside: "ThreadData", reason: "the reminder follows the task prompt ThreadData stamped" }
    ]),
    // 26: innermost: one leading system prompt
    Chain.entry("SystemMessageCoalescing", () => SystemMessageCoalescing.layer(), [
      { inside: "DurableContext", reason: "it merges the system messages the context middlewares add" },
      { last: true, reason: "it merges every system message the wrappers outside it add" }
    ])
  ]
}

/** The names of the lead agent's chain for a configuration, outermost first. */
export const order = (options: ChainOptions): ReadonlyArray<string> => Chain.names(chain(options))

// ---------------------------------------------------------------------------------------------------------
// The agent as a service

/** One turn of a thread. */
export interface TurnInput {
  /** The thread; a new one when absent (its id is in the `run_start` event). */
  readonly threadId?: string | undefined
  readonly runId?: string | undefined
  readonly userId?: string | undefined
  /**
   * What the user says. When the thread waits for an answer to a clarification question, this is the answer
   * (an option's number or label picks that option).
   */
  readonly prompt?: string | undefined
  /** Messages to add instead of (or after) `prompt`. */
  readonly messages?: ReadonlyArray<Message> | undefined
  /** Files uploaded with this message (`additional_kwargs.files`, read by the Uploads middleware). */
  readonly files?: ReadonlyArray<unknown> | undefined
  /** Run options: the model name to route to, recursion limit, non-interactive, ... */
  readonly options?: Partial<RunOptions> | undefined
}

/** The lead agent, built once: its runs share its middleware chain, tools and system prompt. */
export interface Service {
  /** The chain's entry names, outermost first. */
  readonly order: ReadonlyArray<string>
  /** The static system prompt every request starts with. */
  readonly systemPrompt: string
  /** The tools the agent has (before per-call filtering by middlewares). */
  readonly tools: ReadonlyArray<ToolDefinition>
  /** Runs one turn as a stream of events ending with `run_end`; stopping the stream cancels the run. */
  readonly run: (input: TurnInput) => Stream.Stream<RunEvent>
  /** Runs one turn to its end, sending each event to `onEvent`. */
  readonly turn: (input: TurnInput, onEvent?: (event: RunEvent) => void) => Effect.Effect<RunEndEvent>
}

/** The lead agent service. */
export class LeadAgent extends Context.Tag("antler/LeadAgent")<LeadAgent, Service>() {}

/** Options of `layer`. */
export interface Options {
  /** The app's own tools, added after the sandbox tools (a tool of the same name replaces a sandbox tool). */
  readonly tools?: ReadonlyArray<Tool.Tool> | undefined
  /** Whether the sandbox's file and bash tools are offered (default true). */
  readonly sandboxTools?: boolean | undefined
  /** Whether the model accepts images: `view_image` is offered only then (default false). */
  readonly vision?: boolean | undefined
  /** The system prompt; default: the configuration's (skills found under `skills.path`, clarification on). */
  readonly systemPrompt?: string | undefined
  /**
   * Changes the chain before it is built: insert your own middleware at a named position, replace or drop an
   * entry (`Chain.insert`, `Chain.replace`, `Chain.drop`). The result is checked against every entry's facts.
   */
  readonly chain?: ((chain: Chain.Chain) => Either.Either<Chain.Chain, Chain.ChainError>) | undefined
  /** A circuit breaker shared with other agents of the app. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
  /** Tools among `tools` to defer behind `tool_search` (MCP tools when `tool_search.enabled`). */
  readonly deferred?: Deferred | undefined
  /** Plan mode: the agent keeps a todo list with `write_todos` (default false). */
  readonly planMode?: boolean | undefined
  /** A custom agent's name: the prompt's name and the agent's own memory (default: the default agent). */
  readonly agentName?: string | undefined
  /** The agent's personality (SOUL.md text); default: `SOUL.md` in the data directory, for the default agent. */
  readonly soul?: string | undefined
  /** The skills this agent may use (a custom agent's list); default: every enabled skill. */
  readonly skills?: ReadonlyArray<string> | undefined
  /** A custom agent that may change itself: `<self_update>` in its prompt (it needs `update_agent` in `tools`). */
  readonly selfUpdate?: boolean | undefined
  /**
   * Subagents: the `task` tool, SubagentLimit and the prompt's subagent section. Needs a `SubagentRunner` in
   * the context (`Subagents.layer()`, one per app). `toolGroups` are the agent's tool groups, passed on to its
   * subagents (undefined: all).
   */
  readonly subagents?: {
    readonly maxConcurrent?: number | undefined
    readonly maxTotal?: number | undefined
    readonly toolGroups?: ReadonlyArray<string> | undefined
  } | undefined
}

/** The guardrail provider of a configuration: none when guardrails are off; a config error when unusable. */
export const guardrailOf = (
  config: AppConfig
): Either.Either<Guardrail.Service | undefined, Guardrail.GuardrailConfigError> => {
  if (!config.guardrails.enabled) return Either.right(undefined)
  return Either.flatMap(AllowlistGuardrail.fromConfig(config.guardrails), (guardrail) =>
    guardrail === undefined
      ? Either.left(
        new Guardrail.GuardrailConfigError({
          reason: "unknown_provider",
          use: "",
          message: "guardrails.enabled is true but no guardrails.provider is set (e.g. use: allowlist)"
        })
      )
      : Either.right(guardrail))
}

/**
 * The default agent's personality: `SOUL.md` in the data directory, when there is one. One that is not a regular
 * file, or larger than `CustomAgents.MAX_SOUL_BYTES`, or unreadable, is a `ConfigError` naming it: the agent is
 * not run without the personality its user gave it.
 */
export const defaultSoul = (app: AppConfigService["Type"]): Effect.Effect<string | undefined, ConfigError> =>
  Effect.suspend(() => {
    const read = TextFile.read(CustomAgents.globalSoulPath(app.home), CustomAgents.MAX_SOUL_BYTES)
    if (Either.isLeft(read)) {
      return read.left.reason === "missing" ? Effect.succeed(undefined) : Effect.fail(fromTextFileError(read.left))
    }
    return Effect.succeed(read.right.trim() === "" ? undefined : read.right)
  })

/** What the prompt of an agent is made from, besides the configuration and the skills catalog. */
export interface PromptInputs {
  /** The names of the agent's tools (sections about other tools are left out). */
  readonly tools?: ReadonlyArray<string> | undefined
  readonly agentName?: string | undefined
  readonly soul?: string | undefined
  readonly skillAllowlist?: ReadonlyArray<string> | undefined
  /** Whether someone can answer clarification questions (default true). */
  readonly clarification?: boolean | undefined
  /** Tools deferred behind `tool_search` and their routing hints. */
  readonly deferred?: Deferred | undefined
  /** A custom agent that may change itself (`<self_update>`). */
  readonly selfUpdate?: boolean | undefined
  /** The subagent section: limits and subagent types (shown only when the agent has `task`). */
  readonly subagents?: SystemPrompt.Subagents | undefined
}

/** The prompt options of an agent: its configuration's skills (enabled, allowlisted; disabled ones listed). */
export const promptOptions = (
  config: AppConfig,
  catalog: Skills.Catalog,
  inputs: PromptInputs = {}
): SystemPrompt.PromptOptions => {
  const allowed = (name: string) => inputs.skillAllowlist === undefined || inputs.skillAllowlist.includes(name)
  const tools = inputs.tools
  return {
    agentName: inputs.agentName,
    soul: inputs.soul,
    selfUpdate: inputs.selfUpdate,
    clarification: inputs.clarification ?? true,
    tools,
    skills: catalog.skills.filter((s) => s.enabled && allowed(s.name)).map((s) => ({
      name: s.name,
      description: s.description,
      location: s.location,
      category: s.category
    })),
    disabledSkills: catalog.skills.filter((s) => !s.enabled && allowed(s.name)).map((s) => ({
      name: s.name,
      category: s.category
    })),
    skillsContainer: config.skills.container_path,
    skillDiscovery: config.skills.deferred_discovery ? "deferred" : "full",
    memoryTools: config.memory.enabled && config.memory.mode === "tool",
    deferredTools: inputs.deferred?.tools.map((t) => t.name),
    mcpRoutingHints: inputs.deferred?.routes?.map((r) => ({
      tool: r.name,
      keywords: r.keywords,
      priority: r.priority,
      deferred: true
    })),
    subagents: inputs.subagents
  }
}

/** The static system prompt of a configuration (its skills as found now, the sandbox tools, clarification on). */
export const defaultSystemPrompt = (
  app: AppConfigService["Type"],
  inputs: PromptInputs = {}
): Effect.Effect<string, ConfigError> =>
  Effect.map(defaultSoul(app), (soul) =>
    SystemPrompt.make(promptOptions(app.config, SkillsDirectory.catalogOf(app), { soul, ...inputs })))

/**
 * Logs, once per agent built, each skill the agent goes without or gets cut: a SKILL.md that was rejected (too
 * large, not a regular file, bad front matter), a description cut to its limit, a problem with the skill
 * states, and skills left out of a full skills section. A broken skill costs the agent that skill, nothing more.
 */
const warnAboutSkills = (catalog: Skills.Catalog, leftOut: ReadonlyArray<string>) =>
  Effect.forEach([
    ...catalog.rejected.map((r) => `skill skipped: ${r.file}: ${r.problem}`),
    ...catalog.warnings.map((w) => `skills: ${w}`),
    ...(leftOut.length === 0 ? [] : [
      `skills: the prompt's skills section is full (${SystemPrompt.MAX_SKILL_ENTRIES_CHARS} characters): ` +
      `${leftOut.length} skill${leftOut.length === 1 ? " is" : "s are"} not listed ` +
      `(${leftOut.slice(0, 10).join(", ")}${leftOut.length > 10 ? ", ..." : ""})`
    ])
  ], (line) => Effect.logWarning(line), { discard: true })

/**
 * The human message of a turn: an answer to the thread's pending clarification question when there is one
 * (marked so the model and the UI know what it answers), else a plain human message.
 */
export const inputMessage = (state: ThreadState, prompt: string): Message => {
  const pending = ClarificationMW.pending(state.messages)
  return pending !== undefined ? ClarificationMW.answer(pending, prompt) : M.human(prompt)
}

const turnMessages = (input: TurnInput) => (state: ThreadState): ReadonlyArray<Message> => {
  const out: Array<Message> = []
  if (input.prompt !== undefined) {
    const message = inputMessage(state, input.prompt)
    out.push(
      input.files === undefined || input.files.length === 0
        ? message
        : M.withKwargs(message, { files: input.files })
    )
  }
  if (input.messages !== undefined) out.push(...input.messages)
  return out
}

/** What building the agent can fail with: a chain that breaks an ordering fact, or an unusable configuration. */
export type BuildError =
  | ConfigError
  | Chain.ChainError
  | Guardrail.GuardrailConfigError
  | SafetyFinishReason.SafetyDetectorConfigError
  | SubagentRunnerMissing

/** What the agent needs from the app. */
export type Requirements = ModelService | ThreadStore | SandboxProvider | AppConfigService

/**
 * The lead agent as a layer: its chain is built once, over the app's `ModelService` with the sandbox tools and
 * the app's own tools; the store, the sandbox provider and the configuration come from the app. Skills come
 * from the configuration's skills directory. Long-term memory is on when the app also provides `Memory`
 * (one per app, e.g. `FileMemory.layer()`, as `App.factoryLayer` does); without it the agent has no memory.
 */
export const layer = (options: Options = {}): Layer.Layer<LeadAgent, BuildError, Requirements> =>
  Layer.scoped(
    LeadAgent,
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const store = yield* ThreadStore
      const guardrail = yield* guardrailOf(app.config)
      const memory = Option.getOrUndefined(yield* Effect.serviceOption(Memory))
      const registry = SkillsDirectory.make(app)
      const catalog = SkillsDirectory.catalogOf(app)
      const base = options.sandboxTools === false ? [] : yield* SandboxTools.tools({ vision: options.vision === true })
      const tools = Toolkit.make([
        ...base.filter((t) => !(options.tools ?? []).some((own) => own.name === t.name)),
        ...(options.tools ?? [])
      ])
      const runner = options.subagents === undefined ? undefined : yield* Effect.flatMap(
        Effect.serviceOption(SubagentRunner),
        (found) =>
          Option.isSome(found) ? Effect.succeed(found.value) : Effect.fail(
            new SubagentRunnerMissing({
              message: "Subagents are enabled but the app provides no SubagentRunner: provide Subagents.layer() " +
                "(one per app) under the lead agent's layer"
            })
          )
      )
      const subagents = options.subagents === undefined || runner === undefined ? undefined : {
        runner,
        maxConcurrent: options.subagents.maxConcurrent,
        maxTotal: options.subagents.maxTotal,
        toolGroups: options.subagents.toolGroups,
        skills: options.skills
      }
      const planned = chain({
        config: app.config,
        guardrail,
        breaker: options.breaker,
        skills: registry,
        skillAllowlist: options.skills,
        memory,
        planMode: options.planMode,
        vision: options.vision,
        agentName: options.agentName,
        deferred: options.deferred,
        subagents
      })
      const customised = options.chain === undefined ? Either.right(planned) : options.chain(planned)
      const checked = yield* Either.flatMap(customised, Chain.validate)
      const ports: Context.Context<Ports> = yield* Layer.build(
        MW.stack(checked.map((e) => e.make()), MW.baseOverModel(tools))
      )
      // the runtime's short-lived shapes stay known to V8 between runs (see Shapes)
      yield* Shapes.keep
      const definitions = Context.get(ports, ToolService).definitions
      const prompted = promptOptions(app.config, catalog, {
        tools: definitions.map((d) => d.name),
        agentName: options.agentName,
        soul: options.soul ?? (options.agentName === undefined ? yield* defaultSoul(app) : undefined),
        selfUpdate: options.selfUpdate,
        skillAllowlist: options.skills,
        deferred: options.deferred,
        subagents: subagents === undefined ? undefined : {
          maxConcurrent: subagents.maxConcurrent ?? 3,
          maxTotal: subagents.maxTotal ?? 6,
          types: subagents.runner.types
        }
      })
      const systemPrompt = options.systemPrompt ?? SystemPrompt.make(prompted)
      yield* warnAboutSkills(catalog, options.systemPrompt === undefined ? SystemPrompt.skillsLeftOut(prompted) : [])

      const runInput = (input: TurnInput): Run.RunInput => ({
        threadId: input.threadId ?? M.newId(),
        runId: input.runId,
        userId: input.userId,
        input: turnMessages(input),
        systemPrompt,
        options: { recursionLimit: app.config.recursion_limit, ...input.options }
      })
      return LeadAgent.of({
        order: Chain.names(checked),
        systemPrompt,
        tools: definitions,
        run: (input) => Run.stream(runInput(input), ports).pipe(Stream.provideService(ThreadStore, store)),
        turn: (input, onEvent) =>
          Run.execute(runInput(input), ports, onEvent).pipe(Effect.provideService(ThreadStore, store))
      })
    })
  )
