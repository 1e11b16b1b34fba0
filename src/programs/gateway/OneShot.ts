/**
 * A model call the gateway makes for itself, outside any run (DeerFlow's `run_oneshot_llm`: follow-up questions,
 * polishing a draft): one system instruction and one user message, no tools, marked `internal` so that nothing of
 * it is streamed. It runs with a context of its own (a scratch state, events dropped), so that nothing of it is
 * written to a thread or reaches a run's stream. Its answer is the model's text, untrusted: callers decode and
 * bound it.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Crypto from "node:crypto"
import type { ModelService } from "../../services/ModelService.js"
import { RunContext, RunState } from "../../services/RunContext.js"
import { RunEvents } from "../../services/RunEvents.js"
import * as M from "../../state/Message.js"
import { applyUpdate } from "../../state/Reducers.js"
import * as TS from "../../state/ThreadState.js"

/** What a one-shot call is: its purpose (`internal`), prompts, model and user. */
export interface Call {
  readonly purpose: string
  readonly system: string
  readonly user: string
  readonly modelName: string | undefined
  readonly userId: string
}

/** The services a call needs, its own: no thread, no events. */
const scratch = (call: Call) => {
  let state = TS.empty
  return Context.make(RunContext, {
    threadId: `${call.purpose}-${Crypto.randomUUID()}`,
    runId: `${call.purpose}-${Crypto.randomUUID()}`,
    userId: call.userId,
    options: { recursionLimit: 1, toolConcurrency: 1, modelName: call.modelName },
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

/** The text the model answers `call` with. */
export const text = (model: ModelService["Type"], call: Call) =>
  model.generate({
    systemPrompt: call.system,
    messages: [M.human(call.user)],
    tools: [],
    settings: { modelName: call.modelName },
    internal: call.purpose
  }).pipe(
    Effect.map((response) => M.text(response.message)),
    Effect.provide(scratch(call)),
    Effect.withSpan("Gateway.oneShot", { attributes: { purpose: call.purpose, user: call.userId } })
  )
