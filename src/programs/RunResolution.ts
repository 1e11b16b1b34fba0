/**
 * What a run resolves to (SPEC §3.2): its settings against the configured models (the first is the default) and, for
 * a custom agent, its defaults; what makes two runs need different agents (`shapeKey`), and the run options of a
 * resolved run. Pure; the factory (`Factory.ts`) builds and keeps the agents.
 */
import type { ModelConfig } from "../services/AppConfig.js"
import type { RunOptions } from "../services/RunContext.js"
import * as SubagentLimit from "../middleware/SubagentLimit.js"
import * as AgentSetup from "./AgentSetup.js"
import type * as CustomAgents from "./CustomAgents.js"
import type { RunSettings } from "./RuntimeSettings.js"

/** What a run resolves to. */
export interface Resolved {
  /** The configured model's name (`settings.modelName` of requests), when models are configured. */
  readonly modelName: string | undefined
  readonly model: ModelConfig | undefined
  readonly thinkingEnabled: boolean
  readonly reasoningEffort: string | undefined
  readonly planMode: boolean
  readonly subagents: { readonly enabled: boolean; readonly maxConcurrent: number; readonly maxTotal: number }
  readonly agentName: string | undefined
  readonly bootstrap: boolean
  /** The agent a bootstrap conversation creates (its `agent_name`). */
  readonly bootstrapName?: string | undefined
  /** The custom agent of the run, as loaded for it (`agentName`). */
  readonly custom?: CustomAgents.CustomAgent | undefined
  readonly nonInteractive: boolean
  readonly vision: boolean
  readonly recursionLimit: number | undefined
  /** The tool groups of the agent (a custom agent's `tool_groups`); undefined: all groups. */
  readonly toolGroups?: ReadonlyArray<string> | undefined
  /** What the caller should be told (an unknown model, thinking forced off...). */
  readonly warnings: ReadonlyArray<string>
  /**
   * Whether the agent has `skill_manage` and the prompt's skill self-evolution section: `skill_evolution.enabled`
   * in an admin's run (the skills directory is every user's; see `SkillManage`).
   */
  readonly skillEvolution?: boolean | undefined
  /**
   * The role of the run's user, with `authorization.enabled` (none: `default_role`): the agent is built for it (its
   * tools and prompt), and the run asks the provider as that role.
   */
  readonly role?: string | undefined
}

/** Defaults an agent of its own may set (a custom agent's `config.yaml`, SPEC §3.2). */
export interface AgentDefaults {
  readonly model?: string | undefined
  readonly thinkingEnabled?: boolean | undefined
  readonly reasoningEffort?: string | undefined
  /** Tool groups to keep (undefined or null: all; `[]`: no configured tools). */
  readonly toolGroups?: ReadonlyArray<string> | null | undefined
}

/**
 * Resolves a run's settings against the models (the first is the default) and, for a custom agent, its
 * defaults. Pure.
 */
export const resolve = (
  models: ReadonlyArray<ModelConfig>,
  settings: RunSettings,
  agent: AgentDefaults = {},
  app: { readonly maxTotalSubagents?: number | undefined } = {}
): Resolved => {
  const warnings: Array<string> = []
  const requested = settings.model_name ?? settings.model ?? agent.model ?? undefined
  let model = requested === undefined ? models[0] : models.find((m) => m.name === requested)
  if (model === undefined && requested !== undefined && models.length > 0) {
    model = models[0]!
    warnings.push(
      `No configured model is named "${requested}"; using the default model "${model.name}". ` +
        `Configured models: ${models.map((m) => m.name).join(", ")}.`
    )
  }
  let thinking = settings.thinking_enabled ?? agent.thinkingEnabled ?? true
  if (thinking && model !== undefined && !model.supports_thinking) {
    // DeerFlow warns only when thinking was asked for explicitly; the default "on" is quietly off here.
    if (settings.thinking_enabled === true) {
      warnings.push(`The model "${model.name}" does not support thinking; it runs without it.`)
    }
    thinking = false
  }
  let effort = settings.reasoning_effort ?? agent.reasoningEffort ?? undefined
  if (effort !== undefined && model !== undefined && !model.supports_reasoning_effort) {
    if (settings.reasoning_effort != null) {
      warnings.push(`The model "${model.name}" does not take a reasoning effort; "${effort}" is ignored.`)
    }
    effort = undefined
  }
  const bootstrap = settings.is_bootstrap === true
  return {
    modelName: model?.name,
    model,
    thinkingEnabled: thinking,
    reasoningEffort: bootstrap ? undefined : effort,
    planMode: settings.is_plan_mode === true,
    subagents: {
      enabled: settings.subagent_enabled === true,
      // (clamped as SubagentLimit enforces them: the agent is kept per shape, and an unclamped number a run asks
      // for made a new agent, kept for ever, for each value)
      maxConcurrent: SubagentLimit.clampConcurrent(settings.max_concurrent_subagents ?? 3),
      maxTotal: SubagentLimit.clampTotal(settings.max_total_subagents ?? app.maxTotalSubagents ?? 6)
    },
    agentName: bootstrap ? undefined : settings.agent_name ?? undefined,
    bootstrap,
    bootstrapName: bootstrap ? settings.agent_name ?? undefined : undefined,
    nonInteractive: settings.non_interactive === true,
    vision: model?.supports_vision === true,
    recursionLimit: settings.recursion_limit,
    // The bootstrap agent is not filtered by groups (SPEC §3.6).
    ...(!bootstrap && agent.toolGroups != null ? { toolGroups: agent.toolGroups } : {}),
    warnings
  }
}

/** What makes two resolved runs need different agents (their chain, tools or prompt differ). */
export const shapeKey = (r: Resolved): string =>
  JSON.stringify([
    r.vision,
    r.planMode,
    r.subagents.enabled && [r.subagents.maxConcurrent, r.subagents.maxTotal],
    r.agentName ?? null,
    AgentSetup.shapeOf(r.custom),
    r.bootstrap && (r.bootstrapName ?? null),
    r.nonInteractive,
    r.toolGroups ?? null,
    r.skillEvolution === true,
    r.role ?? null
  ])

/** The run options of a resolved run. */
export const runOptions = (r: Resolved): Partial<RunOptions> => {
  const agent = AgentSetup.runOptions(r.agentName ?? r.bootstrapName, r.custom, r.bootstrap)
  return {
    modelName: r.modelName,
    thinkingEnabled: r.thinkingEnabled,
    reasoningEffort: r.reasoningEffort,
    isPlanMode: r.planMode,
    nonInteractive: r.nonInteractive,
    ...(r.recursionLimit !== undefined ? { recursionLimit: r.recursionLimit } : {}),
    ...agent,
    ...(r.role !== undefined ? { extra: { ...agent.extra, user_role: r.role } } : {})
  }
}
