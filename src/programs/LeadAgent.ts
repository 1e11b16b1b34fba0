/**
 * The lead agent as a service an Effect app provides once and runs turns through.
 *
 * `layer(options)` builds the lead chain once (its order is in `Chains`, each entry with its ordering facts in
 * its middleware's module), over the app's `ModelService`, the sandbox tools and the app's own tools, assembles
 * the system prompt (`AgentPrompt`), and provides `LeadAgent`: `run(input)` streams a turn's events, `turn(input)`
 * waits for its end. The chain and prompt helpers are re-exported here under their former names.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as UserModule from "../internal/UserModule.js"
import * as ConfiguredAuthorization from "../layers/ConfiguredAuthorization.js"
import * as SandboxTools from "../layers/SandboxTools.js"
import * as Toolkit from "../layers/Toolkit.js"
import type { ConfigError } from "../layers/ConfigFile.js"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import * as Chain from "../middleware/Chain.js"
import * as ClarificationMW from "../middleware/Clarification.js"
import type * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import type { Ports } from "../middleware/Middleware.js"
import * as MW from "../middleware/Middleware.js"
import * as SafetyDetectorModules from "../middleware/SafetyDetectorModules.js"
import * as UsageJournal from "../middleware/UsageJournal.js"
import type * as Summarization from "../middleware/Summarization.js"
import type * as SafetyFinishReason from "../middleware/SafetyFinishReason.js"
import { AppConfigService } from "../services/AppConfig.js"
import * as Authz from "../services/Authorization.js"
import type * as Guardrail from "../services/Guardrail.js"
import { Memory } from "../services/Memory.js"
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
import type { BackgroundTask, ThreadState } from "../state/ThreadState.js"
import * as AgentAuthorization from "./AgentAuthorization.js"
import * as AgentPrompt from "./AgentPrompt.js"
import type * as SystemPrompt from "./SystemPrompt.js"
import * as Chains from "./Chains.js"
import { ConfiguredMiddlewares } from "./ConfiguredMiddlewares.js"
import * as Run from "./Run.js"
import * as RunSecretsStore from "./RunSecretsStore.js"

export type { Deferred, ChainOptions, SubagentChainOptions } from "./Chains.js"
export { chain, guardrailOf, order, subagentChain, subagentTokenBudget } from "./Chains.js"
export type { PromptInputs } from "./AgentPrompt.js"
export { defaultSoul, defaultSystemPrompt, promptOptions } from "./AgentPrompt.js"

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
  /** The thread's title to set with them (a client's input values). */
  readonly title?: string | undefined
  /** The thread's background tasks to set with them (`background_tasks`, projected from the MCP task records). */
  readonly backgroundTasks?: ReadonlyArray<BackgroundTask> | undefined
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
  /**
   * The app's own tools, added after the sandbox tools (a tool of the same name replaces a sandbox tool; a tool of
   * the chain's middleware, `ask_clarification`, `task`..., replaces one of the same name here).
   */
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
  readonly deferred?: Chains.Deferred | undefined
  /** The prompt's routing hints for MCP tools, deferred or not (`ToolAssembly`); default: the deferred routes'. */
  readonly routingHints?: ReadonlyArray<SystemPrompt.RoutingHint> | undefined
  /** Plan mode: the agent keeps a todo list with `write_todos` (default false). */
  readonly planMode?: boolean | undefined
  /** A custom agent's name: the prompt's name and the agent's own memory (default: the default agent). */
  readonly agentName?: string | undefined
  /**
   * The agent whose memory the run reads and writes, when not `agentName`'s: the bootstrap agent's is the
   * agent it creates (DeerFlow scopes the bootstrap's middlewares to it), its prompt staying the default one.
   */
  readonly memoryAgent?: string | undefined
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
  /**
   * Before-summarisation hooks of the app, run in this order after memory's flush each time the thread is
   * compacted (see `Summarization.Hook`).
   */
  readonly summarizationHooks?: ReadonlyArray<Summarization.Hook> | undefined
  /**
   * The role the agent is built for (`authorization.enabled`: its prompt and `tools` name only the tools the role
   * may see; each request is filtered again for the run's own user and role). Default: `default_role`.
   */
  readonly role?: string | null | undefined
  /** The MCP server of each MCP tool among `tools` (the role's `mcp_servers` policy). */
  readonly mcpServers?: Authz.McpServers | undefined
  readonly subagents?: {
    readonly maxConcurrent?: number | undefined
    readonly maxTotal?: number | undefined
    readonly toolGroups?: ReadonlyArray<string> | undefined
  } | undefined
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
        : M.withKwargs(message, { files: input.files })
    )
  }
  if (input.messages !== undefined) out.push(...input.messages)
  return out
}

