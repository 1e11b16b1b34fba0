/**
 * Threads and their checkpoints. A checkpoint is the list of state updates one completed step applied
 * (an append-only delta), so a step costs the same at message 10 and message 10,000; loading a thread
 * folds its deltas through the reducers.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import type * as Option from "effect/Option"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"
import type { RecordStopReason, RunStatus } from "./RunEvents.js"
import type { StoreError } from "./RunContext.js"
import * as Tracing from "./Tracing.js"

/** A JSON object kept with a thread or a run (its metadata). */
export type Metadata = Readonly<Record<string, unknown>>

/**
 * How a thread stands, from its last run: `running` while that run holds the thread, how it ended
 * (`success`, `interrupted` when it waits for an answer, `cancelled`, `error`), or `stopped` when the process
 * running it went away mid-run (killed, crashed).
 */
export type ThreadStatus = RunStatus | "running" | "stopped"

/** A thread as listed. */
export interface ThreadSummary {
  readonly thread_id: string
  readonly title: string | null
  readonly created_at: string
  readonly updated_at: string
  readonly checkpoints: number
  /** The user the thread belongs to; `null` for threads made without one (the CLI's, which are `default`'s). */
  readonly owner?: string | null | undefined
  /** The thread's metadata (set by its creator, patched through the gateway). */
  readonly metadata?: Metadata | undefined
  /** How its last run stands (see `ThreadStatus`); absent when no run was recorded (or the store does not say). */
  readonly status?: ThreadStatus | undefined
  /** The last run's stop reason, once it ended. */
  readonly stop_reason?: RecordStopReason | null | undefined
}

/** What a new thread starts with (`ensure` ignores it when the thread exists). */
export interface ThreadInit {
  readonly owner?: string | null | undefined
  readonly metadata?: Metadata | undefined
}

/** How a run stands: its end status, or `pending` (accepted, not started) / `running`. */
export type RunRecordStatus = RunStatus | "pending" | "running"

/** One run of a thread. */
export interface RunRecord {
  readonly run_id: string
  readonly thread_id: string
  readonly status: RunRecordStatus
  readonly stop_reason: RecordStopReason | null
  readonly started_at: string
  readonly ended_at: string | null
  /** Why the run failed, when it did. Saving `undefined` or `null` keeps what was saved before. */
  readonly error?: string | null | undefined
  /** What the run was asked with (assistant, strategy, the caller's metadata). Saving `undefined` keeps it. */
  readonly metadata?: Metadata | null | undefined
}

/**
 * One recorded event of a run, in DeerFlow's shape (`GET /api/threads/{id}/runs/{run_id}/events`): its number in
 * the run (from 1), its type (`run.start`, `llm.ai.response`, `subagent.step`...) and category, what it carries.
 */
export interface StoredRunEvent {
  readonly seq: number
  readonly event_type: string
  readonly category: string
  readonly content: unknown
  readonly metadata: Metadata
  readonly created_at: string
}

/** Which runs `runs` returns (every given field must match). */
export interface RunFilter {
  readonly threadId?: string | undefined
  readonly runId?: string | undefined
  readonly status?: RunRecordStatus | undefined
}

/** One stored checkpoint: the updates of one completed step, in order. */
export interface CheckpointRecord {
  /** Increasing in step order within a thread (not necessarily contiguous). */
  readonly seq: number
  readonly run_id: string
  readonly created_at: string
  readonly updates: ReadonlyArray<StateUpdate>
}

/**
 * What a thread keeps in the store, in bytes: the JSON of its checkpoints, of its runs' records (what each was
 * asked with, why it failed) and of its runs' recorded events, as stored (UTF-8). Its owner, and what all the threads
 * of that owner keep (`owned`; for a thread made without one, all the threads made without one).
 */
export interface ThreadBytes {
  readonly bytes: number
  readonly owner: string | null
  readonly owned: number
}

/** A loaded thread: its state and how many checkpoints made it. */
export interface LoadedThread {
  readonly thread_id: string
  readonly state: ThreadState
  readonly checkpoints: number
  readonly runs: ReadonlyArray<RunRecord>
}

