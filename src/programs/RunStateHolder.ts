/**
 * The state of a running turn, in memory: updates are applied by the reducers as they come (the loop's own writes
 * and the middlewares' through `RunState`), kept until the next checkpoint drains them to the store, and told to
 * the run's listener as events.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as StateRead from "../middleware/internal/StateRead.js"
import type { RunState } from "../services/RunContext.js"
import type { RunEvent } from "../services/RunEvents.js"
import * as M from "../state/Message.js"
import type { ReducerError } from "../state/Reducers.js"
import { applyUpdate, makeIndexes } from "../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"

/** A run's thread state, its updates since the last checkpoint, and the run's `RunState` service over it. */
export interface Holder {
  readonly service: RunState["Type"]
  /**
   * Applies an update now (the loop's own writes: no effect of their own); its failure, if it fails. `toolCallId`
   * names the tool call whose result made it (told with its `state` event).
   */
  readonly apply: (update: StateUpdate, toolCallId?: string) => ReducerError | undefined
  /** The updates applied since the last checkpoint, cleared. */
  readonly drain: () => ReadonlyArray<StateUpdate>
  readonly current: () => ThreadState
}

/** Whether an update sets anything besides messages (most updates of a step only add messages). */
const setsMoreThanMessages = (update: StateUpdate): boolean => {
  for (const key in update) if (key !== "messages" && Object.hasOwn(update, key)) return true
  return false
}

/** Whether an update clears the messages (a compaction: everything removed, the kept messages written again). */
const clearsMessages = (update: StateUpdate): boolean => {
  for (const item of update.messages ?? []) {
    if (item.type === "remove" && item.id === M.REMOVE_ALL_MESSAGES) return true
  }
  return false
}

const eventsOf = (update: StateUpdate, emit: (event: RunEvent) => void, toolCallId: string | undefined) => {
  // Told whole, in its order: as messages first and the removal after, a listener would clear what it had just
  // been told was kept (and the kept messages are not new ones).
  if (clearsMessages(update)) return emit({ type: "state", update })
  let rest: StateUpdate | undefined
  if (update.messages !== undefined) {
    let removals: Array<M.MessageWrite> | undefined
    for (const item of update.messages) {
      if (item.type === "remove") (removals ??= []).push(item)
      else emit({ type: "message", message: item })
    }
    if (!setsMoreThanMessages(update)) {
      if (removals !== undefined) emit({ type: "state", update: { messages: removals } })
      return
    }
    const { messages: _, ...others } = update
    rest = removals === undefined ? others : { ...others, messages: removals }
  } else rest = update
  if (Object.keys(rest).length > 0) {
    const event = { type: "state" as const, update: rest }
    emit(toolCallId === undefined ? event : { ...event, tool_call_id: toolCallId })
  }
}

/**
 * A holder starting from `initial`; with `emit`, each update applied is also told as the run's events (its messages,
 * then what else it sets; an update that removes every message, as one `state` event).
 */
export const make = (initial: ThreadState, emit: ((event: RunEvent) => void) | undefined): Holder => {
  let state = initial
  const indexes = makeIndexes()
  let journal: Array<StateUpdate> = []
  const current = () => state
  const apply = (update: StateUpdate, toolCallId?: string): ReducerError | undefined => {
    const next = applyUpdate(state, update, indexes)
    if (Either.isLeft(next)) return next.left
    state = next.right
    journal.push(update)
    if (emit !== undefined) eventsOf(update, emit, toolCallId)
    return undefined
  }
  return {
    // (with a synchronous read for the run's middlewares: see `middleware/internal/StateRead.ts`)
    service: StateRead.readable({
      get: Effect.sync(current),
      update: (update) =>
        Effect.suspend(() => {
          const failed = apply(update)
          return failed === undefined ? Effect.void : Effect.fail(failed)
        })
    }, current),
    apply,
    drain: () => {
      const out = journal
      journal = []
      return out
    },
    current
  }
}
