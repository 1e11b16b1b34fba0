/**
 * TerminalResponse (SPEC §5.30, lead chain slot 33; always on): an empty final answer after tool calls must
 * not pass for a finished turn.
 *
 * A response is an empty terminal response when it shows no text (no non-blank string, `text` or
 * `output_text` block) and asks for no tool in any form, while the thread has a tool result after the latest
 * message the user typed (hidden messages do not count): the model ran tools for the user and then said
 * nothing.
 * - The first time in a run, the empty message is not kept: the model is asked again, with a hidden
 *   `terminal_response_recovery` reminder at the end of that request only (never in the thread). State
 *   changes carried by the dropped response are kept with the later one.
 * - If the answer is empty again (or another empty answer comes later in the run: the retry is once per run),
 *   the message is replaced by a fallback saying so, marked `deerflow_error_fallback: true` with an
 *   `error_reason`, and the run ends with status `error` (`ModelResponse.failure`) whose message is that
 *   `error_reason`, as DeerFlow's run worker reports it.
 * Internal calls (summaries, titles) are left alone.
 */
import * as Effect from "effect/Effect"
import type { ModelRequest, ModelResponse } from "../services/ModelService.js"
import { withUpdate } from "../services/ModelService.js"
import { RunState } from "../services/RunContext.js"
import type { AIMessage, HumanMessage, Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as HardStop from "./HardStop.js"
import { FALLBACK_MARKER } from "./LLMErrorHandling.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"
import { atOnce } from "./internal/StateRead.js"

/** The `name` of the request-only reminder sent with the retry. */
export const RECOVERY_NAME = "terminal_response_recovery"

/** The reminder's text: DeerFlow's `_RECOVERY_PROMPT`, word for word (the model reads it). */
export const RECOVERY_TEXT = "<system_reminder>\n" +
  "Your previous response after the tool execution was empty. Review the tool results already present in the " +
  "conversation and provide a concise, user-visible final response. Do not call another tool unless it is " +
  "strictly necessary.\n" +
  "</system_reminder>"

/** What the user sees when the model stays silent after its retry: DeerFlow's `_FALLBACK_CONTENT`, word for word. */
export const FALLBACK_TEXT = "The model completed the tool run but returned no final response, including after " +
  "one automatic retry. Please try again or use a different model."

/** The fallback's `error_reason`, and the error the run ends with: DeerFlow's words, which its clients read. */
export const ERROR_REASON = "Model returned an empty terminal response after one retry"

/** The name of the error the run ends with. */
export const FAILURE_NAME = "EmptyTerminalResponse"

/** Whether a message shows no text and asks for no tool. */
export const isEmptyTerminal = (message: AIMessage): boolean =>
  !HardStop.hasVisibleText(message) && !HardStop.hasToolCallIntent(message)

/** Whether a tool result follows the latest message the user typed (a visible human message). */
export const toolResultInCurrentTurn = (messages: ReadonlyArray<Message>): boolean => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type === "human" && !M.isHidden(message)) {
      for (let j = i + 1; j < messages.length; j++) if (messages[j]!.type === "tool") return true
      return false
    }
  }
  return false
}

/** The request-only reminder. */
export const recoveryMessage = (): HumanMessage =>
  M.human(RECOVERY_TEXT, { name: RECOVERY_NAME, additional_kwargs: { hide_from_ui: true } })

/** The response that replaces a second empty answer and ends the run with an error. */
export const fallbackResponse = (response: ModelResponse): ModelResponse => ({
  ...response,
  message: {
    ...response.message,
    content: FALLBACK_TEXT,
    additional_kwargs: { ...response.message.additional_kwargs, [FALLBACK_MARKER]: true, error_reason: ERROR_REASON }
  },
  failure: { name: FAILURE_NAME, message: ERROR_REASON }
})

/** The later response, with the state changes of the dropped one applied first. */
export const carryUpdate = (dropped: ModelResponse, later: ModelResponse): ModelResponse => {
  if (dropped.update === undefined) return later
  const base: ModelResponse = { ...later, update: dropped.update }
  return later.update === undefined ? base : withUpdate(base, later.update)
}

/** TerminalResponse. Needs `RunState` per run. */
export const layer = (): Middleware.Middleware =>
  Middleware.make(
    Effect.map(RunState, (state): Middleware.Wrappers => {
      // "armed": the retry was asked for but its call failed; the caller's retry of this call carries the reminder.
      let budget: "unused" | "armed" | "spent" = "unused"

      const withReminder = (request: ModelRequest): ModelRequest => ({
        ...request,
        messages: [...request.messages, recoveryMessage()]
      })
      const askAgain = (request: ModelRequest, next: Middleware.ModelNext) =>
        Effect.tap(next(withReminder(request)), () => {
          budget = "spent"
        })

      const afterModel = (
        request: ModelRequest,
        response: ModelResponse,
        next: Middleware.ModelNext
      ): Middleware.Now<ModelResponse> => {
        // (the usual response, with text or tool calls, passes as it is: no effect step, no state read)
        if (response.failure !== undefined || !isEmptyTerminal(response.message)) return response
        return atOnce(state, (current): Middleware.Now<ModelResponse> => {
          if (!toolResultInCurrentTurn(current.messages)) return response
          if (budget !== "unused") return fallbackResponse(response)
          budget = "armed"
          return Effect.logDebug("The model's final answer after its tool calls was empty; asking it again once").pipe(
            Effect.zipRight(askAgain(request, next)),
            Effect.flatMap((again) => Middleware.lift(afterModel(request, carryUpdate(response, again), next)))
          )
        })
      }

      return {
        modelHooks: {
          // a retry of a failed re-ask (LLMErrorHandling is outside) still carries the reminder
          before: (request) => request.internal !== undefined || budget !== "armed" ? request : withReminder(request),
          after: (response, request, sent, next) => {
            if (request.internal !== undefined) return response
            if (sent !== request) budget = "spent"
            return afterModel(request, response, next)
          }
        }
      }
    }),
    { name: "TerminalResponse" }
  )

/** Its chain entry: an empty final answer is asked again inside the retries, after Safety's verdict. */
export const entry = () =>
  Chain.entry("TerminalResponse", () => layer(), [
    { inside: "LLMErrorHandling", reason: "a failed re-ask is retried, and the retry still carries the reminder" },
    { outside: "SafetyFinishReason", reason: "its after_model runs after Safety's: a safety notice is an answer" }
  ])
