/**
 * The lead agent's system prompt (SPEC §6), as a pure function of the agent's configuration: the same options
 * give the same text, byte for byte, on every turn, run and day, so providers keep its prefix cached. Nothing
 * dynamic goes in: the date, memory, uploads and summaries reach the model in hidden messages.
 *
 * The text is DeerFlow's word for word: its `SYSTEM_PROMPT_TEMPLATE` and section builders (SystemPromptText,
 * SubagentSection), filled under its conditions. What Antler does differently, on purpose (docs/deerflow.md): the
 * default agent is called Antler; every text a user or a server controls is escaped (agent name, mounts, hints);
 * a section about an optional tool (self-update, skill evolution, skill index, memory tools, deferred tools, ACP)
 * needs the tool in `tools`; a run nobody can answer (`clarification: false`) is told to state its assumptions
 * instead of calling `ask_clarification`; the skill index lists the disabled skills too; a skills section past
 * `MAX_SKILL_ENTRIES_CHARS` says how many it left out.
 *
 * Inputs other features fill: `agentName`, `soul`, `selfUpdate` and `skillAllowlist` (custom agents),
 * `subagents` (the `task` tool and its limits), `deferredTools` (tool search), `mounts` (sandbox mounts).
 */
import { clipDescription } from "../services/Skills.js"
import { escapeText as escape } from "../state/Markup.js"
import * as SubagentSection from "./SubagentSection.js"
import * as Text from "./SystemPromptText.js"

/** A skill as the prompt lists it. */
export interface SkillSummary {
  readonly name: string
  readonly description: string
  /** Virtual location of its SKILL.md, e.g. `/mnt/skills/public/deep-research/SKILL.md`. */
  readonly location: string
  /** `public` (built in) or `custom` (the user's own, editable); default `public`. */
  readonly category?: "public" | "custom" | undefined
}

/** A skill that is installed but switched off. */
export interface DisabledSkill {
  readonly name: string
  readonly category: string
}

/** A subagent type the `task` tool can start. */
export type SubagentType = SubagentSection.SubagentType

/** What the subagent section says (present only when `task` exists). */
export interface Subagents {
  /** `task` calls per response the agent enforces (clamped to 1..4, as DeerFlow does). */
  readonly maxConcurrent: number
  /** `task` calls per run the agent enforces (clamped to 1..50). */
  readonly maxTotal: number
  readonly types: ReadonlyArray<SubagentType>
}

/** A directory mounted into the sandbox besides the thread's own. */
export interface Mount {
  readonly containerPath: string
  readonly readOnly: boolean
}

/** What the prompt depends on. */
export interface PromptOptions {
  /** The agent's name (a custom agent's); default `Antler` (DeerFlow's is `DeerFlow 2.0`). */
  readonly agentName?: string | undefined
  /** The agent's personality (its SOUL.md), shown escaped in `<soul>`. */
  readonly soul?: string | undefined
  /** A custom agent that can change itself with `update_agent` (the tool must be in `tools` too). */
  readonly selfUpdate?: boolean | undefined
  /** Whether someone can answer `ask_clarification` (false for non-interactive runs). */
  readonly clarification: boolean
  /**
   * The names of the tools the agent has. Sections about a tool are written only when it is here; when
   * undefined, the standard sandbox tools and `ask_clarification` (when `clarification`) are assumed.
   */
  readonly tools?: ReadonlyArray<string> | undefined
  /** Enabled skills the agent may use. */
  readonly skills: ReadonlyArray<SkillSummary>
  /** Installed skills that are switched off (listed so the model never uses them). */
  readonly disabledSkills?: ReadonlyArray<DisabledSkill> | undefined
  /**
   * Whether `skills` went through the agent's allowlist (its `skills` list, even empty): then, as in DeerFlow, an
   * agent none of whose enabled skills is allowed has no skills section at all (no disabled list, no self-evolution).
   */
  readonly skillsAllowlisted?: boolean | undefined
  readonly skillsContainer: string
  /** `deferred`: only skill names are listed, and `describe_skill` tells the rest. Default `full`. */
  readonly skillDiscovery?: "full" | "deferred" | undefined
  /** Memory tool mode: the model searches and writes memory with the memory_* tools. */
  readonly memoryTools?: boolean | undefined
  /** Tools whose schemas are loaded on demand with `tool_search`. */
  readonly deferredTools?: ReadonlyArray<string> | undefined
  /** MCP routing hints (SPEC §6 item 11). */
  readonly mcpRoutingHints?: ReadonlyArray<RoutingHint> | undefined
  /** The subagent section (only when the agent has `task`). */
  readonly subagents?: Subagents | undefined
  /** Directories mounted into the sandbox besides the thread's own. */
  readonly mounts?: ReadonlyArray<Mount> | undefined
  /** The configured ACP agents (`acp_agents`): their section is written when the agent has `invoke_acp_agent`. */
  readonly acpAgents?: ReadonlyArray<string> | undefined
}

