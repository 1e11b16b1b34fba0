/**
 * What the lead agent's system prompt says about delegation (SPEC §6.2): the `<subagent_system>` section, the
 * DELEGATION CHECK line of `<thinking_style>` and the Benefit-Based Delegation reminder, in DeerFlow's words
 * (`_build_subagent_section` and `apply_prompt_template` of its lead agent's prompt module): the model was tuned
 * on them, and its limits are the ones SubagentLimit enforces. Pure functions of the clamped limits and the
 * subagent types; the prompt is built once per agent.
 */
import { escapeText as escape } from "../state/Markup.js"

/** A subagent type the `task` tool can start. */
export interface SubagentType {
  readonly name: string
  readonly description: string
}

/** The limits and types the section states (already clamped: 1..4 per response, 1..50 per run). */
export interface Limits {
  readonly maxConcurrent: number
  readonly maxTotal: number
  readonly types: ReadonlyArray<SubagentType>
}

/** DeerFlow's compact descriptions of the built-in types, shown in place of their configured ones. */
const BUILTIN_DESCRIPTIONS: Readonly<Record<string, string>> = {
  "general-purpose": "For bounded work with clear delegation benefit from specialist capability, context isolation, " +
    "or independent parallel execution.",
  bash: "For bounded shell workflows with clear context-isolation or independent-parallel benefit. Routine git, " +
    "build, test, or deploy operations are not sufficient reason to delegate."
}

/**
 * The available subagents, one line each: a built-in with DeerFlow's description, another with the first line of
 * its own, escaped (an agent-editable description cannot close the block or forge a tag).
 */
export const availableSubagents = (types: ReadonlyArray<SubagentType>): string =>
  types.map((t) =>
    `- **${escape(t.name)}**: ${
      Object.hasOwn(BUILTIN_DESCRIPTIONS, t.name)
        ? BUILTIN_DESCRIPTIONS[t.name]
        : escape(t.description.split("\n")[0]!.trim())
    }`
  ).join("\n")

const SINGLE = {
  expectedBenefit: "specialist capability + context isolation",
  parallelDispatch: "",
  validBenefits: `- **Specialist capability**: A subagent has tools, skills, a model, or domain instructions that \
materially improve the result.
- **Context isolation**: A bounded, unusually context-heavy investigation would otherwise displace important \
lead-agent context.

With a per-response limit of 1, delegate only for material specialist or context-isolation benefit. Parallel dispatch \
cannot reduce wall-clock latency in this configuration.`,
  limitAction:
    "- When the per-response limit is reached, verify and synthesize the returned result or continue directly.",
  followup: "- After any delegated result, re-evaluate whether the remaining work still has specialist or " +
    "context-isolation benefit. Do not chain delegations merely to work around the per-response limit.",
  workflow: () => `1. Establish the cheapest credible direct-execution path.
2. Include all negative signals in expected cost.
3. Compare specialist or context-isolation benefit with all listed costs.
4. If delegation wins clearly, give the single subagent a bounded scope, relevant known context and paths, an \
expected output, and explicit side-effect ownership.
5. Launch at most 1 call and stay within the remaining run allowance.
6. Verify and synthesize the returned result against primary evidence.`,
  examples: `- Refactor authentication implementation and its tests directly when analysis, edits, and test feedback \
share files or depend on one another. Complexity alone does not justify delegation.
- Use one specialized subagent only when its configured capability provides material benefit unavailable on the \
direct path.
- Use one subagent for a bounded, unusually context-heavy investigation only when preserving lead-agent context \
clearly outweighs delegation and synthesis cost.
- Run a routine test, build, or git command directly. Use one Bash subagent only when a bounded shell workflow has \
material context-isolation benefit.`,
  multiBatch: () => ""
}

const PARALLEL = {
  expectedBenefit: "parallel wall-clock savings + specialist capability + context isolation",
  parallelDispatch: `**Hard vetoes for parallel dispatch - do not launch these scopes concurrently:**
- **Inter-agent dependencies**: One delegated task needs another delegated task's result. Keep the dependency chain \
together instead of splitting it across parallel subagents.
- **Unsafe shared state**: Tasks may touch overlapping files, shared mutable state, or external side effects without \
disjoint ownership.

A bounded sequential chain may still be delegated to one subagent when specialist capability or context isolation \
clearly outweighs delegation overhead.
`,
  validBenefits: `- **Parallel latency**: Two or more independent, non-overlapping tasks can run concurrently and \
materially reduce wall-clock time.
- **Specialist capability**: A subagent has tools, skills, a model, or domain instructions that materially improve \
the result.
- **Context isolation**: A bounded, unusually context-heavy investigation would otherwise displace important \
lead-agent context.

A single subagent is justified only by material specialist or context-isolation benefit. Parallelism requires \
independent scopes with no output dependency. **Use the fewest subagents needed** to realize the benefit.`,
  limitAction: "- Never start a batch that would exceed either limit. When a limit is reached, synthesize existing " +
    "results or continue directly.",
  followup: "- **Re-evaluate the remaining work after every batch.** Later batches cannot overlap earlier batches, " +
    "but can still deliver material within-batch parallel savings. Recompute benefit and cost instead of " +
    "automatically continuing or stopping.",
  workflow: (n: number) => `1. Establish the cheapest credible direct-execution path.
2. Apply the parallel-dispatch hard vetoes and include all negative signals in expected cost.
3. Compare expected benefit with all listed costs.
4. If delegation wins clearly, give each subagent a bounded, non-overlapping scope, relevant known context and paths, \
an expected output, and explicit side-effect ownership.
5. Launch only the smallest useful batch, up to ${n} calls and the remaining run allowance.
6. Verify and synthesize returned results. Resolve contradictions against primary evidence instead of forwarding \
incompatible conclusions.`,
  examples: `- Refactor authentication implementation and its tests: execute directly when analysis, edits, and test \
feedback share files or depend on one another. Complexity alone does not justify delegation.
- Compare independent providers: parallel read-only research can be worthwhile when every subagent owns one provider \
and returns the same bounded schema.
- Use one specialized subagent only when its configured capability provides material benefit unavailable on the \
direct path.
- Run a routine test, build, or git command directly. Use one Bash subagent only when a bounded shell workflow has \
material context-isolation benefit.`,
  multiBatch: (n: number) => `**Multi-batch example (limit ${n}):** For independent scopes that exceed the \
per-response limit:
- **Batch 1: launch up to ${n} independent scopes.**
- Wait for the batch, then re-evaluate the remaining work and net benefit.
- **Batch 2** may launch the next scopes if it still wins; otherwise continue directly.
- **Synthesize all retained results** at the end.
`
}

