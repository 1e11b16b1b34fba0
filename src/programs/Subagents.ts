/**
 * Subagents (SPEC §8): the registry of subagent types and the app's `SubagentRunner`.
 *
 * - Types: the built-in `general-purpose` and `bash` (offered only when bash can run), and custom ones from
 *   `subagents.custom_agents`, with per-agent overrides from `subagents.agents` (timeout, turns, model, skills,
 *   token budget); built-ins also take the global `subagents.timeout_seconds` and `subagents.max_turns`.
 * - A task runs the subagent chain (`Chains.subagentChain`) over the app's model, and the parent's thread:
 *   the same sandbox and directories, its own messages (kept in memory, not in the thread), its own system
 *   prompt (its type's, then the lead's skills section for the enabled skills its type's `skills` and the parent's
 *   allowlist leave it, as they are at the task: `SubagentPrompt`), the run's request secrets (the skills whose
 *   secrets the parent had bound for the call bind them for it too: `SkillSecrets.DelegatedSkills`), its tools (the
 *   parent's, limited by the type's allowlist and denylist and the parent's tool groups),
 *   its model (`inherit` = the parent run's), thinking off, `max_turns` as its recursion limit, its own
 *   timeout. Each type's chain is built once, on first use.
 * - At most `poolSize` (3) subagents run at once in the app; others wait for a slot. A task that has not
 *   finished `timeout + 60` seconds after it was submitted (it waited too long for a slot) ends
 *   `polling_timed_out`.
 * - Progress goes to the parent run's events: `task_started`, `task_running` (each new step message), then
 *   `task_completed` / `task_failed` / `task_cancelled` / `task_timed_out`, each with `task_id` (the call id)
 *   and a `timestamp`. Interrupting the parent's tool call (the parent run is cancelled) cancels the subagent.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as UserModule from "../internal/UserModule.js"
import * as LocalSandbox from "../layers/LocalSandbox.js"
import * as MemoryThreadStore from "../layers/MemoryThreadStore.js"
import * as ConfiguredAuthorization from "../layers/ConfiguredAuthorization.js"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import * as Toolkit from "../layers/Toolkit.js"
import * as Chain from "../middleware/Chain.js"
import * as DeferredToolFilter from "../middleware/DeferredToolFilter.js"
import * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import type { Ports } from "../middleware/Middleware.js"
import * as MW from "../middleware/Middleware.js"
import * as SafetyDetectorModules from "../middleware/SafetyDetectorModules.js"
import * as Authz from "../services/Authorization.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import type { AppConfig, ModelConfig, TokenBudgetConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import { Mcp } from "../services/Mcp.js"
import type { ModelService } from "../services/ModelService.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { RunEndEvent, RunEvent } from "../services/RunEvents.js"
import { RunEvents } from "../services/RunEvents.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import type { SubagentType, TaskRequest } from "../services/SubagentRunner.js"
import { SubagentRunner, TaskEvent } from "../services/SubagentRunner.js"
import type * as Skills from "../services/Skills.js"
import type * as Tool from "../services/Tool.js"
import { ThreadStore } from "../services/ThreadStore.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Outcome } from "../state/SubagentStatus.js"
import type { StateUpdate } from "../state/ThreadState.js"
import * as AgentAuthorization from "./AgentAuthorization.js"
import * as Chains from "./Chains.js"
import { ConfiguredMiddlewares } from "./ConfiguredMiddlewares.js"
import * as Run from "./Run.js"
import * as SubagentPrompt from "./SubagentPrompt.js"
import * as SystemPrompt from "./SystemPrompt.js"
import * as SubagentGatedTools from "./SubagentGatedTools.js"
import { outcomeOf, usageOf } from "./SubagentOutcome.js"
import * as TaskUsage from "./TaskUsage.js"
import * as ToolAssembly from "./ToolAssembly.js"
import * as SubagentBuiltinText from "./SubagentBuiltinText.js"

// ---------------------------------------------------------------------------------------------------------
// The registry

/** A subagent type, resolved (SPEC §8.1 `SubagentConfig`). */
export interface SubagentConfig {
  readonly name: string
  readonly description: string
  readonly systemPrompt: string
  /** Tool allowlist; undefined = every tool the parent has. */
  readonly tools?: ReadonlyArray<string> | undefined
  readonly disallowedTools: ReadonlyArray<string>
  /** Skills allowlist; undefined = all enabled, [] = none. */
  readonly skills?: ReadonlyArray<string> | undefined
  /** A configured model name, or `inherit` (the parent run's model). */
  readonly model: string
  readonly maxTurns: number
  readonly timeoutSeconds: number
  readonly tokenBudget: TokenBudgetConfig
}

