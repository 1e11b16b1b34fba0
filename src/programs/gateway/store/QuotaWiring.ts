/**
 * The storage quotas' reservations a configuration chooses (`QuotaReservations`): in the PostgreSQL database of
 * `database.url` when there is one, shared by the processes using it; else the process's own (`local`, one process:
 * SQLite; the one its gateway's store drains as it writes: `StorageQuota.bounded`). Opened after the thread store (its
 * triggers are on the store's tables). And what those processes share of the per-user quotas on threads and files
 * (`sharedLayer`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { AppConfigService } from "../../../services/AppConfig.js"
import type { StoreError } from "../../../services/RunContext.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import * as QuotaReservations from "../QuotaReservations.js"
import * as SharedQuotas from "../SharedQuotas.js"
import { besideThreads } from "../StoreBackend.js"

/** The reservations of a configuration. */
export const layer = (
  app: AppConfigService["Type"],
  local: QuotaReservations.Service
): Layer.Layer<QuotaReservations.QuotaReservations, StoreError, ThreadStore> =>
  Layer.unwrapEffect(Effect.as(
    ThreadStore,
    besideThreads(app, {
      sqlite: () => Promise.resolve(Layer.succeed(QuotaReservations.QuotaReservations, local)),
      postgres: (url) =>
        import("./PgQuotaReservations.js").then((PgQuotaReservations) => PgQuotaReservations.layer(url))
    })
  ))

/**
 * What the processes of the configuration's PostgreSQL database share of `max_threads_per_user` and `max_user_bytes`
 * (`SharedQuotas`); one process's (nothing shared) on SQLite.
 */
export const sharedLayer = (app: AppConfigService["Type"]): Layer.Layer<SharedQuotas.SharedQuotas, StoreError> =>
  besideThreads(app, {
    sqlite: () => Promise.resolve(Layer.succeed(SharedQuotas.SharedQuotas, SharedQuotas.inProcess)),
    postgres: (url) => import("./PgSharedQuotas.js").then((PgSharedQuotas) => PgSharedQuotas.layer(url))
  })
