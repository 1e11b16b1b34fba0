/**
 * What custom agents and the bootstrap agent add to the factory (SPEC §3.2, §3.6): the custom agent of a run is
 * loaded from the data directory for every run (so what `update_agent` changed applies from the next run), its
 * settings are defaults of the run (model, thinking, effort, model settings, tool groups), and its name, SOUL,
 * skills and `update_agent` shape its agent. The bootstrap agent gets `setup_agent`, only the `bootstrap`
 * skill, and the default agent's soul.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import type { ModelConfig } from "../services/AppConfig.js"
import type { RunOptions } from "../services/RunContext.js"
import type * as Redact from "../state/Redact.js"
import * as AgentTools from "./AgentTools.js"
import * as CustomAgents from "./CustomAgents.js"
import type * as LeadAgent from "./LeadAgent.js"

/** The skill the bootstrap agent runs with. */
export const BOOTSTRAP_SKILL = "bootstrap"

/** The custom agent a run names (none for the bootstrap agent or the default agent). */
export const load = (
  home: string,
  userId: string,
  settings: { readonly agent_name?: string | null | undefined; readonly is_bootstrap?: boolean | undefined }
): Effect.Effect<CustomAgents.CustomAgent | undefined, CustomAgents.AgentError, FileSystem.FileSystem> =>
  settings.is_bootstrap === true || settings.agent_name == null
    ? Effect.succeed(undefined)
    : CustomAgents.load(home, userId, settings.agent_name)

/** The defaults a custom agent sets for its runs (its tool groups go through the factory's tool assembly). */
export const defaultsOf = (agent: CustomAgents.CustomAgent | undefined) => ({
  model: agent?.config.model ?? undefined,
  thinkingEnabled: agent?.config.thinking_enabled ?? undefined,
  reasoningEffort: agent?.config.reasoning_effort ?? undefined,
  toolGroups: agent?.config.tool_groups ?? undefined
})

/** What a run needs to know of its agent: its name (for the agent tools) and its model settings. */
export const runOptions = (
  agentName: string | undefined,
  agent: CustomAgents.CustomAgent | undefined,
  bootstrap: boolean
): Partial<RunOptions> => {
  const settings = bootstrap ? undefined : agent?.config.model_settings
  return {
    ...(agentName !== undefined ? { extra: { agent_name: agentName } } : {}),
    ...(settings?.temperature != null ? { temperature: settings.temperature } : {}),
    ...(settings?.max_tokens != null ? { maxTokens: settings.max_tokens } : {})
  }
}

/** A fingerprint of the agent a run uses, for the factory's shape key. */
export const shapeOf = (agent: CustomAgents.CustomAgent | undefined): string | null =>
  agent === undefined ? null : CustomAgents.fingerprint(agent)

/**
 * The lead agent options of a custom agent, or of the bootstrap agent (the default agent and the bootstrap
 * agent get the data directory's SOUL.md from `LeadAgent.layer`).
 */
export const agentOptions = (
  r: {
    readonly custom?: CustomAgents.CustomAgent | undefined
    readonly bootstrap: boolean
    /** The agent a bootstrap conversation creates: its memory is that agent's. */
    readonly bootstrapName?: string | undefined
  },
  app: {
    readonly home: string
    readonly models: ReadonlyArray<ModelConfig>
    readonly tools?: LeadAgent.Options["tools"]
    /** The secrets the agent tools must not write into an agent's files. */
    readonly redact?: Redact.Redactor | undefined
  }
): Effect.Effect<Partial<LeadAgent.Options>, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    if (r.bootstrap) {
      const setup = yield* AgentTools.setupAgent(app.home, app.redact)
      return {
        tools: [...(app.tools ?? []), setup],
        skills: [BOOTSTRAP_SKILL],
        ...(r.bootstrapName !== undefined ? { memoryAgent: r.bootstrapName } : {})
      }
    }
    const agent = r.custom
    if (agent === undefined) return {}
    return {
      tools: [...(app.tools ?? []), yield* AgentTools.updateAgent(app.home, app.models, app.redact)],
      agentName: agent.name,
      soul: agent.soul,
      selfUpdate: true,
      skills: agent.config.skills ?? undefined
    }
  })
