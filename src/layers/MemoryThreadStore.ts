/**
 * An in-memory ThreadStore, for tests and embedded use. Same semantics as the SQLite store: checkpoints are
 * deltas, and loading folds them through the reducers (the ones not folded yet: appends cost O(1)).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { StoreError } from "../services/RunContext.js"
import type {
  AppendOptions,
  CheckpointRecord,
  LeaseHolder,
  Metadata,
  RunRecord,
  StoredRunEvent,
  ThreadSummary
} from "../services/ThreadStore.js"
import {
  changedRun,
  deleteBusyMessage,
  fencedMessage,
  keptMetadata,
  LEASE_FENCED,
  leaseRunOf,
  leaseBlocks,
  leaseHeldBy,
  ROLLBACK_UNDONE,
  leaseOwner,
  threadStatus,
  ThreadStore,
  withSpans
} from "../services/ThreadStore.js"
import { applyUpdates, makeIndexes } from "../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"
import { titleOf } from "./store/Codec.js"
import { mergeBounded } from "./store/Rows.js"

interface Entry {
  readonly created_at: string
  updated_at: string
  /** The state folded from the first `folded` checkpoints. */
  state: ThreadState
  folded: number
  readonly checkpoints: Array<CheckpointRecord>
  readonly runs: Map<string, RunRecord>
  readonly events: Map<string, ReadonlyArray<StoredRunEvent>>
  readonly owner: string | null
  metadata: Metadata
  /** The bytes of the JSON of the first `measured` checkpoints (measured when asked: an append stays O(1)). */
  measured: number
  checkpointBytes: number
  /** What the thread kept when last measured, as its owner's total counts it (`settle`). */
  counted: number
  /** Changed since it was last measured. */
  dirty: boolean
}

const jsonBytes = (value: unknown): number => (value == null ? 0 : Buffer.byteLength(JSON.stringify(value)))


/** The thread's title: the last one its checkpoints set. */
const entryTitle = (entry: Entry): string | null => {
  for (let i = entry.checkpoints.length - 1; i >= entry.folded; i--) {
    const title = titleOf(entry.checkpoints[i]!.updates)
    if (title !== undefined) return title
  }
  return entry.state.title
}

