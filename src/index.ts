/**
 * Antler: DeerFlow's lead agent for Effect applications. Every module is a namespace, as in Effect itself:
 *
 * ```ts
 * import { LeadAgent, OpenAiModel, MemoryThreadStore, LocalSandbox, AppConfig } from "antler"
 * ```
 *
 * The agent is a service: provide `LeadAgent.layer(options)` over a `ModelService`, a `ThreadStore`, a
 * `SandboxProvider` and the `AppConfigService`, then `run` (a `Stream` of events) or `turn` (its end).
 *
 * This entry loads only what an agent needs: the gateway is at "antler/gateway", the PostgreSQL store at
 * "antler/PgThreadStore", and the libraries of optional features (document conversion, MCP, tracing) are loaded
 * when the feature is first used (see docs/library.md).
 */

// The agent and its run
export * as LeadAgent from "./programs/LeadAgent.js"
/** The lead and subagent middleware orders, and the chains built from them. */
export * as Chains from "./programs/Chains.js"
/** An operator's own middlewares from the configuration (`extensions.middlewares`). */
export * as ConfiguredMiddlewares from "./programs/ConfiguredMiddlewares.js"
export * as AgentPrompt from "./programs/AgentPrompt.js"
export * as Factory from "./programs/Factory.js"
export * as Run from "./programs/Run.js"
export * as SystemPrompt from "./programs/SystemPrompt.js"
export * as Render from "./programs/cli/Render.js"
export * as Upload from "./programs/Upload.js"
export * as Compaction from "./programs/Compaction.js"
export * as Subagents from "./programs/Subagents.js"
export * as CustomAgents from "./programs/CustomAgents.js"
export * as AgentTools from "./programs/AgentTools.js"
// The LangGraph-compatible gateway (`antler serve`) loads an HTTP server: import it from "antler/gateway"
export * as ToolAssembly from "./programs/ToolAssembly.js"

// Ports
export * as AgentHooks from "./services/AgentHooks.js"
export * as AppConfig from "./services/AppConfig.js"
export * as Extensions from "./services/Extensions.js"
export * as Guardrail from "./services/Guardrail.js"
export * as HostResolver from "./services/HostResolver.js"
export * as Mcp from "./services/Mcp.js"
export * as Memory from "./services/Memory.js"
export * as ModelService from "./services/ModelService.js"
export * as ModelUse from "./services/ModelUse.js"
export * as RunContext from "./services/RunContext.js"
export * as RunEvents from "./services/RunEvents.js"
export * as Sandbox from "./services/Sandbox.js"
export * as Skills from "./services/Skills.js"
export * as SkillSecrets from "./services/SkillSecrets.js"
export * as SubagentRunner from "./services/SubagentRunner.js"
export * as ThreadStore from "./services/ThreadStore.js"
export * as Tool from "./services/Tool.js"
export * as ToolService from "./services/ToolService.js"
export * as Tracing from "./services/Tracing.js"
export * as WebSearch from "./services/WebSearch.js"

// Implementations of the ports
export * as AllowlistGuardrail from "./layers/AllowlistGuardrail.js"
export * as ConfigFile from "./layers/ConfigFile.js"
export * as ConfiguredGuardrail from "./layers/ConfiguredGuardrail.js"
export * as ExtensionsFile from "./layers/ExtensionsFile.js"
export * as FileMemory from "./layers/FileMemory.js"
export * as LocalSandbox from "./layers/LocalSandbox.js"
export * as McpClient from "./layers/McpClient.js"
export * as McpTools from "./layers/McpTools.js"
export * as OtelTracing from "./layers/OtelTracing.js"
export * as MemoryThreadStore from "./layers/MemoryThreadStore.js"
export * as OpenAiModel from "./layers/OpenAiModel.js"
export * as SafeHttp from "./layers/SafeHttp.js"
export * as SandboxTools from "./layers/SandboxTools.js"
export * as SearchProviders from "./layers/SearchProviders.js"
/** Search providers a configured web_search names: Serper, Brave, Exa, Firecrawl, fastCRW, InfoQuest, GroundRoute. */
export * as WebSearchProviders from "./layers/web/Providers.js"
export * as Serper from "./layers/web/Serper.js"
export * as BraveSearch from "./layers/web/Brave.js"
export * as ExaSearch from "./layers/web/Exa.js"
export * as Firecrawl from "./layers/web/Firecrawl.js"
export * as InfoQuest from "./layers/web/InfoQuest.js"
export * as GroundRoute from "./layers/web/GroundRoute.js"
/** Readers of web_fetch that are no search provider, the fetch through a reader, and the system's resolver. */
export * as JinaReader from "./layers/web/Jina.js"
export * as TavilyExtract from "./layers/web/Tavily.js"
export * as Browserless from "./layers/web/Browserless.js"
export * as Crawl4AI from "./layers/web/Crawl4AI.js"
export * as ProviderFetch from "./layers/web/ProviderFetch.js"
export * as DnsResolver from "./layers/web/DnsResolver.js"
export * as SkillsDirectory from "./layers/SkillsDirectory.js"
export * as SqliteThreadStore from "./layers/SqliteThreadStore.js"
// PgThreadStore needs the optional peer @effect/sql-pg: import it from "antler/PgThreadStore"
export * as Toolkit from "./layers/Toolkit.js"
export * as WebTools from "./layers/WebTools.js"
/** A SCRIPTED model (it replays turns you give it): for tests and demos, never a real model. */
export * as ScriptedModel from "./layers/ScriptedModel.js"
/** A SCRIPTED Chat Completions server on loopback: for tests and demos, never a real model. */
export * as ScriptedChatServer from "./layers/ScriptedChatServer.js"

