/**
 * A gateway run's settling, as its record says it: once a turn of the run has ended and only its settling remains
 * (the goal evaluator, the delivery check, its receipt, its terminal record), the record, still `running`, keeps
 * the turn's end under `metadata.settling` (`mark`); a goal's continuation turn clears it (`clear`) before it
 * starts. The run's runner holds the thread's lease through it all (see `RunExecution`), so no one else touches the
 * run while it settles.
 *
 * A runner that dies then leaves a run whose answer is in its thread: the thread's next runner must not run it again
 * (a second answer turn). It ends it instead (`interrupted`), as DeerFlow's lease recovery ends a run whose worker
 * died: `error` with `orphan_recovered`, an error naming what was not done, and a zero-delivery receipt in its
 * journal when its runner had kept none.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { StoreError } from "../../services/RunContext.js"
import type { RunEndEvent } from "../../services/RunEvents.js"
import type { RunRecord, StoredRunEvent, ThreadStore } from "../../services/ThreadStore.js"
import * as RunRecords from "./RunRecords.js"

/** The record's metadata key holding the end of the run's last turn while the run settles. */
export const KEY = RunRecords.SETTLING

/** The error of a run whose runner died while it settled. */
export const INTERRUPTED =
  "Run lease expired: its runner stopped after the run's last turn, before the run was settled (its goal " +
  "evaluation, delivery check and receipt were not done). Its answer is kept in its thread; it was not run again."

/** The `error_type` of that run's `run.error` event. */
export const ERROR_NAME = "RunnerLost"

/** The end of the run's last turn, when its record says the run was settling (else `undefined`). */
export const of = (record: RunRecord): RunRecords.Ending | undefined => {
  const kept = record.metadata?.[KEY]
  if (typeof kept !== "object" || kept === null) return undefined
  const { status, stop_reason, error } = kept as Record<string, unknown>
  return typeof status === "string"
    ? {
      status: status as RunRecords.Ending["status"],
      stop_reason: (typeof stop_reason === "string" ? stop_reason : null) as RunRecords.Ending["stop_reason"],
      error: typeof error === "string" ? error : null
    }
    : undefined
}

/** `record` without the settling mark (its metadata as it was before). */
export const without = RunRecords.unmarked

// (the store refusing it is a warning: the run then behaves as before the mark, resumed if its runner dies)
const write = (store: ThreadStore["Type"], runId: string, update: (record: RunRecord) => RunRecord | undefined) =>
  Effect.gen(function*() {
    const record = yield* RunRecords.latest(store, runId)
    const next = record === undefined || !RunRecords.unfinished(record) ? undefined : update(record)
    if (next !== undefined) yield* store.saveRun(next)
  }).pipe(Effect.catchAll((error) => Effect.logWarning(`run ${runId}: its settling not recorded: ${error.message}`)))

/** Records that run `runId`'s turn ended with `end` and only its settling remains. */
export const mark = (store: ThreadStore["Type"], runId: string, end: RunEndEvent): Effect.Effect<void> =>
  write(store, runId, (record) => ({
    ...record,
    metadata: {
      ...record.metadata,
      [KEY]: { status: end.status, stop_reason: end.stop_reason, error: end.error?.message ?? null }
    }
  }))

/** Records that run `runId` runs a turn again (a goal's continuation): it is no longer settling. */
export const clear = (store: ThreadStore["Type"], runId: string): Effect.Effect<void> =>
  write(store, runId, (record) => (of(record) === undefined ? undefined : without(record)))

/**
 * Ends run `record`, whose runner died while it settled (its thread's lease held by no one): `error`,
 * `orphan_recovered`, `INTERRUPTED`, and in its journal a `run.error` and a zero-delivery receipt unless its runner
 * kept its receipt. Returns the ended record; fails when the store does not keep it.
 */
export const interrupted = (store: ThreadStore["Type"], record: RunRecord): Effect.Effect<RunRecord, StoreError> =>
  Effect.gen(function*() {
    const at = new Date(yield* Clock.currentTimeMillis).toISOString()
    const events = yield* Effect.orElseSucceed(store.runEvents(record.thread_id, record.run_id), () => [])
    if (!events.some((event) => event.event_type === "run.delivery")) {
      const metadata = { status: "error", stop_reason: RunRecords.ORPHAN_RECOVERED, error_type: ERROR_NAME }
      const added: ReadonlyArray<Omit<StoredRunEvent, "seq">> = [
        { event_type: "run.error", category: "error", content: INTERRUPTED, metadata, created_at: at },
        {
          event_type: "run.delivery",
          category: "outputs",
          content: { presented: 0, paths: [], by_tool: {} },
          metadata: {},
          created_at: at
        }
      ]
      const kept = [...events, ...added.map((event, i) => ({ ...event, seq: events.length + i + 1 }))]
      yield* store.saveRunEvents(record.thread_id, record.run_id, kept).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`run ${record.run_id}: its receipt could not be kept: ${error.message}`))
      )
    }
    const ended: RunRecord = {
      ...without(record),
      status: "error",
      stop_reason: RunRecords.ORPHAN_RECOVERED,
      error: INTERRUPTED,
      ended_at: at
    }
    yield* store.saveRun(ended)
    return ended
  })
