/**
 * LangGraph's store in the PostgreSQL database of `database.url` (beside the thread store's tables): a small pool
 * of its own, as the scheduled tasks' (`PgTasks`). Loaded only when PostgreSQL is configured (`@effect/sql-pg` is
 * an optional peer).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as PgPool from "../../../layers/store/PgPool.js"
import type { StoreError } from "../../../services/RunContext.js"
import * as StoreItems from "./StoreItems.js"

// An arbitrary constant (not the scheduled tasks'): the advisory lock that serialises making the table.
const MIGRATION_LOCK = 7_246_114_339

/** The store in the database at `url`; closed with the scope. */
export const make = (url: Redacted.Redacted<string> | string) =>
  Effect.gen(function*() {
    const sql = yield* PgPool.open({
      url,
      maxConnections: 3,
      applicationName: "antler-store",
      what: "the store's items"
    })
    yield* PgPool.migrate(sql, MIGRATION_LOCK, StoreItems.MIGRATIONS, "store_items", "Cannot make the store's table")
    return yield* StoreItems.make({ query: PgPool.query(sql, "store_items", "Cannot use the store's items") })
  })

/** The store layer over a PostgreSQL database. */
export const layer = (url: Redacted.Redacted<string> | string): Layer.Layer<StoreItems.StoreItems, StoreError> =>
  Layer.scoped(StoreItems.StoreItems, make(url))
