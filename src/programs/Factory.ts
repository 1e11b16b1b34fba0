/**
 * The lead agent factory (SPEC §3): one function from the app's configuration and a run's settings to the
 * agent that serves the run. The CLI and the gateway both call it.
 *
 * - The runtime merge: LangGraph's `configurable` and `context` as one settings object, `context` winning,
 *   keys starting with `__` (internal) dropped; decoded with Schema (a bad value is a typed, readable error;
 *   `RuntimeSettings`).
 * - Model resolution (`RunResolution`): the requested model (`model_name` or `model`), else the agent's, else the
 *   default (the first configured model). An unknown name is a warning and the default is used (DeerFlow falls
 *   back silently). No configured model at all is DeerFlow's error, `NoModelsError`, for every run. Thinking
 *   follows the request when it says so, else the agent, else on; a model that does not support thinking or
 *   reasoning effort gets neither, with a warning.
 * - Tools come from `ToolAssembly` (configured tools filtered by the agent's tool groups, built-ins, the app's
 *   MCP tools, deferred behind `tool_search` when enabled); its warnings (a tool left out, an MCP server that
 *   failed) come with every run of the agent, and an agent that misses a failed MCP server's tools is built
 *   again for the next run.
 * - Agents are built once per shape (what changes the chain, the tools or the prompt: vision, plan mode,
 *   subagents, custom agent, tool groups, bootstrap, non-interactive, skill self-evolution) and kept until the
 *   MCP servers or the skills change (`SkillsDirectory.signature`); what only changes a run (model name,
 *   thinking, effort, recursion limit) goes into the run's options.
 * - With a `LiveConfig` (`antler serve`), each run takes the configuration as it is when it starts: after an edit
 *   of `config.yaml` is taken, agents are built again over it (its models, their clients, its sections).
 * - Each agent lives in a scope of its own (its chain, its middlewares' resources, the subagent runner of its
 *   configuration), held by the runs that use it (`Shared`): an agent replaced (an edit taken, the MCP servers or
 *   the skills changed) or not kept is closed once no run holds it; a run under way keeps its agent until it ends.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as LocalSandbox from "../layers/LocalSandbox.js"
import * as UserModule from "../internal/UserModule.js"
import * as ConfiguredAuthorization from "../layers/ConfiguredAuthorization.js"
import type * as Authz from "../services/Authorization.js"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import type { ModelConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import type { Snapshot } from "../services/LiveConfig.js"
import { LiveConfig } from "../services/LiveConfig.js"
import { Mcp } from "../services/Mcp.js"
import { McpTasks } from "../services/McpTasks.js"
import { ProcessSecrets } from "../services/ProcessSecrets.js"
import { ModelService } from "../services/ModelService.js"
import type { RunEvent } from "../services/RunEvents.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import { SubagentRunner } from "../services/SubagentRunner.js"
import type { ThreadStore } from "../services/ThreadStore.js"
import * as M from "../state/Message.js"
import * as Redact from "../state/Redact.js"
import * as AgentAuthorization from "./AgentAuthorization.js"
import * as AgentSetup from "./AgentSetup.js"
import * as CustomSkills from "./CustomSkills.js"
import * as LeadAgent from "./LeadAgent.js"
import * as RunMcpListing from "./RunMcpListing.js"
import * as ShadowedTools from "./ShadowedTools.js"
import * as Shared from "./Shared.js"
import type * as SkillSecrets from "../services/SkillSecrets.js"
import * as SkillManage from "./SkillManage.js"
import * as SubagentRunners from "./SubagentRunners.js"
import * as Subagents from "./Subagents.js"
import * as BackgroundTasks from "./BackgroundTasks.js"
import * as ToolAssembly from "./ToolAssembly.js"
import type { Resolved } from "./RunResolution.js"
import { resolve, runOptions, shapeKey } from "./RunResolution.js"
import { SettingsError, settingsOf } from "./RuntimeSettings.js"

/** An agent of the factory, with how it got its tools. */
interface Built {
  readonly agent: LeadAgent.Service
  readonly assembly: ToolAssembly.Assembly
}

/** The run an agent is built for, when its request secrets may list MCP servers (`ToolAssembly.Options.run`). */
type ForRun = ToolAssembly.Options["run"]

// ---------------------------------------------------------------------------------------------------------
// Run settings (`RuntimeSettings`)

export { mergeRuntime, RunSettings, SettingsError, settingsOf } from "./RuntimeSettings.js"

