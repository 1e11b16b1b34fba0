/**
 * The runs a gateway process knows (see `Runs`): each thread's active run here, and the runs it executes or
 * executed recently, by id, which clients may still join. The newest `keepFinished` finished runs stay joinable,
 * and so does any that ended less than a grace period ago (clients that dropped mid-run rejoin late under load), up
 * to GRACE_CAP times as many. Who waits for a thread's next run here (its thread streams) is told when it starts.
 */
import type { ActiveRun, Entry } from "./RunModel.js"

/** How long a finished run stays joinable past `keepFinished` (the newest ones), at least. */
export const FINISHED_GRACE_MS = 60_000

/** At most this many times `keepFinished` finished runs are kept for the grace period. */
export const GRACE_CAP = 50

/** The runs a process knows. */
export interface Registry {
  /** The runs this process executes or executed recently (and the queued ones), by id. */
  readonly known: Map<string, ActiveRun>
  /** Each thread's active run here, by thread (as stored). */
  readonly active: Map<string, Entry>
  /** Notes that run `runId` finished at `now` (ms): the oldest finished runs past the limits are forgotten. */
  readonly forget: (runId: string, now: number) => void
  /** The run `runId`, if it is a thread's active run here. */
  readonly activeRun: (runId: string) => Entry | undefined
  /** Makes `entry` its thread's active run here, and tells that thread's listeners (`onStart`). */
  readonly begin: (threadId: string, entry: Entry) => void
  /**
   * Calls `listener` with each run that becomes thread `threadId`'s active run here from now on (a thread's stream
   * waiting for the thread's next run); returns how to stop.
   */
  readonly onStart: (threadId: string, listener: (run: ActiveRun) => void) => () => void
}

/** An empty registry keeping `keepFinished` finished runs (and those of the grace period). */
export const make = (keepFinished: number): Registry => {
  const known = new Map<string, ActiveRun>()
  const active = new Map<string, Entry>()
  const finishedOrder: Array<{ readonly runId: string; readonly at: number }> = []
  const listeners = new Map<string, Set<(run: ActiveRun) => void>>()
  return {
    known,
    active,
    forget: (runId, now) => {
      finishedOrder.push({ runId, at: now })
      const cap = keepFinished * GRACE_CAP
      while (
        finishedOrder.length > keepFinished &&
        (finishedOrder.length > cap || finishedOrder[0]!.at + FINISHED_GRACE_MS <= now)
      ) known.delete(finishedOrder.shift()!.runId)
    },
    activeRun: (runId) => {
      for (const entry of active.values()) if (entry.runId === runId) return entry
      return undefined
    },
    begin: (threadId, entry) => {
      active.set(threadId, entry)
      const waiting = listeners.get(threadId)
      if (waiting !== undefined) for (const listener of [...waiting]) listener(entry)
    },
    onStart: (threadId, listener) => {
      const waiting = listeners.get(threadId) ?? new Set()
      listeners.set(threadId, waiting.add(listener))
      return () => {
        waiting.delete(listener)
        if (waiting.size === 0 && listeners.get(threadId) === waiting) listeners.delete(threadId)
      }
    }
  }
}
