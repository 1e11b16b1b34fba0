/**
 * The store of LangGraph's items a configuration chooses: beside its threads and scheduled tasks (PostgreSQL at
 * `database.url`, else the SQLite file under the data directory), as `scheduler/Wiring.storeLayer` chooses the
 * tasks'.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Path from "node:path"
import * as SqliteThreadStore from "../../../layers/SqliteThreadStore.js"
import type { AppConfigService } from "../../../services/AppConfig.js"
import { StoreError } from "../../../services/RunContext.js"
import type { StoreItems } from "./StoreItems.js"

/** The items' store of a configuration. */
export const layer = (app: AppConfigService["Type"]): Layer.Layer<StoreItems, StoreError> => {
  const url = app.config.database.url ?? app.config.database.postgres_url ?? undefined
  if (url === undefined) {
    return Layer.unwrapEffect(Effect.map(
      Effect.promise(() => import("./SqliteStoreItems.js")),
      (SqliteStoreItems) => SqliteStoreItems.layer(Path.join(app.home, SqliteThreadStore.FILENAME))
    ))
  }
  return Layer.unwrapEffect(Effect.map(
    Effect.tryPromise({
      try: () => import("./PgStoreItems.js"),
      catch: (cause) =>
        new StoreError({ operation: "open", message: `@effect/sql-pg cannot be loaded: ${String(cause)}`, cause })
    }),
    (PgStoreItems) => PgStoreItems.layer(url)
  ))
}
