/**
 * The system prompts of the built-in subagents (SPEC §6.3) and the skills section of a subagent's prompt, as
 * pure functions of their inputs. The lead agent's own sections about delegation and custom agents
 * (`<subagent_system>`, `<soul>`, `<self_update>`) are in `SystemPrompt`. The built-in prompts are DeerFlow's word for
 * word; the skills sections' tags are DeerFlow's, their prose Antler's. What comes from outside is escaped.
 */
import { escapeText as escape } from "../state/Markup.js"
import * as BuiltinText from "./SubagentBuiltinText.js"

/** The system prompt of the built-in `general-purpose` subagent: DeerFlow's (SubagentBuiltinText). */
export const GENERAL_PURPOSE_PROMPT = BuiltinText.GENERAL_PURPOSE_PROMPT

/** The system prompt of the built-in `bash` subagent: DeerFlow's (SubagentBuiltinText). */
export const BASH_PROMPT = BuiltinText.BASH_PROMPT

/** A skills section for a subagent's prompt: the skills it may use, by name, description and location. */
export const subagentSkillsSection = (
  skills: ReadonlyArray<{ readonly name: string; readonly description: string; readonly location: string }>,
  container: string
): string => {
  if (skills.length === 0) return ""
  const entries = skills.map((s) =>
    `  <skill><name>${escape(s.name)}</name><description>${escape(s.description)}</description>` +
    `<location>${escape(s.location)}</location></skill>`
  )
  return `<skill_system>
When your task matches a skill, read its SKILL.md with read_file first and follow it. Skills are located at:
${escape(container)}
<available_skills>
${entries.join("\n")}
</available_skills>
</skill_system>`
}

/**
 * The skills section of a subagent with deferred skill discovery (`skills.deferred_discovery`): the names alone,
 * sorted, in DeerFlow's `<skill_index>`; `describe_skill` tells the rest.
 */
export const subagentSkillIndexSection = (
  skills: ReadonlyArray<{ readonly name: string }>,
  container: string
): string => {
  if (skills.length === 0) return ""
  const names = skills.map((s) => s.name).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(escape)
  return `<skill_system>
When your task may match a skill: find its name in <skill_index>, call describe_skill(name) to learn what it
does and where its SKILL.md is, then read that SKILL.md with read_file and follow it.
<skill_index>
${names.join(", ")}
</skill_index>
Skills are located at: ${escape(container)}
</skill_system>`
}
