/**
 * The application configuration (`config.yaml`): its Schema, with DeerFlow's defaults, and the Tag through
 * which layers and middlewares read it. Loading the file lives in `layers/ConfigFile.ts`.
 */
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { AcpAgentsConfig } from "./config/Acp.js"
import { AuthorizationConfig } from "./config/Authorization.js"
import {
  BaseUrl,
  BooleanOrWord,
  Fraction,
  JsonRecord,
  NonNegativeInt,
  PositiveInt,
  PositiveIntOrDigits,
  withDefault
} from "./config/Fields.js"
import {
  CircuitBreakerConfig,
  GuardrailsConfig,
  LlmCallConfig,
  LoopDetectionConfig,
  SafetyFinishReasonConfig,
  TokenBudgetConfig,
  ToolProgressConfig
} from "./config/Guards.js"
import { LoggingConfig, LogLevelName } from "./config/Logging.js"
import { McpTasksConfig } from "./config/McpTasks.js"
import { StalenessFields } from "./config/MemoryStaleness.js"
import * as ModelRequest from "./config/ModelRequest.js"
import { SkillsContainerPath, VolumeMountConfig } from "./config/Mounts.js"
import { DatabaseConfig, GatewayConfig, SchedulerConfig, TracingConfig } from "./config/Server.js"
import { useProblem } from "./ModelUse.js"

export { baseUrlProblem, withDefault } from "./config/Fields.js"
export * from "./config/Acp.js"
export * from "./config/Guards.js"
export * from "./config/Logging.js"
export { McpTasksConfig } from "./config/McpTasks.js"
export * from "./config/Server.js"
export { mountIssues, VolumeMountConfig } from "./config/Mounts.js"

