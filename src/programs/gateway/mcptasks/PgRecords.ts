/**
 * The MCP task store in the PostgreSQL database of `database.url` (beside the thread store's tables): a small pool
 * of its own (`PgPool`). Loaded only when PostgreSQL is configured (`@effect/sql-pg` is an optional peer).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as PgPool from "../../../layers/store/PgPool.js"
import type { StoreError } from "../../../services/RunContext.js"
import * as Records from "./Records.js"

// An arbitrary constant: the advisory lock that serialises making the table.
const MIGRATION_LOCK = 7_246_114_347

/** The store in the database at `url`; closed with the scope. */
export const make = (url: Redacted.Redacted<string> | string) =>
  Effect.gen(function*() {
    const sql = yield* PgPool.open({
      url,
      maxConnections: 3,
      applicationName: "antler-mcp-tasks",
      what: "the MCP tasks"
    })
    yield* PgPool.migrate(sql, MIGRATION_LOCK, Records.MIGRATIONS, "mcp_tasks", "Cannot make the MCP tasks' table")
    return yield* Records.make({ query: PgPool.query(sql, "mcp_tasks", "Cannot use the MCP tasks") })
  })

/** The store layer over a PostgreSQL database. */
export const layer = (url: Redacted.Redacted<string> | string): Layer.Layer<Records.Records, StoreError> =>
  Layer.scoped(Records.Records, make(url))
