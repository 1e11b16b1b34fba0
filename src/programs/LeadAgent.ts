/**
 * The lead agent: the documented middleware chain, and the agent as a service an Effect app provides once and
 * runs turns through.
 *
 * The chain is checked data (`Chain`): one entry per middleware, outermost first, each with a stable name, a
 * line saying why it stands there, and the ordering facts it relies on. The first entry is the outermost
 * wrapper: its `before` work runs first and its `after` work last; model and tool wrappers run outer → inner
 * on the way in and inner → outer on the way out (SPEC-deerflow §4.1). Numbers are DeerFlow's slots; slots
 * Antler does not have yet are left out (see README, "Status").
 *
 * `layer(options)` builds the chain once, over the app's `ModelService`, the sandbox tools and the app's own
 * tools, and provides `LeadAgent`: `run(input)` streams a turn's events, `turn(input)` waits for its end.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as SandboxTools from "../layers/SandboxTools.js"
import * as Toolkit from "../layers/Toolkit.js"
import * as AllowlistGuardrail from "../layers/AllowlistGuardrail.js"
import * as LocalSandbox from "../layers/LocalSandbox.js"
import * as Chain from "../middleware/Chain.js"
import * as ClarificationMW from "../middleware/Clarification.js"
import * as DanglingToolCall from "../middleware/DanglingToolCall.js"
import * as DurableContext from "../middleware/DurableContext.js"
import * as GuardrailMW from "../middleware/Guardrail.js"
import * as InputSanitization from "../middleware/InputSanitization.js"
import * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import * as LoopDetection from "../middleware/LoopDetection.js"
import type { Ports } from "../middleware/Middleware.js"
import * as MW from "../middleware/Middleware.js"
import * as ModelLengthFinishReason from "../middleware/ModelLengthFinishReason.js"
import * as SafetyFinishReason from "../middleware/SafetyFinishReason.js"
import * as SandboxMW from "../middleware/Sandbox.js"
import * as SandboxAudit from "../middleware/SandboxAudit.js"
import * as SubagentLimit from "../middleware/SubagentLimit.js"
import * as Summarization from "../middleware/Summarization.js"
import * as SystemMessageCoalescing from "../middleware/SystemMessageCoalescing.js"
import * as ThreadData from "../middleware/ThreadData.js"
import * as Title from "../middleware/Title.js"
import * as TokenBudget from "../middleware/TokenBudget.js"
import * as TokenUsage from "../middleware/TokenUsage.js"
import * as ToolErrorHandling from "../middleware/ToolErrorHandling.js"
import * as ToolOutputBudget from "../middleware/ToolOutputBudget.js"
import * as Uploads from "../middleware/Uploads.js"
import type { AppConfig, TokenBudgetConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import * as Guardrail from "../services/Guardrail.js"
import type { ModelService, ToolDefinition } from "../services/ModelService.js"
import type { RunOptions } from "../services/RunContext.js"
import type { RunEndEvent, RunEvent } from "../services/RunEvents.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import { SubagentRunner, SubagentRunnerMissing } from "../services/SubagentRunner.js"
import { ThreadStore } from "../services/ThreadStore.js"
import type * as Tool from "../services/Tool.js"
import { ToolService } from "../services/ToolService.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { ThreadState } from "../state/ThreadState.js"
import * as Run from "./Run.js"
import * as SystemPrompt from "./SystemPrompt.js"
import * as ToolGroups from "./ToolGroups.js"

// ---------------------------------------------------------------------------------------------------------
// The chain

/** What the lead agent's chain is built from. App-level pieces (breaker, guardrail) are shared by its runs. */
export interface ChainOptions {
  readonly config: AppConfig
  /** The configured guardrail provider; none when guardrails are off. */
  readonly guardrail?: Guardrail.Service | undefined
  /** A circuit breaker to share with other agents of the app; by default the agent has its own. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
  /** Subagents enabled: the `task` tool and its limits (SubagentLimit, slot 28). */
  readonly subagents?: SubagentLimit.Options | undefined
}

const when = <A>(condition: boolean, entry: () => A): ReadonlyArray<A> => (condition ? [entry()] : [])

