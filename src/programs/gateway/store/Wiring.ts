/**
 * The store of LangGraph's items a configuration chooses: beside its threads and scheduled tasks (PostgreSQL at
 * `database.url`, else the SQLite file under the data directory; see `StoreBackend`).
 */
import type * as Layer from "effect/Layer"
import type { AppConfigService } from "../../../services/AppConfig.js"
import type { StoreError } from "../../../services/RunContext.js"
import { besideThreads } from "../StoreBackend.js"
import type { StoreItems } from "./StoreItems.js"

/** The items' store of a configuration. */
export const layer = (app: AppConfigService["Type"]): Layer.Layer<StoreItems, StoreError> =>
  besideThreads(app, {
    sqlite: (file) => import("./SqliteStoreItems.js").then((SqliteStoreItems) => SqliteStoreItems.layer(file)),
    postgres: (url) => import("./PgStoreItems.js").then((PgStoreItems) => PgStoreItems.layer(url))
  })