/**
 * Who holds a thread's lease: the run, and the process it runs in (`host:pid`), until when. A thread has at
 * most one active run at a time, across processes: the run holds the lease and renews it while it goes.
 */
export interface LeaseHolder {
  readonly run_id: string
  readonly owner: string
  /** Epoch milliseconds. */
  readonly expires_at: number
}

/** A request for a thread's lease (or its renewal by the run that holds it). */
export interface LeaseRequest {
  readonly threadId: string
  readonly runId: string
  /** How long the lease lasts unless renewed, in milliseconds. */
  readonly ttlMs: number
  /** Now, epoch milliseconds. */
  readonly now: number
}

/** How a checkpoint is appended (`append`, `appendMeasured`). */
export interface AppendOptions {
  /**
   * Fenced by run `runId`'s lease on the thread: written only while the thread's lease is that run's, taken by this
   * process (no other run took it since, nor another process resuming the run, and it was not given back), as the
   * write's own transaction reads it; else nothing is written and the append fails with a `StoreError` of operation
   * `LEASE_FENCED` (`fencedMessage`). A run that checked its lease just before still never writes over the checkpoints
   * of a run that took its thread in between. A run id instead of `true`: fenced by that writer's lease, for a
   * writer whose checkpoints keep other run ids (a thread's copy keeps those of the runs it copies).
   */
  readonly leased?: boolean | string | undefined
}

/** The run whose lease fences an append of run `runId` (`AppendOptions.leased`), if it is fenced. */
export const leaseRunOf = (runId: string, options: AppendOptions | undefined): string | undefined =>
  options?.leased === true ? runId : typeof options?.leased === "string" ? options.leased : undefined

/** The `StoreError` operation of an append fenced by a lease its run no longer holds (`AppendOptions.leased`). */
export const LEASE_FENCED = "lease_fenced"

/**
 * Why a write fenced by run `runId`'s lease on `threadId` was refused: `holder` holds it now (none: no run); `undone`
 * what was not done (an append's checkpoint not written, a rollback's steps not deleted).
 */
export const fencedMessage = (
  threadId: string,
  runId: string,
  holder: LeaseHolder | undefined,
  undone = "its checkpoint was not written"
): string =>
  `Run ${runId} no longer holds the lease of thread "${threadId}" (` +
  (holder === undefined ? "no run holds it" : `run ${holder.run_id}, process ${holder.owner}, holds it`) +
  `): ${undone}.`

/** What a rollback refused by its fence did not do (`fencedMessage`). */
export const ROLLBACK_UNDONE = "its steps were not rolled back, and the other run's were kept"

/** Whether `holder` is run `runId`'s lease taken by `owner` (expired or not: no other took it since). */
export const leaseHeldBy = (holder: LeaseHolder | undefined, runId: string, owner: string): boolean =>
  holder !== undefined && holder.run_id === runId && holder.owner === owner

/** This process as a lease owner: `host:pid`. */
export const leaseOwner = (): string => `${Os.hostname()}:${process.pid}`

/**
 * Whether the holder of an unexpired lease may still be running: a holder on this host whose process is gone
 * (killed, crashed) holds nothing, so a thread is usable again at once after a crash instead of after the
 * lease's time-to-live. Holders on other hosts are trusted until their lease expires.
 */
export const holderAlive = (owner: string): boolean => {
  const at = owner.lastIndexOf(":")
  const host = owner.slice(0, at)
  const pid = Number(owner.slice(at + 1))
  if (at < 0 || host !== Os.hostname() || !Number.isInteger(pid) || pid <= 0) return true
  return pid === process.pid || processAlive(pid)
}

/**
 * Whether a process of this host is running: it exists (`kill(pid, 0)`; a process of another user counts) and
 * is not a zombie, a process that has ended but that its parent has not reaped yet (an init that never reaps,
 * as in many containers, keeps one for good). Where `/proc` cannot tell, an existing process counts as running.
 */