/** The lead agent's chain, outermost first (SPEC §4.1). */
export const chain = (options: ChainOptions): Chain.Chain => {
  const c = options.config
  const guardrail = options.guardrail
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
    // 4: before_agent: the thread's directories, and run id / timestamp on the new user message
    Chain.entry("ThreadData", () => ThreadData.layer()),
    // 5: before_agent, after ThreadData (it needs the uploads dir): the <current_uploads> block
    Chain.entry("Uploads", () => Uploads.layer(), [
      { inside: "ThreadData", reason: "the uploads block needs the thread's directories ThreadData records" }
    ]),
    // 6: lazy sandbox: records the id a tool acquired, releases it after the run
    Chain.entry("Sandbox", () => SandboxMW.layer(), [
      { inside: "ThreadData", reason: "the sandbox is made over the thread's directories ThreadData records" }
    ]),
    // 7: repairs dangling / orphan tool results in the request, outside the retry loop (done once per call)
    Chain.entry("DanglingToolCall", () => DanglingToolCall.layer(), [
      { outside: "LLMErrorHandling", reason: "the history is repaired once per call, not once per retry" }
    ]),
    // 8: the retry loop and circuit breaker; everything inside is re-run per attempt
    Chain.entry(
      "LLMErrorHandling",
      () => LLMErrorHandling.layer({ llmCall: c.llm_call, circuitBreaker: c.circuit_breaker, breaker: options.breaker })
    ),
    // 10: configured guardrail, before the audit so a denied tool is never audited as run
    ...when(guardrail !== undefined, () =>
      Chain.entry("Guardrail", () =>
        GuardrailMW.layerWith(guardrail!, { failClosed: c.guardrails.fail_closed, passport: c.guardrails.passport }), [
        { outside: "SandboxAudit", reason: "a denied tool is never audited as if it ran" }
      ])),
    // 11: bash audit: blocks high-risk commands, warns on medium-risk ones
    Chain.entry("SandboxAudit", () => SandboxAudit.layer()),
    // 14: turns tool failures into results the model can read; inner short-circuits still get metadata
    Chain.entry("ToolErrorHandling", () =>
      ToolErrorHandling.layer({
        skillReadToolNames: c.summarization.skill_file_read_tool_names,
        skillsRoot: c.skills.container_path
      }), [
      { outside: "Clarification", reason: "results of inner short-circuits (a question) still get tool metadata" }
    ]),
    // 18: projects the summary and loaded skills into every request (request-only)
    Chain.entry("DurableContext", () => DurableContext.layer(), [
      { inside: "LLMErrorHandling", reason: "every attempt of a retried call carries the current summary" }
    ]),
    // 19: right inside DurableContext, so a request after a compaction carries the new summary
    Chain.entry("Summarization", () => Summarization.layer(), [
      { inside: "DurableContext", reason: "a request made after a compaction must carry the new summary" }
    ]),
    // 21: after_model after the guards below, so it stamps the final form of the message
    Chain.entry("TokenUsage", () => TokenUsage.layer(c.token_usage), [
      { outside: "SafetyFinishReason", reason: "usage is stamped on the final form of the message" }
    ]),
    // 22: names the thread after its first exchange
    Chain.entry("Title", () => Title.layer(c.title)),
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
 * the lead-only ones (uploads, title, token usage, memory, clarification, the subagent limit: subagents cannot
 * delegate), with its own token budget and the system messages coalesced innermost.
 */
export const subagentChain = (options: SubagentChainOptions): Chain.Chain => {
  const c = options.config
  const guardrail = options.guardrail
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
    Chain.entry("Sandbox", () => SandboxMW.layer(), [
      { inside: "ThreadData", reason: "the sandbox is made over the thread's directories ThreadData records" }
    ]),
    // 6: repairs the history once per call, outside the retry loop
    Chain.entry("DanglingToolCall", () => DanglingToolCall.layer(), [
      { outside: "LLMErrorHandling", reason: "the history is repaired once per call, not once per retry" }
    ]),
    // 7: the retry loop and circuit breaker; everything inside is re-run per attempt
    Chain.entry(
      "LLMErrorHandling",
      () => LLMErrorHandling.layer({ llmCall: c.llm_call, circuitBreaker: c.circuit_breaker, breaker: options.breaker })
    ),
    // 9: the configured guardrail applies to subagents too
    ...when(guardrail !== undefined, () =>
      Chain.entry("Guardrail", () =>
        GuardrailMW.layerWith(guardrail!, { failClosed: c.guardrails.fail_closed, passport: c.guardrails.passport }), [
        { outside: "SandboxAudit", reason: "a denied tool is never audited as if it ran" }
      ])),
    // 10: bash audit
    Chain.entry("SandboxAudit", () => SandboxAudit.layer()),
    // 13: tool failures become results the subagent can read
    Chain.entry("ToolErrorHandling", () =>
      ToolErrorHandling.layer({
        skillReadToolNames: c.summarization.skill_file_read_tool_names,
        skillsRoot: c.skills.container_path
      })),
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
  /**
   * Subagents: the `task` tool, SubagentLimit and the prompt's subagent section. Needs a `SubagentRunner` in
   * the context (`Subagents.layer()`, one per app).
   */
  readonly subagents?: {
    readonly maxConcurrent?: number | undefined
    readonly maxTotal?: number | undefined
  } | undefined
  /** Who the agent is (a custom agent): its name, its SOUL.md, whether `<self_update>` is in its prompt. */
  readonly identity?: {
    readonly name?: string | undefined
    readonly soul?: string | undefined
    readonly selfUpdate?: boolean | undefined
  } | undefined
  /** The skills the agent may use (a custom agent's allowlist): undefined = all, [] = none. */
  readonly skills?: ReadonlyArray<string> | undefined
  /** The tool groups the sandbox and app tools are limited to (a custom agent's `tool_groups`); undefined = all. */
  readonly toolGroups?: ReadonlyArray<string> | undefined
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
 * The static system prompt of a configuration (the skills found under `skills.path` at start-up, limited to an
 * allowlist when given), with what the agent adds: its identity, subagents.
 */
export const defaultSystemPrompt = (
  app: AppConfigService["Type"],
  extra: Partial<Omit<SystemPrompt.PromptOptions, "skills">> & {
    readonly allowedSkills?: ReadonlyArray<string> | undefined
  } = {}
): string => {
  const container = app.config.skills.container_path
  const { allowedSkills, ...rest } = extra
  const skills = SystemPrompt.loadSkills(LocalSandbox.skillsDirectory(app), container)
  return SystemPrompt.make({
    clarification: true,
    skillsContainer: container,
    ...rest,
    skills: allowedSkills === undefined ? skills : skills.filter((s) => allowedSkills.includes(s.name))
  })
}

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
        : { ...message, additional_kwargs: { ...message.additional_kwargs, files: input.files } } as Message
    )
  }
  if (input.messages !== undefined) out.push(...input.messages)
  return out
}

