/**
 * The lead agent's and a subagent's middleware orders, in one place: two lists of entry names, outermost first,
 * each with the configuration switch that puts it in the chain. The entries themselves, with their ordering facts
 * and why each stands where it does, are exported by the middleware modules (`entry`); the first entry is the
 * outermost wrapper: its `before` work runs first and its `after` work last (SPEC-deerflow §4.1). Numbers are
 * DeerFlow's slots (§4.1, §4.2); slots Antler does not have yet are left out (see README, "Status").
 */
import * as Effect from "effect/Effect"
import * as ConfiguredGuardrail from "../layers/ConfiguredGuardrail.js"
import * as AuthorizationMW from "../middleware/Authorization.js"
import * as Chain from "../middleware/Chain.js"
import * as Clarification from "../middleware/Clarification.js"
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
import type * as Authorization from "../services/Authorization.js"
import * as Guardrail from "../services/Guardrail.js"
import type { Memory } from "../services/Memory.js"
import type { ToolDefinition } from "../services/ModelService.js"
import type * as Skills from "../services/Skills.js"

/** Tools deferred behind `tool_search` (SPEC §5.24, §5.25, §7.14). */
export interface Deferred {
  /** The deferred tools' definitions (the tools themselves are among the agent's tools). */
  readonly tools: ReadonlyArray<ToolDefinition>
  /** Routing keywords of deferred tools (`mode: prefer`), for McpRouting and the prompt's hints. */
  readonly routes?: ReadonlyArray<McpRouting.Route> | undefined
  /** `tool_search.auto_promote_top_k`. */
  readonly topK?: number | undefined
}

/** What either chain is built from. App-level pieces (breaker, guardrail) are shared by the app's runs. */
interface CommonChainOptions {
  readonly config: AppConfig
  /** The configured guardrail provider; none when guardrails are off. */
  readonly guardrail?: Guardrail.Service | undefined
  /** Role-based permissions (`authorization.enabled`); none when off. */
  readonly authorization?: Authorization.Authorization | undefined
  /** The MCP server of each MCP tool, for the role's `mcp_servers` policy. */
  readonly mcpServers?: Authorization.McpServers | undefined
  /** A circuit breaker to share with other agents of the app; by default the agent has its own. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
  /** MCP tools deferred behind `tool_search` (none: no deferral). */
  readonly deferred?: Deferred | undefined
  /** The app's skills (slash activation, in a subagent's task prompt too; `allowed-tools`); by default none. */
  readonly skills?: Skills.Registry | undefined
  /** The skills this agent may use (a custom agent's list; a subagent's: its parent's ∩ its type's); all: none set. */
  readonly skillAllowlist?: ReadonlyArray<string> | undefined
  /** How many skills this agent may use, when known: with none, `describe_skill` is not offered. */
  readonly usableSkills?: number | undefined
  /** The model accepts images: viewed images reach it. */
  readonly vision?: boolean | undefined
  /** The app's configured middlewares (`ConfiguredMiddlewares`), in order; by default none. */
  readonly configured?: ReadonlyArray<Chain.Entry> | undefined
  /** SafetyFinishReason's detectors, when the configuration names detector modules (`SafetyDetectorModules`). */
  readonly safetyDetectors?: ReadonlyArray<SafetyFinishReason.Detector> | undefined
}

/** What the lead agent's chain is built from. */
export interface ChainOptions extends CommonChainOptions {
  /** The app's long-term memory; none: no memory. */
  readonly memory?: Memory["Type"] | undefined
  /** Plan mode: the todo list (`write_todos`). */
  readonly planMode?: boolean | undefined
  /** A custom agent's name (its own memory). */
  readonly agentName?: string | undefined
  /** Subagents enabled: the `task` tool and its limits (SubagentLimit, slot 28). */
  readonly subagents?: SubagentLimit.Options | undefined
  /** The app's before-summarisation hooks, run in this order after memory's flush (see `Summarization.Hook`). */
  readonly summarizationHooks?: ReadonlyArray<Summarization.Hook> | undefined
}

