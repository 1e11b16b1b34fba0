/**
 * DeerFlow's `task` tool as its model reads it, word for word (bytedance/deer-flow, MIT licence,
 * backend/packages/harness/deerflow/tools/builtins/task_tool.py): its docstring through LangChain's
 * `@tool(parse_docstring=True)` (the paragraphs before `Args:` joined by a space). Generated; a line too long for
 * this file goes on with a backslash at its end (nothing of it is in the text).
 */

/** The tool's description. */
export const DESCRIPTION =
  `Delegate a bounded task to a specialized subagent in its own context. Delegate only when expected benefit clearly \
exceeds delegation overhead.
Useful benefits are:
- Material wall-clock savings from independent parallel work
- Specialist tools, skills, models, or domain instructions
- Context isolation for a bounded, unusually context-heavy investigation Built-in subagent types:
- **general-purpose**: A capable agent for bounded exploration and action. Use
  when the assignment has clear specialist or context-isolation benefit, or is
  one of several independent, non-overlapping tasks that can actually run in
  parallel.
- **bash**: Command execution specialist for running bash commands. This is only
  available when host bash is explicitly allowed or when using an isolated shell
  sandbox such as \`AioSandboxProvider\`. Use it only for a bounded shell workflow
  with clear context-isolation or independent-parallel benefit.
  Routine git, build, test, or deploy operations are not sufficient reason to delegate. Additional custom subagent \
types may be defined in config.yaml under
\`subagents.custom_agents\`. Each custom type can have its own system prompt,
tools, skills, model, and timeout configuration. If an unknown subagent_type
is provided, the error message will list all available types. When to use this tool:
- Independent tasks that materially reduce wall-clock time when run in parallel
- A specialist subagent provides capability unavailable on the direct path
- Bounded exploration that would otherwise displace important parent context When NOT to use this tool:
- Merely because a task is complex, multi-step, verbose, or touches a large repo
- Splitting dependent steps across parallel subagents; keep the chain together
  and delegate it as one bounded task only when specialist or context-isolation
  benefit clearly wins
- Parallel work with overlapping files, shared mutable state, or external side effects
- Tasks requiring user interaction or clarification Costs to include in the delegation decision:
- Repeating the same repository discovery in multiple contexts
- Coordination, verification, and synthesis of returned results
- Any task the parent can complete more cheaply with direct tools`

/** Its parameters' descriptions. */
export const ARGS = {
  description:
    `A short (3-5 word) description of the task for logging/display. ALWAYS PROVIDE THIS PARAMETER FIRST.`,
  prompt:
    `The task description for the subagent. Be specific and clear about what needs to be done. ALWAYS PROVIDE THIS \
PARAMETER SECOND.`,
  subagent_type:
    `The type of subagent to use. ALWAYS PROVIDE THIS PARAMETER THIRD.`
} as const