/** One model entry (`models[]`). `api_base` is accepted as DeerFlow's spelling of `base_url`. */
export const ModelConfig = Schema.Struct({
  name: Schema.NonEmptyTrimmedString,
  model: Schema.NonEmptyTrimmedString,
  display_name: Schema.optional(Schema.String),
  /** Shown with the model in the app's model list (DeerFlow's `description`). */
  description: Schema.optional(Schema.String),
  use: Schema.optional(Schema.String),
  base_url: Schema.optional(BaseUrl),
  api_base: Schema.optional(BaseUrl),
  api_key: Schema.optional(Schema.Redacted(Schema.String)),
  supports_vision: withDefault(Schema.Boolean, () => false),
  supports_thinking: withDefault(Schema.Boolean, () => false),
  supports_reasoning_effort: withDefault(Schema.Boolean, () => false),
  /**
   * Seconds a model call may stay silent (before the first byte, or between two chunks of the stream) before
   * it is ended. `request_timeout` is DeerFlow's spelling for OpenAI-compatible models (langchain's
   * `ChatOpenAI`), `timeout` its spelling for others; `request_timeout` wins when both are set.
   */
  request_timeout: Schema.optional(Schema.Number.pipe(Schema.positive())),
  timeout: Schema.optional(Schema.Number.pipe(Schema.positive())),
  max_tokens: Schema.optional(PositiveInt),
  temperature: Schema.optional(Schema.Number),
  context_window: Schema.optional(PositiveInt),
  /**
   * Retries of a failed call to this model (langchain's `max_retries`): the call is tried `max_retries + 1`
   * times in all by the LLM error-handling middleware, instead of `llm_call.retry_max_attempts`. The client
   * itself never retries, so the two do not multiply as they do in DeerFlow.
   */
  max_retries: Schema.optional(NonNegativeInt),
  /** Headers sent with every request to this model (langchain's `default_headers`). */
  default_headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** Fields merged into every request body (langchain's `extra_body`), e.g. a provider's own switches. */
  extra_body: Schema.optional(Schema.NullOr(JsonRecord)),
  /** Settings applied when thinking is on: `extra_body`, `reasoning_effort`, other request fields. */
  when_thinking_enabled: Schema.optional(Schema.NullOr(JsonRecord)),
  /** Settings applied when thinking is off (default: DeerFlow's switch-off derived from the enabled ones). */
  when_thinking_disabled: Schema.optional(Schema.NullOr(JsonRecord)),
  /** Shortcut for `when_thinking_enabled.thinking`. */
  thinking: Schema.optional(Schema.NullOr(JsonRecord)),
  /** Request fields sent with every call: `top_p`, `seed`, `stop`, ..., `model_kwargs`, `stream_usage`. */
  ...ModelRequest.fields
}).pipe(
  // The `use` class must be one Antler can speak: the entry is named, with the way to reach the model.
  Schema.filter((entry) => {
    const problem = useProblem(entry)
    return problem === undefined ? true : { path: ["use"], message: problem }
  })
)
export type ModelConfig = typeof ModelConfig.Type

export const SandboxConfig = Schema.Struct({
  use: Schema.optional(Schema.String),
  allow_host_bash: withDefault(Schema.Boolean, () => false),
  bash_output_max_chars: withDefault(NonNegativeInt, () => 20000),
  read_file_output_max_chars: withDefault(NonNegativeInt, () => 50000),
  ls_output_max_chars: withDefault(NonNegativeInt, () => 20000),
  bash_command_timeout: withDefault(Schema.Number.pipe(Schema.positive()), () => 600),
  write_file_max_bytes: withDefault(Schema.Number.pipe(Schema.int()), () => 80 * 1024),
  // Resource limits of the sandbox (0 = no limit); see docs/configuration.md, "The sandbox's resource limits".
  /** Tasks (processes and threads) one command may run at once (a cgroup pids limit). */
  max_processes: withDefault(NonNegativeInt, () => 256),
  /** Memory of each process of a command (address space), and of the whole command where cgroup v2 allows. */
  max_memory_mb: withDefault(NonNegativeInt, () => 4096),
  /** Size of the command's private /tmp (and of /dev/shm), which live in the host's memory. */
  tmp_size_mb: withDefault(NonNegativeInt, () => 256),
  /** The largest file a command or a file tool may write. */
  max_file_size_mb: withDefault(NonNegativeInt, () => 512),
  /** The most disk the thread's files (workspace, uploads, outputs) may use together. */
  disk_quota_mb: withDefault(NonNegativeInt, () => 2048),
  /** Host directories shown in the sandbox (DeerFlow's `sandbox.mounts`); see `config/Mounts.ts`. */
  mounts: withDefault(Schema.Array(VolumeMountConfig), () => [])
})
export type SandboxConfig = typeof SandboxConfig.Type

export const ToolOutputConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  externalize_min_chars: withDefault(NonNegativeInt, () => 12000),
  preview_head_chars: withDefault(NonNegativeInt, () => 2000),
  preview_tail_chars: withDefault(NonNegativeInt, () => 1000),
  fallback_max_chars: withDefault(NonNegativeInt, () => 30000),
  fallback_head_chars: withDefault(NonNegativeInt, () => 8000),
  fallback_tail_chars: withDefault(NonNegativeInt, () => 3000),
  storage_subdir: withDefault(
    Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._-]+$/), Schema.filter((s) => s !== "." && s !== "..")),
    () => ".tool-results"
  ),
  exempt_tools: withDefault(Schema.Array(Schema.String), () => ["read_file", "read_file_tool"]),
  tool_overrides: withDefault(Schema.Record({ key: Schema.String, value: NonNegativeInt }), () => ({}))
})
export type ToolOutputConfig = typeof ToolOutputConfig.Type

export const SkillsConfig = Schema.Struct({
  /** Where the model sees skills (the sandbox mount). */
  container_path: withDefault(SkillsContainerPath, () => "/mnt/skills"),
  /**
   * The host skills directory (relative to the config file's directory). Default: `$DEER_FLOW_SKILLS_PATH`
   * or `$ANTLER_SKILLS_PATH`, else `skills/` next to the config file (DeerFlow's layout).
   */
  path: Schema.optional(Schema.NullOr(Schema.String)),
  /** Only skill names in the prompt; the model asks `describe_skill` for the rest. */
  deferred_discovery: withDefault(Schema.Boolean, () => false)
})
export type SkillsConfig = typeof SkillsConfig.Type

/**
 * DeerFlow's `skill_evolution`: the agent may create and change skills under `custom/` of the skills directory
 * with `skill_manage` (in an admin's run only), each change kept in the skill's history. Off by default.
 */