/**
 * The events of a run refused before it starts (its role may use no model): `run_start`, then a `run_end` with
 * status `error` saying why. Nothing of the thread is read or written.
 */
const refusal = (
  input: { readonly threadId: string; readonly runId: string },
  error: Authz.AuthorizationError
): readonly [RunEvent, RunEndEvent] => [
  { type: "run_start", thread_id: input.threadId, run_id: input.runId },
  { type: "run_end", status: "error", stop_reason: "error", error: { name: error._tag, message: error.message } }
]

/** What building the agent can fail with: a chain that breaks an ordering fact, or an unusable configuration. */
export type BuildError =
  | ConfigError
  | Chain.ChainError
  | Guardrail.GuardrailConfigError
  | Authz.AuthorizationConfigError
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
      const guardrail = yield* Chains.guardrailOf(app.config, UserModule.baseDirOf(app.source))
      const authorization = yield* ConfiguredAuthorization.fromConfig(
        app.config.authorization,
        UserModule.baseDirOf(app.source)
      )
      const safetyDetectors = yield* SafetyDetectorModules.fromConfig(
        app.config.safety_finish_reason,
        UserModule.baseDirOf(app.source)
      )
      // the app's memory under this configuration's `memory` (an edit taken by `antler serve`: the agents over it)
      const memory = Option.getOrUndefined(yield* Effect.serviceOption(Memory))?.under(app.config.memory)
      const configured = Option.getOrUndefined(yield* Effect.serviceOption(ConfiguredMiddlewares))
      const registry = SkillsDirectory.make(app)
      const catalog = SkillsDirectory.catalogOf(app)
      // (the skills the role it is built for may load: those it lists, activates and describes; its subagents too)
      const skills = yield* AgentAuthorization.skillsFor(authorization, options.role, catalog, options.skills)
      const base = options.sandboxTools === false ? [] : yield* SandboxTools.tools({ vision: options.vision === true })
      const tools = Toolkit.make([
        ...base.filter((t) => !(options.tools ?? []).some((own) => own.name === t.name)),
        ...(options.tools ?? [])
      ])
      // (an MCP tool's server, given or the tool's own: its role's `mcp_servers` policy is asked of it)
      const mcpServers = AgentAuthorization.mcpServersWith(options.tools ?? [], options.mcpServers)
      // (a deferred tool the role may not see is not in `tool_search`'s catalog; the factory's are already not)
      const deferred = yield* AgentAuthorization.deferredFor(authorization, options.role, options.deferred, mcpServers)
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
        skills
      }
      const planned = Chains.chain({
        config: app.config,
        guardrail,
        authorization,
        safetyDetectors,
        breaker: options.breaker,
        skills: registry,
        skillAllowlist: skills,
        mcpServers,
        usableSkills: catalog.skills.filter((s) => s.enabled && (skills === undefined || skills.includes(s.name)))
          .length,
        memory,
        planMode: options.planMode,
        vision: options.vision,
        agentName: options.memoryAgent ?? options.agentName,
        deferred,
        subagents,
        summarizationHooks: options.summarizationHooks,
        configured: configured?.entries
      })
      const customised = options.chain === undefined ? Either.right(planned) : options.chain(planned)
      const checked = yield* Either.flatMap(customised, Chain.validate)
      // (without TokenUsage, each call's usage is still counted, under the chain: DeerFlow's run journal, unless
      // `run_events.track_token_usage` is off)
      const journal = app.config.token_usage.enabled || !app.config.run_events.track_token_usage
        ? []
        : [UsageJournal.layer()]
      const ports: Context.Context<Ports> = yield* Layer.build(
        MW.stack([...checked.map((e) => e.make()), ...journal], MW.baseOverModel(tools))
      )
      const all = Context.get(ports, ToolService).definitions
      // (the tools the role the agent is built for may see: the prompt speaks of no other)
      const shown = authorization === undefined ? undefined : new Set(
        yield* Authz.visibleTools(
          authorization,
          Authz.principalOf({ role: options.role }, authorization.defaultRole),
          all.map((d) => d.name),
          mcpServers
        )
      )
      const definitions = shown === undefined ? all : all.filter((d) => shown.has(d.name) || d.name === "tool_search")
      const systemPrompt = yield* AgentPrompt.forAgent(app, catalog, {
        tools: definitions.map((d) => d.name),
        agentName: options.agentName,
        soul: options.soul,
        selfUpdate: options.selfUpdate,
        skillAllowlist: skills,
        deferred,
        // (no hint names a tool the role may not see)
        routingHints: shown === undefined
          ? options.routingHints
          : options.routingHints?.filter((h) => shown.has(h.tool)),
        subagents: subagents === undefined ? undefined : {
          maxConcurrent: subagents.maxConcurrent ?? 3,
          maxTotal: subagents.maxTotal ?? 6,
          types: subagents.runner.types
        }
      }, options.systemPrompt)

      const runInput = (input: TurnInput): Run.RunInput => ({
        threadId: input.threadId ?? M.newId(),
        runId: input.runId,
        userId: input.userId,
        input: turnMessages(input),
        title: input.title,
        backgroundTasks: input.backgroundTasks,
        systemPrompt,
        options: { recursionLimit: app.config.recursion_limit, ...input.options }
      })
      // (a run's model, as the factory chooses it for a role: a library's run was not through the factory; one
      // through it names a model its role may use, which this leaves as it is. Without a role's policy a run is as
      // it was asked: no check, its events not wrapped)
      const chosen = (input: TurnInput) =>
        Effect.gen(function*() {
          const ids = { ...input, threadId: input.threadId ?? M.newId(), runId: input.runId ?? M.newId() }
          if (authorization === undefined) return { input: ids, warning: undefined }
          const run = { userId: input.userId, ...input.options }
          const model = yield* Effect.either(
            AgentAuthorization.runModel(authorization, options.role, app.config.models, run)
          )
          if (Either.isLeft(model)) return { input: ids, refusal: refusal(ids, model.left) }
          const { modelName, warning } = model.right
          const same = modelName === input.options?.modelName
          if (same) return { input: ids, warning }
          // (a substitute takes the run's thinking settings as its own configuration allows them)
          const substitute = warning === undefined ? undefined : app.config.models.find((m) => m.name === modelName)
          const thinking = substitute === undefined
            ? {}
            : AgentAuthorization.thinkingFor(substitute, input.options ?? {})
          return { input: { ...ids, options: { ...input.options, modelName, ...thinking } }, warning }
        })
      // (the warning right after the run's `run_start`, as the factory sends its own)
      const warned = (warning: string | undefined) => {
        let told = warning === undefined
        return (event: RunEvent): ReadonlyArray<RunEvent> => {
          if (told || event.type !== "run_start") return [event]
          told = true
          return [event, { type: "custom", name: "warning", data: { message: warning } }]
        }
      }

      // (a run given request secrets keeps none of them in its thread: see `RunSecretsStore`)
      const storeOf = (input: TurnInput) => RunSecretsStore.hiding(store, input.options?.secrets)

      return LeadAgent.of({
        order: Chain.names(checked),
        systemPrompt,
        tools: definitions,
        run: (input) =>
          authorization === undefined
            ? Run.stream(runInput(input), ports).pipe(Stream.provideService(ThreadStore, storeOf(input)))
            : Stream.unwrap(Effect.map(chosen(input), (ready) => {
              if ("refusal" in ready) return Stream.fromIterable(ready.refusal)
              const stream = Run.stream(runInput(ready.input), ports)
              return (ready.warning === undefined ? stream : Stream.mapConcat(stream, warned(ready.warning))).pipe(
                Stream.provideService(ThreadStore, storeOf(input))
              )
            })),
        turn: (input, onEvent) =>
          authorization === undefined
            ? Run.execute(runInput(input), ports, onEvent).pipe(Effect.provideService(ThreadStore, storeOf(input)))
            : Effect.flatMap(chosen(input), (ready) => {
              if ("refusal" in ready) {
                for (const event of ready.refusal) onEvent?.(event)
                return Effect.succeed(ready.refusal[1])
              }
              const warn = warned(ready.warning)
              const send = onEvent === undefined || ready.warning === undefined ? onEvent : (event: RunEvent) => {
                for (const sent of warn(event)) onEvent(sent)
              }
              return Run.execute(runInput(ready.input), ports, send).pipe(
                Effect.provideService(ThreadStore, storeOf(input))
              )
            })
      })
    })
  )
