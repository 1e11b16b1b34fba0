/**
 * Before-summarisation hooks (DeerFlow's `before_summarization`): what runs once a summary has been made and
 * before the messages it replaces leave the thread (memory's flush is one; an app adds its own). They run in
 * registration order, each once per compaction, never when no summary could be made. A hook that fails is
 * logged and the next one runs: a hook cannot stop a compaction.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type { Message } from "../../state/Message.js"

/** What a hook is told: the messages about to be summarised away, those kept, and whose thread it is. */
export interface SummarizationEvent {
  /** The messages the summary replaces, oldest first. */
  readonly summarized: ReadonlyArray<Message>
  /** The messages that stay (rescued ones first, then the kept tail). */
  readonly preserved: ReadonlyArray<Message>
  readonly threadId: string
  readonly userId: string
  /** The custom agent of the thread, when it has one. */
  readonly agentName: string | undefined
  /** The run's model (memory's flush updates with it). */
  readonly modelName: string | undefined
  /** Whether the compaction was asked for (`compact`, the gateway's endpoint) rather than triggered by a run. */
  readonly manual: boolean
}

/** A before-summarisation hook. */
export type Hook = (event: SummarizationEvent) => Effect.Effect<void, unknown>

/**
 * Runs `hooks` in order; a failure or defect of one is logged and the next runs (interruption still stops). The
 * log line is DeerFlow's (`before_summarization hook NAME failed`, at error), NAME being the hook function's name
 * (its place in the list for an anonymous one), so a search of either's logs finds both.
 */
export const run = (hooks: ReadonlyArray<Hook>, event: SummarizationEvent): Effect.Effect<void> =>
  Effect.forEach(hooks, (hook, index) =>
    Effect.suspend(() => hook(event)).pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.logError(`before_summarization hook ${hook.name !== "" ? hook.name : `#${index + 1}`} failed`)
            .pipe(Effect.annotateLogs("cause", Cause.pretty(cause)))
      )
    ), { discard: true })
