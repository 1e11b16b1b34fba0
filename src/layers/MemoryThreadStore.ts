/**
 * An in-memory ThreadStore, for tests and embedded use. Same semantics as the SQLite store: checkpoints are
 * deltas, and loading folds them through the reducers.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { StoreError } from "../services/RunContext.js"
import type { CheckpointRecord, LeaseHolder, Metadata, RunRecord, ThreadSummary } from "../services/ThreadStore.js"
import { leaseBlocks, leaseOwner, ThreadStore } from "../services/ThreadStore.js"
import { applyUpdates, makeIndexes } from "../state/Reducers.js"
import type { ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"

interface Entry {
  readonly created_at: string
  updated_at: string
  state: ThreadState
  readonly checkpoints: Array<CheckpointRecord>
  readonly runs: Map<string, RunRecord>
  readonly owner: string | null
  metadata: Metadata
}

/** A fresh in-memory store. */
export const make = (): ThreadStore["Type"] => {
  const threads = new Map<string, Entry>()
  const indexes = makeIndexes()
  const leases = new Map<string, LeaseHolder>()
  let seq = 0
  const get = (threadId: string, owner: string | null = null, metadata: Metadata = {}) => {
    let entry = threads.get(threadId)
    if (entry === undefined) {
      const now = new Date().toISOString()
      entry = {
        created_at: now,
        updated_at: now,
        state: TS.empty,
        checkpoints: [],
        runs: new Map(),
        owner,
        metadata
      }
      threads.set(threadId, entry)
    }
    return entry
  }
  const summary = (thread_id: string, entry: Entry): ThreadSummary => ({
    thread_id,
    title: entry.state.title,
    created_at: entry.created_at,
    updated_at: entry.updated_at,
    checkpoints: entry.checkpoints.length,
    owner: entry.owner,
    metadata: entry.metadata
  })
  const fold = (checkpoints: ReadonlyArray<CheckpointRecord>) =>
    applyUpdates(TS.empty, checkpoints.flatMap((c) => c.updates), makeIndexes())
  return ThreadStore.of({
    ensure: (threadId, init) => Effect.sync(() => void get(threadId, init?.owner ?? null, init?.metadata ?? {})),
    info: (threadId) =>
      Effect.sync(() => {
        const entry = threads.get(threadId)
        return entry === undefined ? Option.none() : Option.some(summary(threadId, entry))
      }),
    patchMetadata: (threadId, patch) =>
      Effect.sync(() => {
        const entry = threads.get(threadId)
        if (entry === undefined) return false
        const next: Record<string, unknown> = { ...entry.metadata }
        for (const [key, value] of Object.entries(patch)) {
          if (value === null) delete next[key]
          else next[key] = value
        }
        entry.metadata = next
        entry.updated_at = new Date().toISOString()
        return true
      }),
    remove: (threadId) =>
      Effect.sync(() => {
        leases.delete(threadId)
        return threads.delete(threadId)
      }),
    checkpoints: (threadId) => Effect.sync(() => threads.get(threadId)?.checkpoints.slice() ?? []),
    rollback: (threadId, runId) =>
      Effect.suspend(() => {
        const entry = threads.get(threadId)
        if (entry === undefined) return Effect.succeed(0)
        const kept = entry.checkpoints.filter((c) => c.run_id !== runId)
        const state = fold(kept)
        if (Either.isLeft(state)) {
          return Effect.fail(new StoreError({ operation: "rollback", message: state.left.message, cause: state.left }))
        }
        const deleted = entry.checkpoints.length - kept.length
        entry.checkpoints.splice(0, entry.checkpoints.length, ...kept)
        entry.state = state.right
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
      Effect.sync(() => {
        const entry = threads.get(threadId)
        if (entry === undefined) return Option.none()
        return Option.some({
          thread_id: threadId,
          state: entry.state,
          checkpoints: entry.checkpoints.length,
          runs: [...entry.runs.values()]
        })
      }),
    append: (threadId, runId, updates) =>
      Effect.suspend(() => {
        const entry = get(threadId)
        const next = applyUpdates(entry.state, updates, indexes)
        if (Either.isLeft(next)) {
          return Effect.fail(new StoreError({ operation: "append", message: next.left.message, cause: next.left }))
        }
        const now = new Date().toISOString()
        entry.state = next.right
        entry.checkpoints.push({ seq: ++seq, run_id: runId, created_at: now, updates })
        entry.updated_at = now
        return Effect.void
      }),
    saveRun: (run) =>
      Effect.sync(() => {
        const runs = get(run.thread_id).runs
        const before = runs.get(run.run_id)
        runs.set(run.run_id, {
          ...run,
          error: run.error ?? before?.error ?? null,
          metadata: run.metadata ?? before?.metadata ?? null
        })
      }),
    list: Effect.sync(() =>
      [...threads.entries()]
        .map(([thread_id, entry]) => summary(thread_id, entry))
        .sort((a, b) => b.updated_at.localeCompare(a.updated_at))
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
