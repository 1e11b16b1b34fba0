/**
 * UsageJournal: with `token_usage.enabled: false` (TokenUsage not in the chain), each model call's usage still
 * counts in the run's and the thread's token usage, as DeerFlow's run journal records every call's usage whether
 * its TokenUsageMiddleware is built or not (`run_events.track_token_usage`, on by default). It only counts: no step
 * attribution, no roll-up of subagent usage onto messages (a task's usage is counted when the task ends).
 * A subagent's chain has it always: every call made inside the subagent (its summaries' too) is booked in its own
 * state, from which its task's usage is read (`TaskUsage`), as DeerFlow's token collector sees every call of its run.
 *
 * Not a chain entry: it is DeerFlow's journal, not one of its middlewares, and sits under the whole chain (over the
 * model itself), so every call that reached the model is counted, an internal one under its purpose.
 */
import * as Effect from "effect/Effect"
import { RunContext, RunState } from "../services/RunContext.js"
import * as Middleware from "./Middleware.js"
import { callUsage, recordUsage } from "./TokenUsage.js"

/** The journal's layer, under the chain when TokenUsage is off. */
export const layer = (): Middleware.Middleware =>
  Middleware.make(Effect.gen(function*() {
    const context = yield* RunContext
    const state = yield* RunState
    return {
      modelHooks: {
        after: (response, request) => {
          const { delta } = callUsage(request, response.message, context.options.modelName)
          return delta === undefined ? response : Effect.as(recordUsage(state, [delta]), response)
        }
      }
    } satisfies Middleware.Wrappers
  }))