export const SkillEvolutionConfig = Schema.Struct({ enabled: withDefault(Schema.Boolean, () => false) })
export type SkillEvolutionConfig = typeof SkillEvolutionConfig.Type

/**
 * DeerFlow's `agents_api`: whether the gateway serves the custom agents endpoints (`/api/agents`). On unless
 * `enabled: false` (each user reads and changes only their own agents); DeerFlow's is off unless enabled.
 */
export const AgentsApiConfig = Schema.Struct({ enabled: withDefault(Schema.Boolean, () => true) })
export type AgentsApiConfig = typeof AgentsApiConfig.Type

export const UploadsConfig = Schema.Struct({
  // (limits and the switch may be written as text, as DeerFlow's gateway reads them: `"1048576"`, `"yes"`, a `$VAR`)
  max_files: withDefault(PositiveIntOrDigits, () => 10),
  max_file_size: withDefault(PositiveIntOrDigits, () => 50 * 1024 * 1024),
  max_total_size: withDefault(PositiveIntOrDigits, () => 100 * 1024 * 1024),
  /**
   * Whether an upload's documents get a Markdown sibling. Unset, the gateway's uploads do not (DeerFlow's default:
   * the parsers run on the host, before any sandbox, over files from any user) and the CLI's do (the operator's own
   * files).
   */
  auto_convert_documents: Schema.optional(BooleanOrWord)
})
export type UploadsConfig = typeof UploadsConfig.Type

/** A context size: `{ type: tokens | messages | fraction, value }`. */
export const ContextSize = Schema.Struct({
  type: Schema.Literal("tokens", "messages", "fraction"),
  value: Schema.Number.pipe(Schema.positive())
}).pipe(
  Schema.filter((c) => c.type !== "fraction" || c.value <= 1 || "a fraction must be between 0 and 1"),
  Schema.filter((c) => c.type === "fraction" || Number.isInteger(c.value) || "tokens and messages must be integers")
)
export type ContextSize = typeof ContextSize.Type

export const SummarizationConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  model_name: Schema.optional(Schema.NullOr(Schema.String)),
  trigger: Schema.optional(Schema.NullOr(Schema.Union(ContextSize, Schema.Array(ContextSize)))),
  keep: withDefault(ContextSize, () => ({ type: "messages" as const, value: 20 })),
  trim_tokens_to_summarize: withDefault(Schema.NullOr(NonNegativeInt), () => 4000),
  summary_prompt: Schema.optional(Schema.NullOr(Schema.String)),
  skill_file_read_tool_names: withDefault(Schema.Array(Schema.String), () => ["read_file", "read", "view", "cat"])
})
export type SummarizationConfig = typeof SummarizationConfig.Type

export const TokenUsageConfig = Schema.Struct({ enabled: withDefault(Schema.Boolean, () => true) })
export type TokenUsageConfig = typeof TokenUsageConfig.Type

/**
 * DeerFlow's `run_events`: Antler reads its `track_token_usage` (on by default). Off, a run books no token usage:
 * its stored run's counts and the thread's `token-usage` stay at zero, as DeerFlow's run journal then records none;
 * the messages keep their usage and TokenUsage's step attribution. Its other keys are not read (run events are kept
 * in the thread store).
 */
export const RunEventsConfig = Schema.Struct({ track_token_usage: withDefault(Schema.Boolean, () => true) })
export type RunEventsConfig = typeof RunEventsConfig.Type

/** DeerFlow's default `title.prompt_template`. */
export const DEFAULT_TITLE_PROMPT_TEMPLATE =
  "Generate a concise title (max {max_words} words) for this conversation.\n" +
  "User: {user_msg}\nAssistant: {assistant_msg}\n\nReturn ONLY the title, no quotes, no explanation."

export const TitleConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  // DeerFlow's bounds
  max_words: withDefault(Schema.Int.pipe(Schema.between(1, 20)), () => 6),
  max_chars: withDefault(Schema.Int.pipe(Schema.between(10, 200)), () => 60),
  model_name: Schema.optional(Schema.NullOr(Schema.String)),
  /** The title model's prompt, with `{max_words}`, `{user_msg}` and `{assistant_msg}` (Python `format` syntax). */
  prompt_template: withDefault(Schema.String, () => DEFAULT_TITLE_PROMPT_TEMPLATE)
})
export type TitleConfig = typeof TitleConfig.Type

