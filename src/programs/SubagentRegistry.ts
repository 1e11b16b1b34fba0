/**
 * The registry of subagent types (SPEC §8.1): the built-in `general-purpose` and `bash` (offered only when bash can
 * run), and custom ones from `subagents.custom_agents`, with per-agent overrides from `subagents.agents`; and what
 * a type may use of its parent's tools and skills. Re-exported by `Subagents`.
 */
import type { AppConfig, TokenBudgetConfig } from "../services/AppConfig.js"
import * as Chains from "./Chains.js"
import * as SubagentBuiltinText from "./SubagentBuiltinText.js"
import * as SubagentPrompt from "./SubagentPrompt.js"

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
