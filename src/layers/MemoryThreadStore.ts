/**
 * An in-memory ThreadStore, for tests and embedded use. Same semantics as the SQLite store: checkpoints are
 * deltas, and loading folds them through the reducers (the ones not folded yet: appends cost O(1)).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { StoreError } from "../services/RunContext.js"
import type { LeaseHolder, RunRecord } from "../services/ThreadStore.js"
import { deleteBusyMessage, leaseBlocks, leaseOwner, threadStatus, ThreadStore } from "../services/ThreadStore.js"
import { applyUpdates, makeIndexes } from "../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"

interface Entry {
  readonly created_at: string
  updated_at: string
  /** The state folded from the first `folded` checkpoints. */
  state: ThreadState
  folded: number
  readonly checkpoints: Array<ReadonlyArray<StateUpdate>>
  readonly runs: Map<string, RunRecord>
}

/** The thread's title: the last one its checkpoints set. */
const titleOf = (entry: Entry): string | null => {
  for (let i = entry.checkpoints.length - 1; i >= entry.folded; i--) {
    for (let j = entry.checkpoints[i]!.length - 1; j >= 0; j--) {
      const title = entry.checkpoints[i]![j]!.title
      if (title !== undefined) return title
    }
  }
  return entry.state.title
}

/** A fresh in-memory store. */
export const make = (): ThreadStore["Type"] => {
  const threads = new Map<string, Entry>()
  const indexes = makeIndexes()
  const leases = new Map<string, LeaseHolder>()
  const get = (threadId: string) => {
    let entry = threads.get(threadId)
    if (entry === undefined) {
      const now = new Date().toISOString()
      entry = { created_at: now, updated_at: now, state: TS.empty, folded: 0, checkpoints: [], runs: new Map() }
      threads.set(threadId, entry)
    }
    return entry
  }
  return ThreadStore.of({
    ensure: (threadId) => Effect.sync(() => void get(threadId)),
    load: (threadId) =>
      Effect.suspend(() => {
        const entry = threads.get(threadId)
        if (entry === undefined) return Effect.succeed(Option.none())
        // Checkpoints are folded when the thread is read, as the SQLite store does: an append stays O(1).
        for (; entry.folded < entry.checkpoints.length; entry.folded++) {
          const next = applyUpdates(entry.state, entry.checkpoints[entry.folded]!, indexes)
          if (Either.isLeft(next)) {
            return Effect.fail(
              new StoreError({
                operation: "load",
                message: `Thread "${threadId}" cannot be loaded: its checkpoint ${entry.folded + 1} does not apply ` +
                  `to the state before it: ${next.left.message}`,
                cause: next.left
              })
            )
          }
          entry.state = next.right
        }
        return Effect.succeed(Option.some({
          thread_id: threadId,
          state: entry.state,
          checkpoints: entry.checkpoints.length,
          runs: [...entry.runs.values()]
        }))
      }),
    append: (threadId, _runId, updates) =>
      Effect.sync(() => {
        const entry = get(threadId)
        entry.checkpoints.push(updates)
        entry.updated_at = new Date().toISOString()
      }),
    saveRun: (run) => Effect.sync(() => void get(run.thread_id).runs.set(run.run_id, run)),
    list: Effect.clockWith((clock) =>
      Effect.sync(() =>
        [...threads.entries()].map(([thread_id, entry]) => {
          const last = [...entry.runs.values()].at(-1)
          const status = threadStatus(last, leases.get(thread_id), clock.unsafeCurrentTimeMillis())
          return {
            thread_id,
            title: titleOf(entry),
            created_at: entry.created_at,
            updated_at: entry.updated_at,
            checkpoints: entry.checkpoints.length,
            ...(status === undefined ? {} : { status, stop_reason: last?.stop_reason ?? null })
          }
        })
      )
    ),
    delete: (threadId) =>
      Effect.clockWith((clock) =>
        Effect.suspend(() => {
          const holder = leases.get(threadId)
          const request = { threadId, runId: "", ttlMs: 0, now: clock.unsafeCurrentTimeMillis() }
          if (leaseBlocks(holder, request)) {
            return Effect.fail(new StoreError({ operation: "delete", message: deleteBusyMessage(threadId, holder) }))
          }
          leases.delete(threadId)
          return Effect.succeed(threads.delete(threadId))
        })
      ),
    acquireLease: (request) =>
      Effect.sync(() => {
        const holder = leases.get(request.threadId)
        if (leaseBlocks(holder, request)) return holder
        leases.set(request.threadId, {
          run_id: request.runId,
          owner: leaseOwner(),
          expires_at: request.now + request.ttlMs
        })
        return undefined
      }),
    releaseLease: (threadId, runId) =>
      Effect.sync(() => {
        if (leases.get(threadId)?.run_id === runId) leases.delete(threadId)
      })
  })
}

/** A layer with a fresh in-memory store. */
export const layer = (): Layer.Layer<ThreadStore> => Layer.sync(ThreadStore, make)
