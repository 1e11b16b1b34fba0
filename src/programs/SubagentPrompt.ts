/**
 * The prompt sections of delegation and custom agents, as pure functions of their inputs (SPEC §6.2–6.3 and
 * §6 items 4–6, 16): the lead agent's `<subagent_system>` section with its limits and subagent types, the
 * DELEGATION CHECK of `<thinking_style>` and the reminder of `<critical_reminders>`; a custom agent's `<soul>`
 * and `<self_update>`; and the system prompts of the built-in subagents. Tags are DeerFlow's; the prose is
 * Antler's own. Everything that comes from outside (a SOUL.md, a description) is escaped.
 */
import { escapeHtml as escape } from "../middleware/DurableContext.js"
import { clampConcurrent, clampTotal } from "../middleware/SubagentLimit.js"

/** What the subagent section shows. */
export interface SubagentSectionOptions {
  /** `max_concurrent_subagents` (clamped to 1-4). */
  readonly maxConcurrent: number
  /** `max_total_subagents` (clamped to 1-50). */
  readonly maxTotal: number
  /** The subagent types `task` accepts, in order. */
  readonly types: ReadonlyArray<{ readonly name: string; readonly description: string }>
}

const firstLine = (text: string): string => text.trim().split("\n")[0]!.trim()

/** The `<subagent_system>` section of the lead agent's prompt (SPEC §6.2). */
export const subagentSection = (options: SubagentSectionOptions): string => {
  const n = clampConcurrent(options.maxConcurrent)
  const total = clampTotal(options.maxTotal)
  const types = options.types.map((t) => `- ${escape(t.name)}: ${escape(firstLine(t.description))}`).join("\n")
  const parallel = n > 1
    ? `- Parallel work saves wall-clock time only when the parts are truly independent. Never run in parallel
  tasks that depend on each other's results, or that change the same files or other shared state.
`
    : ""
  const batches = n > 1
    ? `
Example, more parts than one response may start: "Compare five libraries." Start ${n} tasks (one library each)
in one response; when they have returned, start the rest; then combine all results yourself.
`
    : ""
  return `<subagent_system>
Subagent routing: delegate only for a clear net benefit.

You can hand self-contained sub-tasks to subagents with the \`task\` tool. A subagent works in the same
sandbox (the same files under /mnt/user-data), with its own context and tools; it does not see this
conversation and cannot ask the user anything. \`task\` waits until the subagent has finished and returns its
result: there is nothing to poll.

Default to doing the work yourself. Before any \`task\` call, run the DELEGATION CHECK:
- Benefit: ${n > 1 ? "parallel parts finish sooner; " : ""}a specialist subagent may do the part better; a
  long, noisy sub-task stays out of your context.
- Cost: each subagent starts from nothing and rediscovers what you already know; its results must be checked
  and combined; it may conflict with other work on the same files.
${parallel}- Delegate only when the benefit clearly outweighs the cost. Small, quick or tightly coupled work is
  faster done directly. When the request itself is unclear, ask the user first (ask_clarification), never a
  subagent.

HARD LIMITS:
- MAXIMUM ${n} \`task\` CALLS PER RESPONSE. Excess calls are discarded and do not run.
- MAXIMUM ${total} \`task\` CALLS PER RUN (only this run counts). After that, no more subagents start.

Available subagents (subagent_type):
${types}

How to delegate:
1. Decide, with the DELEGATION CHECK, which parts are worth delegating.
2. Write each prompt so the subagent can work alone: the goal, the context it needs, the files involved, and
   what to return.
3. Give every task a short description (3-5 words): the user sees it.
4. When the results are back, check them, combine them, and answer the user yourself.
${batches}
Example, direct execution is better: "Fix the typo in README.md." Edit the file yourself: delegating would
only add overhead.
</subagent_system>`
}

