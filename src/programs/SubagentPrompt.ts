/**
 * The system prompts of the built-in subagents (SPEC §6.3) and the skills section of a subagent's prompt, as
 * pure functions of their inputs. The lead agent's own sections about delegation and custom agents
 * (`<subagent_system>`, `<soul>`, `<self_update>`) are in `SystemPrompt`. All of it is DeerFlow's word for word: the
 * built-in prompts its builtins', the skills section its lead's (`SystemPrompt.subagentSkillsSection`), which
 * DeerFlow's subagent executor reuses. What comes from outside is escaped.
 */
import * as BuiltinText from "./SubagentBuiltinText.js"
import * as SystemPrompt from "./SystemPrompt.js"

/** The system prompt of the built-in `general-purpose` subagent: DeerFlow's (SubagentBuiltinText). */
export const GENERAL_PURPOSE_PROMPT = BuiltinText.GENERAL_PURPOSE_PROMPT

/** The system prompt of the built-in `bash` subagent: DeerFlow's (SubagentBuiltinText). */
export const BASH_PROMPT = BuiltinText.BASH_PROMPT

/**
 * A subagent's system prompt (DeerFlow's `_build_initial_state`): its type's prompt, the skills section of the skills
 * it may use (none without), then the sections of its deferred tools (`toolSections`), a blank line between each.
 */
export const subagentPrompt = (options: {
  readonly systemPrompt: string
  readonly skills: ReadonlyArray<SystemPrompt.SkillSummary>
  readonly skillsContainer: string
  readonly deferredDiscovery: boolean
  /** The names of the subagent's tools (`describe_skill` among them with deferred discovery). */
  readonly tools: ReadonlyArray<string>
  readonly toolSections: string
}): string =>
  [
    options.systemPrompt,
    SystemPrompt.subagentSkillsSection({
      skills: options.skills,
      skillsContainer: options.skillsContainer,
      skillDiscovery: options.deferredDiscovery ? "deferred" : "full",
      tools: options.tools
    }),
    options.toolSections
  ].filter((part) => part !== "").join("\n\n")
