/**
 * How a gateway run's events reach its buffer: they come to `onEvent` in the run's fiber, as they happen (no
 * mailbox and stream between the run and its buffer); those of one synchronous step (a state update's messages
 * and fields) are projected together, at the next microtask or before anything else is appended. What is streamed
 * is the events' encoded form (RunEvents' Schema, the thread named as the client names it); an event that does not
 * encode is left out and reported, never sent half-formed.
 */
import * as Either from "effect/Either"
import type { RunEvent } from "../../services/RunEvents.js"
import * as RunStream from "./RunStream.js"

/** A run's listener. */
export interface RunListener {
  /** Takes one of the run's events (ignored once stopped: what a stopped run says as it winds down). */
  readonly onEvent: (event: RunEvent) => void
  /** Projects and appends what is pending now. */
  readonly flush: () => void
  /** Flushes, then takes no more events. */
  readonly stop: () => void
  /** The run's `run_end`, once it came. */
  readonly end: () => (RunEvent & { readonly type: "run_end" }) | undefined
  /** A defect met while projecting in a microtask (the run then fails with it once it ends). */
  readonly broken: () => { readonly defect: unknown } | undefined
  /** The events left out of the stream, and why. */
  readonly invalid: ReadonlyArray<string>
}

/**
 * A listener whose encoded batches go to `deliver` (the run's journal and projector). `publicEvent` renames what
 * the client names differently (the thread of a safety stop's custom event).
 */
export const make = (
  publicEvent: (event: RunEvent) => RunEvent,
  deliver: (encoded: ReadonlyArray<RunEvent>) => void
): RunListener => {
  let pending: Array<RunEvent> = []
  let scheduled = false
  let stopped = false
  let end: (RunEvent & { readonly type: "run_end" }) | undefined
  let broken: { readonly defect: unknown } | undefined
  const invalid: Array<string> = []
  const flush = () => {
    scheduled = false
    if (pending.length === 0) return
    const batch = pending
    pending = []
    const encoded: Array<RunEvent> = []
    for (const event of batch) {
      const json = RunStream.encodeEvent(publicEvent(event))
      if (Either.isRight(json)) encoded.push(json.right as RunEvent)
      else invalid.push(`${event.type}: ${json.left.message}`)
    }
    deliver(encoded)
  }
  const onEvent = (event: RunEvent) => {
    if (stopped) return
    if (event.type === "run_end") end = event
    pending.push(event)
    if (!scheduled) {
      scheduled = true
      queueMicrotask(() => {
        try {
          flush()
        } catch (defect) {
          broken ??= { defect }
          stopped = true
        }
      })
    }
  }
  return {
    onEvent,
    flush,
    stop: () => {
      flush()
      stopped = true
    },
    end: () => end,
    broken: () => broken,
    invalid
  }
}