/** No model is configured, so no run can be served (DeerFlow's `_resolve_model_name`, SPEC §3.2). */
export class NoModelsError extends Schema.TaggedError<NoModelsError>()("NoModelsError", {
  message: Schema.String
}) {}

/** DeerFlow's words for a factory without models. */
export const NO_MODELS = "No chat models are configured. Please configure at least one model in config.yaml."

export { type AgentDefaults, type Resolved, resolve, runOptions, shapeKey } from "./RunResolution.js"

/**
 * The most agents kept for runs to come, the one used longest ago given up first (rebuilt when asked for again):
 * a shape's parts come from a run's settings (a custom agent's name, a bootstrap's new agent name), which users
 * choose.
 */
export const MAX_KEPT_AGENTS = 64

// ---------------------------------------------------------------------------------------------------------
// The factory service

/** One turn, with its run's settings (`configurable` / `context` merged, or already merged). */
export interface TurnInput extends Omit<LeadAgent.TurnInput, "options"> {
  readonly settings?: unknown
  /**
   * Whether the run is an admin's (`RunOptions.admin`: it may change what every user's agent reads). Never taken
   * from the settings; default false.
   */
  readonly admin?: boolean | undefined
  /** The request's secrets for skills (`RunOptions.secrets`): never taken from the settings, never stored. */
  readonly secrets?: SkillSecrets.RequestSecrets | undefined
  /** The role of the run's user (`authorization`; none: `default_role`). Never taken from the settings. */
  readonly role?: string | undefined
}

/** The lead agent factory of an app. */
export interface Service {
  /**
   * Decodes and resolves a run's settings (loading the custom agent it names, for `userId`; `admin`: whether the
   * run is an admin's, as `TurnInput.admin`); with no model configured, a `NoModelsError`.
   */
  readonly resolve: (
    settings: unknown,
    userId?: string,
    admin?: boolean,
    role?: string
  ) => Effect.Effect<Resolved, SettingsError | NoModelsError | Authz.AuthorizationConfigError>
  /**
   * The agent for a resolved run: built on first use for its shape, then kept while it is current. One that is not
   * kept (an earlier configuration's, or one missing a failed MCP server's tools) is closed at once: run turns
   * through `turn` or `run`, which hold their agent until they end.
   */
  readonly agent: (resolved: Resolved) => Effect.Effect<LeadAgent.Service, LeadAgent.BuildError>
  /** How the agent of a resolved run got its tools (sources, what is missing and why). */
  readonly tools: (resolved: Resolved) => Effect.Effect<ToolAssembly.Assembly, LeadAgent.BuildError>
  /**
   * One turn: settings resolved, the agent chosen, the run streamed. Warnings of the resolution come as
   * `warning` custom events right after `run_start`; settings or an agent that cannot be built end the
   * stream at once with a `run_end` of status `error`.
   */
  readonly run: (input: TurnInput) => Stream.Stream<RunEvent>
  /**
   * One turn as `run`, its events handed to `onEvent` as they happen, in the caller's fiber (no stream between
   * the run and its reader: what the gateway's runs use); ends when the run ended. Interrupting it cancels the run.
   */
  readonly turn: (input: TurnInput, onEvent: (event: RunEvent) => void) => Effect.Effect<void>
}

/** The factory service. */
export class AgentFactory extends Context.Tag("antler/AgentFactory")<AgentFactory, Service>() {}

/** How a resolved run becomes the options of its agent (the extension point of the features). */
export type AgentOptions = (resolved: Resolved) => LeadAgent.Options

/** Options of the factory. */
export interface Options {
  /** The models runs may choose from (the first is the default); default: the configuration's. */
  readonly models?: ReadonlyArray<ModelConfig> | undefined
  /** Options shared by every agent the factory builds (an app's own tools, a chain customisation...). */
  readonly agent?: LeadAgent.Options | undefined
  /** Options of the app's subagent runner (built on first use by a run with `subagent_enabled`). */
  readonly subagents?: Subagents.Options | undefined
  /** The secrets `setup_agent` and `update_agent` must not write into an agent's files (default: the models' keys). */
  readonly redact?: Redact.Redactor | undefined
  /**
   * Whether runs need a configured model (default true: none is `NoModelsError`). Off only for a factory that
   * builds agents to inspect them and calls no model (`antler tools list`).
   */
  readonly requireModel?: boolean | undefined
}

/**
 * The factory over the app's services and a file system (custom agents are files: `NodeContext.layer` provides
 * Node's). Agents it builds live as long as the layer.
 */
export const layer = (
  options: Options = {}
): Layer.Layer<
  AgentFactory,
  never,
  ModelService | ThreadStore | SandboxProvider | AppConfigService | FileSystem.FileSystem