/** What no subagent may use: it cannot delegate, ask the user, or present deliverables. */
export const DEFAULT_DISALLOWED: ReadonlyArray<string> = ["task", "ask_clarification", "present_files"]

/** The built-in `general-purpose` subagent. */
export const GENERAL_PURPOSE = "general-purpose"

/** The built-in `bash` subagent. */
export const BASH = "bash"

/**
 * Why `bash` is refused when bash cannot run in the sandbox: DeerFlow's sentence
 * (`LOCAL_BASH_SUBAGENT_DISABLED_MESSAGE`) with Antler's sandbox in it (bubblewrap where DeerFlow names its
 * AioSandboxProvider).
 */
export const BASH_DISABLED_MESSAGE = "Bash subagent is disabled because commands cannot run in an isolated sandbox " +
  "here (bubblewrap is not available) and host bash execution is not a secure sandbox boundary. Install " +
  "bubblewrap for isolated bash access, or set sandbox.allow_host_bash: true only in a fully trusted local " +
  "environment. Use general-purpose instead."

/**
 * The registry of a configuration (SPEC §8.1): built-ins (`bash` only when `bash` is true), then custom
 * types, each with its per-agent override.
 */
export const registry = (
  config: AppConfig,
  options: { readonly bash: boolean }
): ReadonlyMap<string, SubagentConfig> => {
  const settings = config.subagents
  const out = new Map<string, SubagentConfig>()
  const withOverride = (base: SubagentConfig): SubagentConfig => {
    const o = settings.agents[base.name]
    if (o === undefined) return base
    return {
      ...base,
      ...(o.timeout_seconds != null ? { timeoutSeconds: o.timeout_seconds } : {}),
      ...(o.max_turns != null ? { maxTurns: o.max_turns } : {}),
      ...(o.model != null ? { model: o.model } : {}),
      // null is no override, as DeerFlow's get_skills_for: a custom type keeps its own allowlist
      ...(o.skills != null ? { skills: o.skills } : {}),
      ...(o.token_budget != null ? { tokenBudget: Chains.subagentTokenBudget(config, o.token_budget) } : {})
    }
  }
  const builtin = (spec: Omit<SubagentConfig, "timeoutSeconds" | "tokenBudget" | "model" | "disallowedTools">) =>
    withOverride({
      ...spec,
      maxTurns: settings.max_turns ?? spec.maxTurns,
      model: "inherit",
      disallowedTools: DEFAULT_DISALLOWED,
      timeoutSeconds: settings.timeout_seconds,
      tokenBudget: Chains.subagentTokenBudget(config)
    })
  out.set(GENERAL_PURPOSE, builtin({
    name: GENERAL_PURPOSE,
    description: SubagentBuiltinText.GENERAL_PURPOSE_DESCRIPTION,
    systemPrompt: SubagentPrompt.GENERAL_PURPOSE_PROMPT,
    maxTurns: 150
  }))
  if (options.bash) {
    out.set(BASH, builtin({
      name: BASH,
      description: SubagentBuiltinText.BASH_DESCRIPTION,
      systemPrompt: SubagentPrompt.BASH_PROMPT,
      tools: ["bash", "ls", "read_file", "write_file", "str_replace"],
      maxTurns: 60
    }))
  }
  for (const [name, custom] of Object.entries(settings.custom_agents)) {
    // a built-in's name stays the built-in's, offered or not (a custom `bash` does not stand in for it)
    if (name === GENERAL_PURPOSE || name === BASH) continue
    out.set(name, withOverride({
      name,
      description: custom.description,
      systemPrompt: custom.system_prompt,
      tools: custom.tools ?? undefined,
      disallowedTools: custom.disallowed_tools,
      skills: custom.skills ?? undefined,
      model: custom.model,
      maxTurns: custom.max_turns,
      timeoutSeconds: custom.timeout_seconds,
      tokenBudget: Chains.subagentTokenBudget(config)
    }))
  }
  return out
}