/** One MCP routing hint: when the request involves one of the keywords, prefer the tool. */
export interface RoutingHint {
  readonly tool: string
  readonly keywords: ReadonlyArray<string>
  readonly priority: number
  /** Whether the tool is deferred (the model must load it with `tool_search` first). */
  readonly deferred: boolean
}

const STANDARD_TOOLS = ["bash", "ls", "read_file", "write_file", "str_replace", "glob", "grep", "present_files"]

const toolsOf = (options: PromptOptions): ReadonlySet<string> =>
  new Set(options.tools ?? [...STANDARD_TOOLS, ...(options.clarification ? ["ask_clarification"] : [])])

/** Clamps the subagent limits to the ranges DeerFlow accepts. */
export const clampSubagents = (s: Subagents): Subagents => ({
  ...s,
  maxConcurrent: Math.min(4, Math.max(1, Math.floor(s.maxConcurrent))),
  maxTotal: Math.min(50, Math.max(1, Math.floor(s.maxTotal)))
})

// ---------------------------------------------------------------------------------------------------------
// Sections (each as DeerFlow's builder returns it: the template puts the blank lines around them)

const soul = (o: PromptOptions) =>
  o.soul === undefined || o.soul.trim() === "" ? "" : `<soul>\n${escape(o.soul.trim())}\n</soul>\n`

const selfUpdate = (o: PromptOptions) =>
  o.selfUpdate !== true || o.agentName === undefined || !toolsOf(o).has("update_agent")
    ? ""
    : Text.format(Text.SELF_UPDATE, { agent_name: escape(o.agentName) })

const interactive = (o: PromptOptions) => o.clarification && toolsOf(o).has("ask_clarification")

const skillTag = (s: SkillSummary) => (s.category === "custom" ? "[custom, editable]" : "[built-in]")

/**
 * The characters the skills section's entries (skills, the index, disabled skills) may take together: every
 * request carries the section, so a skills directory with very many (or very wordy) skills cannot make each
 * request huge. Entries past it are left out, and the section says how many.
 */
export const MAX_SKILL_ENTRIES_CHARS = 64_000

/**
 * Whether skills are listed by name only (`<skill_index>`): with `describe_skill` and a skill to list; with none,
 * the full section is written, as DeerFlow's `make_lead_agent` passes `skill_names or None`.
 */
const deferredDiscovery = (o: PromptOptions) =>
  o.skillDiscovery === "deferred" && toolsOf(o).has("describe_skill") && o.skills.length > 0

/** The skills section's entries, as many as fit in `MAX_SKILL_ENTRIES_CHARS`, and the names left out. */
const skillEntries = (o: PromptOptions) => {
  const deferred = deferredDiscovery(o)
  let room = MAX_SKILL_ENTRIES_CHARS
  const leftOut: Array<string> = []
  // (each entry costs its text and its separator: ", " in the index, a new line elsewhere)
  const take = <A extends { readonly name: string }>(
    items: ReadonlyArray<A>,
    line: (item: A) => string,
    separator = 1
  ) => {
    const kept: Array<string> = []
    for (const item of items) {
      const text = leftOut.length > 0 ? undefined : line(item)
      if (text === undefined || text.length + separator > room) {
        leftOut.push(item.name)
        continue
      }
      room -= text.length + separator
      kept.push(text)
    }
    return kept
  }
  const enabled = deferred
    ? take([...o.skills].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)), (s) => escape(s.name), 2)
    : take(o.skills, (s) =>
      `    <skill>\n        <name>${escape(s.name)}</name>\n        <description>${
        escape(clipDescription(s.description))
      } ${skillTag(s)}</description>\n        <location>${escape(s.location)}</location>\n    </skill>`)
  const disabled = take(o.disabledSkills ?? [], (d) => `    - ${escape(d.name)} (${escape(d.category)})`)
  return { deferred, enabled, disabled, leftOut }
}

/** The skills the prompt does not list because its skills section is full (see `MAX_SKILL_ENTRIES_CHARS`). */
export const skillsLeftOut = (o: PromptOptions): ReadonlyArray<string> => skillEntries(o).leftOut