> =>
  Layer.scoped(
    AgentFactory,
    Effect.gen(function*() {
      const app = yield* AppConfigService
      // custom agents are files (loaded for each run that names one, written by the agent tools)
      const files = yield* FileSystem.FileSystem
      const services = yield* Effect.context<ModelService | ThreadStore | SandboxProvider | AppConfigService>()
      // The app's MCP connections, when it has them (optional: an app without MCP servers provides none).
      const mcp = yield* Effect.serviceOption(Mcp)
      // the gateway's MCP task runtime, when it has one (see `services/McpTasks`)
      const tasks = yield* Effect.serviceOption(McpTasks)
      const models = options.models ?? app.config.models
      const redact = options.redact ?? Redact.make(models.map((m) => m.api_key))
      const scope = yield* Effect.scope
      const agents = Shared.kept<Built>(MAX_KEPT_AGENTS)
      // the configuration each run takes (the one of the start, unless the app re-reads its file: `LiveConfig`)
      const started: Snapshot = { app, models, model: Context.get(services, ModelService), revision: 0 }
      const live = yield* Effect.serviceOption(LiveConfig)
      const current = Option.isSome(live) ? live.value.current : Effect.succeed(started)
      // (the process's secrets, which a middleware's cut of a text masks first: `ProcessSecrets`)
      const withSecrets = Context.add(services, ProcessSecrets, redact)
      const contextOf = (snap: Snapshot) => {
        const base = snap.revision === 0
          ? withSecrets
          : Context.add(Context.add(withSecrets, AppConfigService, snap.app), ModelService, snap.model)
        const withMcp = Option.isSome(mcp) ? Context.add(base, Mcp, mcp.value) : base
        return Option.isSome(tasks) ? Context.add(withMcp, McpTasks, tasks.value) : withMcp
      }
      // the configuration's revision the agents in `agents` were built for
      let configFor = 0
      // the MCP servers' revision the agents in `agents` were built for (see `Mcp.Service.revision`)
      let builtFor = 0
      // the skills the agents in `agents` list in their prompts (see `SkillsDirectory.signature`)
      let skillsFor: string | undefined
      const mcpRevision = Option.isSome(mcp) && mcp.value.revision !== undefined
        ? mcp.value.revision
        : Effect.succeed(0)
      const lock = yield* Effect.makeSemaphore(1)
      // whether commands can run here (bubblewrap, or host bash allowed): probed once, when an agent is first built
      const bash = yield* Effect.cached(Effect.map(LocalSandbox.bashMode(app), (m) => m.mode !== "disabled"))

      // the authorization provider of each configuration taken (a provider module is loaded and created once)
      const authorizationOf = yield* Effect.cachedFunction((taken: AppConfigService["Type"]) =>
        ConfiguredAuthorization.fromConfig(taken.config.authorization, UserModule.baseDirOf(taken.source))
      )

      // one subagent runner per configuration taken, held by the agents built over it (see `SubagentRunners`)
      const runners = yield* SubagentRunners.make(
        scope,
        { tools: options.agent?.tools, ...options.subagents },
        contextOf
      )

      const agentOptions = (r: Resolved, snap: Snapshot): Effect.Effect<LeadAgent.Options> =>
        Effect.map(
          AgentSetup.agentOptions(r, { home: app.home, models: snap.models, tools: options.agent?.tools, redact }).pipe(
            Effect.provideService(FileSystem.FileSystem, files)
          ),
          (custom): LeadAgent.Options => ({
            ...options.agent,
            ...custom,
            vision: r.vision,
            // plan mode changes the agent's shape: the Todo middleware and write_todos exist only there
            planMode: r.planMode,
            ...(r.subagents.enabled
              ? {
                subagents: {
                  maxConcurrent: r.subagents.maxConcurrent,
                  maxTotal: r.subagents.maxTotal,
                  toolGroups: r.toolGroups
                }
              }
              : {})
          })
        )

      // an agent in a scope of its own (closed if the build fails or is interrupted)
      const build = (r: Resolved, snap: Snapshot, run?: ForRun) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(Scope.fork(scope, ExecutionStrategy.sequential), (child) =>
            restore(Effect.gen(function*() {
              const wanted = { vision: r.vision, groups: r.toolGroups, bash: yield* bash, run }
              const context = contextOf(snap)
              const assembly = yield* ToolAssembly.assemble(wanted).pipe(Effect.provide(context))
              const base = yield* agentOptions(r, snap)
              const own = [
                ...(base.tools ?? []),
                // skill self-evolution: the skills directory's custom skills, in an admin's run (see SkillManage)
                // (checked with the run's `skill_scan`: an edit of `config.yaml` taken, the agents built again over it)
                ...(r.skillEvolution === true ? [SkillManage.make(CustomSkills.of(snap.app), redact)] : [])
              ]
              const tools = [...assembly.tools.filter((t) => !own.some((o) => o.name === t.name)), ...own]
              // (a deferred tool the role may not see is not in `tool_search`'s catalog either)
              const servers = AgentAuthorization.mcpServersOf(assembly.entries)
              const authz = yield* authorizationOf(snap.app)
              const deferred = yield* AgentAuthorization.deferredFor(authz, r.role, assembly.deferred, servers)
              const withRunner = r.subagents.enabled
                ? Context.add(context, SubagentRunner, yield* runners.forAgent(snap, child))
                : context
              const agentContext = yield* Layer.buildWithScope(
                LeadAgent.layer({
                  ...base,
                  tools,
                  sandboxTools: false,
                  deferred,
                  routingHints: deferred === assembly.deferred
                    ? assembly.routingHints
                    : assembly.routingHints.filter((h) => deferred?.tools.some((t) => t.name === h.tool) ?? false),
                  role: r.role,
                  mcpServers: servers
                }),
                child
              ).pipe(Effect.provide(withRunner))
              const agent = Context.get(agentContext, LeadAgent.LeadAgent)
              const made: Built = { agent, assembly: ShadowedTools.report(assembly, agent.tools) }
              return Shared.make(made, child)
            })).pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(child, exit))))
          )
        )

      // The agent of a resolved run over `snap`, held for the caller (`onHold` gets it in the step that holds it).
      // (uninterruptible but for the build: an agent built is kept or retired, and held, whatever happens)
      const built = (r: Resolved, snap: Snapshot, onHold: (entry: Shared.Shared<Built>) => void, run?: ForRun) =>
        lock.withPermits(1)(Effect.uninterruptibleMask((restore) =>
          Effect.gen(function*() {
            const revision = yield* mcpRevision
            // agents built before the MCP servers were replaced have the old servers' tools: built again (each
            // replaced one is closed once no run holds it)
            if (revision !== builtFor) {
              yield* agents.retireAll
              builtFor = revision
            }
            // agents built over a configuration an edit of `config.yaml` replaced: built again over the new one (a
            // run that started before the edit builds its agent over its own, and does not keep it)
            if (snap.revision > configFor) {
              yield* agents.retireAll
              configFor = snap.revision
            }
            const current = snap.revision === configFor
            const key = shapeKey(r)
            if (current) {
              // agents built before a skill was added, changed, removed or switched: built again, with the skills
              // now
              const skills = SkillsDirectory.signature(app)
              if (skills !== skillsFor) {
                yield* agents.retireAll
                skillsFor = skills
              }
              const known = agents.hold(key)
              if (known !== undefined) {
                onHold(known)
                return known.value
              }
            }
            const entry = yield* restore(build(r, snap, run))
            // An agent missing tools of a failed MCP server is not kept: the next run tries the server again.
            const keep = current && !entry.value.assembly.incomplete
            if (keep) yield* agents.keep(key, entry)
            entry.hold()
            onHold(entry)
            // (one not kept is closed once its caller released it)
            if (!keep) yield* entry.retire
            return entry.value
          })
        ))

      // `use` of the agent of a resolved run, the agent held until `use` ended
      // (`run`: a run's, whose MCP servers listed only with request secrets are listed with its own)
      const using = <A, E>(r: Resolved, snap: Snapshot, use: (made: Built) => Effect.Effect<A, E>, run?: ForRun) =>
        // (the run's own listing made before the lock every run takes for its agent: `RunMcpListing`)
        Effect.flatMap(RunMcpListing.listed(mcp, run), (listed) =>
          Shared.using((onHold) => built(r, snap, onHold, listed), use))

      const agent = (r: Resolved) =>
        Effect.flatMap(current, (snap) => using(r, snap, (made) => Effect.succeed(made.agent)))

      const resolveWith = (snap: Snapshot, raw: unknown, userId = "default", admin = false, role?: string) =>
        Effect.gen(function*() {
          const { models } = snap
          if (models.length === 0 && options.requireModel !== false) {
            return yield* new NoModelsError({ message: NO_MODELS })
          }
          const settings = yield* settingsOf(raw)
          const custom = yield* AgentSetup.load(app.home, userId, settings).pipe(
            Effect.provideService(FileSystem.FileSystem, files),
            Effect.mapError((error) =>
              new SettingsError({
                message: `agent_name: ${error.message}`,
                ...(error.reason === "not_found" || error.reason === "invalid_name"
                  ? { missingAgent: error.name }
                  : {})
              })
            )
          )
          const resolved = resolve(models, settings, AgentSetup.defaultsOf(custom), {
            maxTotalSubagents: snap.app.config.subagents.max_total_per_run
          })
          const evolving = snap.app.config.skill_evolution.enabled && admin
          const authz = yield* authorizationOf(snap.app)
          const full: Resolved = {
            ...resolved,
            // (named as its directory is, whatever case the run wrote: its memory is that agent's)
            ...(custom === undefined ? {} : { custom, agentName: custom.name }),
            ...(evolving ? { skillEvolution: true } : {}),
            ...(authz === undefined ? {} : { role: role ?? authz.defaultRole })
          }
          if (authz === undefined) return full
          return yield* Effect.mapError(
            AgentAuthorization.authorizeModel(authz, full.role, models, full),
            (error) => new SettingsError({ message: error.message, unauthorized: true })
          )
        })

      const turn = (input: TurnInput, onEvent: (event: RunEvent) => void): Effect.Effect<void> => {
        const threadId = input.threadId ?? M.newId()
        const runId = input.runId ?? M.newId()
        const failed = (error: { readonly _tag: string; readonly message: string }) =>
          Effect.sync(() => {
            onEvent({ type: "run_start", thread_id: threadId, run_id: runId })
            onEvent({
              type: "run_end",
              status: "error",
              stop_reason: "error",
              error: { name: error._tag, message: error.message }
            })
          })
        return Effect.gen(function*() {
          // (one configuration for the whole run: the one of its start)
          const snap = yield* current
          const resolved = yield* Effect.either(
            resolveWith(snap, input.settings, input.userId, input.admin === true, input.role)
          )
          if (Either.isLeft(resolved)) return yield* failed(resolved.left)
          const { admin, secrets, settings: _, role: _role, ...rest } = input
          // (the thread's MCP tasks as its state shows them, when the gateway tracks them: DeerFlow's projection)
          const backgroundTasks = Option.isSome(tasks) && input.userId !== undefined && input.threadId !== undefined
            ? yield* BackgroundTasks.project(tasks.value, input.threadId, input.userId)
            : undefined
          const options = {
            ...runOptions(resolved.right),
            admin: admin === true,
            ...(secrets === undefined ? {} : { secrets })
          }
          // (the agent is held until the run ended: one retired meanwhile is released then)
          // (its provider, made for the run's resolution already; one that cannot be made tells no server's problems)
          const authz = yield* Effect.either(authorizationOf(snap.app))
          const held = yield* Effect.either(using(resolved.right, snap, (made) => Effect.gen(function*() {
            // (an MCP server's problems only for a role that may use it)
            const told = yield* AgentAuthorization.warningsFor(authz, resolved.right.role, made.assembly)
            const messages = [...resolved.right.warnings, ...told]
            let first = true
            // (the resolution's warnings right after `run_start`, as `run` sends them)
            const send = messages.length === 0 ? onEvent : (event: RunEvent) => {
              onEvent(event)
              if (!first) return
              first = false
              for (const message of messages) onEvent({ type: "custom", name: "warning", data: { message } })
            }
            // (the process's secrets in the run too: a tool masks them in what it cuts, as `bash` its output)
            return yield* made.agent.turn({ ...rest, threadId, runId, options, backgroundTasks }, send).pipe(
              Effect.provideService(ProcessSecrets, redact)
            )
          }), { secrets }))
          if (Either.isLeft(held)) return yield* failed(held.left)
        })
      }

      // (the events of `turn` as a stream: stopping the stream early interrupts the turn, which cancels the run)
      const run = (input: TurnInput): Stream.Stream<RunEvent> =>
        Stream.unwrapScoped(Effect.gen(function*() {
          const mailbox = yield* Mailbox.make<RunEvent>()
          yield* turn(input, (event) => {
            mailbox.unsafeOffer(event)
          }).pipe(Effect.ensuring(mailbox.end), Effect.forkScoped)
          return Mailbox.toStream(mailbox)
        }))

      return AgentFactory.of({
        turn,
        resolve: (raw, userId, admin, role) =>
          Effect.flatMap(current, (snap) => resolveWith(snap, raw, userId, admin, role)),
        agent,
        tools: (r) => Effect.flatMap(current, (snap) => using(r, snap, (made) => Effect.succeed(made.assembly))),
        run
      })
    })
  )