/** The skills of a subagent: the parent's allowlist ∩ the type's (undefined = no limit on either side). */
export const effectiveSkills = (
  parent: ReadonlyArray<string> | undefined,
  own: ReadonlyArray<string> | undefined
): ReadonlyArray<string> | undefined =>
  parent === undefined ? own : own === undefined ? parent : own.filter((name) => parent.includes(name))

/** A type's tools: its allowlist (if any) minus its denylist. */
export const toolsOf = <T extends { readonly name: string }>(
  config: Pick<SubagentConfig, "tools" | "disallowedTools">,
  tools: ReadonlyArray<T>
): ReadonlyArray<T> =>
  tools.filter((t) =>
    (config.tools === undefined || config.tools.includes(t.name)) && !config.disallowedTools.includes(t.name)
  )

// ---------------------------------------------------------------------------------------------------------
// Outcomes (`SubagentOutcome`)

export { outcomeOf, usageOf }

// ---------------------------------------------------------------------------------------------------------
// The runner

/** Options of the runner. */
export interface Options {
  /** How many subagents may run at once in the app (default 3, DeerFlow's pool). */
  readonly poolSize?: number | undefined
  /**
   * The pool itself, shared with the app's other runners (one per configuration `antler serve` took, each built
   * over its own); wins over `poolSize`.
   */
  readonly pool?: Effect.Semaphore | undefined
  /** The app's own tools, offered to subagents too (limited like the sandbox tools). */
  readonly tools?: ReadonlyArray<Tool.Tool> | undefined
  /** Whether the `bash` subagent is offered; default: when bash can run in the sandbox. */
  readonly bash?: boolean | undefined
  /** The models runs may name (for `supports_vision`); default: the configuration's. */
  readonly models?: ReadonlyArray<ModelConfig> | undefined
  /** A circuit breaker shared with the app's other agents; by default each subagent type has its own. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
}

const POLLING_GRACE_SECONDS = 60

/**
 * The error of a task whose subagent outlived its timeout and the grace after it (DeerFlow's task tool's text: the
 * minutes are the configured timeout's, whole, as its `timeout_seconds // 60`).
 */
export const pollingTimedOut = (timeoutSeconds: number, started: boolean): string =>
  `Task polling timed out after ${Math.floor(timeoutSeconds / 60)} minutes. This may indicate the background task ` +
  `is stuck. Status: ${started ? "running" : "pending"}`

/** The runner over the app's services; the subagent chains it builds live as long as its scope. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const app = yield* AppConfigService
    const base = yield* Effect.context<ModelService | SandboxProvider | AppConfigService>()
    // The app's MCP connections, when it has them: subagents get the MCP tools the lead agent gets.
    const mcp = yield* Effect.serviceOption(Mcp)
    const configured = Option.getOrUndefined(yield* Effect.serviceOption(ConfiguredMiddlewares))
    const services = Option.isSome(mcp) ? Context.add(base, Mcp, mcp.value) : base
    const scope = yield* Effect.scope
    const pool = options.pool ?? (yield* Effect.makeSemaphore(Math.max(1, options.poolSize ?? 3)))
    const building = yield* Effect.makeSemaphore(1)
    // each built agent with its system prompt for the skills it may use, made once per run
    // (`unknown`: why a tool is not the subagent's, for a server listing its tools only with request secrets)
    type Built = {
      ports: Context.Context<Ports>
      prompt: (skills: ReadonlyArray<Skills.Skill>) => string
      unknown: SubagentGatedTools.Why | undefined
    }
    const built = new Map<string, Either.Either<Built, string>>()
    const bash = options.bash ?? (yield* LocalSandbox.bashMode(app)).mode !== "disabled"
    const configs = registry(app.config, { bash })
    // (the run's role's provider, for a type's own model; one that cannot be loaded builds no agent, see below)
    const authorization = yield* Effect.orElseSucceed(
      ConfiguredAuthorization.fromConfig(app.config.authorization, UserModule.baseDirOf(app.source)),
      () => undefined
    )
    /** The principal of the parent run (its role: `extra.user_role`; none: `default_role`). */
    const runPrincipal = (parent: RunContext["Type"]) => {
      const role = parent.options.extra?.user_role
      return Authz.principalOf(
        { userId: parent.userId, role: typeof role === "string" ? role : null },
        authorization?.defaultRole ?? ""
      )
    }
    const models = options.models ?? app.config.models
    const container = app.config.skills.container_path
    const skillRegistry = SkillsDirectory.make(app)
    // The enabled skills as they are now, as DeerFlow's subagents load them for each task: read again only when a
    // SKILL.md or the skill states changed (`SkillsDirectory.signature`, file metadata only).
    let enabled: { readonly signature: string; readonly skills: ReadonlyArray<Skills.Skill> } | undefined
    const enabledSkills = Effect.sync(() => {
      const signature = SkillsDirectory.signature(app)
      if (enabled?.signature !== signature) {
        enabled = { signature, skills: SkillsDirectory.catalogOf(app).skills.filter((s) => s.enabled) }
      }
      return enabled.skills
    })
    const usableOf = (all: ReadonlyArray<Skills.Skill>, skills: ReadonlyArray<string> | undefined) =>
      skills === undefined ? all : all.filter((s) => skills.includes(s.name))
    const types: ReadonlyArray<SubagentType> = [...configs.values()].map((c) => ({
      name: c.name,
      description: c.description
    }))

