/**
 * Todo (SPEC §5.19, lead chain slot #20), plan mode only: the agent keeps a visible todo list for multi-step
 * work with `write_todos`. The list lives in the thread's `todos` (replaced whole on each write), so the user
 * sees it change and `threads show` prints it.
 *
 * - Every request gets `<todo_list_system>` (how to use the list) appended to the system prompt: the same text
 *   on every request of a plan-mode agent, so the prompt stays cacheable.
 * - When the list is no longer visible to the model (a compaction removed the `write_todos` calls) and no
 *   reminder was given since, a hidden `todo_reminder` message listing it is added to the thread, at the end,
 *   before the request is sent.
 * - Several `write_todos` calls in one response are refused (each of them): the list is written once a turn.
 * - When the model gives a final answer (no tool calls) while items are not completed, it is asked once more with
 *   a hidden `todo_completion_reminder` listing them (request-only, one per request, never stored; DeerFlow's
 *   `jump_to: model`), at most `MAX_COMPLETION_REMINDERS` times a run. Its first answer stays in the thread,
 *   before the one that follows.
 * - An item written without a status is pending.
 * What the model reads (the guidance, the tool's description, the reminders, the parallel-call error) is DeerFlow's,
 * word for word (TodoPrompt).
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ModelError, ModelRequest, ModelResponse } from "../services/ModelService.js"
import { withUpdate } from "../services/ModelService.js"
import type { RunServices } from "../services/RunContext.js"
import { RunState } from "../services/RunContext.js"
import * as Tool from "../services/Tool.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Chain from "./Chain.js"
import * as HardStop from "./HardStop.js"
import * as TodoPrompt from "./TodoPrompt.js"

/** The tool's name. */
export const TOOL_NAME = "write_todos"

/** The `name` of the reminder message. */
export const REMINDER_NAME = "todo_reminder"

/** The `name` of the completion reminder (sent with one request, never stored). */
export const COMPLETION_REMINDER_NAME = "todo_completion_reminder"

/** Completion reminders at most per run (DeerFlow's limit). */
export const MAX_COMPLETION_REMINDERS = 2

export { completionReminderText, reminderText, SYSTEM_PROMPT } from "./TodoPrompt.js"

/**
 * Whether a response ends the turn cleanly: no tool calls (valid, invalid or raw) and no tool finish reason. An
 * empty raw `tool_calls` list asks for nothing, so it is a final answer (as DeerFlow's truthiness test reads it).
 */
const isFinalAnswer = (message: M.AIMessage): boolean => !HardStop.hasToolCallIntent(message)

const showsList = (m: Message) => m.name === REMINDER_NAME || M.toolCalls(m).some((c) => c.name === TOOL_NAME)

/** Whether the model can still see a `write_todos` call, or was already reminded. */
export const listVisible = (messages: ReadonlyArray<Message>): boolean => messages.some(showsList)

const TodoArg = Schema.Struct({
  content: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "What the step is, in a few words." }),
  status: Schema.optionalWith(
    Schema.Literal("pending", "in_progress", "completed").annotations({
      description: "pending (when left out), in_progress or completed."
    }),
    { default: () => "pending" }
  )
})

/** `write_todos`: replaces the thread's todo list. */
export const writeTodos = Tool.make({
  name: TOOL_NAME,
  description: TodoPrompt.TOOL_DESCRIPTION,
  parameters: Schema.Struct({
    todos: Schema.Array(TodoArg).annotations({ description: "The whole list, in order." })
  }),
  handler: ({ todos }, call) =>
    Effect.flatMap(RunState, (state) =>
      Effect.map(state.get, (current) => {
        const issuer = [...current.messages].reverse().find((m) => M.toolCalls(m).some((c) => c.id === call.id))
        const writes = issuer === undefined ? 1 : M.toolCalls(issuer).filter((c) => c.name === TOOL_NAME).length
        if (writes > 1) {
          return Tool.errorResult(call, TodoPrompt.PARALLEL_ERROR)
        }
        const list = todos.map((t) => ({ content: t.content, status: t.status }))
        return {
          message: M.tool(`Updated todo list to ${JSON.stringify(list)}`, call.id, {
            name: TOOL_NAME,
            status: "success"
          }),
          update: { todos: list }
        }
      })
    )
})