/** The most follow-up questions one request may ask for. */
export const MAX_SUGGESTIONS_LIMIT = 5

/** DeerFlow's follow-up questions after an answer (`POST /api/threads/{id}/suggestions`). */
export const SuggestionsConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  max_suggestions: withDefault(PositiveInt.pipe(Schema.lessThanOrEqualTo(MAX_SUGGESTIONS_LIMIT)), () => 3)
})
export type SuggestionsConfig = typeof SuggestionsConfig.Type

/** DeerFlow's rewriting of a draft before it is sent (`POST /api/input-polish`). */
export const InputPolishConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  max_chars: withDefault(PositiveInt.pipe(Schema.lessThanOrEqualTo(100_000)), () => 4000),
  /** The model that rewrites (a `models[].name`); none: the default model. */
  model_name: Schema.optional(Schema.NullOr(Schema.String))
})
export type InputPolishConfig = typeof InputPolishConfig.Type

/** Whether an IANA time zone name is known to this runtime. */
export const isTimeZone = (name: string): boolean => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name })
    return true
  } catch {
    return false
  }
}

const TimeZone = Schema.String.pipe(
  Schema.filter((name) =>
    isTimeZone(name) || `unknown time zone "${name}" (use an IANA name such as Europe/Paris or UTC)`
  )
)

/** DeerMem's file storage by its class path (`memory.backend_config.storage_class`). */
const FILE_STORAGE_CLASS = "deerflow.agents.memory.backends.deermem.deermem.core.storage.FileMemoryStorage"

/** Days a signal takes to count half (DeerMem's bounds: 1 to 3650). */
const HalfLifeDays = PositiveInt.pipe(Schema.lessThanOrEqualTo(3650))