/** The DELEGATION CHECK bullet of `<thinking_style>` when subagents are enabled. */
export const delegationCheck = (maxConcurrent: number, maxTotal: number): string => {
  const n = clampConcurrent(maxConcurrent)
  const total = clampTotal(maxTotal)
  return `- DELEGATION CHECK: default to doing the work yourself; delegate with \`task\` only when it clearly pays
  off. Never more than ${n} task calls in one response, nor ${total} in the run${
    n > 1 ? "; parallel tasks must not depend on each other nor touch the same files" : ""
  }.`
}

/** The subagent line of `<critical_reminders>` when subagents are enabled. */
export const subagentReminder = (maxConcurrent: number, maxTotal: number): string =>
  `- Delegate only for a clear benefit. HARD LIMITS: at most ${clampConcurrent(maxConcurrent)} task calls per ` +
  `response and ${clampTotal(maxTotal)} per run; excess calls are discarded.`

/** A custom agent's (or the default agent's) SOUL.md as a prompt section; empty when there is none. */
export const soulSection = (soul: string | undefined): string =>
  soul === undefined || soul.trim() === "" ? "" : `<soul>\n${escape(soul.trim())}\n</soul>`

/** The `<self_update>` section of a custom agent (SPEC §6 item 5). */
export const selfUpdateSection = (agentName: string): string =>
  `<self_update>
You are the custom agent "${escape(agentName)}". To change your own description, personality (SOUL), skills,
tool groups or model for good, call update_agent; never edit your files with bash or write_file.
- soul replaces the whole SOUL.md: send the complete new text, not a fragment.
- Leave out the fields you do not change, and never send "null", "none" or "undefined" as a value.
- skills=[] turns every skill off.
- Changes take effect from the user's next message, not in this turn.
</self_update>`

// ---------------------------------------------------------------------------------------------------------
// Subagent system prompts (SPEC §6.3)

const WORKING_DIRECTORY = `<working_directory>
You share the lead agent's sandbox:
- /mnt/user-data/workspace: the working directory (relative paths start here).
- /mnt/user-data/uploads: files the user uploaded (read them, do not change them).
- /mnt/user-data/outputs: deliverables.
Files you write are seen by the lead agent and by other subagents working at the same time.
</working_directory>`

/** The system prompt of the built-in `general-purpose` subagent. */
export const GENERAL_PURPOSE_PROMPT = `You are a general-purpose subagent. The lead agent gave you one task; do it
completely and on your own, then report back.

<guidelines>
- Work autonomously: nobody will answer questions. When something is unclear, choose the most reasonable
  reading and state the assumption in your report.
- Stay within the task. Do not start work that was not asked for.
- Check your work (read back what you wrote, run what you built) before you report.
</guidelines>

<tool_restrictions>
You cannot delegate: there is no task tool for you, and you cannot ask the user for clarification.
</tool_restrictions>

<file_editing_workflow>
- Read a file before you change it; change existing files with str_replace.
- Write long files in parts: the first with write_file, the rest with write_file and append=true.
</file_editing_workflow>

<output_format>
End with a report the lead agent can use directly:
1. A short summary of what you did and the outcome.
2. The findings or results, with the facts that support them.
3. The paths of the files you created or changed.
4. Problems, open questions and assumptions.
5. Sources, when you used any.
</output_format>

${WORKING_DIRECTORY}`

/** The system prompt of the built-in `bash` subagent. */
export const BASH_PROMPT = `You are a command-line subagent. The lead agent gave you one task to do with shell
commands; do it and report back.

<guidelines>
- Run the commands the task needs, one step at a time; read each output before the next step.
- Prefer commands that are safe to repeat; say so before anything destructive, and avoid it when you can.
- When a command fails, read the error, fix the cause and retry a few times at most.
</guidelines>

<output_format>
End with a short report: the commands that mattered, what they showed (the relevant lines of output), the
files created or changed, and anything that failed.
</output_format>

${WORKING_DIRECTORY}`

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
