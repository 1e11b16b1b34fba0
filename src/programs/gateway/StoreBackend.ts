/**
 * Where a gateway keeps what it stores beside its threads (scheduled tasks, LangGraph's store items): in the
 * PostgreSQL database of `database.url` when there is one, else in the threads' SQLite file under the data
 * directory. Each backend's module is loaded only when chosen (`@effect/sql-pg` is an optional peer).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import * as SqliteThreadStore from "../../layers/SqliteThreadStore.js"
import type { AppConfigService } from "../../services/AppConfig.js"
import { StoreError } from "../../services/RunContext.js"

/** The layers of one store on each backend, each loaded when asked for. */
export interface Backends<S> {
  /** The store in the SQLite file `file`. */
  readonly sqlite: (file: string) => Promise<Layer.Layer<S, StoreError>>
  /** The store in the PostgreSQL database at `url` (its module needs `@effect/sql-pg`). */
  readonly postgres: (url: Redacted.Redacted<string> | string) => Promise<Layer.Layer<S, StoreError>>
}

/** The store of `backends` that the configuration chooses: beside its threads. */
export const besideThreads = <S>(app: AppConfigService["Type"], backends: Backends<S>): Layer.Layer<S, StoreError> => {
  const url = app.config.database.url ?? app.config.database.postgres_url ?? undefined
  if (url === undefined) {
    return Layer.unwrapEffect(Effect.promise(() => backends.sqlite(Path.join(app.home, SqliteThreadStore.FILENAME))))
  }
  return Layer.unwrapEffect(Effect.tryPromise({
    try: () => backends.postgres(url),
    catch: (cause) =>
      new StoreError({ operation: "open", message: `@effect/sql-pg cannot be loaded: ${String(cause)}`, cause })
  }))
}
