/**
 * What a task's subagent spent, counted in its run's token usage when the task ends (completed, failed, timed out
 * or cancelled), as DeerFlow's task tool reports each task's usage records to the run's journal then: a run that
 * ends before its next model call (cancelled, stopped at its recursion limit, or done) still counts the tasks of
 * its last step.
 *
 * Every model call made inside the subagent counts, its answers and its middlewares' own calls (its summaries)
 * alike, as DeerFlow's token collector, a callback on the subagent's whole run, records them: the journal under the
 * subagent's chain (`UsageJournal`) books each call in the subagent's state, and the task reads those records from
 * its run's events. Each is booked under the model its provider named (the model the call asked for when it named
 * none), with the purpose `subagent`; one that spent nothing is not a record.
 *
 * The task's result then says its usage is counted (`subagent_token_usage_recorded`), so TokenUsage's roll-up at
 * the run's next model call moves it onto the dispatch message without counting it again.
 */
import * as Effect from "effect/Effect"
import type { RunState } from "../services/RunContext.js"
import type { RunEvent } from "../services/RunEvents.js"
import * as M from "../state/Message.js"
import type { TokenUsage } from "../state/SubagentStatus.js"
import type { TokenUsageDelta } from "../state/ThreadState.js"

/** A task's usage records, gathered from its subagent's run as it goes. */
export interface Spent {
  /** Sees an event of the subagent's run (only the usage records of its state updates count). */
  readonly see: (event: RunEvent) => void
  /** The records so far, one per model call that spent tokens. */
  readonly records: () => ReadonlyArray<TokenUsageDelta>
  /** Their sum, as the task's events and result tell it (none when nothing was spent). */
  readonly usage: () => TokenUsage | undefined
}

/** A fresh tracker for one task. */
export const spent = (): Spent => {
  const records: Array<TokenUsageDelta> = []
  return {
    see: (event) => {
      if (event.type !== "state") return
      for (const delta of event.update.token_usage ?? []) {
        const total = M.spentTokens(delta)
        if (total <= 0) continue
        records.push({
          model: delta.model,
          purpose: "subagent",
          input_tokens: delta.input_tokens,
          output_tokens: delta.output_tokens,
          total_tokens: total
        })
      }
    },
    records: () => records.slice(),
    usage: () => {
      if (records.length === 0) return undefined
      let input = 0
      let output = 0
      let total = 0
      for (const record of records) {
        input += record.input_tokens
        output += record.output_tokens
        total += record.total_tokens
      }
      return { input_tokens: input, output_tokens: output, total_tokens: total }
    }
  }
}

/**
 * Counts the task's usage in its run's token usage, once: `true` when it is counted (now or before), `false` when
 * the subagent spent nothing or the update failed (the roll-up may then still count it from the result), or when
 * the run's usage is not tracked (`run_events.track_token_usage: false`: DeerFlow's journal then takes no record).
 */
export const recorder = (state: RunState["Type"], track = true) => {
  let recorded = false
  return (records: ReadonlyArray<TokenUsageDelta>): Effect.Effect<boolean> =>
    Effect.uninterruptible(Effect.suspend(() => {
      if (recorded) return Effect.succeed(true)
      if (records.length === 0 || !track) return Effect.succeed(false)
      return state.update({ token_usage: records }).pipe(
        Effect.map(() => (recorded = true)),
        Effect.catchAll((error) =>
          Effect.as(Effect.logWarning(`A task's token usage was not recorded: ${error.message}`), false)
        )
      )
    }))
}
