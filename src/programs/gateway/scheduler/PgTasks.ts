/**
 * The scheduled task store in the PostgreSQL database of `database.url` (beside the thread store's tables): a
 * small pool of its own (`PgPool`: `?` placeholders become PostgreSQL's `$1`, `$2`...). Loaded only when PostgreSQL
 * is configured (`@effect/sql-pg` is an optional peer).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as PgPool from "../../../layers/store/PgPool.js"
import type { StoreError } from "../../../services/RunContext.js"
import * as TaskStore from "./TaskStore.js"

// An arbitrary constant: the advisory lock that serialises making the tables.
const MIGRATION_LOCK = 7_246_114_338

/** The store in the database at `url`; closed with the scope. */
export const make = (url: Redacted.Redacted<string> | string) =>
  Effect.gen(function*() {
    const sql = yield* PgPool.open({
      url,
      maxConnections: 3,
      applicationName: "antler-scheduler",
      what: "the scheduled tasks"
    })
    yield* PgPool.migrate(
      sql,
      MIGRATION_LOCK,
      TaskStore.MIGRATIONS,
      "scheduled_tasks",
      "Cannot make the scheduled tasks' tables"
    )
    return yield* TaskStore.make({
      query: PgPool.query(sql, "scheduled_tasks", "Cannot use the scheduled tasks")
    })
  })

/** The store layer over a PostgreSQL database. */
export const layer = (url: Redacted.Redacted<string> | string): Layer.Layer<TaskStore.TaskStore, StoreError> =>
  Layer.scoped(TaskStore.TaskStore, make(url))
