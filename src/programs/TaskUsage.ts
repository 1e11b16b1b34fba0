/**
 * What a task's subagent spent, counted in its run's token usage when the task ends (completed, failed, timed out
 * or cancelled), as DeerFlow's task tool reports each task's usage records to the run's journal then: a run that
 * ends before its next model call (cancelled, stopped at its recursion limit, or done) still counts the tasks of
 * its last step. Each of the subagent's model calls is booked under the model its provider named (the subagent's
 * model when it named none), as DeerFlow's token collector records it, with the purpose `subagent`.
 *
 * The task's result then says its usage is counted (`subagent_token_usage_recorded`), so TokenUsage's roll-up at
 * the run's next model call moves it onto the dispatch message without counting it again.
 */
import * as Effect from "effect/Effect"
import { modelOf } from "../middleware/TokenUsage.js"
import type { RunState } from "../services/RunContext.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { TokenUsageDelta } from "../state/ThreadState.js"

/** The usage records of a subagent's model calls: one per AI message that spent tokens. */
export const recordsOf = (
  messages: ReadonlyArray<Message>,
  modelName: string | undefined
): ReadonlyArray<TokenUsageDelta> => {
  const records: Array<TokenUsageDelta> = []
  for (const message of messages) {
    if (message.type !== "ai" || message.usage_metadata === undefined) continue
    const usage = message.usage_metadata
    const spent = M.spentTokens(usage)
    if (spent <= 0) continue
    records.push({
      model: modelOf(message, modelName),
      purpose: "subagent",
      input_tokens: usage.input_tokens,
      output_tokens: usage.output_tokens,
      total_tokens: spent
    })
  }
  return records
}

/**
 * Counts the task's usage in its run's token usage, once: `true` when it is counted (now or before), `false` when
 * the subagent spent nothing or the update failed (the roll-up may then still count it from the result).
 */
export const recorder = (state: RunState["Type"], modelName: string | undefined) => {
  let recorded = false
  return (messages: ReadonlyArray<Message>): Effect.Effect<boolean> =>
    Effect.uninterruptible(Effect.suspend(() => {
      if (recorded) return Effect.succeed(true)
      const records = recordsOf(messages, modelName)
      if (records.length === 0) return Effect.succeed(false)
      return state.update({ token_usage: records }).pipe(
        Effect.map(() => (recorded = true)),
        Effect.catchAll((error) =>
          Effect.as(Effect.logWarning(`A task's token usage was not recorded: ${error.message}`), false)
        )
      )
    }))
}