/** What a subagent's chain is built from. */
export interface SubagentChainOptions extends CommonChainOptions {
  /**
   * The subagent's token budget (slot 20); default: `subagents.token_budget` of the configuration, on unless
   * switched off, 1,000,000 tokens when summarization is on, else 2,000,000.
   */
  readonly tokenBudget?: TokenBudgetConfig | undefined
}

/** Everything an entry of either chain is made from, resolved from the options. */
export interface Parts {
  readonly config: AppConfig
  readonly guardrail: Guardrail.Service | undefined
  readonly authorization: Authorization.Authorization | undefined
  readonly mcpServers: Authorization.McpServers | undefined
  readonly breaker: LLMErrorHandling.CircuitBreaker | undefined
  /** SafetyFinishReason's loaded detectors; undefined: the configuration's built-ins. */
  readonly safetyDetectors: ReadonlyArray<SafetyFinishReason.Detector> | undefined
  /** The deferred tools, when there are any. */
  readonly deferred: Deferred | undefined
  readonly skills: Skills.Registry
  readonly skillAllowlist: ReadonlyArray<string> | undefined
  /**
   * `describe_skill` is offered (deferred skill discovery, and a skill to describe; DeerFlow's
   * build_skill_search_setup offers no tool for none).
   */
  readonly describeSkills: boolean
  /** The app's memory, when it is enabled. */
  readonly memory: Memory["Type"] | undefined
  readonly planMode: boolean
  readonly vision: boolean
  readonly agentName: string | undefined
  readonly subagents: SubagentLimit.Options | undefined
  /** Before-summarisation hooks of the app (after memory's flush). */
  readonly summarizationHooks: ReadonlyArray<Summarization.Hook>
  readonly tokenBudget: TokenBudgetConfig
  /** A subagent's chain: its system messages are coalesced innermost (SPEC §4.2). */
  readonly subagent: boolean
  /** The app's configured middlewares, in order. */
  readonly configured: ReadonlyArray<Chain.Entry>
}

