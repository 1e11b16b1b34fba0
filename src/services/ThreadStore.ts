/**
 * Threads and their checkpoints. A checkpoint is the list of state updates one completed step applied
 * (an append-only delta), so a step costs the same at message 10 and message 10,000; loading a thread
 * folds its deltas through the reducers.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"
import type { RunStatus, StopReason } from "./RunEvents.js"
import type { StoreError } from "./RunContext.js"

/** A thread as listed. */
export interface ThreadSummary {
  readonly thread_id: string
  readonly title: string | null
  readonly created_at: string
  readonly updated_at: string
  readonly checkpoints: number
}

/** One run of a thread. */
export interface RunRecord {
  readonly run_id: string
  readonly thread_id: string
  readonly status: RunStatus | "running"
  readonly stop_reason: StopReason | null
  readonly started_at: string
  readonly ended_at: string | null
}

/** A loaded thread: its state and how many checkpoints made it. */
export interface LoadedThread {
  readonly thread_id: string
  readonly state: ThreadState
  readonly checkpoints: number
  readonly runs: ReadonlyArray<RunRecord>
}

/** The thread store port. */
export class ThreadStore extends Context.Tag("antler/ThreadStore")<
  ThreadStore,
  {
    /** Creates the thread if it does not exist. */
    readonly ensure: (threadId: string) => Effect.Effect<void, StoreError>
    /** The thread's current state, folded from its checkpoints. */
    readonly load: (threadId: string) => Effect.Effect<Option.Option<LoadedThread>, StoreError>
    /** Appends one checkpoint: the updates of one completed step, in order. */
    readonly append: (threadId: string, runId: string, updates: ReadonlyArray<StateUpdate>) => Effect.Effect<void, StoreError>
    /** Records a run's start or end. */
    readonly saveRun: (run: RunRecord) => Effect.Effect<void, StoreError>
    readonly list: Effect.Effect<ReadonlyArray<ThreadSummary>, StoreError>
  }
>() {}
