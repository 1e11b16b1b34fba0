/**
 * An agent's system prompt, assembled: what `SystemPrompt.make` is given for an agent (its configuration's
 * skills, its tools, its name and SOUL, its deferred tools and subagents), the default agent's SOUL read from the
 * data directory, and the warnings about skills the agent goes without, logged once per agent built.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { ConfigError } from "../layers/ConfigFile.js"
import { fromTextFileError } from "../layers/ConfigFile.js"
import * as SkillsDirectory from "../layers/SkillsDirectory.js"
import * as TextFile from "../layers/TextFile.js"
import type { AppConfig, AppConfigService } from "../services/AppConfig.js"
import type * as Skills from "../services/Skills.js"
import type { Deferred } from "./Chains.js"
import * as CustomAgents from "./CustomAgents.js"
import * as SystemPrompt from "./SystemPrompt.js"

/**
 * The default agent's personality: `SOUL.md` in the data directory, when there is one. One that is not a regular
 * file, or larger than `CustomAgents.MAX_SOUL_BYTES`, or unreadable, is a `ConfigError` naming it: the agent is
 * not run without the personality its user gave it.
 */
export const defaultSoul = (app: AppConfigService["Type"]): Effect.Effect<string | undefined, ConfigError> =>
  Effect.suspend(() => {
    const read = TextFile.read(CustomAgents.globalSoulPath(app.home), CustomAgents.MAX_SOUL_BYTES)
    if (Either.isLeft(read)) {
      return read.left.reason === "missing" ? Effect.succeed(undefined) : Effect.fail(fromTextFileError(read.left))
    }
    return Effect.succeed(read.right.trim() === "" ? undefined : read.right)
  })

/** What the prompt of an agent is made from, besides the configuration and the skills catalog. */
export interface PromptInputs {
  /** The names of the agent's tools (sections about other tools are left out). */
  readonly tools?: ReadonlyArray<string> | undefined
  readonly agentName?: string | undefined
  readonly soul?: string | undefined
  readonly skillAllowlist?: ReadonlyArray<string> | undefined
  /** Whether someone can answer clarification questions (default true). */
  readonly clarification?: boolean | undefined
  /** Tools deferred behind `tool_search` and their routing hints. */
  readonly deferred?: Deferred | undefined
  /**
   * The hints for every MCP tool with routing, deferred or not (`ToolAssembly`): with `tool_search` off, the prompt
   * still tells the model which tool to prefer. When absent, the deferred tools' routes are the hints.
   */
  readonly routingHints?: ReadonlyArray<SystemPrompt.RoutingHint> | undefined
  /** A custom agent that may change itself (`<self_update>`). */
  readonly selfUpdate?: boolean | undefined
  /** The subagent section: limits and subagent types (shown only when the agent has `task`). */
  readonly subagents?: SystemPrompt.Subagents | undefined
}

/** The prompt options of an agent: its configuration's skills (enabled, allowlisted; disabled ones listed). */
export const promptOptions = (
  config: AppConfig,
  catalog: Skills.Catalog,
  inputs: PromptInputs = {}
): SystemPrompt.PromptOptions => {
  const allowed = (name: string) => inputs.skillAllowlist === undefined || inputs.skillAllowlist.includes(name)
  const tools = inputs.tools
  return {
    agentName: inputs.agentName,
    soul: inputs.soul,
    selfUpdate: inputs.selfUpdate,
    clarification: inputs.clarification ?? true,
    tools,
    skills: catalog.skills.filter((s) => s.enabled && allowed(s.name)).map((s) => ({
      name: s.name,
      description: s.description,
      location: s.location,
      category: s.category
    })),
    disabledSkills: catalog.skills.filter((s) => !s.enabled && allowed(s.name)).map((s) => ({
      name: s.name,
      category: s.category
    })),
    skillsAllowlisted: inputs.skillAllowlist !== undefined,
    skillsContainer: config.skills.container_path,
    skillDiscovery: config.skills.deferred_discovery ? "deferred" : "full",
    memoryTools: config.memory.enabled && config.memory.mode === "tool",
    deferredTools: inputs.deferred?.tools.map((t) => t.name),
    mcpRoutingHints: inputs.routingHints ?? inputs.deferred?.routes?.map((r) => ({
      tool: r.name,
      keywords: r.keywords,
      priority: r.priority,
      deferred: true
    })),
    subagents: inputs.subagents,
    acpAgents: Object.keys(config.acp_agents),
    mounts: config.sandbox.mounts.map((m) => ({ containerPath: m.container_path, readOnly: m.read_only }))
  }
}

/** The static system prompt of a configuration (its skills as found now, the sandbox tools, clarification on). */
export const defaultSystemPrompt = (
  app: AppConfigService["Type"],
  inputs: PromptInputs = {}
): Effect.Effect<string, ConfigError> =>
  Effect.map(defaultSoul(app), (soul) =>
    SystemPrompt.make(promptOptions(app.config, SkillsDirectory.catalogOf(app), { soul, ...inputs })))

/**
 * Logs, once per agent built, each skill the agent goes without or gets cut: a SKILL.md that was rejected (too
 * large, not a regular file, bad front matter), a description cut to its limit, a problem with the skill
 * states, and skills left out of a full skills section. A broken skill costs the agent that skill, nothing more.
 */
const warnAboutSkills = (catalog: Skills.Catalog, leftOut: ReadonlyArray<string>) =>
  Effect.forEach([
    ...catalog.rejected.map((r) => `skill skipped: ${r.file}: ${r.problem}`),
    ...catalog.warnings.map((w) => `skills: ${w}`),
    ...(leftOut.length === 0 ? [] : [
      `skills: the prompt's skills section is full (${SystemPrompt.MAX_SKILL_ENTRIES_CHARS} characters): ` +
      `${leftOut.length} skill${leftOut.length === 1 ? " is" : "s are"} not listed ` +
      `(${leftOut.slice(0, 10).join(", ")}${leftOut.length > 10 ? ", ..." : ""})`
    ])
  ], (line) => Effect.logWarning(line), { discard: true })

/**
 * The system prompt of an agent being built: `given` when the app gave one, else made from the configuration,
 * the catalog and the inputs; without a SOUL in the inputs, the default agent (no `agentName`) gets the data
 * directory's (read, and checked, either way). The catalog's problems with skills are logged.
 */
export const forAgent = (
  app: AppConfigService["Type"],
  catalog: Skills.Catalog,
  inputs: PromptInputs,
  given: string | undefined
): Effect.Effect<string, ConfigError> =>
  Effect.gen(function*() {
    const soul = inputs.soul ?? (inputs.agentName === undefined ? yield* defaultSoul(app) : undefined)
    const prompted = promptOptions(app.config, catalog, { ...inputs, soul })
    const systemPrompt = given ?? SystemPrompt.make(prompted)
    yield* warnAboutSkills(catalog, given === undefined ? SystemPrompt.skillsLeftOut(prompted) : [])
    return systemPrompt
  })
