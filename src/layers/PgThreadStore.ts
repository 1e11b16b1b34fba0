/**
 * The ThreadStore on PostgreSQL (`@effect/sql-pg`), so several `antler serve` processes (or apps) share threads.
 * Chosen by `database.url` in `config.yaml`. Same semantics as the SQLite store, checked by the same
 * conformance suite: a checkpoint is the JSON text of one completed step's updates (text, not `jsonb`, so a
 * NUL character or a key order a provider sent survives), appended in one transaction; `load` folds them
 * through the reducers after decoding each with Schema; a thread has one active run at a time through a lease
 * row taken under a row lock.
 *
 * Tables are prefixed `antler_` so the store can live in a database other programs use. Appends to one thread
 * lock its row first, so their `seq` order is their commit order even when two processes append at once.
 * A database written by a newer build (a higher schema version) is refused rather than misread. This module keeps
 * the threads and their checkpoints; their summaries are `store/PgThreadSummaries`, their runs' records
 * `store/PgRuns`, their leases `store/PgLeases`.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { StoreError } from "../services/RunContext.js"
import type { AppendOptions, LoadedThread, RunRecord } from "../services/ThreadStore.js"
import {
  deleteBusyMessage,
  fencedMessage,
  LEASE_FENCED,
  leaseBlocks,
  leaseHeldBy,
  leaseRunOf,
  ROLLBACK_UNDONE,
  ThreadStore,
  withSpans
} from "../services/ThreadStore.js"
import * as Redact from "../state/Redact.js"
import type { StateUpdate } from "../state/ThreadState.js"
import { checkpointOf } from "./store/Codec.js"
import { checkpointRecords, foldCheckpoints } from "./store/Fold.js"
import * as PgAccess from "./store/PgAccess.js"
import * as PgLeases from "./store/PgLeases.js"
import { migrate } from "./store/PgMigrations.js"
import * as PgPool from "./store/PgPool.js"
import * as PgRuns from "./store/PgRuns.js"
import * as PgThreadSummaries from "./store/PgThreadSummaries.js"
import { decodeBytesRows, decodeMetadata, decodeRows, decodeRunRows, iso, mergeBounded } from "./store/Rows.js"

/** Options of the Postgres store. */
export interface Options {
  /** `postgres://user:password@host:port/database` (a secret: it is never printed). */
  readonly url: string | Redacted.Redacted<string>
  /** Most connections the store's pool opens (default 10). */
  readonly maxConnections?: number | undefined
  /** What never reaches the database (see `SqliteThreadStore.Options.redact`). */
  readonly redact?: Redact.Redactor | undefined
}

export { migrations, SCHEMA_VERSION } from "./store/PgMigrations.js"

/** Where a URL points, without its credentials (for messages). */
export const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `postgres database ${parsed.pathname.replace(/^\//, "") || "(default)"} at ${parsed.hostname}` +
      (parsed.port ? `:${parsed.port}` : "")
  } catch {
    return "the postgres database (database.url is not a URL)"
  }
}

