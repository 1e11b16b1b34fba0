/**
 * The agent a subagent task runs (SPEC §8): its type's chain (`Chains.subagentChain`) over the app's model, the lead
 * agent's tools its type and the parent's tool groups leave it, and its system prompt for the skills it may use
 * (`SubagentPrompt`). One agent per (type, parent tool groups, skills, vision, role), built on first use and kept as
 * long as the runner's scope.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as UserModule from "../internal/UserModule.js"
import * as ConfiguredAuthorization from "../layers/ConfiguredAuthorization.js"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import * as Toolkit from "../layers/Toolkit.js"
import * as Chain from "../middleware/Chain.js"
import * as DeferredToolFilter from "../middleware/DeferredToolFilter.js"
import type * as LLMErrorHandling from "../middleware/LLMErrorHandling.js"
import type { Ports } from "../middleware/Middleware.js"
import * as MW from "../middleware/Middleware.js"
import * as SafetyDetectorModules from "../middleware/SafetyDetectorModules.js"
import * as UsageJournal from "../middleware/UsageJournal.js"
import * as Authz from "../services/Authorization.js"
import { AppConfigService } from "../services/AppConfig.js"
import { Mcp } from "../services/Mcp.js"
import type { ModelService } from "../services/ModelService.js"
import type { SandboxProvider } from "../services/Sandbox.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import type * as Skills from "../services/Skills.js"
import type * as Tool from "../services/Tool.js"
import * as AgentAuthorization from "./AgentAuthorization.js"
import * as Chains from "./Chains.js"
import { ConfiguredMiddlewares } from "./ConfiguredMiddlewares.js"
import * as SubagentGatedTools from "./SubagentGatedTools.js"
import type { SubagentConfig } from "./SubagentRegistry.js"
import { toolsOf } from "./SubagentRegistry.js"
import * as SubagentPrompt from "./SubagentPrompt.js"
import * as SystemPrompt from "./SystemPrompt.js"
import * as ToolAssembly from "./ToolAssembly.js"

/** A built subagent: its ports, its system prompt for the skills it may use, and why a tool is not its own. */
export interface Agent {
  readonly ports: Context.Context<Ports>
  readonly prompt: (skills: ReadonlyArray<Skills.Skill>) => string
  /** Why a tool is not the subagent's, for a server listing its tools only with request secrets. */
  readonly unknown: SubagentGatedTools.Why | undefined
}

/** What a task asks of its agent: the parent's tool groups and role, and the type's skills, vision and secrets. */
export interface AgentRequest {
  readonly config: SubagentConfig
  readonly toolGroups: ReadonlyArray<string> | undefined
  readonly skills: ReadonlyArray<string> | undefined
  readonly vision: boolean
  readonly role: string | undefined
  readonly secrets: SkillSecrets.RequestSecrets | undefined
}

/** The agents of a runner. */
export interface Agents {
  /** The agent of a task, or why it could not be built. */
  readonly agentFor: (request: AgentRequest) => Effect.Effect<Either.Either<Agent, string>>
  /**
   * The enabled skills as they are now, as DeerFlow's subagents load them for each task: read again only when a
   * SKILL.md or the skill states changed (`SkillsDirectory.signature`, file metadata only).
   */
  readonly enabledSkills: Effect.Effect<ReadonlyArray<Skills.Skill>>
}

/** Options of the agents. */
export interface Options {
  /** Whether the sandbox's bash tool is offered. */
  readonly bash: boolean
  /** The app's own tools, offered to subagents too (limited like the sandbox tools). */
  readonly tools?: ReadonlyArray<Tool.Tool> | undefined
  /** A circuit breaker shared with the app's other agents; by default each subagent type has its own. */
  readonly breaker?: LLMErrorHandling.CircuitBreaker | undefined
}

/** The skills of `all` a list of names allows (undefined = all). */
export const usableOf = (all: ReadonlyArray<Skills.Skill>, skills: ReadonlyArray<string> | undefined) =>
  skills === undefined ? all : all.filter((s) => skills.includes(s.name))

/** The agents over the app's services; the chains they build live as long as the scope. */
export const make = (
  options: Options
): Effect.Effect<Agents, never, ModelService | SandboxProvider | AppConfigService | Scope.Scope> =>
  Effect.gen(function*() {
    const app = yield* AppConfigService
    const base = yield* Effect.context<ModelService | SandboxProvider | AppConfigService>()
    // The app's MCP connections, when it has them: subagents get the MCP tools the lead agent gets.
    const mcp = yield* Effect.serviceOption(Mcp)
    const configured = Option.getOrUndefined(yield* Effect.serviceOption(ConfiguredMiddlewares))
    const services = Option.isSome(mcp) ? Context.add(base, Mcp, mcp.value) : base
    const scope = yield* Effect.scope
    const building = yield* Effect.makeSemaphore(1)
    const built = new Map<string, Either.Either<Agent, string>>()
    const bash = options.bash
    const container = app.config.skills.container_path
    const skillRegistry = SkillsDirectory.make(app)
    let enabled: { readonly signature: string; readonly skills: ReadonlyArray<Skills.Skill> } | undefined
    const enabledSkills = Effect.sync(() => {
      const signature = SkillsDirectory.signature(app)
      if (enabled?.signature !== signature) {
        enabled = { signature, skills: SkillsDirectory.catalogOf(app).skills.filter((s) => s.enabled) }
      }
      return enabled.skills
    })

    // An agent that misses the tools of a failed MCP server is not kept: the next task tries the server again.
    const agentFor: Agents["agentFor"] = ({ config, toolGroups, skills, vision, role, secrets }) =>
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
          // (a chain's entries do not say what they need: the app's services, given below; every call inside it
          // booked in its state, its summaries' too: what its task spent, TaskUsage)
          const stacked: Layer.Layer<Ports, unknown, ModelService | SandboxProvider | AppConfigService> = MW.stack(
            [...chain.right.map((e) => e.make()), UsageJournal.layer()],
            MW.baseOverModel(Toolkit.make(tools))
          )
          const ports = yield* Effect.either(Layer.buildWithScope(stacked, scope))
          const result = Either.match(ports, {
            onLeft: (error) => Either.left(String((error as { message?: unknown }).message ?? error)),
            onRight: (ports) => Either.right({ ports, prompt, unknown })
          })
          if (!assembly.incomplete) built.set(key, result)
          return result
        }).pipe(Effect.provide(services))
      }))

    return { agentFor, enabledSkills }
  })
