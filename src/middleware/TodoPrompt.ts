/**
 * What plan mode tells the model, in DeerFlow's words (the TodoMiddleware its lead agent builds,
 * `_create_todo_list_middleware`, and the reminders of its `todo_middleware.py`; the parallel-call error is
 * LangChain's TodoListMiddleware's): the model was tuned on them. The system prompt and the tool's description are
 * constants, so every request of a plan-mode agent carries the same text.
 */
import { escapeText } from "../state/Markup.js"
import type { Todo } from "../state/ThreadState.js"

/**
 * Appended to the system prompt of a plan-mode agent after a blank line, as LangChain appends it (DeerFlow's text
 * opens and ends with a line break).
 */
export const SYSTEM_PROMPT = `
<todo_list_system>
You have access to the \`write_todos\` tool to help you manage and track complex multi-step objectives.

**CRITICAL RULES:**
- Mark todos as completed IMMEDIATELY after finishing each step - do NOT batch completions
- Keep EXACTLY ONE task as \`in_progress\` at any time (unless tasks can run in parallel)
- Update the todo list in REAL-TIME as you work - this gives users visibility into your progress
- DO NOT use this tool for simple tasks (< 3 steps) - just complete them directly

**When to Use:**
This tool is designed for complex objectives that require systematic tracking:
- Complex multi-step tasks requiring 3+ distinct steps
- Non-trivial tasks needing careful planning and execution
- User explicitly requests a todo list
- User provides multiple tasks (numbered or comma-separated list)
- The plan may need revisions based on intermediate results

**When NOT to Use:**
- Single, straightforward tasks
- Trivial tasks (< 3 steps)
- Purely conversational or informational requests
- Simple tool calls where the approach is obvious

**Best Practices:**
- Break down complex tasks into smaller, actionable steps
- Use clear, descriptive task names
- Remove tasks that become irrelevant
- Add new tasks discovered during implementation
- Don't be afraid to revise the todo list as you learn more

**Task Management:**
Writing todos takes time and tokens - use it when helpful for managing complex problems, not for simple requests.
</todo_list_system>
`

/** The description of `write_todos`. */
export const TOOL_DESCRIPTION = `Use this tool to create and manage a structured task list for complex work sessions.

**IMPORTANT: Only use this tool for complex tasks (3+ steps). For simple requests, just do the work directly.**

## When to Use

Use this tool in these scenarios:
1. **Complex multi-step tasks**: When a task requires 3 or more distinct steps or actions
2. **Non-trivial tasks**: Tasks requiring careful planning or multiple operations
3. **User explicitly requests todo list**: When the user directly asks you to track tasks
4. **Multiple tasks**: When users provide a list of things to be done
5. **Dynamic planning**: When the plan may need updates based on intermediate results

## When NOT to Use

Skip this tool when:
1. The task is straightforward and takes less than 3 steps
2. The task is trivial and tracking provides no benefit
3. The task is purely conversational or informational
4. It's clear what needs to be done and you can just do it

## How to Use

1. **Starting a task**: Mark it as \`in_progress\` BEFORE beginning work
2. **Completing a task**: Mark it as \`completed\` IMMEDIATELY after finishing
3. **Updating the list**: Add new tasks, remove irrelevant ones, or update descriptions as needed
4. **Multiple updates**: You can make several updates at once (e.g., complete one task and start the next)

## Task States

- \`pending\`: Task not yet started
- \`in_progress\`: Currently working on (can have multiple if tasks run in parallel)
- \`completed\`: Task finished successfully

## Task Completion Requirements

**CRITICAL: Only mark a task as completed when you have FULLY accomplished it.**

Never mark a task as completed if:
- There are unresolved issues or errors
- Work is partial or incomplete
- You encountered blockers preventing completion
- You couldn't find necessary resources or dependencies
- Quality standards haven't been met

If blocked, keep the task as \`in_progress\` and create a new task describing what needs to be resolved.

## Best Practices

- Create specific, actionable items
- Break complex tasks into smaller, manageable steps
- Use clear, descriptive task names
- Update task status in real-time as you work
- Mark tasks complete IMMEDIATELY after finishing (don't batch completions)
- Remove tasks that are no longer relevant
- **IMPORTANT**: When you write the todo list, mark your first task(s) as \`in_progress\` immediately
- **IMPORTANT**: Unless all tasks are completed, always have at least one task \`in_progress\` to show progress

Being proactive with task management demonstrates thoroughness and ensures all requirements are completed \
successfully.

**Remember**: If you only need a few tool calls to complete a task and it's clear what to do, it's better to just \
do the task directly and NOT use this tool at all.
`

/** The error each of several `write_todos` calls in one response gets (none of them is applied). */
export const PARALLEL_ERROR = "Error: The `write_todos` tool should never be called multiple times in parallel. " +
  "Please call it only once per model invocation to update the todo list."

// An item's line; its content is the model's own text, escaped so that it cannot close the reminder's tag
const item = (t: Todo) => `- [${t.status}] ${escapeText(t.content)}`

/** The reminder that brings the list back when a compaction hid its `write_todos` calls. */
export const reminderText = (todos: ReadonlyArray<Todo>): string =>
  "<system_reminder>\n" +
  "Your todo list from earlier is no longer visible in the current context window, " +
  "but it is still active. Here is the current state:\n\n" +
  `${todos.map(item).join("\n")}\n\n` +
  "Continue tracking and updating this todo list as you work. " +
  "Call `write_todos` whenever the status of any item changes.\n" +
  "</system_reminder>"

/** The completion reminder: the items not completed when the model gave its final answer. */
export const completionReminderText = (open: ReadonlyArray<Todo>): string =>
  "<system_reminder>\n" +
  "You have incomplete todo items that must be finished before giving your final response:\n\n" +
  `${open.map(item).join("\n")}\n\n` +
  "Please continue working on these tasks. Call `write_todos` to mark items as completed " +
  "as you finish them, and only respond when all items are done.\n" +
  "</system_reminder>"