export const processAlive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  let stat: string
  try {
    stat = Fs.readFileSync(`/proc/${pid}/stat`, "latin1")
  } catch {
    return true
  }
  // `pid (comm) state ...`: the name may hold spaces and parentheses, the state follows the last `)`
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
  return state !== "Z" && state !== "X"
}

/**
 * Whether `holder` blocks `request`: another run's lease, unexpired, held by a live process; asked by `owner` (the
 * process asking, `leaseOwner()`), also the same run's lease held by another live process (which resumed the run
 * after this one stalled past the lease's life: this one's renewal finds it taken, and stops the run).
 */
export const leaseBlocks = (
  holder: LeaseHolder | undefined,
  request: LeaseRequest,
  owner?: string
): holder is LeaseHolder =>
  holder !== undefined && (holder.run_id !== request.runId || (owner !== undefined && holder.owner !== owner)) &&
  holder.expires_at > request.now && holderAlive(holder.owner)

/**
 * A thread's status from its last run and the holder of its lease (if any) at `now`: a run still marked
 * running is `running` only while it holds an unexpired lease from a live process, else `stopped`.
 */
export const threadStatus = (
  last: Pick<RunRecord, "run_id" | "status"> | undefined,
  holder: LeaseHolder | undefined,
  now: number
): ThreadStatus | undefined => {
  if (last === undefined) return undefined
  // a run accepted (pending) holds the thread as a running one does
  if (last.status !== "running" && last.status !== "pending") return last.status
  return holder !== undefined && holder.run_id === last.run_id && holder.expires_at > now && holderAlive(holder.owner)
    ? "running"
    : "stopped"
}

/** Why a thread cannot be deleted now: one of its runs is in progress (`holder`). */
export const deleteBusyMessage = (threadId: string, holder: LeaseHolder): string =>
  `Thread "${threadId}" has a run in progress (run ${holder.run_id}, process ${holder.owner}); ` +
  "stop it (Ctrl-C) or wait for it to end, then delete the thread."

/** The `StoreError` operation of a metadata patch past its `maxBytes` (see `patchMetadata`). */
export const METADATA_BOUND = "metadata_bound"

/**
 * Keys of a run's metadata that `saveRun` keeps as stored, written by `updateRun` alone: the feedback on the run
 * (the gateway's `RunFeedback`), which a user gives while the run's start or end is written from what was read
 * before it.
 */
export const RUN_KEPT_KEYS: ReadonlyArray<string> = ["feedback", "feedback_more"]

/** `metadata` as `saveRun` writes it over the `stored` one: its keys, but `RUN_KEPT_KEYS` as stored. */
export const keptMetadata = (metadata: Metadata, stored: Metadata | null | undefined): Metadata => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(metadata)) if (!RUN_KEPT_KEYS.includes(key)) out[key] = value
  for (const key of RUN_KEPT_KEYS) if (stored != null && stored[key] !== undefined) out[key] = stored[key]
  return out
}

/**
 * The run `updateRun` writes: `stored` with the metadata `change` gives it; none when there is no such run of
 * `threadId` or `change` answers none.
 */
export const changedRun = (
  stored: RunRecord | undefined,
  threadId: string,
  change: (run: RunRecord) => Metadata | undefined
): RunRecord | undefined => {
  if (stored === undefined || stored.thread_id !== threadId) return undefined
  const metadata = change(stored)
  return metadata === undefined ? undefined : { ...stored, metadata }
}