// Middleware: the layer helpers, the checked chain, and every middleware of the lead chain
export * as Middleware from "./middleware/Middleware.js"
export * as Chain from "./middleware/Chain.js"
export * as Clarification from "./middleware/Clarification.js"
export * as DanglingToolCall from "./middleware/DanglingToolCall.js"
export * as DeferredToolFilter from "./middleware/DeferredToolFilter.js"
export * as DurableContext from "./middleware/DurableContext.js"
export * as DynamicContext from "./middleware/DynamicContext.js"
export * as GuardrailMiddleware from "./middleware/Guardrail.js"
export * as InputSanitization from "./middleware/InputSanitization.js"
export * as LLMErrorHandling from "./middleware/LLMErrorHandling.js"
export * as LoopDetection from "./middleware/LoopDetection.js"
export * as McpRouting from "./middleware/McpRouting.js"
export * as MemoryMiddleware from "./middleware/Memory.js"
export * as ModelLengthFinishReason from "./middleware/ModelLengthFinishReason.js"
export * as ReadBeforeWrite from "./middleware/ReadBeforeWrite.js"
export * as SafetyFinishReason from "./middleware/SafetyFinishReason.js"
export * as SandboxMiddleware from "./middleware/Sandbox.js"
export * as SandboxAudit from "./middleware/SandboxAudit.js"
export * as SkillActivation from "./middleware/SkillActivation.js"
export * as SkillToolPolicy from "./middleware/SkillToolPolicy.js"
export * as SubagentLimit from "./middleware/SubagentLimit.js"
export * as Summarization from "./middleware/Summarization.js"
export * as SystemMessageCoalescing from "./middleware/SystemMessageCoalescing.js"
export * as TerminalResponse from "./middleware/TerminalResponse.js"
export * as ThreadData from "./middleware/ThreadData.js"
export * as Title from "./middleware/Title.js"
export * as Todo from "./middleware/Todo.js"
export * as TokenBudget from "./middleware/TokenBudget.js"
export * as TokenUsage from "./middleware/TokenUsage.js"
export * as ToolErrorHandling from "./middleware/ToolErrorHandling.js"
export * as ToolOutputBudget from "./middleware/ToolOutputBudget.js"
export * as ToolProgress from "./middleware/ToolProgress.js"
export * as ToolResultSanitization from "./middleware/ToolResultSanitization.js"
export * as Uploads from "./middleware/Uploads.js"
export * as ViewImage from "./middleware/ViewImage.js"

// Optional features: the error of a feature whose optional package is not installed
export * as OptionalPackage from "./internal/OptionalPackage.js"

// State: messages, thread state and its reducers
export * as MemoryDocument from "./state/Memory.js"
export * as Message from "./state/Message.js"
export * as Redact from "./state/Redact.js"
export * as Reducers from "./state/Reducers.js"
export * as SubagentStatus from "./state/SubagentStatus.js"
export * as ThreadState from "./state/ThreadState.js"
export * as Tokens from "./state/Tokens.js"
