/**
 * The gateway's MCP task runtime as a layer, when `mcp_tasks.enabled`: its records beside the threads (PostgreSQL
 * at `database.url`, else the SQLite file under the data directory), its poller over the app's MCP servers.
 */
import * as Layer from "effect/Layer"
import type { AppConfigService } from "../../../services/AppConfig.js"
import type { Mcp } from "../../../services/Mcp.js"
import type { McpTasks } from "../../../services/McpTasks.js"
import type { StoreError } from "../../../services/RunContext.js"
import type { Redactor } from "../../../state/Redact.js"
import { besideThreads } from "../StoreBackend.js"
import type { Records } from "./Records.js"
import * as Runtime from "./Runtime.js"

/** The records store a configuration chooses: beside its threads (see `StoreBackend`). */
export const recordsLayer = (app: AppConfigService["Type"]): Layer.Layer<Records, StoreError> =>
  besideThreads(app, {
    sqlite: (file) => import("./SqliteRecords.js").then((SqliteRecords) => SqliteRecords.layer(file)),
    postgres: (url) => import("./PgRecords.js").then((PgRecords) => PgRecords.layer(url))
  })

/** The runtime of `app` (none when `mcp_tasks.enabled` is off); what it records is without `redact`'s secrets. */
export const layer = (
  app: AppConfigService["Type"],
  redact?: Redactor
): Layer.Layer<McpTasks, StoreError, Mcp> | undefined =>
  app.config.mcp_tasks.enabled
    ? Runtime.layer(app.config.mcp_tasks, redact).pipe(Layer.provide(recordsLayer(app)))
    : undefined
