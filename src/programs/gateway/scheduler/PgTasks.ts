/**
 * The scheduled task store in the PostgreSQL database of `database.url` (beside the thread store's tables): a
 * small pool of its own. `?` placeholders become PostgreSQL's `$1`, `$2`... (the statements hold no other `?`).
 * Loaded only when PostgreSQL is configured (`@effect/sql-pg` is an optional peer).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { toStoreError } from "../../../layers/store/Rows.js"
import { StoreError } from "../../../services/RunContext.js"
import * as TaskStore from "./TaskStore.js"

/** A statement's `?` placeholders numbered as PostgreSQL's. */
export const numbered = (text: string): string => {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

// An arbitrary constant: the advisory lock that serialises making the tables.
const MIGRATION_LOCK = 7_246_114_338

/** The store in the database at `url`; closed with the scope. */
export const make = (url: Redacted.Redacted<string> | string) =>
  Effect.gen(function*() {
    const secret = Redacted.isRedacted(url) ? url : Redacted.make(url)
    const sql = yield* PgClient.make({
      url: secret,
      maxConnections: 3,
      applicationName: "antler-scheduler",
      connectTimeout: "10 seconds"
    }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAllCause((cause) => {
        if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
        const error = Cause.squash(cause)
        const detail = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error)
        return Effect.fail(new StoreError({ operation: "open", message: `Cannot open the scheduled tasks: ${detail}` }))
      })
    )
    // processes starting at once make the tables one after another (CREATE TABLE IF NOT EXISTS run at the same
    // moment fails one of them with a unique violation in the catalog)
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`)
      for (const statement of TaskStore.MIGRATIONS) yield* sql.unsafe(statement)
    })).pipe(Effect.mapError(toStoreError("scheduled_tasks", "Cannot make the scheduled tasks' tables")))
    return yield* TaskStore.make({
      query: (text, params) =>
        sql.unsafe<Record<string, unknown>>(numbered(text), params as Array<unknown>).pipe(
          Effect.mapError(toStoreError("scheduled_tasks", "Cannot use the scheduled tasks"))
        )
    })
  })

/** The store layer over a PostgreSQL database. */
export const layer = (url: Redacted.Redacted<string> | string): Layer.Layer<TaskStore.TaskStore, StoreError> =>
  Layer.scoped(TaskStore.TaskStore, make(url))
