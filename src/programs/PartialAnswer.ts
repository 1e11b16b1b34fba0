/**
 * The answer a run was streaming when it was stopped: the text (and reasoning) of the model's `token` events
 * for the message being generated, kept so that a stopped run leaves what the user saw in the thread, as an AI
 * message under the id its pieces were streamed with (a client showing the streamed message sees the same one in
 * the thread's state and message pages). Only text: a tool call the model had begun is dropped, so nothing is
 * left without its result. Bounded: past `MAX_PARTIAL_CHARS` the rest is not kept; a text cut there is masked with
 * the process's secrets and the run's (`message`'s `hide`), a beginning of one left at the cut too
 * (`Redactor.last`): the store's mask after it finds whole values only.
 */
import * as TextBuilder from "../internal/TextBuilder.js"
import type { RunEvent } from "../services/RunEvents.js"
import type { AIMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { Redactor } from "../state/Redact.js"

/** The most characters of a stopped answer (text and reasoning each) kept in the thread. */
export const MAX_PARTIAL_CHARS = 200_000

/** The `response_metadata.finish_reason` of an answer stopped while it streamed. */
export const STOPPED = "stopped"

/** What a run has streamed of the message being generated. */
export interface PartialAnswer {
  /** Sees an event the run emits (only `token` events count; a new message id starts over). */
  readonly see: (event: RunEvent) => void
  /**
   * The message to keep when the run stops now, unless `written` holds its id or nothing of it was text; a text cut at
   * the bound masked with `hide` (see the module's header).
   */
  readonly message: (written: ReadonlyArray<{ readonly id: string }>, hide: Redactor) => AIMessage | undefined
}

/** A text kept to the bound, masked if it was cut there (a secret's beginning at the cut hidden). */
const cut = (kept: string, hide: Redactor): string => kept.length < MAX_PARTIAL_CHARS ? kept : hide.last(kept)

/** A fresh tracker for one run. */
export const make = (): PartialAnswer => {
  let id: string | undefined
  // (compact while they grow: read whole only when the run stops)
  let text = TextBuilder.make()
  let reasoning = TextBuilder.make()
  const add = (kept: TextBuilder.TextBuilder, piece: string | undefined) => {
    if (piece !== undefined && kept.length() < MAX_PARTIAL_CHARS) {
      kept.append(piece.slice(0, MAX_PARTIAL_CHARS - kept.length()))
    }
  }
  return {
    see: (event) => {
      if (event.type !== "token") return
      if (event.message_id !== id) {
        id = event.message_id
        text = TextBuilder.make()
        reasoning = TextBuilder.make()
      }
      add(text, event.text)
      add(reasoning, event.reasoning)
    },
    message: (written, hide) => {
      const said = cut(text.text(), hide)
      if (id === undefined || said.trim() === "") return undefined
      const current = id
      if (written.some((m) => m.id === current)) return undefined
      const thought = cut(reasoning.text(), hide)
      return M.ai(said, {
        id: current,
        additional_kwargs: thought === "" ? {} : { reasoning_content: thought },
        response_metadata: { finish_reason: STOPPED },
        tool_calls: [],
        invalid_tool_calls: []
      })
    }
  }
}
