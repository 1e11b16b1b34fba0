/**
 * The services a model call needs outside any run (the memory update, a follow-up question, a polished draft):
 * a run context of its own, a scratch thread state that nothing stores, and no events. The model's middleware
 * (retries, token usage) read them as they read a run's.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { applyUpdate } from "../state/Reducers.js"
import * as TS from "../state/ThreadState.js"
import { RunContext, RunState } from "./RunContext.js"
import { RunEvents } from "./RunEvents.js"

/** Who the call is for. */
export interface Ids {
  readonly threadId: string
  readonly runId: string
  readonly userId: string
  readonly modelName: string | undefined
}

/** The services of one detached call (each call its own scratch state). */
export const services = (ids: Ids) => {
  let state = TS.empty
  return Context.make(RunContext, {
    threadId: ids.threadId,
    runId: ids.runId,
    userId: ids.userId,
    options: { recursionLimit: 1, toolConcurrency: 1, modelName: ids.modelName },
    stopReason: Effect.succeed(undefined),
    setStopReason: () => Effect.void
  }).pipe(
    Context.add(RunState, {
      get: Effect.sync(() => state),
      update: (update) =>
        Effect.suspend(() => {
          const next = applyUpdate(state, update)
          if (Either.isLeft(next)) return Effect.fail(next.left)
          state = next.right
          return Effect.void
        })
    }),
    Context.add(RunEvents, RunEvents.discard)
  )
}
