/**
 * Runs from a checkpoint, as LangGraph takes them (`checkpoint` / `checkpoint_id` of a run request): a run given
 * the thread's head (what DeerFlow's app sends with every follow-up) runs as any other; a run given an older
 * checkpoint forks the thread there. Antler's checkpoints are an append-only list of deltas, so a fork is one
 * more checkpoint, written under the forking run's id before its first step, that brings the thread back to
 * the state it had at that checkpoint (its messages, title, todos, uploads, summary, goal and viewed images;
 * artifacts, loaded skills, delegations and token usage keep what the later steps added: files written stay
 * written, tokens spent stay spent). The later checkpoints stay in `history`; the fork's checkpoint names the
 * checkpoint it forked from as its parent (`parentOf`).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { CheckpointRecord, RunRecord } from "../../services/ThreadStore.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import { REMOVE_ALL_MESSAGES } from "../../state/Message.js"
import { applyUpdates, makeIndexes } from "../../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../../state/ThreadState.js"
import * as TS from "../../state/ThreadState.js"
import * as ThreadLease from "../ThreadLease.js"
import { GatewayError, notFound } from "./api/Problem.js"

/** The checkpoint id of a thread before its first checkpoint. */
export const BEFORE_FIRST = 0

/** The run metadata key naming the checkpoint a run forked from. */
export const FORKED_FROM = "forked_from_checkpoint"

const internal = (error: { readonly message: string }) =>
  new GatewayError({ reason: "internal", message: error.message, cause: error })

/** The checkpoint id a run request names (`checkpoint_id`, or `checkpoint.checkpoint_id`), if any. */
export const requestedCheckpoint = (request: {
  readonly checkpoint_id?: string | null | undefined
  readonly checkpoint?: unknown
}): string | undefined => {
  if (request.checkpoint_id != null) return request.checkpoint_id
  const checkpoint = request.checkpoint
  if (typeof checkpoint !== "object" || checkpoint === null) return undefined
  const id = (checkpoint as { readonly checkpoint_id?: unknown }).checkpoint_id
  return typeof id === "string" ? id : typeof id === "number" ? String(id) : undefined
}

/** The state after checkpoint `seq` of the thread's checkpoints (folded from the first). */
export const stateAfter = (
  records: ReadonlyArray<CheckpointRecord>,
  seq: number
): Either.Either<ThreadState, { readonly message: string }> =>
  applyUpdates(TS.empty, records.filter((r) => r.seq <= seq).flatMap((r) => r.updates), makeIndexes())

/** The fields a fork restores: the thread's conversation and what the user sees of it. */
const restored = (state: ThreadState) => ({
  messages: state.messages,
  title: state.title,
  todos: state.todos,
  uploaded_files: state.uploaded_files,
  summary_text: state.summary_text,
  goal: state.goal,
  viewed_images: state.viewed_images
})

/** The updates that bring `current` back to `target` (in the fields a fork restores); empty when it is there. */
export const resetUpdates = (current: ThreadState, target: ThreadState): ReadonlyArray<StateUpdate> => {
  if (JSON.stringify(restored(current)) === JSON.stringify(restored(target))) return []
  const update: StateUpdate = {
    messages: [{ type: "remove", id: REMOVE_ALL_MESSAGES }, ...target.messages],
    title: target.title,
    todos: target.todos ?? [],
    uploaded_files: target.uploaded_files,
    summary_text: target.summary_text,
    goal: target.goal ?? { clear: true },
    viewed_images: {}
  }
  return Object.keys(target.viewed_images).length === 0
    ? [update]
    : [update, { viewed_images: target.viewed_images }]
}

/**
 * The updates that bring the stored thread `threadId` back to checkpoint `checkpointId` (with its seq): none when
 * it is the head (or the state there is the head's); 404 when the thread has no such checkpoint.
 */
export const resetTo = (threadId: string, checkpointId: string) =>
  Effect.gen(function*() {
    const store = yield* ThreadStore
    const records = yield* Effect.mapError(store.checkpoints(threadId), internal)
    const seq = Number(checkpointId)
    // checkpoint ids are the checkpoints' seq, from 1; `0` is the thread before its first checkpoint (the base
    // a regenerate of its first turn starts from)
    if (!/^\d+$/.test(checkpointId.trim()) || (seq !== BEFORE_FIRST && !records.some((r) => r.seq === seq))) {
      return yield* notFound(`Checkpoint ${JSON.stringify(checkpointId)} of this thread`)
    }
    if (records.length === 0 || records[records.length - 1]!.seq === seq) return { seq, updates: [] }
    const target = stateAfter(records, seq)
    const current = stateAfter(records, Number.MAX_SAFE_INTEGER)
    if (Either.isLeft(target) || Either.isLeft(current)) {
      return yield* new GatewayError({
        reason: "internal",
        message: `Cannot fold the thread's checkpoints: ${
          Either.isLeft(target) ? target.left.message : Either.isLeft(current) ? current.left.message : ""
        }`
      })
    }
    return { seq, updates: resetUpdates(current.right, target.right) }
  })

/**
 * Prepares a run of the stored thread `threadId` (`shown` as its client calls it) from checkpoint `checkpointId` (the
 * run holds the thread's lease): nothing when it is the head (or the state there is the head's), else the fork's
 * checkpoint, appended under `runId`, fenced by its lease (a run that took the thread while this one stalled keeps
 * its steps: 409). Returns the checkpoint forked from (for the run's metadata), or undefined when nothing was
 * forked; 404 when the thread has no such checkpoint.
 */
export const fromCheckpoint = (threadId: string, runId: string, checkpointId: string, shown = threadId) =>
  Effect.gen(function*() {
    const store = yield* ThreadStore
    const { seq, updates } = yield* resetTo(threadId, checkpointId)
    if (updates.length === 0) return undefined
    yield* Effect.mapError(
      store.append(threadId, runId, updates, { leased: true }),
      (error) =>
        ThreadLease.isFenced(error)
          ? new GatewayError({
            reason: "conflict",
            message: ThreadLease.takenWhile(shown, `its run's fork from checkpoint ${seq}`)
          })
          : internal(error)
    )
    return seq
  })

/**
 * The parent of each checkpoint in history: the previous one, except for a fork's checkpoint (the first of a
 * run that forked), whose parent is the checkpoint it forked from.
 */
export const parentOf = (
  records: ReadonlyArray<CheckpointRecord>,
  runs: ReadonlyArray<RunRecord>
): (index: number) => number | undefined => {
  const forks = new Map<string, number>()
  for (const run of runs) {
    const from = run.metadata?.[FORKED_FROM]
    if (typeof from === "number") forks.set(run.run_id, from)
  }
  const firstOfRun = new Set<number>()
  const seen = new Set<string>()
  records.forEach((record, i) => {
    if (!seen.has(record.run_id)) firstOfRun.add(i)
    seen.add(record.run_id)
  })
  return (index) => {
    const record = records[index]
    if (record === undefined) return undefined
    const from = forks.get(record.run_id)
    if (from !== undefined && firstOfRun.has(index)) return from === BEFORE_FIRST ? undefined : from
    return index > 0 ? records[index - 1]!.seq : undefined
  }
}
