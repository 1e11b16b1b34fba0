/**
 * A PostgreSQL thread store's run records (`antler_runs`: a run's status, its times, why it failed, what it was
 * asked with) and their events (`antler_run_events`), what they keep passed through the store's redactor first.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { RunRecord } from "../../services/ThreadStore.js"
import { changedRun, keptMetadata, type ThreadStore } from "../../services/ThreadStore.js"
import type * as Redact from "../../state/Redact.js"
import type * as PgAccess from "./PgAccess.js"
import { decodeRows, decodeRunEventsRows, decodeRunRows, runEventsText } from "./Rows.js"

/** The columns of a run's record, in the order `saveRun` writes them. */
export const RUN_COLUMNS = `run_id, thread_id, status, stop_reason, started_at, ended_at, error, metadata`

/** The run records of a store. */
export interface Runs {
  readonly saveRun: ThreadStore["Type"]["saveRun"]
  readonly updateRun: ThreadStore["Type"]["updateRun"]
  readonly runs: ThreadStore["Type"]["runs"]
  readonly saveRunEvents: ThreadStore["Type"]["saveRunEvents"]
  readonly runEvents: ThreadStore["Type"]["runEvents"]
  readonly deleteRun: ThreadStore["Type"]["deleteRun"]
}

/** What the run records need of their store. */
export interface Options {
  readonly access: PgAccess.Access
  readonly redactor: Redact.Redactor
  /** The time now, as the store writes it. */
  readonly now: Effect.Effect<string>
  /** The thread's row made when there is none (a run's record is of a thread). */
  readonly ensureThread: (threadId: string, at: string) => Effect.Effect<unknown, SqlError>
}

/** The run records of a store. */
export const make = ({ access, redactor, now, ensureThread }: Options): Runs => {
  const { q, run, transaction } = access

  const upsertRun = (record: RunRecord) =>
    q(
      `INSERT INTO antler_runs (${RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, status = excluded.status,
        stop_reason = excluded.stop_reason, started_at = excluded.started_at, ended_at = excluded.ended_at,
        error = COALESCE(excluded.error, antler_runs.error),
        metadata = COALESCE(excluded.metadata, antler_runs.metadata)`,
      [
        record.run_id,
        record.thread_id,
        record.status,
        record.stop_reason,
        record.started_at,
        record.ended_at,
        record.error == null ? null : redactor.text(record.error),
        record.metadata == null ? null : JSON.stringify(redactor.value(record.metadata))
      ]
    )

  // the run as stored, its row locked until the transaction ends (no write in between)
  const lockedRun = (runId: string, operation: string) =>
    Effect.flatMap(
      q(`SELECT ${RUN_COLUMNS} FROM antler_runs WHERE run_id = $1 FOR UPDATE`, [runId]),
      (rows) => Effect.map(decodeRows(decodeRunRows, rows, operation, "The run table"), (found) => found[0])
    )

  const saveRun: ThreadStore["Type"]["saveRun"] = (record) =>
    Effect.flatMap(now, (at) =>
      transaction(
        Effect.gen(function*() {
          yield* ensureThread(record.thread_id, at)
          // (its feedback, written by `updateRun` alone, as stored)
          const stored = record.metadata == null ? undefined : yield* lockedRun(record.run_id, "saveRun")
          const metadata = record.metadata == null ? record.metadata : keptMetadata(record.metadata, stored?.metadata)
          yield* upsertRun({ ...record, metadata })
        }),
        "saveRun",
        `Cannot save run "${record.run_id}" of thread "${record.thread_id}"`
      ))

  const updateRun: ThreadStore["Type"]["updateRun"] = (threadId, runId, change) =>
    transaction(
      Effect.gen(function*() {
        const written = changedRun(yield* lockedRun(runId, "updateRun"), threadId, change)
        if (written !== undefined) yield* upsertRun(written)
        return written
      }),
      "updateRun",
      `Cannot update run "${runId}" of thread "${threadId}"`
    )

  const runs: ThreadStore["Type"]["runs"] = (filter) =>
    Effect.gen(function*() {
      const where: Array<string> = []
      const params: Array<string> = []
      const add = (column: string, value: string | undefined) => {
        if (value === undefined) return
        params.push(value)
        where.push(`${column} = $${params.length}`)
      }
      add("thread_id", filter.threadId)
      add("run_id", filter.runId)
      add("status", filter.status)
      const rows = yield* run(
        q(
          `SELECT ${RUN_COLUMNS} FROM antler_runs${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""} ` +
            `ORDER BY started_at, ord`,
          params
        ),
        "runs",
        "Cannot read runs"
      )
      return yield* decodeRows(decodeRunRows, rows, "runs", "The run table")
    })

  const saveRunEvents: ThreadStore["Type"]["saveRunEvents"] = (threadId, runId, events) =>
    Effect.asVoid(run(
      q(
        `INSERT INTO antler_run_events (run_id, thread_id, events) VALUES ($1, $2, $3)
          ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, events = excluded.events`,
        [runId, threadId, runEventsText(events, redactor)]
      ),
      "saveRunEvents",
      `Cannot save the events of run "${runId}" of thread "${threadId}"`
    ))

  const runEvents: ThreadStore["Type"]["runEvents"] = (threadId, runId) =>
    Effect.gen(function*() {
      const rows = yield* run(
        q(`SELECT events FROM antler_run_events WHERE run_id = $1 AND thread_id = $2`, [runId, threadId]),
        "runEvents",
        `Cannot read the events of run "${runId}"`
      )
      const decoded = yield* decodeRows(decodeRunEventsRows, rows, "runEvents", "The run event table")
      return decoded[0]?.events ?? []
    })

  const deleteRun: ThreadStore["Type"]["deleteRun"] = (threadId, runId) =>
    transaction(
      Effect.gen(function*() {
        const deleted = yield* q(
          `DELETE FROM antler_runs WHERE thread_id = $1 AND run_id = $2 AND status NOT IN ('pending', 'running')
            RETURNING run_id`,
          [threadId, runId]
        )
        if (deleted.length === 0) return false
        yield* q(`DELETE FROM antler_run_events WHERE thread_id = $1 AND run_id = $2`, [threadId, runId])
        return true
      }),
      "deleteRun",
      `Cannot delete run "${runId}" of thread "${threadId}"`
    )

  return { saveRun, updateRun, runs, saveRunEvents, runEvents, deleteRun }
}