/** The entry of each name, made from the parts. */
const entries = {
  InputSanitization: () => InputSanitization.entry(),
  ToolOutputBudget: (p: Parts) => ToolOutputBudget.entry(p.config.tool_output),
  ToolResultSanitization: () => ToolResultSanitization.entry(),
  ThreadData: () => ThreadData.entry(),
  Uploads: () => Uploads.entry(),
  Sandbox: () => SandboxMW.entry(),
  DanglingToolCall: () => DanglingToolCall.entry(),
  LLMErrorHandling: (p: Parts) =>
    LLMErrorHandling.entry({
      llmCall: p.config.llm_call,
      circuitBreaker: p.config.circuit_breaker,
      breaker: p.breaker,
      attemptsByModel: LLMErrorHandling.attemptsByModel(p.config.models)
    }),
  Authorization: (p: Parts) =>
    AuthorizationMW.entry(p.authorization!, { mcpServers: p.mcpServers, skills: p.skills }),
  Guardrail: (p: Parts) =>
    GuardrailMW.entry(p.guardrail!, {
      failClosed: p.config.guardrails.fail_closed,
      passport: p.config.guardrails.passport
    }),
  SandboxAudit: () => SandboxAudit.entry(),
  ReadBeforeWrite: () => ReadBeforeWrite.entry(),
  ToolProgress: (p: Parts) => ToolProgress.entry(p.config.tool_progress),
  ToolErrorHandling: (p: Parts) =>
    ToolErrorHandling.entry({
      skillReadToolNames: p.config.summarization.skill_file_read_tool_names,
      skillsRoot: p.config.skills.container_path
    }),
  DynamicContext: (p: Parts) =>
    DynamicContext.entry({
      timeZone: p.config.timezone ?? undefined,
      memory: p.memory,
      injectMemory: p.config.memory.injection_enabled,
      agentName: p.agentName
    }),
  SkillActivation: (p: Parts) =>
    SkillActivation.entry({
      registry: p.skills,
      allowlist: p.skillAllowlist,
      describeTool: p.describeSkills,
      subagent: p.subagent
    }),
  SkillToolPolicy: (p: Parts) => SkillToolPolicy.entry({ registry: p.skills, allowlist: p.skillAllowlist }),
  DurableContext: (p: Parts) =>
    DurableContext.entry({
      skillsRoot: p.config.skills.container_path,
      skillReadToolNames: p.config.summarization.skill_file_read_tool_names
    }),
  Summarization: (p: Parts) =>
    Summarization.entry({
      // memory's flush first, then the app's own hooks, in the order given
      hooks: [
        ...(p.memory === undefined ? [] : [
          MemoryMW.beforeCompaction({ memory: p.memory, agentName: p.agentName, authorization: p.authorization })
        ]),
        ...p.summarizationHooks
      ],
      agentName: p.agentName,
      authorization: p.authorization
    }),
  Todo: () => Todo.entry(),
  TokenUsage: (p: Parts) => TokenUsage.entry(p.config.token_usage, p.config.run_events.track_token_usage),
  Title: (p: Parts) => Title.entry(p.config.title, p.authorization),
  Memory: (p: Parts) => MemoryMW.entry({ memory: p.memory!, agentName: p.agentName, authorization: p.authorization }),
  ViewImage: () => ViewImage.entry(),
  McpRouting: (p: Parts) =>
    McpRouting.entry({
      routes: p.deferred!.routes!,
      catalogHash: DeferredToolFilter.catalogHash(p.deferred!.tools),
      topK: p.deferred!.topK ?? p.config.tool_search.auto_promote_top_k
    }),
  DeferredToolFilter: (p: Parts) => DeferredToolFilter.entry({ deferred: p.deferred!.tools }),
  SystemMessageCoalescing: (p: Parts) => SystemMessageCoalescing.entry({ innermost: p.subagent }),
  SubagentLimit: (p: Parts) => SubagentLimit.entry(p.subagents!),
  LoopDetection: (p: Parts) => LoopDetection.entry(p.config.loop_detection),
  TokenBudget: (p: Parts) => TokenBudget.entry(p.tokenBudget),
  TerminalResponse: () => TerminalResponse.entry(),
  ModelLengthFinishReason: () => ModelLengthFinishReason.entry(),
  SafetyFinishReason: (p: Parts) =>
    SafetyFinishReason.entry({ config: p.config.safety_finish_reason, detectors: p.safetyDetectors }),
  ClarificationMiddleware: () => Clarification.entry(),
  SubagentDateContext: (p: Parts) => DynamicContext.subagentEntry({ timeZone: p.config.timezone ?? undefined })
} satisfies Record<string, (parts: Parts) => Chain.Entry>

/** The name of an entry of the lead or the subagent chain. */
export type Name = keyof typeof entries

/** A place in an order: an entry's name and, for an optional entry, when it is in the chain. */
export interface Item {
  readonly name: Name
  readonly when?: ((parts: Parts) => boolean) | undefined
}

const routed = (p: Parts) => (p.deferred?.routes ?? []).length > 0
// An entry its configuration switches off is left out, as DeerFlow does, rather than standing as a pass-through.
const summarizing = (p: Parts) => p.config.summarization.enabled
const loopDetecting = (p: Parts) => p.config.loop_detection.enabled
const budgeted = (p: Parts) => p.tokenBudget.enabled
const safetyChecked = (p: Parts) => p.config.safety_finish_reason.enabled
const readBeforeWrite = (p: Parts) => p.config.read_before_write.enabled
const toolProgress = (p: Parts) => p.config.tool_progress.enabled