    // One chain per (type, parent tool groups, skills, vision, role), built on first use and kept. An agent that
    // misses the tools of a failed MCP server is not kept: the next task tries the server again.
    const agentFor = (
      config: SubagentConfig,
      toolGroups: ReadonlyArray<string> | undefined,
      skills: ReadonlyArray<string> | undefined,
      vision: boolean,
      role: string | undefined,
      secrets: SkillSecrets.RequestSecrets | undefined
    ) =>
      building.withPermits(1)(Effect.suspend(() => {
        // (an agent whose MCP servers were listed with the run's request secrets is that run's: never kept, see
        // `ToolAssembly.Options.run`; one of a run given some is not one of a run given none)
        const given = SkillSecrets.entries(secrets)
        // (by whether the run gave any, never by their names, which users choose: an agent of a run whose servers
        // naming request secrets were asked for with them is not kept at all, `incomplete`)
        const key = JSON.stringify([config.name, toolGroups ?? null, skills ?? null, vision, role ?? null]) +
          (given.size > 0 ? "+secrets" : "")
        const known = built.get(key)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.gen(function*() {
          const guardrail = yield* Effect.either(Chains.guardrailOf(app.config, UserModule.baseDirOf(app.source)))
          if (Either.isLeft(guardrail)) return Either.left(guardrail.left.message)
          const safetyDetectors = yield* Effect.either(
            SafetyDetectorModules.fromConfig(app.config.safety_finish_reason, UserModule.baseDirOf(app.source))
          )
          if (Either.isLeft(safetyDetectors)) return Either.left(safetyDetectors.left.message)
          // The lead agent's tools (configured ones in the parent's groups, built-ins, MCP), then the type's
          // allowlist and denylist.
          // (no list_uploaded_files: a subagent's state has no uploaded_files to leave this run's uploads out by)
          // (the parent run's request secrets: an MCP server listing its tools only with them is listed with them)
          const assembly = yield* ToolAssembly.assemble({
            vision,
            groups: toolGroups,
            uploads: false,
            bash,
            ...(given.size === 0 ? {} : { run: { secrets } })
          })
          const own = options.tools ?? []
          const tools = toolsOf(config, [...assembly.tools.filter((t) => !own.some((o) => o.name === t.name)), ...own])
          const names = new Set(tools.map((t) => t.name))
          const authorization = yield* Effect.either(
            ConfiguredAuthorization.fromConfig(app.config.authorization, UserModule.baseDirOf(app.source))
          )
          if (Either.isLeft(authorization)) return Either.left(authorization.left.message)
          const servers = AgentAuthorization.mcpServersOf(assembly.entries)
          // (the parent's role: a deferred tool it may not see is not in `tool_search`'s catalog)
          const visible = yield* AgentAuthorization.deferredFor(authorization.right, role, assembly.deferred, servers)
          const deferredTools = visible?.tools.filter((t) => names.has(t.name)) ?? []
          const deferred = visible === undefined || deferredTools.length === 0
            ? undefined
            : {
              ...visible,
              tools: deferredTools,
              routes: visible.routes?.filter((r) => names.has(r.name))
            }
          // the deferred tools are named in its prompt, with the routing hints of the tools it has (DeerFlow's
          // _build_initial_state): `tool_search` alone does not tell the model what it may find
          // (and no hint names a tool the parent's role may not see)
          const shown = authorization.right === undefined ? names : new Set(yield* Authz.visibleTools(
            authorization.right,
            Authz.principalOf({ role }, authorization.right.defaultRole),
            [...names],
            servers
          ))
          const promptTools = [...shown, ...(deferred === undefined ? [] : [DeferredToolFilter.TOOL_NAME])]
          const toolSections = SystemPrompt.toolSearchSections({
            tools: promptTools,
            deferredTools: deferred?.tools.map((t) => t.name),
            mcpRoutingHints: assembly.routingHints.filter((h) => shown.has(h.tool))
          })
          // the skills it may use (DeerFlow's _load_skills: the enabled ones, limited to its allowlist), listed in its
          // prompt in the lead's words; with deferred discovery and any, it has describe_skill (its SkillActivation's)
          const usable = usableOf(yield* enabledSkills, skills)
          const deferredDiscovery = app.config.skills.deferred_discovery
          const describing = deferredDiscovery && usable.length > 0
          const prompt = (now: ReadonlyArray<Skills.Skill>) =>
            SubagentPrompt.subagentPrompt({
              systemPrompt: config.systemPrompt,
              skills: now,
              skillsContainer: container,
              deferredDiscovery,
              tools: [...promptTools, ...(describing ? ["describe_skill"] : [])],
              toolSections
            })
          const chain = Chain.validate(Chains.subagentChain({
            config: app.config,
            guardrail: guardrail.right,
            authorization: authorization.right,
            mcpServers: servers,
            safetyDetectors: safetyDetectors.right,
            breaker: options.breaker,
            tokenBudget: config.tokenBudget,
            skills: skillRegistry,
            skillAllowlist: skills,
            usableSkills: usable.length,
            vision,
            deferred,
            configured: configured?.entries
          }))
          if (Either.isLeft(chain)) return Either.left(chain.left.message)
          const unknown = yield* SubagentGatedTools.explainer(
            assembly.entries,
            new Set(given.keys()),
            authorization.right,
            role
          )
          const ports = yield* Effect.either(
            Layer.buildWithScope(
              MW.stack(chain.right.map((e) => e.make()), MW.baseOverModel(Toolkit.make(tools))),
              scope
            )
          )
          const result = Either.match(ports, {
            onLeft: (error) => Either.left(String((error as { message?: unknown }).message ?? error)),
            onRight: (ports) => Either.right({ ports, prompt, unknown })
          })
          if (!assembly.incomplete) built.set(key, result)
          return result
        }).pipe(Effect.provide(services))
      }))