/** DeerFlow's skill self-evolution section, for an agent that has `skill_manage` (its `skill_evolution.enabled`). */
const skillEvolution = (o: PromptOptions) => (toolsOf(o).has("skill_manage") ? Text.SKILL_EVOLUTION : "")

const skillsSection = (o: PromptOptions) => {
  const evolution = skillEvolution(o)
  if (o.skills.length === 0 && (o.disabledSkills ?? []).length === 0 && evolution === "") return ""
  // DeerFlow's get_skills_prompt_section: an allowlist that leaves no enabled skill
  if (o.skills.length === 0 && o.skillsAllowlisted === true) return ""
  const entries = skillEntries(o)
  const container = escape(o.skillsContainer)
  const disabled = entries.disabled.length === 0
    ? ""
    : Text.format(Text.DISABLED_SKILLS, { disabled_items: entries.disabled.join("\n") })
  const section = entries.deferred
    ? Text.format(Text.SKILL_INDEX, {
      evolution: evolution === "" ? "" : `\n${evolution}`,
      names: entries.enabled.join(", "),
      container_base_path: container
    })
    : Text.format(Text.SKILL_SYSTEM, {
      container_base_path: container,
      skill_evolution_section: evolution,
      skills_list: entries.enabled.length === 0
        ? ""
        : `<available_skills>\n${entries.enabled.join("\n")}\n</available_skills>`,
      disabled_section: disabled
    })
  // Antler's additions, at the end: the disabled skills beside the index too (DeerFlow's index leaves them out),
  // and how many skills the size limit left out
  const n = entries.leftOut.length
  const more = n === 0 ? "" : `${n} more installed skill${n === 1 ? " is" : "s are"} not listed here: the list ` +
    "has a size limit.\n"
  const added = `${entries.deferred && disabled !== "" ? `${disabled}\n` : ""}${more}`
  const close = "</skill_system>"
  return added === "" ? section : `${section.slice(0, -close.length)}${added}${close}`
}

/**
 * A subagent's skills section (DeerFlow's `_build_initial_state`): none without a skill; else the lead's for those
 * skills alone (DeerFlow filters the disabled ones by the loaded names, so none is listed), or, with `describe_skill`,
 * the `<skill_index>`, there without the self-evolution block (DeerFlow passes none).
 */
export const subagentSkillsSection = (
  options: Pick<PromptOptions, "skills" | "skillsContainer" | "skillDiscovery"> & {
    readonly tools: ReadonlyArray<string>
  }
): string => {
  if (options.skills.length === 0) return ""
  const o: PromptOptions = { ...options, clarification: false, disabledSkills: [], skillsAllowlisted: true }
  return skillsSection(deferredDiscovery(o) ? { ...o, tools: options.tools.filter((t) => t !== "skill_manage") } : o)
}

const memoryToolSection = (o: PromptOptions) =>
  o.memoryTools === true && toolsOf(o).has("memory_search") ? Text.MEMORY_TOOL_SYSTEM : ""

const deferredToolsSection = (o: PromptOptions) => {
  const names = o.deferredTools ?? []
  if (names.length === 0 || !toolsOf(o).has("tool_search")) return ""
  return `<available-deferred-tools>\n${[...names].sort().map(escape).join("\n")}\n</available-deferred-tools>`
}

const keywordList = (keywords: ReadonlyArray<string>): string => {
  const shown = keywords.map(escape)
  return shown.length <= 1 ? shown.join("") : `${shown.slice(0, -1).join(", ")}, or ${shown[shown.length - 1]}`
}

/** `<mcp_routing_hints>`: one hint per routed MCP tool, by priority then name; empty without any. */
const mcpRoutingHintsSection = (o: PromptOptions): string => {
  const routed = (o.mcpRoutingHints ?? []).filter((h) => h.keywords.length > 0)
    .sort((a, b) => b.priority - a.priority || (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0))
  if (routed.length === 0) return ""
  const lines = routed.map((h) =>
    `When the user's request involves ${keywordList(h.keywords)}:\n` +
    (h.deferred
      ? `  use \`tool_search\` to fetch \`${escape(h.tool)}\`, then prefer that MCP tool.`
      : `  prefer the \`${escape(h.tool)}\` tool.`)
  )
  return `<mcp_routing_hints>\n${lines.join("\n")}\n</mcp_routing_hints>`
}