/** The lead agent's order, outermost first (SPEC §4.1), with DeerFlow's slot numbers. */
export const leadOrder: ReadonlyArray<Item> = [
  { name: "InputSanitization" }, // 1
  { name: "ToolOutputBudget" }, // 2
  { name: "ToolResultSanitization" }, // 3
  { name: "ThreadData" }, // 4
  { name: "Uploads" }, // 5
  { name: "Sandbox" }, // 6
  { name: "DanglingToolCall" }, // 7
  { name: "LLMErrorHandling" }, // 8
  { name: "Authorization", when: (p) => p.authorization !== undefined }, // 9
  { name: "Guardrail", when: (p) => p.guardrail !== undefined }, // 10
  { name: "SandboxAudit" }, // 11
  { name: "ReadBeforeWrite", when: readBeforeWrite }, // 12
  { name: "ToolProgress", when: toolProgress }, // 13
  { name: "ToolErrorHandling" }, // 14
  { name: "DynamicContext" }, // 15
  { name: "SkillActivation" }, // 16
  { name: "SkillToolPolicy" }, // 17
  { name: "DurableContext" }, // 18
  { name: "Summarization", when: summarizing }, // 19
  { name: "Todo", when: (p) => p.planMode }, // 20
  { name: "TokenUsage", when: (p) => p.config.token_usage.enabled }, // 21
  { name: "Title" }, // 22
  { name: "Memory", when: (p) => p.memory !== undefined }, // 23
  { name: "ViewImage", when: (p) => p.vision }, // 24
  { name: "McpRouting", when: routed }, // 25
  { name: "DeferredToolFilter", when: (p) => p.deferred !== undefined }, // 26
  { name: "SystemMessageCoalescing" }, // 27
  { name: "SubagentLimit", when: (p) => p.subagents !== undefined }, // 28
  { name: "LoopDetection", when: loopDetecting }, // 29
  { name: "TokenBudget", when: budgeted }, // 30
  { name: "TerminalResponse" }, // 33
  { name: "ModelLengthFinishReason" }, // 34
  { name: "SafetyFinishReason", when: safetyChecked }, // 35
  { name: "ClarificationMiddleware" } // 36
]

/**
 * A subagent's order, outermost first (SPEC §4.2): the lead chain's entries without the lead-only ones (uploads,
 * memory and its date swap, todos, title, token usage, clarification, the subagent limit: subagents cannot
 * delegate), with its own token budget, a date-only reminder, and the system messages coalesced innermost.
 */
export const subagentOrder: ReadonlyArray<Item> = [
  { name: "InputSanitization" }, // 1
  { name: "ToolOutputBudget" }, // 2
  { name: "ToolResultSanitization" }, // 3
  { name: "ThreadData" }, // 4
  { name: "Sandbox" }, // 5
  { name: "DanglingToolCall" }, // 6
  { name: "LLMErrorHandling" }, // 7
  { name: "Authorization", when: (p) => p.authorization !== undefined }, // 8
  { name: "Guardrail", when: (p) => p.guardrail !== undefined }, // 9
  { name: "SandboxAudit" }, // 10
  { name: "ReadBeforeWrite", when: readBeforeWrite }, // 11
  { name: "ToolProgress", when: toolProgress }, // 12
  { name: "ToolErrorHandling" }, // 13
  { name: "SkillActivation" }, // 14
  { name: "SkillToolPolicy" }, // 15
  { name: "ViewImage", when: (p) => p.vision }, // 16
  { name: "McpRouting", when: routed }, // 17
  { name: "DeferredToolFilter", when: (p) => p.deferred !== undefined }, // 18
  { name: "LoopDetection", when: loopDetecting }, // 19
  { name: "TokenBudget", when: budgeted }, // 20
  { name: "SafetyFinishReason", when: safetyChecked }, // 22
  { name: "DurableContext" }, // 23
  { name: "Summarization", when: summarizing }, // 24
  { name: "SubagentDateContext" }, // 25
  { name: "SystemMessageCoalescing" } // 26
]

/**
 * Where the configured middlewares stand in both orders: after TokenBudget's place (switched on or not), where
 * DeerFlow puts them (lead slot 32, before the terminal-response and safety tail; a subagent's, before
 * SafetyFinishReason).
 */
const CONFIGURED_AFTER: Name = "TokenBudget"

/**
 * The chain of an order for these parts: the entries whose switch is on, outermost first, with the configured
 * middlewares at their place.
 */
export const build = (order: ReadonlyArray<Item>, parts: Parts): Chain.Chain => {
  const out: Array<Chain.Entry> = []
  for (const item of order) {
    if (item.when === undefined || item.when(parts)) out.push(entries[item.name](parts))
    if (item.name === CONFIGURED_AFTER) out.push(...parts.configured)
  }
  return out
}