/** DeerMem's settings (`memory.backend_config`), as far as Antler's file memory uses them. */
export const MemoryBackendConfig = Schema.Struct({
  /** The root directory of memory files; empty: the data directory. Per user: `{root}/users/{user}/memory.json`. */
  storage_path: withDefault(Schema.String, () => ""),
  /**
   * Antler stores memory in files only: `file`, or DeerMem's ways of naming its file storage (empty, DeerMem's
   * default, or `FileMemoryStorage`'s class path). Any other class is an error, as DeerMem refuses to fall back.
   */
  storage_class: withDefault(Schema.Literal("file", "", FILE_STORAGE_CLASS), () => "file" as const),
  manifest_filename: withDefault(
    Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._-]+$/), Schema.filter((s) => s !== "." && s !== "..")),
    () => "memory.json"
  ),
  /** Seconds a memory file lock is waited for before the update gives up (it is retried after the next run). */
  file_lock_timeout_seconds: withDefault(Schema.Number.pipe(Schema.positive()), () => 10),
  /** Seconds to wait after a run before its memory update (a new run of the same thread restarts the wait). */
  debounce_seconds: withDefault(Schema.Number.pipe(Schema.nonNegative()), () => 30),
  /**
   * Pending updates at most (0 = no limit); new threads beyond it are dropped until the queue drains, unless their
   * user's recent lines carry a signal (a correction, a confirmation...).
   */
  queue_max_depth: withDefault(NonNegativeInt, () => 1000),
  max_facts: withDefault(PositiveInt, () => 100),
  /**
   * Which facts stay past `max_facts`: `confidence`, the most confident; `hybrid-v1` (DeerMem's, opt-in),
   * confidence, how fresh a fact's confirmation is, and how often it was recalled, with room kept for corrections
   * (`MemoryEviction.ts`), weighted by the `eviction_*` keys.
   */
  fact_eviction_policy: withDefault(Schema.Literal("confidence", "hybrid-v1"), () => "confidence" as const),
  /**
   * DeerMem's shadow mode: under `confidence`, recalls are recorded and each audited eviction also says what
   * `hybrid-v1` would have left out (`shadow`); what is kept does not change.
   */
  fact_eviction_shadow_enabled: withDefault(Schema.Boolean, () => false),
  eviction_confidence_weight: withDefault(Fraction, () => 0.65),
  eviction_confirmation_weight: withDefault(Fraction, () => 0.25),
  eviction_access_weight: withDefault(Fraction, () => 0.1),
  eviction_confirmation_half_life_days: withDefault(HalfLifeDays, () => 90),
  eviction_access_half_life_days: withDefault(HalfLifeDays, () => 30),
  eviction_correction_reserved_fraction: withDefault(Fraction, () => 0.1),
  eviction_correction_reserved_max: withDefault(NonNegativeInt.pipe(Schema.lessThanOrEqualTo(100)), () => 10),
  /**
   * Events the eviction audit of a memory keeps (DeerMem's `eviction-audit.json`, the newest; 0: no audit): which
   * facts `max_facts` left out, with their scores, never their content (`state/MemoryAudit.ts`).
   */
  eviction_audit_max_entries: withDefault(NonNegativeInt.pipe(Schema.lessThanOrEqualTo(10000)), () => 200),
  /** DeerMem's staleness review (`staleness_*`, `state/MemoryStaleness.ts`). */
  ...StalenessFields,
  /**
   * DeerMem's consolidation (opt-in: a merge is lossy): a category of at least `consolidation_min_facts` facts is
   * shown to the memory model, which may merge up to `consolidation_max_sources` of them into one richer fact, at
   * most `consolidation_max_groups_per_cycle` merges per update (`MemoryConsolidation.ts`).
   */
  consolidation_enabled: withDefault(Schema.Boolean, () => false),
  consolidation_min_facts: withDefault(PositiveInt.pipe(Schema.between(3, 30)), () => 8),
  consolidation_max_groups_per_cycle: withDefault(PositiveInt.pipe(Schema.between(1, 10)), () => 3),
  consolidation_max_sources: withDefault(PositiveInt.pipe(Schema.between(2, 20)), () => 8),
  // (consolidation never merges the categories the staleness review spares: `staleness_protected_categories`)
  /**
   * Characters of one fact at most, and of one summary (Antler's keys): a memory model's answer, and a memory
   * file, over them is cut (with a warning naming what was cut).
   */
  max_fact_chars: withDefault(PositiveInt, () => 1000),
  max_summary_chars: withDefault(PositiveInt, () => 4000),
  fact_confidence_threshold: withDefault(Fraction, () => 0.7),
  /** Budget of the memory block injected at the start of a thread, in tokens. */
  max_injection_tokens: withDefault(PositiveInt, () => 2000),
  /** `tiktoken`: count with the o200k tokenizer (bundled, offline); `char`: a character estimate. */
  token_counting: withDefault(Schema.Literal("tiktoken", "char"), () => "tiktoken" as const),
  /** Fact categories injected first, from their own budget (`guaranteed_token_budget`). */
  guaranteed_categories: withDefault(Schema.Array(Schema.String), () => ["correction"]),
  guaranteed_token_budget: withDefault(NonNegativeInt, () => 500),
  /**
   * DeerMem's own files (`layers/memory/PatternFiles.ts`, `PromptFiles.ts`), relative to the config file; empty or
   * null: the built-in ones. `patterns_dir`: the signal patterns (`correction.yaml`... `trivial.yaml`);
   * `prompts_dir`: the memory update's prompt (`memory_update.chat.yaml`, per custom agent in `{agent}/`).
   */
  patterns_dir: withDefault(Schema.NullOr(Schema.String), () => null),
  prompts_dir: withDefault(Schema.NullOr(Schema.String), () => null)
})
export type MemoryBackendConfig = typeof MemoryBackendConfig.Type

/** Why `memory.mode: tool` with the noop backend is refused (memory enabled). */
export const MEMORY_TOOL_NEEDS_SEARCH = "memory.mode 'tool' needs a backend that searches memory (memory_search), " +
  "and manager_class 'noop' does not: use mode 'middleware', manager_class 'deermem', or enabled: false"

