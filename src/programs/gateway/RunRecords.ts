/**
 * What the store keeps of a gateway run as it ends: its record settled by how it was stopped (rolled back,
 * cancelled, or ended without saying so), an edit's run that failed undone, and the runs a previous process left
 * `running` settled at start.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { RunEvent } from "../../services/RunEvents.js"
import type { AppendOptions, RunRecord, ThreadStore } from "../../services/ThreadStore.js"
import { LEASE_FENCED } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"

const LEASED: AppendOptions = { leased: true }

/** The message of a run ended by `action=rollback`. */
export const ROLLED_BACK = "Rolled back by user"

/**
 * The message of a run whose `action=rollback` its store refused (`fenced`: another run took the thread between the
 * run's last look at its lease and the rollback; the store's words say which).
 */
export const notRolledBack = (fenced: string): string => `Rollback asked by user was not done: ${fenced}`

/** What a failed edit's run whose undoing its store refused (as `notRolledBack`) adds to its record's error. */
export const editNotUndone = (fenced: string): string => `The failed edit was not undone: ${fenced}`

/** The message of a run a previous gateway process left unfinished (DeerFlow's `STARTUP_ORPHAN_RECOVERY_ERROR`). */
export const SERVER_RESTARTED = "Gateway restarted before this run reached a durable final state."

/** The stop reason of such a run (DeerFlow's `ORPHAN_RECOVERY_STOP_REASON`). */
export const ORPHAN_RECOVERED = "orphan_recovered"

/** The record's metadata key marking a run whose last turn ended and which settles (see `RunSettling`). */
export const SETTLING = "settling"

/** `record` without the mark of a run settling (its metadata as it was before). */
export const unmarked = (record: RunRecord): RunRecord => {
  if (record.metadata == null || !(SETTLING in record.metadata)) return record
  const { [SETTLING]: _gone, ...metadata } = record.metadata
  return { ...record, metadata }
}

/** Whether a run's record says it has not ended yet (`pending` or `running`). */
export const unfinished = (record: RunRecord): boolean => record.status === "pending" || record.status === "running"

/** A new run's record: `pending` since `at`. */
export const base = (threadId: string, runId: string, at: string): RunRecord => ({
  run_id: runId,
  thread_id: threadId,
  status: "pending",
  stop_reason: null,
  started_at: at,
  ended_at: null
})

/** The record of a run as the store has it, if it can be read. */
export const latest = (store: ThreadStore["Type"], runId: string) =>
  Effect.map(store.runs({ runId }), (records) => records[0]).pipe(Effect.orElseSucceed(() => undefined))

/**
 * Saves a run's settled record; a store that refuses it is said in a warning naming the run and its status (the
 * run ends as settled for its waiters; its record stays as it was), as DeerFlow's drain logs it.
 */
const keep = (store: ThreadStore["Type"], record: RunRecord) =>
  store.saveRun(record).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning(`Could not persist ${record.status} status for run ${record.run_id}: ${error.message}`))
  )

/** How a run ended, as its record says it. */
export interface Ending {
  readonly status: RunRecord["status"]
  readonly stop_reason: RunRecord["stop_reason"]
  readonly error: string | null
}

/**
 * How a run that was not rolled back ended: as its last turn's `run_end` said; if it never said (its settings or
 * agent refused it, or it was stopped before), `cancelled` when stopped (`action`), else `error`.
 */
export const ending = (
  action: "interrupt" | "rollback" | undefined,
  end: (RunEvent & { readonly type: "run_end" }) | undefined
): Ending => {
  const status = end?.status ?? (action !== undefined ? "cancelled" : "error")
  return {
    status,
    stop_reason: end?.stop_reason ?? (status === "cancelled" ? "cancelled" : "error"),
    error: end?.error?.message ?? null
  }
}

/**
 * Settles the record of run `runId` once, at the end of its last phase (its turns leave it `running`, see
 * `RunSettlement`): rolled back (its thread's checkpoints too) when a client asked `rollback`, else as `ended`
 * says. Returns the record.
 */
export const settle = (
  store: ThreadStore["Type"],
  threadId: string,
  runId: string,
  action: "interrupt" | "rollback" | undefined,
  ended: Ending
): Effect.Effect<RunRecord> =>
  Effect.gen(function*() {
    const record = yield* latest(store, runId)
    const at = new Date(yield* Clock.currentTimeMillis).toISOString()
    // (fenced by the run's lease: refused once another run took the thread, whose steps stay)
    const refused = action !== "rollback" ? undefined : yield* store.rollback(threadId, runId, LEASED).pipe(
      Effect.as(undefined),
      Effect.catchAll((error) =>
        Effect.as(Effect.logWarning(`run ${runId}: not rolled back: ${error.message}`), error.message))
    )
    const settled: RunRecord = {
      ...(record === undefined ? base(threadId, runId, at) : unmarked(record)),
      ...(action === "rollback"
        ? { status: "error", stop_reason: "error", error: refused === undefined ? ROLLED_BACK : notRolledBack(refused) }
        : ended),
      ended_at: at
    }
    yield* keep(store, settled)
    return settled
  })