/**
 * The `<available-deferred-tools>` and `<mcp_routing_hints>` sections alone, for a prompt of its own (a
 * subagent's): the deferred tools are named when the agent has `tool_search`.
 */
export const toolSearchSections = (
  options: Pick<PromptOptions, "deferredTools" | "mcpRoutingHints" | "tools">
): string => {
  const o: PromptOptions = { ...options, clarification: false, skills: [], skillsContainer: "" }
  return [deferredToolsSection(o), mcpRoutingHintsSection(o)].filter((section) => section !== "").join("\n\n")
}

const subagentLimits = (o: PromptOptions) =>
  o.subagents === undefined || !toolsOf(o).has("task") ? undefined : clampSubagents(o.subagents)

// DeerFlow's words (SubagentSection); its "bash available" is whether the `bash` subagent is offered
const subagentSection = (o: PromptOptions) => {
  const s = subagentLimits(o)
  return s === undefined ? "" : SubagentSection.section(s, s.types.some((t) => t.name === "bash"))
}

/** The ACP agents' part of `<working_directory>` (with `invoke_acp_agent`) and the custom mounts'. */
const acpAndMounts = (o: PromptOptions) => {
  const acp = (o.acpAgents ?? []).length === 0 || !toolsOf(o).has("invoke_acp_agent") ? "" : Text.ACP
  const mounts = o.mounts ?? []
  const mountsSection = mounts.length === 0 ? "" : Text.format(Text.MOUNTS, {
    mounts_list: mounts.map((m) =>
      Text.format(Text.MOUNT_LINE, {
        container_path: escape(m.containerPath),
        access: m.readOnly ? "read-only" : "read-write"
      })
    ).join("\n")
  })
  return [acp, mountsSection].filter((section) => section !== "").join("\n")
}

/** DeerFlow's template (or, for a run nobody can answer, `NON_INTERACTIVE`), filled. */
const deerflowPrompt = (o: PromptOptions) => {
  const s = subagentLimits(o)
  return Text.format(interactive(o) ? Text.LEAD : NON_INTERACTIVE, {
    agent_name: escape(o.agentName ?? "Antler"),
    soul: soul(o),
    self_update_section: selfUpdate(o),
    skills_section: skillsSection(o),
    deferred_tools_section: deferredToolsSection(o),
    mcp_routing_hints_section: mcpRoutingHintsSection(o),
    subagent_section: subagentSection(o),
    memory_tool_section: memoryToolSection(o),
    subagent_reminder: s === undefined ? "" : `${SubagentSection.reminderLine(s)}\n`,
    skill_first_reminder: deferredDiscovery(o)
      ? "- Skill First: For complex tasks, call describe_skill(name) to check if a matching skill exists, then " +
        "read_file to load it.\n"
      : "- Skill First: Always load the relevant skill before starting **complex** tasks.\n",
    subagent_thinking: s === undefined ? "" : `${SubagentSection.thinkingLine(s)}\n`,
    acp_section: acpAndMounts(o)
  })
}

// Antler's: what a run nobody can answer reads instead of DeerFlow's clarification lines
const NO_CLARIFICATION = {
  thinking: "- **PRIORITY CHECK: If anything is unclear, missing, or has multiple interpretations, choose the most " +
    "reasonable reading and state the assumption you made - nobody can answer questions during this run**",
  system: `<clarification_system>
Nobody can answer questions during this run. When something is unclear, choose the most reasonable reading, state
the assumption you made, and carry on.
</clarification_system>`,
  reminder: "- **Clarification First**: nobody can answer questions in this run - state your assumptions and continue"
}

/** The template's lines from the one that starts with `start` to the one that starts with `end` (no last newline). */
const lines = (start: string, end: string) => {
  const from = Text.LEAD.indexOf(`\n${start}`) + 1
  return Text.LEAD.slice(from, Text.LEAD.indexOf("\n", Text.LEAD.indexOf(`\n${end}`, from - 1) + 1))
}

/** DeerFlow's template with `NO_CLARIFICATION`'s lines for its clarification ones (before it is filled). */
const NON_INTERACTIVE = Text.LEAD
  .replace(lines("- **PRIORITY CHECK", "- **PRIORITY CHECK"), NO_CLARIFICATION.thinking)
  .replace(lines("<clarification_system>", "</clarification_system>"), NO_CLARIFICATION.system)
  .replace(lines("- **Clarification First**", "- **Clarification First**"), NO_CLARIFICATION.reminder)

/** The system prompt for the lead agent. Pure: the same options give the same text. */
export const make = (options: PromptOptions): string => deerflowPrompt(options)
