/**
 * LangGraph's store in the PostgreSQL database of `database.url` (beside the thread store's tables): a small pool
 * of its own, as the scheduled tasks' (`PgTasks`). Loaded only when PostgreSQL is configured (`@effect/sql-pg` is
 * an optional peer).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { toStoreError } from "../../../layers/store/Rows.js"
import { StoreError } from "../../../services/RunContext.js"
import { numbered } from "../scheduler/PgTasks.js"
import * as StoreItems from "./StoreItems.js"

// An arbitrary constant (not the scheduled tasks'): the advisory lock that serialises making the table.
const MIGRATION_LOCK = 7_246_114_339

/** The store in the database at `url`; closed with the scope. */
export const make = (url: Redacted.Redacted<string> | string) =>
  Effect.gen(function*() {
    const secret = Redacted.isRedacted(url) ? url : Redacted.make(url)
    const sql = yield* PgClient.make({
      url: secret,
      maxConnections: 3,
      applicationName: "antler-store",
      connectTimeout: "10 seconds"
    }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAllCause((cause) => {
        if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
        const error = Cause.squash(cause)
        const detail = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error)
        return Effect.fail(new StoreError({ operation: "open", message: `Cannot open the store's items: ${detail}` }))
      })
    )
    // processes starting at once make the table one after another (see `PgTasks`)
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`)
      for (const statement of StoreItems.MIGRATIONS) yield* sql.unsafe(statement)
    })).pipe(Effect.mapError(toStoreError("store_items", "Cannot make the store's table")))
    return yield* StoreItems.make({
      query: (text, params) =>
        sql.unsafe<Record<string, unknown>>(numbered(text), params as Array<unknown>).pipe(
          Effect.mapError(toStoreError("store_items", "Cannot use the store's items"))
        )
    })
  })

/** The store layer over a PostgreSQL database. */
export const layer = (url: Redacted.Redacted<string> | string): Layer.Layer<StoreItems.StoreItems, StoreError> =>
  Layer.scoped(StoreItems.StoreItems, make(url))