/** Long-term memory (`memory:`, SPEC §11). */
export const MemoryConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  /** Whether the memory block is injected at the start of a thread. */
  injection_enabled: withDefault(Schema.Boolean, () => true),
  /** `middleware`: updated after each run; `tool`: the model reads and writes it with memory_* tools. */
  mode: withDefault(Schema.Literal("middleware", "tool"), () => "middleware" as const),
  /** Seconds pending updates may take when the app stops. */
  shutdown_flush_timeout_seconds: withDefault(Schema.Number.pipe(Schema.nonNegative()), () => 30),
  /** `deermem` (memory files) or `noop` (no memory): the backends Antler has. */
  manager_class: withDefault(Schema.Literal("deermem", "noop"), () => "deermem" as const),
  /** The configured model that writes memory (Antler's key); default: the model of the run. */
  model_name: Schema.optional(Schema.NullOr(Schema.String)),
  backend_config: withDefault(MemoryBackendConfig, () => Schema.decodeSync(MemoryBackendConfig)({}))
}).pipe(
  // as DeerFlow's MemoryManager: the model of tool mode searches memory, which the noop backend cannot
  Schema.filter((c) => !(c.enabled && c.mode === "tool" && c.manager_class === "noop") || MEMORY_TOOL_NEEDS_SEARCH)
)
export type MemoryConfig = typeof MemoryConfig.Type

export const EnabledFlag = Schema.Struct({ enabled: withDefault(Schema.Boolean, () => true) })

/**
 * A subagent token budget (`subagents.token_budget`, or per agent): on by default; `max_tokens` defaults to
 * 1,000,000 when summarization is on, else 2,000,000 (SPEC §4.2 slot 20).
 */
export const SubagentTokenBudgetConfig = Schema.Struct({
  enabled: Schema.optional(Schema.NullOr(Schema.Boolean)),
  max_tokens: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.greaterThanOrEqualTo(1000)))),
  warn_threshold: Schema.optional(Schema.NullOr(Fraction)),
  hard_stop_threshold: Schema.optional(Schema.NullOr(Fraction))
})
export type SubagentTokenBudgetConfig = typeof SubagentTokenBudgetConfig.Type

/** Per-agent overrides (`subagents.agents.<name>`), for built-in and custom subagents alike. */
export const SubagentOverride = Schema.Struct({
  timeout_seconds: Schema.optional(Schema.NullOr(Schema.Number.pipe(Schema.positive()))),
  max_turns: Schema.optional(Schema.NullOr(PositiveInt)),
  model: Schema.optional(Schema.NullOr(Schema.NonEmptyString)),
  skills: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  token_budget: Schema.optional(Schema.NullOr(SubagentTokenBudgetConfig))
})
export type SubagentOverride = typeof SubagentOverride.Type

/** A custom subagent type (`subagents.custom_agents.<name>`). */
export const CustomSubagentConfig = Schema.Struct({
  description: Schema.NonEmptyTrimmedString,
  system_prompt: Schema.NonEmptyTrimmedString,
  /** Tool allowlist; absent or null = every tool the parent has. */
  tools: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  disallowed_tools: withDefault(Schema.Array(Schema.String), () => ["task", "ask_clarification", "present_files"]),
  /** Skills allowlist; absent or null = all enabled skills, [] = none. */
  skills: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  model: withDefault(Schema.String, () => "inherit"),
  max_turns: withDefault(PositiveInt, () => 50),
  timeout_seconds: withDefault(Schema.Number.pipe(Schema.positive()), () => 900)
})
export type CustomSubagentConfig = typeof CustomSubagentConfig.Type

const SubagentName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_-]*$/, { message: () => "subagent names are letters, digits, '-' and '_'" })
)

/** `subagents`: timeouts, turns and budgets of subagents, per-agent overrides and custom types (SPEC §8.1). */
export const SubagentsConfig = Schema.Struct({
  /** Timeout of built-in subagents, in seconds (custom ones keep their own unless overridden). */
  timeout_seconds: withDefault(Schema.Number.pipe(Schema.positive()), () => 1800),
  /** A max-turns override for the built-in subagents (their defaults: general-purpose 150, bash 60). */
  max_turns: Schema.optional(Schema.NullOr(PositiveInt)),
  /** Delegations one lead-agent run may make (1-50); a run's `max_total_subagents` overrides it. */
  max_total_per_run: withDefault(Schema.Number.pipe(Schema.int(), Schema.between(1, 50)), () => 6),
  token_budget: withDefault(SubagentTokenBudgetConfig, () => ({})),
  agents: withDefault(Schema.Record({ key: SubagentName, value: SubagentOverride }), () => ({})),
  custom_agents: withDefault(Schema.Record({ key: SubagentName, value: CustomSubagentConfig }), () => ({}))
})
export type SubagentsConfig = typeof SubagentsConfig.Type