/** The thread store port. */
export class ThreadStore extends Context.Tag("antler/ThreadStore")<
  ThreadStore,
  {
    /** Creates the thread if it does not exist (owned by `init.owner`, with `init.metadata`). */
    readonly ensure: (threadId: string, init?: ThreadInit) => Effect.Effect<void, StoreError>
    /**
     * The thread as listed (owner, metadata, title, status), without folding its state; none when it does not
     * exist.
     */
    readonly info: (threadId: string) => Effect.Effect<Option.Option<ThreadSummary>, StoreError>
    /**
     * Merges keys into the thread's metadata (a `null` value removes its key); false when there is no thread. The
     * thread's `updated_at` is now, unless `touch` is false (a change that is no activity: pinning it). With
     * `maxBytes`, metadata that would be more JSON than that once merged is a `StoreError` of operation
     * `METADATA_BOUND`, nothing written: checked in the write's transaction, so patches made together cannot each
     * pass the bound against what the metadata was before the others.
     */
    readonly patchMetadata: (
      threadId: string,
      patch: Metadata,
      options?: { readonly touch?: boolean; readonly maxBytes?: number }
    ) => Effect.Effect<boolean, StoreError>
    /** The thread's checkpoints in step order (for history); empty when there is no thread. */
    readonly checkpoints: (threadId: string) => Effect.Effect<ReadonlyArray<CheckpointRecord>, StoreError>
    /**
     * Deletes the checkpoints a run wrote, restoring the state the thread had before it (rollback of the
     * thread's latest run: call it only once the run has ended). Returns how many were deleted. Fenced as an append
     * is (`options.leased`): refused, nothing deleted, with a `StoreError` of operation `LEASE_FENCED`
     * (`fencedMessage`, `ROLLBACK_UNDONE`) once another run took the thread's lease, also between the run's last look
     * at its lease and this delete.
     */
    readonly rollback: (threadId: string, runId: string, options?: AppendOptions) => Effect.Effect<number, StoreError>
    /** Runs matching the filter, oldest first. */
    readonly runs: (filter: RunFilter) => Effect.Effect<ReadonlyArray<RunRecord>, StoreError>
    /** The thread's current state, folded from its checkpoints. */
    readonly load: (threadId: string) => Effect.Effect<Option.Option<LoadedThread>, StoreError>
    /** Appends one checkpoint: the updates of one completed step, in order (fenced by the run's lease: `options`). */
    readonly append: (
      threadId: string,
      runId: string,
      updates: ReadonlyArray<StateUpdate>,
      options?: AppendOptions
    ) => Effect.Effect<void, StoreError>
    /**
     * Appends as `append` does, and says what the thread keeps once the checkpoint is kept (`ThreadBytes`; its
     * owner's `owned` counts the threads made without one too when the owner is `unownedOf` or none), read by the
     * write itself, not by a statement of its own (a gateway's quota asks at every step).
     */
    readonly appendMeasured: (
      threadId: string,
      runId: string,
      updates: ReadonlyArray<StateUpdate>,
      unownedOf: string,
      options?: AppendOptions
    ) => Effect.Effect<ThreadBytes, StoreError>
    /**
     * Deletes a run that has ended (not `pending` nor `running`): its record and its recorded events. Its
     * checkpoints stay (each is a delta the later ones build on). `false` when the thread has no such run, or the
     * run has not ended.
     */
    readonly deleteRun: (threadId: string, runId: string) => Effect.Effect<boolean, StoreError>
    /**
     * Records a run's start or end (`error` and `metadata` left out keep what was saved; metadata written keeps the
     * stored `RUN_KEPT_KEYS`, which only `updateRun` writes).
     */
    readonly saveRun: (run: RunRecord) => Effect.Effect<void, StoreError>
    /**
     * Changes a run's metadata with no write between its read and its write (one transaction): `change` gets the
     * run as stored and answers its new metadata (`RUN_KEPT_KEYS` included), or none to write nothing. Answers the
     * run as written; none when it has no such run or nothing was written.
     */
    readonly updateRun: (
      threadId: string,
      runId: string,
      change: (run: RunRecord) => Metadata | undefined
    ) => Effect.Effect<RunRecord | undefined, StoreError>
    /**
     * Keeps a run's recorded events (replacing what was kept for it), deleted with its thread. The caller bounds
     * them (the gateway's `RunJournal`).
     */
    readonly saveRunEvents: (
      threadId: string,
      runId: string,
      events: ReadonlyArray<StoredRunEvent>
    ) => Effect.Effect<void, StoreError>
    /** A run's recorded events, in order; empty when none were kept. */
    readonly runEvents: (threadId: string, runId: string) => Effect.Effect<ReadonlyArray<StoredRunEvent>, StoreError>
    /** Every thread, most recently updated first. */
    readonly list: Effect.Effect<ReadonlyArray<ThreadSummary>, StoreError>
    /**
     * The threads of `owner`, most recently updated first (as `list`, without reading anyone else's): with
     * `unowned` also those made without one (the CLI's, which are `default`'s).
     */
    readonly listOwned: (owner: string, unowned: boolean) => Effect.Effect<ReadonlyArray<ThreadSummary>, StoreError>
    /**
     * How many threads `owner` has: those whose owner it is, and with `unowned` also those made without one (the
     * CLI's, which are `default`'s). Without reading the threads' checkpoints or runs (a gateway's quota).
     */
    readonly countOwned: (owner: string, unowned: boolean) => Effect.Effect<number, StoreError>
    /**
     * What the thread keeps in the store (see `ThreadBytes`); none when there is no thread. Read from counters the
     * store keeps with every write (a gateway's quota asks at each step), never by reading what they count.
     */
    readonly bytesOf: (threadId: string) => Effect.Effect<ThreadBytes | undefined, StoreError>
    /**
     * What the threads of `owner` keep in the store, in bytes (as `ThreadBytes.bytes`, summed): with `unowned` also
     * those made without one (the CLI's, which are `default`'s). From the store's counter per owner.
     */
    readonly bytesOwned: (owner: string, unowned: boolean) => Effect.Effect<number, StoreError>
    /**
     * Deletes a thread: its checkpoints, runs, run events and cached state (its files are the sandbox's, not the
     * store's). `true` when there was such a thread. Refused (a `StoreError` with operation `delete`) while one of its
     * runs holds the thread's lease.
     */
    readonly delete: (threadId: string) => Effect.Effect<boolean, StoreError>
    /**
     * Takes (or renews) the thread's lease for a run: `undefined` when the run holds it now, else the holder
     * that blocks it (see `leaseBlocks`). Atomic across processes sharing the store.
     */
    readonly acquireLease: (request: LeaseRequest) => Effect.Effect<LeaseHolder | undefined, StoreError>
    /**
     * Gives the lease back, if this run still holds it from this process (not once another process resumed the run
     * and holds it under the same run id).
     */
    readonly releaseLease: (threadId: string, runId: string) => Effect.Effect<void, StoreError>
  }