/** A fresh in-memory store. */
export const make = (): ThreadStore["Type"] => {
  const threads = new Map<string, Entry>()
  const indexes = makeIndexes()
  const leases = new Map<string, LeaseHolder>()
  // (this process, as lease owner: the host name is a system call, asked once)
  const owner = leaseOwner()
  let seq = 0
  // the byte counters (`bytesOf`): each owner's total, settled from the threads changed since the last question; a
  // run's record and a run's events measured once each (they are replaced, never changed, when saved)
  const owners = new Map<string | null, number>()
  const dirty = new Set<Entry>()
  const recordBytes = new WeakMap<object, number>()
  const measuredOnce = (value: object, bytes: () => number) => {
    let found = recordBytes.get(value)
    if (found === undefined) recordBytes.set(value, found = bytes())
    return found
  }
  /** What the thread keeps, in bytes, as the SQLite store counts it (`ThreadStore.ThreadBytes.bytes`). */
  const entryBytes = (entry: Entry): number => {
    for (; entry.measured < entry.checkpoints.length; entry.measured++) {
      entry.checkpointBytes += jsonBytes(entry.checkpoints[entry.measured]!.updates)
    }
    let bytes = entry.checkpointBytes
    for (const run of entry.runs.values()) {
      bytes += measuredOnce(run, () => jsonBytes(run.metadata) + (run.error == null ? 0 : Buffer.byteLength(run.error)))
    }
    for (const events of entry.events.values()) bytes += measuredOnce(events, () => jsonBytes(events))
    // (its metadata too: replaced, never changed, when patched)
    const metadata = entry.metadata
    if (Object.keys(metadata).length > 0) bytes += measuredOnce(metadata, () => jsonBytes(metadata))
    return bytes
  }
  const touched = (entry: Entry) => {
    if (entry.dirty) return
    entry.dirty = true
    dirty.add(entry)
  }
  const settle = () => {
    for (const entry of dirty) {
      const bytes = entryBytes(entry)
      owners.set(entry.owner, (owners.get(entry.owner) ?? 0) + bytes - entry.counted)
      entry.counted = bytes
      entry.dirty = false
    }
    dirty.clear()
  }
  const get = (threadId: string, owner: string | null = null, metadata: Metadata = {}) => {
    let entry = threads.get(threadId)
    if (entry === undefined) {
      const now = new Date().toISOString()
      entry = {
        created_at: now,
        updated_at: now,
        state: TS.empty,
        folded: 0,
        checkpoints: [],
        runs: new Map(),
        events: new Map(),
        owner,
        metadata,
        measured: 0,
        checkpointBytes: 0,
        counted: 0,
        dirty: false
      }
      threads.set(threadId, entry)
      if (Object.keys(metadata).length > 0) touched(entry)
    }
    return entry
  }
  const appendNow = (threadId: string, runId: string, updates: ReadonlyArray<StateUpdate>): Entry => {
    const entry = get(threadId)
    const now = new Date().toISOString()
    entry.checkpoints.push({ seq: ++seq, run_id: runId, created_at: now, updates })
    entry.updated_at = now
    touched(entry)
    return entry
  }
  // an append fenced by its run's lease, which another run (or process) took since, or was given back: refused
  const fenced = (threadId: string, runId: string, options: AppendOptions | undefined, undone?: string) => {
    const leased = leaseRunOf(runId, options)
    return leased === undefined || leaseHeldBy(leases.get(threadId), leased, owner)
      ? undefined
      : Effect.fail(new StoreError({
        operation: LEASE_FENCED,
        message: fencedMessage(threadId, leased, leases.get(threadId), undone)
      }))
  }
  const summary = (thread_id: string, entry: Entry, now: number): ThreadSummary => {
    const last = [...entry.runs.values()].at(-1)
    const status = threadStatus(last, leases.get(thread_id), now)
    return {
      thread_id,
      title: entryTitle(entry),
      created_at: entry.created_at,
      updated_at: entry.updated_at,
      checkpoints: entry.checkpoints.length,
      owner: entry.owner,
      metadata: entry.metadata,
      ...(status === undefined ? {} : { status, stop_reason: last?.stop_reason ?? null })
    }
  }
  // Checkpoints are folded when the thread is read, as the SQLite store does: an append stays O(1).
  const fold = (threadId: string, entry: Entry): Either.Either<ThreadState, StoreError> => {
    for (; entry.folded < entry.checkpoints.length; entry.folded++) {
      const next = applyUpdates(entry.state, entry.checkpoints[entry.folded]!.updates, indexes)
      if (Either.isLeft(next)) {
        return Either.left(
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
    return Either.right(entry.state)
  }
  /** The threads `keep` keeps, most recently updated first. */
  const listOf = (keep: (entry: Entry) => boolean) =>
    Effect.clockWith((clock) =>
      Effect.sync(() => {
        const now = clock.unsafeCurrentTimeMillis()
        return [...threads.entries()]
          .filter(([, entry]) => keep(entry))
          .map(([thread_id, entry]) => summary(thread_id, entry, now))
          .sort((a, b) => b.updated_at.localeCompare(a.updated_at))
      })
    )
  return withSpans("MemoryThreadStore", {
    ensure: (threadId, init) => Effect.sync(() => void get(threadId, init?.owner ?? null, init?.metadata ?? {})),
    info: (threadId) =>
      Effect.clockWith((clock) =>
        Effect.sync(() => {
          const entry = threads.get(threadId)
          return entry === undefined
            ? Option.none()
            : Option.some(summary(threadId, entry, clock.unsafeCurrentTimeMillis()))
        })
      ),
    patchMetadata: (threadId, patch, options) =>
      Effect.suspend(() => {
        const entry = threads.get(threadId)
        if (entry === undefined) return Effect.succeed(false)
        return Effect.map(mergeBounded(entry.metadata, patch, options?.maxBytes), (next) => {
          entry.metadata = next
          touched(entry)
          if (options?.touch !== false) entry.updated_at = new Date().toISOString()
          return true
        })
      }),
    checkpoints: (threadId) => Effect.sync(() => threads.get(threadId)?.checkpoints.slice() ?? []),
    rollback: (threadId, runId, options) =>
      Effect.suspend(() => {
        const refused = fenced(threadId, runId, options, ROLLBACK_UNDONE)
        if (refused !== undefined) return refused
        const entry = threads.get(threadId)
        if (entry === undefined) return Effect.succeed(0)
        const kept = entry.checkpoints.filter((c) => c.run_id !== runId)
        const deleted = entry.checkpoints.length - kept.length
        if (deleted === 0) return Effect.succeed(0)
        entry.checkpoints.splice(0, entry.checkpoints.length, ...kept)
        // folded again from the start on the next read
        entry.state = TS.empty
        entry.folded = 0
        entry.measured = 0
        entry.checkpointBytes = 0
        touched(entry)
        return Effect.succeed(deleted)
      }),
    runs: (filter) =>
      Effect.sync(() => {
        const out: Array<RunRecord> = []
        for (const [threadId, entry] of threads) {
          if (filter.threadId !== undefined && filter.threadId !== threadId) continue
          for (const run of entry.runs.values()) {
            if (filter.runId !== undefined && filter.runId !== run.run_id) continue
            if (filter.status !== undefined && filter.status !== run.status) continue
            out.push(run)
          }
        }
        return out.sort((a, b) => a.started_at.localeCompare(b.started_at))
      }),
    load: (threadId) =>
      Effect.suspend(() => {
        const entry = threads.get(threadId)
        if (entry === undefined) return Effect.succeed(Option.none())
        return Either.match(fold(threadId, entry), {
          onLeft: Effect.fail,
          onRight: (state) =>
            Effect.succeed(Option.some({
              thread_id: threadId,
              state,
              checkpoints: entry.checkpoints.length,
              runs: [...entry.runs.values()]
            }))
        })
      }),
    append: (threadId, runId, updates, options) =>
      Effect.suspend(() =>
        fenced(threadId, runId, options) ?? Effect.sync(() => void appendNow(threadId, runId, updates))
      ),
    appendMeasured: (threadId, runId, updates, unownedOf, options) =>
      Effect.suspend(() => fenced(threadId, runId, options) ?? Effect.sync(() => {
        const entry = appendNow(threadId, runId, updates)
        settle()
        const mine = owners.get(entry.owner) ?? 0
        const owned = entry.owner === null || entry.owner === unownedOf
          ? (owners.get(unownedOf) ?? 0) + (owners.get(null) ?? 0)
          : mine
        return { bytes: entry.counted, owner: entry.owner, owned }
      })),
    saveRun: (run) =>
      Effect.sync(() => {
        const entry = get(run.thread_id)
        const runs = entry.runs
        const before = runs.get(run.run_id)
        touched(entry)
        runs.set(run.run_id, {
          ...run,
          error: run.error ?? before?.error ?? null,
          metadata: run.metadata == null ? before?.metadata ?? null : keptMetadata(run.metadata, before?.metadata)
        })
      }),
    updateRun: (threadId, runId, change) =>
      Effect.sync(() => {
        const entry = threads.get(threadId)
        const written = changedRun(entry?.runs.get(runId), threadId, change)
        if (entry === undefined || written === undefined) return undefined
        entry.runs.set(runId, written)
        touched(entry)
        return written
      }),
    deleteRun: (threadId, runId) =>
      Effect.sync(() => {
        const entry = threads.get(threadId)
        const run = entry?.runs.get(runId)
        if (entry === undefined || run === undefined || run.status === "pending" || run.status === "running") {
          return false
        }
        entry.runs.delete(runId)
        entry.events.delete(runId)
        touched(entry)
        return true
      }),
    saveRunEvents: (threadId, runId, events) =>
      Effect.sync(() => {
        const entry = get(threadId)
        entry.events.set(runId, events)
        touched(entry)
      }),
    runEvents: (threadId, runId) => Effect.sync(() => threads.get(threadId)?.events.get(runId) ?? []),
    list: listOf(() => true),
    listOwned: (owner, unowned) => listOf((entry) => entry.owner === owner || (unowned && entry.owner == null)),
    countOwned: (owner, unowned) =>
      Effect.sync(() => {
        let n = 0
        for (const entry of threads.values()) {
          if (entry.owner === owner || (unowned && entry.owner == null)) n++
        }
        return n
      }),
    bytesOf: (threadId) =>
      Effect.sync(() => {
        const entry = threads.get(threadId)
        if (entry === undefined) return undefined
        settle()
        return { bytes: entry.counted, owner: entry.owner, owned: owners.get(entry.owner) ?? 0 }
      }),
    bytesOwned: (owner, unowned) =>
      Effect.sync(() => {
        settle()
        return (owners.get(owner) ?? 0) + (unowned ? owners.get(null) ?? 0 : 0)
      }),
    delete: (threadId) =>
      Effect.clockWith((clock) =>
        Effect.suspend(() => {
          const holder = leases.get(threadId)
          const request = { threadId, runId: "", ttlMs: 0, now: clock.unsafeCurrentTimeMillis() }
          if (leaseBlocks(holder, request)) {
            return Effect.fail(new StoreError({ operation: "delete", message: deleteBusyMessage(threadId, holder) }))
          }
          leases.delete(threadId)
          const entry = threads.get(threadId)
          if (entry !== undefined) {
            // (what its owner's total counts of it, measured or not since)
            dirty.delete(entry)
            owners.set(entry.owner, (owners.get(entry.owner) ?? 0) - entry.counted)
          }
          return Effect.succeed(threads.delete(threadId))
        })
      ),
    acquireLease: (request) =>
      Effect.sync(() => {
        const holder = leases.get(request.threadId)
        if (leaseBlocks(holder, request, owner)) return holder
        leases.set(request.threadId, {
          run_id: request.runId,
          owner,
          expires_at: request.now + request.ttlMs
        })
        return undefined
      }),
    releaseLease: (threadId, runId) =>
      Effect.sync(() => {
        const holder = leases.get(threadId)
        if (holder?.run_id === runId && holder.owner === owner) leases.delete(threadId)
      })
  })
}

/** A layer with a fresh in-memory store. */
export const layer = (): Layer.Layer<ThreadStore> => Layer.sync(ThreadStore, make)