/** Opens the store (creating and migrating its tables when needed); closed with the scope. */
export const make = (options: Options): Effect.Effect<ThreadStore["Type"], StoreError, Scope.Scope> =>
  Effect.gen(function*() {
    const url = Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url)
    const where = describeUrl(Redacted.value(url))
    const redactor = options.redact ?? Redact.none
    const sql: SqlClient.SqlClient = yield* PgPool.open({
      url,
      maxConnections: options.maxConnections ?? 10,
      applicationName: "antler",
      what: where
    })

    const access = PgAccess.make(sql)
    const { q, run, snapshot, transaction } = access
    yield* migrate(access, where)

    const now = Effect.map(Clock.currentTimeMillis, iso)
    const leases = PgLeases.make(access)
    const ensureThread = (threadId: string, at: string, owner: string | null = null, metadata: string | null = null) =>
      q(
        `INSERT INTO antler_threads (thread_id, created_at, updated_at, owner, metadata) VALUES ($1, $2, $2, $3, $4)
          ON CONFLICT (thread_id) DO NOTHING`,
        [threadId, at, owner, metadata]
      )

    const ensure: ThreadStore["Type"]["ensure"] = (threadId, init) =>
      Effect.flatMap(now, (at) =>
        run(
          ensureThread(
            threadId,
            at,
            init?.owner ?? null,
            init?.metadata === undefined ? null : JSON.stringify(init.metadata)
          ),
          "ensure",
          `Cannot create thread "${threadId}"`
        ))

    // What the thread keeps once the checkpoint is kept, read by the statement that touches the thread after it (the
    // checkpoint's triggers have counted it by then), for `appendMeasured`: no statement of its own.
    const MEASURED = `RETURNING t.bytes, t.owner, (SELECT COALESCE(SUM(o.bytes), 0) FROM antler_owner_bytes o
      WHERE o.owner = COALESCE(t.owner, '') OR (COALESCE(t.owner, '') IN ('', $3) AND o.owner IN ('', $3))) AS owned`
    const appendWith = (
      threadId: string,
      runId: string,
      given: ReadonlyArray<StateUpdate>,
      unownedOf: string | undefined,
      options: AppendOptions | undefined
    ) =>
      Effect.suspend(() => {
        const checkpoint = checkpointOf(threadId, given, redactor)
        if (Either.isLeft(checkpoint)) return Effect.fail(checkpoint.left)
        const { text: body, title } = checkpoint.right
        const returning = unownedOf === undefined ? "" : ` ${MEASURED}`
        const measure = unownedOf === undefined ? [] : [unownedOf]
        return Effect.flatMap(now, (at) =>
          transaction(
            Effect.gen(function*() {
              // fenced by the run's lease: its row locked first (as a delete locks it), shared, until the commit, so
              // no other process takes the lease between this check and the write
              const leased = leaseRunOf(runId, options)
              if (leased !== undefined) {
                const holder = yield* leases.holder(threadId, "SHARE", "append")
                if (!leaseHeldBy(holder, leased, leases.owner)) {
                  return yield* new StoreError({
                    operation: LEASE_FENCED,
                    message: fencedMessage(threadId, leased, holder)
                  })
                }
              }
              yield* ensureThread(threadId, at)
              // one appender of a thread at a time: seq order is commit order
              yield* q(`SELECT 1 FROM antler_threads WHERE thread_id = $1 FOR UPDATE`, [threadId])
              yield* q(
                `INSERT INTO antler_checkpoints (thread_id, run_id, created_at, updates) VALUES ($1, $2, $3, $4)`,
                [threadId, runId, at, body]
              )
              const rows = yield* title === undefined
                ? q(`UPDATE antler_threads t SET updated_at = $2 WHERE thread_id = $1${returning}`, [
                  threadId,
                  at,
                  ...measure
                ])
                : q(
                  `UPDATE antler_threads t SET updated_at = $2, title = $${3 + measure.length} WHERE thread_id = $1` +
                    returning,
                  [threadId, at, ...measure, title]
                )
              if (unownedOf === undefined) return undefined
              const found = yield* decodeRows(decodeBytesRows, rows, "append", "The thread table")
              return found[0]
            }),
            "append",
            `Cannot save a checkpoint of thread "${threadId}"`
          ))
      })

    const append: ThreadStore["Type"]["append"] = (threadId, runId, given, options) =>
      Effect.asVoid(appendWith(threadId, runId, given, undefined, options))

    const appendMeasured: ThreadStore["Type"]["appendMeasured"] = (threadId, runId, given, unownedOf, options) =>
      Effect.flatMap(appendWith(threadId, runId, given, unownedOf, options), (measured) =>
        measured !== undefined ? Effect.succeed(measured) : Effect.die(new Error("a measured append measured nothing")))

    const load: ThreadStore["Type"]["load"] = (threadId) =>
      Effect.gen(function*() {
        const read = yield* snapshot(
          Effect.gen(function*() {
            const threads = yield* q(`SELECT thread_id FROM antler_threads WHERE thread_id = $1`, [threadId])
            const checkpoints = yield* q(
              `SELECT seq, updates FROM antler_checkpoints WHERE thread_id = $1 ORDER BY seq`,
              [threadId]
            )
            const runs = yield* q(
              `SELECT ${PgRuns.RUN_COLUMNS} FROM antler_runs WHERE thread_id = $1 ORDER BY started_at, ord`,
              [threadId]
            )
            return { threads, checkpoints, runs }
          }),
          "load",
          `Cannot load thread "${threadId}"`
        )
        if (read.threads.length === 0 && read.checkpoints.length === 0) return Option.none<LoadedThread>()
        const state = yield* foldCheckpoints(threadId, read.checkpoints)
        const records: ReadonlyArray<RunRecord> = yield* decodeRows(
          decodeRunRows,
          read.runs,
          "load",
          `The run table of thread "${threadId}"`
        )
        return Option.some<LoadedThread>({
          thread_id: threadId,
          state,
          checkpoints: read.checkpoints.length,
          runs: records
        })
      })

    const patchMetadata: ThreadStore["Type"]["patchMetadata"] = (threadId, patch, options) =>
      Effect.flatMap(now, (at) =>
        transaction(
          Effect.gen(function*() {
            const rows = yield* q(`SELECT metadata FROM antler_threads WHERE thread_id = $1 FOR UPDATE`, [threadId])
            if (rows.length === 0) return false
            const current = yield* decodeRows(
              decodeMetadata,
              rows[0]!.metadata,
              "patchMetadata",
              `Thread "${threadId}"`
            )
            const next = yield* mergeBounded(current ?? {}, patch, options?.maxBytes)
            const set = `UPDATE antler_threads SET metadata = $2, updated_at = COALESCE($3::text, updated_at)`
            yield* q(`${set} WHERE thread_id = $1`, [
              threadId,
              JSON.stringify(next),
              options?.touch === false ? null : at
            ])
            return true
          }),
          "patchMetadata",
          `Cannot update the metadata of thread "${threadId}"`
        ))

    const deleteThread: ThreadStore["Type"]["delete"] = (threadId) =>
      Effect.flatMap(Clock.currentTimeMillis, (millis) =>
        transaction(
          Effect.gen(function*() {
            // the lease row (when there is one) locked: its run cannot renew it while the thread is deleted
            const holder = yield* leases.holder(threadId, "UPDATE", "delete")
            if (leaseBlocks(holder, { threadId, runId: "", ttlMs: 0, now: millis })) {
              return yield* new StoreError({ operation: "delete", message: deleteBusyMessage(threadId, holder) })
            }
            // (the thread's row first: its owner's byte counter changes once, not once per checkpoint)
            const deleted = yield* q(`DELETE FROM antler_threads WHERE thread_id = $1 RETURNING thread_id`, [threadId])
            yield* q(`DELETE FROM antler_checkpoints WHERE thread_id = $1`, [threadId])
            yield* q(`DELETE FROM antler_runs WHERE thread_id = $1`, [threadId])
            yield* q(`DELETE FROM antler_run_events WHERE thread_id = $1`, [threadId])
            yield* q(`DELETE FROM antler_leases WHERE thread_id = $1`, [threadId])
            return deleted.length > 0
          }),
          "delete",
          `Cannot delete thread "${threadId}"`
        ))

    const checkpoints: ThreadStore["Type"]["checkpoints"] = (threadId) =>
      Effect.gen(function*() {
        const rows = yield* run(
          q(
            `SELECT seq, run_id, created_at, updates FROM antler_checkpoints WHERE thread_id = $1 ORDER BY seq`,
            [threadId]
          ),
          "checkpoints",
          `Cannot read the checkpoints of thread "${threadId}"`
        )
        return yield* checkpointRecords(threadId, rows)
      })

    const rollback: ThreadStore["Type"]["rollback"] = (threadId, runId, options) =>
      transaction(
        Effect.gen(function*() {
          // fenced as an append is: the lease's row locked, shared, until the commit
          const leased = leaseRunOf(runId, options)
          if (leased !== undefined) {
            const holder = yield* leases.holder(threadId, "SHARE", "rollback")
            if (!leaseHeldBy(holder, leased, leases.owner)) {
              return yield* new StoreError({
                operation: LEASE_FENCED,
                message: fencedMessage(threadId, leased, holder, ROLLBACK_UNDONE)
              })
            }
          }
          yield* q(`SELECT 1 FROM antler_threads WHERE thread_id = $1 FOR UPDATE`, [threadId])
          const deleted = yield* q(
            `DELETE FROM antler_checkpoints WHERE thread_id = $1 AND run_id = $2 RETURNING seq`,
            [threadId, runId]
          )
          const rows = yield* q(
            `SELECT seq, updates FROM antler_checkpoints WHERE thread_id = $1 ORDER BY seq`,
            [threadId]
          )
          const state = yield* foldCheckpoints(threadId, rows)
          yield* q(`UPDATE antler_threads SET title = $2 WHERE thread_id = $1`, [threadId, state.title])
          return deleted.length
        }),
        "rollback",
        `Cannot roll back run "${runId}" of thread "${threadId}"`
      )

    return withSpans("PgThreadStore", {
      ensure,
      patchMetadata,
      delete: deleteThread,
      checkpoints,
      rollback,
      load,
      append,
      appendMeasured,
      ...PgThreadSummaries.make(access),
      ...PgRuns.make({ access, redactor, now, ensureThread }),
      acquireLease: leases.acquireLease,
      releaseLease: leases.releaseLease
    })
  })

/** A Postgres thread store, opened (and migrated) when the layer is built, closed with it. */
export const layer = (options: Options): Layer.Layer<ThreadStore, StoreError> =>
  Layer.scoped(ThreadStore, make(options))