/**
 * DeerFlow's `<subagent_system>` section. `bash` (DeerFlow's "bash available": the `bash` subagent is offered)
 * chooses the direct-execution example: a `bash("npm test")` call, or a `read_file` one.
 */
export const section = (limits: Limits, bash: boolean): string => {
  const n = limits.maxConcurrent
  const v = n === 1 ? SINGLE : PARALLEL
  const directTools = bash ? "bash, ls, read_file, web_search, etc." : "ls, read_file, web_search, etc."
  const directExample = bash
    ? "# User asks: \"Run the tests\"\n# Thinking: Direct bash is cheaper than delegation\n# → Execute directly\n\n" +
      "bash(\"npm test\")  # Direct execution, not task()"
    : "# User asks: \"Read the README\"\n# Thinking: Single straightforward file read\n# → Execute directly\n\n" +
      "read_file(\"/mnt/user-data/workspace/README.md\")  # Direct execution, not task()"
  return `<subagent_system>
## Subagent Routing: Delegate Only for Clear Net Benefit

Subagents are optional. **Default to direct execution.** Do not delegate merely because a task is complex, has many \
steps, produces verbose output, or touches a large repository.

**DELEGATION CHECK (required before every \`task\` call):**

Expected benefit = ${v.expectedBenefit}

Expected cost = delegation and startup overhead + duplicate context and repository discovery + coordination and \
synthesis + state-conflict risk + side-effect risk

**Delegate only when the expected benefit is clearly greater than the expected cost.** When uncertain, execute directly.

${v.parallelDispatch}

**Delegation costs and negative signals - include these in the net-benefit comparison:**
- **Duplicate discovery**: Each subagent would need to read the same repository area or reconstruct context the lead \
agent already has.
- **Cheap direct path**: The lead agent can finish with a small number of tool calls or less work than delegation \
plus synthesis.
- **Coordination burden**: The lead agent would spend substantial work reconciling or verifying subagent results.

**Clarify first**: Requirements that need user input must be resolved before direct execution or delegation.

**Valid sources of delegation benefit:**
${v.validBenefits}

**HARD LIMITS - NON-NEGOTIABLE:**
- **MAXIMUM ${n} \`task\` CALLS PER RESPONSE - NEVER emit more. VIOLATION IS A HARD ERROR.** Excess calls are \
discarded and their work is lost.
- **MAXIMUM ${limits.maxTotal} \`task\` CALLS PER RUN - NEVER exceed it. VIOLATION IS A HARD ERROR.** Count only \
delegations for the current user request/run; older thread history does not consume this run's allowance.
${v.limitAction}
${v.followup}

**Available Subagents:**
${availableSubagents(limits.types)}

**Delegation workflow:**
${v.workflow(n)}

**Examples:**
${v.examples}

${v.multiBatch(n)}

Otherwise execute directly using available tools (${directTools}):

\`\`\`python
${directExample}
\`\`\`

The \`task\` tool waits for the subagent and returns its result directly; no polling is needed.
</subagent_system>`
}

/** DeerFlow's DELEGATION CHECK line of `<thinking_style>`. */
export const thinkingLine = (limits: Limits): string =>
  limits.maxConcurrent === 1
    ? "- **DELEGATION CHECK: Default to direct execution; complexity alone is not a reason to delegate. Before each " +
      "`task` call, require clear positive net benefit from specialist capability or context isolation. " +
      `Never exceed 1 \`task\` call in one response or ${limits.maxTotal} total in this run.**`
    : "- **DELEGATION CHECK: Default to direct execution; complexity alone is not a reason to delegate. Before each " +
      "`task` call, require clear positive net benefit; before parallel calls, rule out inter-agent dependencies " +
      "and overlapping state or side effects. If delegating, use the fewest agents needed and never exceed " +
      `${limits.maxConcurrent} \`task\` calls in one response or ${limits.maxTotal} total in this run.**`

/** DeerFlow's Benefit-Based Delegation line of `<critical_reminders>`. */
export const reminderLine = (limits: Limits): string =>
  "- **Benefit-Based Delegation**: Default to direct execution. Use `task` only when expected benefit from " +
  (limits.maxConcurrent === 1
    ? "specialist capability or context isolation"
    : "real parallel latency, specialist capability, or context isolation") +
  " clearly exceeds delegation, duplicate-discovery, synthesis, conflict, and side-effect costs. Use the fewest " +
  `subagents needed. HARD LIMITS ARE NON-NEGOTIABLE: max ${limits.maxConcurrent} \`task\` calls per response, max ` +
  `${limits.maxTotal} per run; excess calls are discarded and their work is lost.`
