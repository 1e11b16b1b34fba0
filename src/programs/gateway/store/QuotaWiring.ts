/**
 * The storage quotas' reservations a configuration chooses (`QuotaReservations`): in the PostgreSQL database of
 * `database.url` when there is one, shared by the processes using it; else in the process (one process: SQLite).
 */
import * as Layer from "effect/Layer"
import type { AppConfigService } from "../../../services/AppConfig.js"
import type { StoreError } from "../../../services/RunContext.js"
import * as QuotaReservations from "../QuotaReservations.js"
import { besideThreads } from "../StoreBackend.js"

/** The reservations of a configuration. */
export const layer = (app: AppConfigService["Type"]): Layer.Layer<QuotaReservations.QuotaReservations, StoreError> =>
  besideThreads(app, {
    sqlite: () => Promise.resolve(Layer.sync(QuotaReservations.QuotaReservations, QuotaReservations.inProcess)),
    postgres: (url) =>
      import("./PgQuotaReservations.js").then((PgQuotaReservations) => PgQuotaReservations.layer(url))
  })