>() {}

/**
 * A store with spans on its entry points, named after the implementation (`SqliteThreadStore.load`...): `load`
 * (every run) and `append` (every step) only when the app traces (see `Tracing`: a span costs about as much as
 * an append of a small step), `rollback`, `delete` and `deleteRun` always.
 */
export const withSpans = (name: string, store: ThreadStore["Type"]): ThreadStore["Type"] =>
  ThreadStore.of({
    ...store,
    load: (threadId) =>
      Tracing.withSpanWhenTraced(store.load(threadId), `${name}.load`, { attributes: { thread: threadId } }),
    append: (threadId, runId, updates, options) =>
      Tracing.withSpanWhenTraced(store.append(threadId, runId, updates, options), `${name}.append`, {
        attributes: { thread: threadId, run: runId, updates: updates.length }
      }),
    appendMeasured: (threadId, runId, updates, unownedOf, options) =>
      Tracing.withSpanWhenTraced(
        store.appendMeasured(threadId, runId, updates, unownedOf, options),
        `${name}.append`,
        { attributes: { thread: threadId, run: runId, updates: updates.length } }
      ),
    rollback: Effect.fn(`${name}.rollback`)(function*(threadId: string, runId: string, options?: AppendOptions) {
      yield* Effect.annotateCurrentSpan({ thread: threadId, run: runId })
      return yield* store.rollback(threadId, runId, options)
    }),
    delete: Effect.fn(`${name}.delete`)(function*(threadId: string) {
      yield* Effect.annotateCurrentSpan({ thread: threadId })
      return yield* store.delete(threadId)
    }),
    deleteRun: Effect.fn(`${name}.deleteRun`)(function*(threadId: string, runId: string) {
      yield* Effect.annotateCurrentSpan({ thread: threadId, run: runId })
      return yield* store.deleteRun(threadId, runId)
    })
  })