/** What building the agent can fail with: a chain that breaks an ordering fact, or an unusable configuration. */
export type BuildError =
  | Chain.ChainError
  | Guardrail.GuardrailConfigError
  | SafetyFinishReason.SafetyDetectorConfigError
  | SubagentRunnerMissing

/** What the agent needs from the app. */
export type Requirements = ModelService | ThreadStore | SandboxProvider | AppConfigService

/**
 * The lead agent as a layer: its chain is built once, over the app's `ModelService` with the sandbox tools and
 * the app's own tools; the store, the sandbox provider and the configuration come from the app.
 */
export const layer = (options: Options = {}): Layer.Layer<LeadAgent, BuildError, Requirements> =>
  Layer.scoped(
    LeadAgent,
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const store = yield* ThreadStore
      const guardrail = yield* guardrailOf(app.config)
      const base = options.sandboxTools === false ? [] : yield* SandboxTools.tools({ vision: options.vision === true })
      const tools = Toolkit.make(ToolGroups.filter([
        ...base.filter((t) => !(options.tools ?? []).some((own) => own.name === t.name)),
        ...(options.tools ?? [])
      ], options.toolGroups))
      const runner = options.subagents === undefined ? undefined : yield* Effect.flatMap(
        Effect.serviceOption(SubagentRunner),
        (found) =>
          found._tag === "Some" ? Effect.succeed(found.value) : Effect.fail(
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
        toolGroups: options.toolGroups,
        skills: options.skills
      }
      const planned = chain({ config: app.config, guardrail, breaker: options.breaker, subagents })
      const customised = options.chain === undefined ? Either.right(planned) : options.chain(planned)
      const checked = yield* Either.flatMap(customised, Chain.validate)
      const ports: Context.Context<Ports> = yield* Layer.build(
        MW.stack(checked.map((e) => e.make()), MW.baseOverModel(tools))
      )
      const systemPrompt = options.systemPrompt ?? defaultSystemPrompt(app, {
        agentName: options.identity?.name,
        soul: options.identity?.soul,
        selfUpdate: options.identity?.selfUpdate,
        allowedSkills: options.skills,
        subagents: subagents === undefined ? undefined : {
          maxConcurrent: subagents.maxConcurrent ?? 3,
          maxTotal: subagents.maxTotal ?? 6,
          types: subagents.runner.types
        }
      })

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
        tools: Context.get(ports, ToolService).definitions,
        run: (input) => Run.stream(runInput(input), ports).pipe(Stream.provideService(ThreadStore, store)),
        turn: (input, onEvent) =>
          Run.execute(runInput(input), ports, onEvent).pipe(Effect.provideService(ThreadStore, store))
      })
    })
  )