/** What undoing an edit's run did: whether it was tried, whether it was done, and why not when fenced. */
export interface EditUndo {
  readonly tried: boolean
  readonly undone: boolean
  /** What the run's error adds when the lease fence refused the undoing (`editNotUndone`). */
  readonly note?: string | undefined
}

/** An error with a note after it. */
export const withNote = (error: string | null, note: string): string =>
  [error, note].filter((e) => e != null && e !== "").join(" ")

/**
 * Undoes an edit-and-rerun run (its metadata's `replay_kind: "edit"`, see `handlers/Branches`) that did not succeed
 * (`status` `error`, or `cancelled`: stopped): its checkpoints go, the fork before its first step with them, so the
 * thread is again as it was before the edit, as DeerFlow's worker restores it; the run keeps its status. Fenced by
 * the lease of `leased` (`AppendOptions.leased`: the run's own, or the lease taken to settle it): refused once
 * another run took the thread, with the note the run's error adds (`editNotUndone`).
 */
export const undoEdit = (
  store: ThreadStore["Type"],
  threadId: string,
  runId: string,
  status: RunRecord["status"],
  metadata: Readonly<Record<string, unknown>>,
  leased: AppendOptions["leased"] = true
): Effect.Effect<EditUndo> =>
  metadata.replay_kind !== "edit" || (status !== "error" && status !== "cancelled")
    ? Effect.succeed({ tried: false, undone: false })
    : store.rollback(threadId, runId, { leased }).pipe(
      Effect.as({ tried: true, undone: true }),
      Effect.catchAll((error) =>
        Effect.as(Effect.logWarning(`run ${runId}: the failed edit could not be undone`, error), {
          tried: true,
          undone: false,
          note: error.operation === LEASE_FENCED ? editNotUndone(error.message) : undefined
        }))
    )

/**
 * `undoEdit` of a run whose record is settled already: refused by the fence, the record keeps the note. Answers
 * whether it undid the edit, and the record as it is now kept (what the run's waiters are told).
 */
export const undoFailedEdit = (
  store: ThreadStore["Type"],
  record: RunRecord,
  metadata: Readonly<Record<string, unknown>>,
  leased: AppendOptions["leased"] = true
): Effect.Effect<{ readonly undone: boolean; readonly record: RunRecord }> =>
  Effect.flatMap(
    undoEdit(store, record.thread_id, record.run_id, record.status, metadata, leased),
    ({ note, undone }) => {
      if (note === undefined) return Effect.succeed({ undone, record })
      const noted: RunRecord = { ...record, error: withNote(record.error ?? null, note) }
      return Effect.as(store.saveRun(noted), { undone, record: noted }).pipe(
        Effect.orElseSucceed(() => ({ undone, record }))
      )
    }
  )

/** The caller's metadata a run was started with, as its record keeps it (`metadata.metadata`). */
export const callerMetadata = (record: RunRecord): Readonly<Record<string, unknown>> => {
  const given = record.metadata?.metadata
  return typeof given === "object" && given !== null && !Array.isArray(given)
    ? given as Readonly<Record<string, unknown>>
    : {}
}

/**
 * Records as `error` (`orphan_recovered`, "Gateway restarted before...", as DeerFlow's startup recovery) the runs
 * left `running` or `pending` whose thread no live process holds (its lease is free), an edit's run undone as a
 * failed one is; returns them.
 */
export const recover = (store: ThreadStore["Type"]) =>
  Effect.gen(function*() {
    const stale = [
      ...(yield* store.runs({ status: "running" })),
      ...(yield* store.runs({ status: "pending" }))
    ]
    const settled: Array<RunRecord> = []
    for (const record of stale) {
      const probe = `recover-${M.newId()}`
      const millis = yield* Clock.currentTimeMillis
      const holder = yield* store.acquireLease({
        threadId: record.thread_id,
        runId: probe,
        ttlMs: 60_000,
        now: millis
      })
      // a live process (this one, or another sharing the store) holds the thread: its run is running
      if (holder !== undefined) continue
      const ended: RunRecord = {
        ...unmarked(record),
        status: "error",
        stop_reason: ORPHAN_RECOVERED,
        ended_at: new Date(millis).toISOString(),
        error: SERVER_RESTARTED
      }
      yield* store.saveRun(ended)
      const kept = (yield* undoFailedEdit(store, ended, callerMetadata(record), probe)).record
      yield* store.releaseLease(record.thread_id, probe)
      settled.push(kept)
    }
    return settled
  })