const noSkills = (config: AppConfig): Skills.Registry => ({
  catalog: Effect.sync(() => ({
    root: undefined,
    container: config.skills.container_path,
    skills: [],
    rejected: [],
    shadowed: [],
    warnings: []
  })),
  read: () => Effect.die(new Error("no skills"))
})

/** The deferred tools, when there are any. */
const deferredOf = (options: { readonly deferred?: Deferred | undefined }): Deferred | undefined =>
  options.deferred !== undefined && options.deferred.tools.length > 0 ? options.deferred : undefined

/** Whether `describe_skill` is offered: deferred skill discovery, and a skill to describe (when that is known). */
const describeSkills = (
  options: { readonly config: AppConfig; readonly usableSkills?: number | undefined }
): boolean =>
  options.config.skills.deferred_discovery && (options.usableSkills === undefined || options.usableSkills > 0)

/** The parts of the lead agent's chain. */
export const leadParts = (options: ChainOptions): Parts => ({
  config: options.config,
  guardrail: options.guardrail,
  authorization: options.authorization,
  mcpServers: options.mcpServers,
  breaker: options.breaker,
  safetyDetectors: options.safetyDetectors,
  deferred: deferredOf(options),
  skills: options.skills ?? noSkills(options.config),
  skillAllowlist: options.skillAllowlist,
  describeSkills: describeSkills(options),
  memory: options.memory?.enabled === true ? options.memory : undefined,
  planMode: options.planMode === true,
  vision: options.vision === true,
  agentName: options.agentName,
  subagents: options.subagents,
  summarizationHooks: options.summarizationHooks ?? [],
  tokenBudget: options.config.token_budget,
  subagent: false,
  configured: options.configured ?? []
})

/** The parts of a subagent's chain. */
export const subagentParts = (options: SubagentChainOptions): Parts => ({
  config: options.config,
  guardrail: options.guardrail,
  authorization: options.authorization,
  mcpServers: options.mcpServers,
  breaker: options.breaker,
  safetyDetectors: options.safetyDetectors,
  deferred: deferredOf(options),
  skills: options.skills ?? noSkills(options.config),
  skillAllowlist: options.skillAllowlist,
  describeSkills: describeSkills(options),
  memory: undefined,
  planMode: false,
  vision: options.vision === true,
  agentName: undefined,
  subagents: undefined,
  summarizationHooks: [],
  tokenBudget: options.tokenBudget ?? subagentTokenBudget(options.config),
  subagent: true,
  configured: options.configured ?? []
})

/** The lead agent's chain, outermost first (SPEC §4.1). */
export const chain = (options: ChainOptions): Chain.Chain => build(leadOrder, leadParts(options))

/** A subagent's chain, outermost first (SPEC §4.2). */
export const subagentChain = (options: SubagentChainOptions): Chain.Chain =>
  build(subagentOrder, subagentParts(options))

/** The names of the lead agent's chain for a configuration, outermost first. */
export const order = (options: ChainOptions): ReadonlyArray<string> => Chain.names(chain(options))

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
 * The guardrail provider of a configuration: none when guardrails are off; a config error when unusable. A
 * provider module (`guardrails.provider.use: ./x.mjs:X`) is read from `baseDir`, the folder of `config.yaml`.
 */
export const guardrailOf = (
  config: AppConfig,
  baseDir: string = process.cwd()
): Effect.Effect<Guardrail.Service | undefined, Guardrail.GuardrailConfigError> => {
  if (!config.guardrails.enabled) return Effect.succeed(undefined)
  return Effect.flatMap(ConfiguredGuardrail.fromConfig(config.guardrails, baseDir), (guardrail) =>
    guardrail === undefined
      ? Effect.fail(
        new Guardrail.GuardrailConfigError({
          reason: "unknown_provider",
          use: "",
          message: "guardrails.enabled is true but no guardrails.provider is set (e.g. use: allowlist)"
        })
      )
      : Effect.succeed(guardrail))
}