    const run = (request: TaskRequest): Effect.Effect<Outcome, never, RunContext | RunState | RunEvents> =>
      Effect.gen(function*() {
        const parent = yield* RunContext
        const parentState = yield* RunState
        // the skills whose request secrets the parent had bound for this call (its SkillActivation's)
        const delegated = Option.getOrUndefined(yield* Effect.serviceOption(SkillSecrets.DelegatedSkills))?.skills
        const events = yield* RunEvents
        const emit = (name: string, data: Record<string, unknown>) =>
          Effect.flatMap(Clock.currentTimeMillis, (ms) =>
            events.emit({
              type: "custom",
              name,
              data: { task_id: request.toolCallId, ...data, timestamp: new Date(ms).toISOString() }
            }))

        const config = configs.get(request.subagentType)
        if (config === undefined) {
          const error = request.subagentType === BASH && !bash
            ? BASH_DISABLED_MESSAGE
            : `Unknown subagent type '${request.subagentType}'. Available: ${[...configs.keys()].join(", ")}`
          yield* emit(TaskEvent.failed, { description: request.description, error })
          return { status: "failed", error } satisfies Outcome
        }
        const inherited = parent.options.modelName ?? models[0]?.name
        const wanted = config.model === "inherit" ? inherited : config.model
        // (a type's own model the run's role may not use: the run's, which its role may; as the lead agent's)
        const modelName = wanted === inherited || wanted === undefined || authorization === undefined ||
            (yield* Authz.allows(authorization, runPrincipal(parent), "model", "use", wanted))
          ? wanted
          : inherited
        const vision = models.find((m) => m.name === modelName)?.supports_vision === true
        const info = { maxTurns: config.maxTurns, modelName }
        const common = { description: request.description, subagent_type: config.name, model_name: modelName ?? null }

        // Messages of the subagent's run, by id in first-seen order (a message re-written keeps its place).
        const seen = new Map<string, Message>()
        const step = (event: RunEvent): Effect.Effect<void> => {
          // (what its skills bind, names only, audited in the parent's run as the parent's own binding is)
          if (event.type === "custom" && event.name === "skill_secrets") {
            return events.emit({ ...event, data: { ...(event.data as object), task_id: request.toolCallId } })
          }
          if (event.type !== "message" || event.message.type === "human" || event.message.type === "system") {
            return Effect.void
          }
          const message = event.message
          const fresh = !seen.has(message.id)
          seen.set(message.id, message)
          if (!fresh) return Effect.void
          return emit(TaskEvent.running, {
            ...common,
            message,
            message_index: seen.size,
            total_messages: seen.size,
            usage: usageOf([...seen.values()]) ?? null
          })
        }

        const execute = Effect.gen(function*() {
          const skills = effectiveSkills(request.skills, config.skills)
          // (the role matters only with authorization: one agent of a type for every role without it)
          const role = app.config.authorization.enabled ? parent.options.extra?.user_role : undefined
          const agent = yield* agentFor(
            config,
            request.toolGroups,
            skills,
            vision,
            typeof role === "string" ? role : undefined,
            parent.options.secrets
          )
          if (Either.isLeft(agent)) {
            return { status: "failed", error: `The subagent could not be built: ${agent.left}`, modelName } as Outcome
          }
          const current = yield* parentState.get
          const store = MemoryThreadStore.make()
          const seed: StateUpdate = {
            ...(current.sandbox !== null ? { sandbox: current.sandbox } : {}),
            ...(current.thread_data !== null ? { thread_data: current.thread_data } : {})
          }
          if (Object.keys(seed).length > 0) yield* Effect.ignore(store.append(parent.threadId, parent.runId, [seed]))
          let end: RunEndEvent | undefined
          const input: Run.RunInput = {
            threadId: parent.threadId,
            runId: parent.runId,
            userId: parent.userId,
            input: [M.human(request.prompt)],
            systemPrompt: agent.right.prompt(usableOf(yield* enabledSkills, skills)),
            unknownTool: agent.right.unknown,
            options: {
              modelName,
              recursionLimit: config.maxTurns,
              thinkingEnabled: false,
              nonInteractive: true,
              // (its run's request secrets: the same user's, the same run's; masked in its tool results as there;
              // with the skills whose secrets its parent had bound, which bind for its commands too)
              ...(parent.options.secrets === undefined ? {} : { secrets: parent.options.secrets }),
              ...(delegated === undefined ? {} : { delegatedSkills: delegated }),
              extra: { ...parent.options.extra, is_subagent: true, subagent_type: config.name }
            }
          }
          const finished = yield* Run.stream(input, agent.right.ports).pipe(
            Stream.runForEach((event) => {
              if (event.type === "run_end") end = event
              return step(event)
            }),
            Effect.provideService(ThreadStore, store),
            Effect.timeoutOption(Duration.seconds(config.timeoutSeconds))
          )
          if (Option.isNone(finished)) {
            return {
              status: "timed_out",
              error: `Execution timed out after ${config.timeoutSeconds} seconds`,
              modelName,
              usage: usageOf([...seen.values()])
            } as Outcome
          }
          const ended = end ?? { type: "run_end", status: "cancelled", stop_reason: "cancelled" }
          return outcomeOf(ended, [...seen.values()], info)
        })

        yield* emit(TaskEvent.started, common)
        const record = TaskUsage.recorder(parentState, modelName)
        let started = false
        const bound = config.timeoutSeconds + POLLING_GRACE_SECONDS
        const outcome: Outcome = yield* pool.withPermits(1)(Effect.suspend(() => {
          started = true
          return execute
        })).pipe(
          Effect.timeoutTo({
            duration: Duration.seconds(bound),
            onSuccess: (o): Outcome => o,
            onTimeout: (): Outcome => ({
              status: "polling_timed_out",
              error: pollingTimedOut(config.timeoutSeconds, started),
              modelName,
              usage: usageOf([...seen.values()])
            })
          }),
          // (what the subagent spent is the run's as the task ends, cancelled with its run too: TaskUsage)
          Effect.flatMap((o) => Effect.map(record([...seen.values()]), (usageRecorded) => ({ ...o, usageRecorded }))),
          Effect.onInterrupt(() => {
            const usage = usageOf([...seen.values()]) ?? null
            const cancelled = emit(TaskEvent.cancelled, { ...common, error: "Task cancelled by user.", usage })
            return Effect.zipRight(cancelled, record([...seen.values()]))
          })
        )
        const usage = outcome.usage ?? null
        switch (outcome.status) {
          case "completed":
            yield* emit(TaskEvent.completed, {
              ...common,
              result: outcome.result ?? "",
              stop_reason: outcome.stopReason ?? null,
              usage
            })
            break
          case "timed_out":
          case "polling_timed_out":
            yield* emit(TaskEvent.timedOut, { ...common, error: outcome.error ?? "", usage })
            break
          case "cancelled":
            yield* emit(TaskEvent.cancelled, { ...common, error: outcome.error ?? "", usage })
            break
          case "failed":
            yield* emit(TaskEvent.failed, {
              ...common,
              error: outcome.error ?? "",
              stop_reason: outcome.stopReason ?? null,
              usage
            })
        }
        return outcome
      })

    return SubagentRunner.of({ types, run })
  })

/** The app's subagent runner (one pool per app), over the app's model, sandbox and configuration. */
export const layer = (
  options: Options = {}
): Layer.Layer<SubagentRunner, never, ModelService | SandboxProvider | AppConfigService> =>
  Layer.scoped(SubagentRunner, make(options))