/**
 * One configured tool (`tools[]`): its name, group and DeerFlow class path, plus the provider's own keys
 * (`max_results`, `timeout`, `api_key`, `base_url`...), read by the tool the `use` maps to.
 */
export const ToolConfig = Schema.Struct(
  {
    name: Schema.NonEmptyTrimmedString,
    group: Schema.optional(Schema.String),
    use: Schema.NonEmptyTrimmedString
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
export type ToolConfig = typeof ToolConfig.Type

/** One tool group (`tool_groups[]`). */
export const ToolGroupConfig = Schema.Struct(
  { name: Schema.NonEmptyTrimmedString },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
export type ToolGroupConfig = typeof ToolGroupConfig.Type

/** Deferred tools (SPEC §5.24, §5.25, §7.14): MCP tools hidden behind `tool_search` until promoted. */
export const ToolSearchConfig = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  // clamped into 1-5, as DeerFlow's validator does (a value DeerFlow loads is not an error here)
  auto_promote_top_k: withDefault(
    Schema.transform(Schema.Number.pipe(Schema.int()), Schema.Number.pipe(Schema.int(), Schema.between(1, 5)), {
      strict: true,
      decode: (k) => Math.min(5, Math.max(1, k)),
      encode: (k) => k
    }),
    () => 3
  )
})
export type ToolSearchConfig = typeof ToolSearchConfig.Type

/** The whole `config.yaml`. Sections missing from the file take DeerFlow's code defaults. */
export const AppConfigSchema = Schema.Struct({
  models: withDefault(Schema.Array(ModelConfig), () => []),
  recursion_limit: withDefault(PositiveInt, () => 100),
  max_recursion_limit: withDefault(PositiveInt, () => 1000),
  sandbox: withDefault(SandboxConfig, () => Schema.decodeSync(SandboxConfig)({})),
  tool_output: withDefault(ToolOutputConfig, () => Schema.decodeSync(ToolOutputConfig)({})),
  skills: withDefault(SkillsConfig, () => Schema.decodeSync(SkillsConfig)({})),
  skill_evolution: withDefault(SkillEvolutionConfig, () => ({ enabled: false })),
  agents_api: withDefault(AgentsApiConfig, () => ({ enabled: true })),
  uploads: withDefault(UploadsConfig, () => Schema.decodeSync(UploadsConfig)({})),
  llm_call: withDefault(LlmCallConfig, () => Schema.decodeSync(LlmCallConfig)({})),
  circuit_breaker: withDefault(CircuitBreakerConfig, () => Schema.decodeSync(CircuitBreakerConfig)({})),
  guardrails: withDefault(GuardrailsConfig, () => Schema.decodeSync(GuardrailsConfig)({})),
  /** DeerFlow's role-based permissions: tools, models and routes per role (`config/Authorization`). */
  authorization: withDefault(AuthorizationConfig, () => Schema.decodeSync(AuthorizationConfig)({})),
  loop_detection: withDefault(LoopDetectionConfig, () => Schema.decodeSync(LoopDetectionConfig)({})),
  summarization: withDefault(SummarizationConfig, () => Schema.decodeSync(SummarizationConfig)({})),
  token_usage: withDefault(TokenUsageConfig, () => Schema.decodeSync(TokenUsageConfig)({})),
  run_events: withDefault(RunEventsConfig, () => Schema.decodeSync(RunEventsConfig)({})),
  token_budget: withDefault(TokenBudgetConfig, () => Schema.decodeSync(TokenBudgetConfig)({})),
  title: withDefault(TitleConfig, () => Schema.decodeSync(TitleConfig)({})),
  suggestions: withDefault(SuggestionsConfig, () => Schema.decodeSync(SuggestionsConfig)({})),
  input_polish: withDefault(InputPolishConfig, () => Schema.decodeSync(InputPolishConfig)({})),
  safety_finish_reason: withDefault(SafetyFinishReasonConfig, () => Schema.decodeSync(SafetyFinishReasonConfig)({})),
  read_before_write: withDefault(EnabledFlag, () => ({ enabled: true })),
  /**
   * DeerFlow's `skill_scan`: SkillScan's rules on what a skill install, a custom skill edit or `skill_manage`
   * writes (a CRITICAL finding refuses it). On unless `enabled: false`; an archive's own checks stay either way.
   */
  skill_scan: withDefault(EnabledFlag, () => ({ enabled: true })),
  tool_progress: withDefault(ToolProgressConfig, () => Schema.decodeSync(ToolProgressConfig)({})),
  database: withDefault(DatabaseConfig, () => ({})),
  gateway: withDefault(GatewayConfig, () => Schema.decodeSync(GatewayConfig)({})),
  /** DeerFlow's `scheduler`: of it, the scheduled tasks' `min_once_delay_seconds` (`config/Server`). */
  scheduler: withDefault(SchedulerConfig, () => Schema.decodeSync(SchedulerConfig)({})),
  tracing: withDefault(TracingConfig, () => Schema.decodeSync(TracingConfig)({})),
  /** How much `antler serve` logs (`--log-level` wins); absent: warnings and errors. `antler run` does not read it. */
  log_level: Schema.optional(Schema.NullOr(LogLevelName)),
  logging: withDefault(LoggingConfig, () => Schema.decodeSync(LoggingConfig)({})),
  /** Configured tools; absent: the sandbox tools (all groups) and no web tools. */
  tools: Schema.optional(Schema.NullOr(Schema.Array(ToolConfig))),
  tool_groups: withDefault(Schema.Array(ToolGroupConfig), () => []),
  tool_search: withDefault(ToolSearchConfig, () => Schema.decodeSync(ToolSearchConfig)({})),
  memory: withDefault(MemoryConfig, () => Schema.decodeSync(MemoryConfig)({})),
  /** The time zone of the date the model is told (an IANA name); default: the machine's. */
  timezone: Schema.optional(Schema.NullOr(TimeZone)),
  subagents: withDefault(SubagentsConfig, () => Schema.decodeSync(SubagentsConfig)({})),
  /** External agents run over the Agent Client Protocol (`invoke_acp_agent`); none by default. */
  acp_agents: withDefault(AcpAgentsConfig, () => ({})),
  /** DeerFlow's durable MCP tasks (`mcp_tasks`, see `config/McpTasks`); off by default. */
  mcp_tasks: withDefault(McpTasksConfig, () => Schema.decodeSync(McpTasksConfig)({})),
  /**
   * DeerFlow's `extensions` block. Antler reads its `middlewares` (see `ConfiguredMiddlewares`); declared here,
   * they win over the extensions file's. Its other keys (MCP servers, skills) live in the extensions file.
   */
  extensions: Schema.optional(Schema.Struct(
    { middlewares: Schema.optional(Schema.Array(Schema.NonEmptyTrimmedString)) },
    Schema.Record({ key: Schema.String, value: Schema.Unknown })
  ))
})
export type AppConfig = typeof AppConfigSchema.Type

/** The configuration with every default (what an empty `config.yaml` means). */
export const defaults = (): AppConfig => Schema.decodeUnknownSync(AppConfigSchema)({})

/** The loaded configuration, plus where it came from. */
export class AppConfigService extends Context.Tag("antler/AppConfig")<
  AppConfigService,
  {
    readonly config: AppConfig
    /** The file it was read from, if any. */
    readonly source: string | undefined
    /**
     * The data directory (`ANTLER_HOME`, default `~/.antler`), absolute. Threads, sandboxes and the database live
     * here.
     */
    readonly home: string
    /** Keys found in the file that Antler does not use (dotted paths). */
    readonly ignored: ReadonlyArray<string>
    /**
     * The sections as written (`$VAR`s read, DeerFlow's older layouts moved), for what is given back as written
     * (DeerFlow's `/api/memory/config` `backend_config`); none for a configuration given as a decoded value.
     */
    readonly written?: Readonly<Record<string, unknown>> | undefined
  }
>() {}