/** The Todo middleware (plan mode). Requires `RunState`. Contributes `write_todos`. */
export const layer = (): Middleware =>
  MW.make(
    Effect.map(RunState, (state) => {
      // Where the list was last seen (an index and the message's id): checked in O(1) on the next call, so a
      // long thread is scanned again only after a compaction moved things.
      let seen: { readonly at: number; readonly id: string } | undefined
      const visible = (messages: ReadonlyArray<Message>) => {
        const at = seen === undefined ? undefined : messages[seen.at]
        if (at !== undefined && at.id === seen!.id && showsList(at)) return true
        const found = messages.findLastIndex(showsList)
        seen = found < 0 ? undefined : { at: found, id: messages[found]!.id }
        return found >= 0
      }
      // completion reminders given in this run
      let reminded = 0
      /**
       * Asks again while the answer is final and items are open (at most MAX_COMPLETION_REMINDERS a run): each
       * earlier answer goes to the thread before the last one (with its own state changes), the reminder only
       * to the request.
       */
      const completed = (
        request: ModelRequest,
        response: ModelResponse,
        next: (request: ModelRequest) => Effect.Effect<ModelResponse, ModelError, RunServices>
      ): Effect.Effect<ModelResponse, ModelError, RunServices> =>
        Effect.flatMap(state.get, (current) => {
          const open = (current.todos ?? []).filter((t) => t.status !== "completed")
          if (
            open.length === 0 || reminded >= MAX_COMPLETION_REMINDERS || response.failure !== undefined ||
            !isFinalAnswer(response.message)
          ) return Effect.succeed(response)
          reminded++
          const reminder = M.human(TodoPrompt.completionReminderText(open), {
            name: COMPLETION_REMINDER_NAME,
            additional_kwargs: { hide_from_ui: true }
          })
          const carried = withUpdate(response, { messages: [response.message] }).update!
          // the reminder goes with this request only: an earlier one is not sent again
          const earlier = request.messages.filter((m) => m.name !== COMPLETION_REMINDER_NAME)
          const asked = { ...request, messages: [...earlier, response.message, reminder] }
          return Effect.flatMap(next(asked), (again) =>
            completed(
              asked,
              again.update === undefined
                ? { ...again, update: carried }
                : withUpdate({ ...again, update: carried }, again.update),
              next
            ))
        })
      // the agent's prompt with the guidance appended, made once: the agent's prompt is the same on every step
      let planned: { readonly base: string | undefined; readonly text: string } | undefined
      const withGuidance = (base: string | undefined) => {
        if (planned === undefined || planned.base !== base) {
          const text = base === undefined || base === ""
            ? TodoPrompt.SYSTEM_PROMPT
            : `${base}\n\n${TodoPrompt.SYSTEM_PROMPT}`
          planned = { base, text }
        }
        return planned.text
      }
      return {
        model: (request: ModelRequest, next) => {
          if (request.internal !== undefined) return next(request)
          const systemPrompt = withGuidance(request.systemPrompt)
          return Effect.flatMap(state.get, (current) => {
            const todos = current.todos ?? []
            if (todos.length === 0 || visible(current.messages)) {
              const planned = { ...request, systemPrompt }
              return Effect.flatMap(next(planned), (response) => completed(planned, response, next))
            }
            const reminder = M.human(TodoPrompt.reminderText(todos), {
              name: REMINDER_NAME,
              additional_kwargs: { hide_from_ui: true }
            })
            const planned = { ...request, systemPrompt, messages: [...request.messages, reminder] }
            return Effect.zipRight(
              Effect.orDie(state.update({ messages: [reminder] })),
              Effect.flatMap(next(planned), (response) => completed(planned, response, next))
            )
          })
        }
      } satisfies MW.Wrappers
    }),
    { name: "Todo", tools: [writeTodos] }
  )

/** Its chain entry (plan mode): inside Summarization, so it sees whether a compaction hid the list. */
export const entry = () =>
  Chain.entry("Todo", () => layer(), [
    { inside: "Summarization", reason: "it checks whether the list is still in view after a compaction" }
  ])
