/**
 * A model call the gateway makes for itself, outside any run (DeerFlow's `run_oneshot_llm`: follow-up questions,
 * polishing a draft): one system instruction and one user message, no tools, marked `internal` so that nothing of
 * it is streamed. It runs with a context of its own (a scratch state, events dropped), so that nothing of it is
 * written to a thread or reaches a run's stream. Its answer is the model's text, untrusted: callers decode and
 * bound it.
 */
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as DetachedCall from "../../services/DetachedCall.js"
import type { ModelService } from "../../services/ModelService.js"
import * as M from "../../state/Message.js"

/** What a one-shot call is: its purpose (`internal`), prompts, model and user. */
export interface Call {
  readonly purpose: string
  readonly system: string
  readonly user: string
  readonly modelName: string | undefined
  readonly userId: string
}

/** The services a call needs, its own: no thread, no events (see `DetachedCall`). */
const scratch = (call: Call) =>
  DetachedCall.services({
    threadId: `${call.purpose}-${Crypto.randomUUID()}`,
    runId: `${call.purpose}-${Crypto.randomUUID()}`,
    userId: call.userId,
    modelName: call.modelName
  })

/** The text the model answers `call` with. */
export const text = (model: ModelService["Type"], call: Call) =>
  model.generate({
    systemPrompt: call.system,
    messages: [M.human(call.user)],
    tools: [],
    // (thinking off, as DeerFlow's one-shot model: a short answer, not a reasoning trace)
    settings: { modelName: call.modelName, thinkingEnabled: false },
    internal: call.purpose
  }).pipe(
    Effect.map((response) => M.text(response.message)),
    Effect.provide(scratch(call)),
    Effect.withSpan("Gateway.oneShot", { attributes: { purpose: call.purpose, user: call.userId } })
  )
