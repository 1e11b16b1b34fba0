/**
 * What gateway processes sharing a database share of the per-user quotas on threads and files (`Quotas`:
 * `gateway.quotas.max_threads_per_user`, `max_user_bytes`), so that a burst of one user's new threads or uploads
 * across processes is admitted as in one process: a thread's count and its making go together under a lock of the
 * user's held in the database (`threads`), and the files a request is to write are reserved there from their check
 * until they are written or failed, however long that takes (`files`: the request's scope), each process's check
 * counting the others' reservations. In one process
 * (`inProcess`: SQLite or the in-memory store) there is nothing to share: `Quotas`' own locks of the user's order
 * them. On PostgreSQL: `store/PgSharedQuotas`; a configuration's: `store/QuotaWiring`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { StoreError } from "../../services/RunContext.js"

/** The service. */
export interface Service {
  /**
   * Runs `make` (a check of the user's thread count, then the thread made) while no other process runs one of the
   * user's: the count it reads includes every thread made before it, whichever process made it.
   */
  readonly threads: <A, E, R>(userId: string, make: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreError, R>
  /**
   * Runs `check` with the bytes the user's other requests reserved and have not written yet (in other processes;
   * read before `check` measures the files, so a request that wrote meanwhile is counted at least once), one check
   * of the user's at a time across processes; passed, reserves `adding` bytes until the scope closes (the files
   * written or failed), kept live meanwhile however long the request writes.
   */
  readonly files: <E>(
    userId: string,
    adding: number,
    check: (reserved: number) => Effect.Effect<void, E>
  ) => Effect.Effect<void, E | StoreError, Scope.Scope>
}

/** The port. */
export class SharedQuotas extends Context.Tag("antler/gateway/SharedQuotas")<SharedQuotas, Service>() {}

/** One process's: nothing shared (its own locks of the user's order its checks: `Quotas`). */
export const inProcess: Service = {
  threads: (_userId, make) => make,
  files: (_userId, _adding, check) => check(0)
}
