/**
 * The gateway's MCP task runtime as a layer, when `mcp_tasks.enabled`: its records beside the threads (PostgreSQL
 * at `database.url`, else the SQLite file under the data directory), its poller over the app's MCP servers, and
 * its notifier, which tells a thread's user of a task that ended or waits for input with a run on the thread.
 */
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AppConfigService } from "../../../services/AppConfig.js"
import type { Mcp } from "../../../services/Mcp.js"
import type { McpTasks } from "../../../services/McpTasks.js"
import type { StoreError } from "../../../services/RunContext.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import type { Redactor } from "../../../state/Redact.js"
import * as OwnerRole from "../OwnerRole.js"
import { Runs } from "../Runs.js"
import { besideThreads } from "../StoreBackend.js"
import * as Launch from "./Launch.js"
import * as Notifier from "./Notifier.js"
import { Records } from "./Records.js"
import * as Runtime from "./Runtime.js"
import * as TaskSecrets from "./TaskSecrets.js"

/** The records store a configuration chooses: beside its threads (see `StoreBackend`). */
export const recordsLayer = (app: AppConfigService["Type"]): Layer.Layer<Records, StoreError> =>
  besideThreads(app, {
    sqlite: (file) => import("./SqliteRecords.js").then((SqliteRecords) => SqliteRecords.layer(file)),
    postgres: (url) => import("./PgRecords.js").then((PgRecords) => PgRecords.layer(url))
  })

/**
 * The runtime of `app` (none when `mcp_tasks.enabled` is off); what it records is without `redact`'s secrets, nor
 * its tasks' runs' request secrets (sealed under `gateway.cluster.secret`, else a key of the process's own).
 * `records`: the store it shares with the notifier (the same layer: built once).
 */
export const layer = (
  app: AppConfigService["Type"],
  redact?: Redactor,
  records: Layer.Layer<Records, StoreError> = recordsLayer(app)
): Layer.Layer<McpTasks, StoreError, Mcp> | undefined =>
  app.config.mcp_tasks.enabled
    ? Layer.suspend(() =>
      // (a key of this process's own is made when the layer is built: never shared, never on disk)
      Runtime.layer(app.config.mcp_tasks, redact, TaskSecrets.keyOf(app.config.gateway.cluster?.secret))
    ).pipe(Layer.provide(records))
    : undefined

/**
 * The notifier of `app`'s tasks (none when `mcp_tasks.enabled` is off): a pass at once, then one every
 * `poll_interval_seconds`, launching notification runs through the gateway's run manager; every process of a
 * cluster or sharing the database passes (each event is taken by one of them).
 */
export const notifierLayer = (
  app: AppConfigService["Type"],
  records: Layer.Layer<Records, StoreError>
): Layer.Layer<never, StoreError, Runs | ThreadStore> | undefined => {
  const config = app.config.mcp_tasks
  if (!config.enabled) return undefined
  return Layer.scopedDiscard(Effect.gen(function*() {
    const store = yield* Records
    const launcher = Launch.make(app, yield* Runs, yield* ThreadStore, yield* OwnerRole.ofApp(app))
    const owner = `${Os.hostname()}:${Crypto.randomUUID().replace(/-/g, "")}`
    const pass = Notifier.make(config, store.notifications, launcher, owner)
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(
      pass.pipe(Effect.catchAllCause((cause) => Effect.logWarning("MCP task notification pass failed", cause))),
      Effect.sleep(`${config.poll_interval_seconds} seconds`)
    )))
  })).pipe(Layer.provide(records))
}
