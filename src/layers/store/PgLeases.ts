/**
 * Thread leases in the PostgreSQL store: one active run per thread, across processes, through one `antler_leases`
 * row per thread (the run that holds it, its owner, when it expires), taken under a row lock.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { StoreError } from "../../services/RunContext.js"
import type { LeaseHolder, ThreadStore } from "../../services/ThreadStore.js"
import { leaseBlocks, leaseOwner } from "../../services/ThreadStore.js"
import type * as PgAccess from "./PgAccess.js"
import { decodeRows } from "./Rows.js"

// the driver gives a BIGINT as text
const LeaseRow = Schema.Struct({
  run_id: Schema.String,
  owner: Schema.String,
  expires_at: Schema.Union(Schema.Number, Schema.NumberFromString)
})
const decodeLeaseRows = Schema.decodeUnknownEither(Schema.Array(LeaseRow))

/** The leases of a store. */
export interface Leases {
  readonly acquireLease: ThreadStore["Type"]["acquireLease"]
  readonly releaseLease: ThreadStore["Type"]["releaseLease"]
  /**
   * The holder of a thread's lease row, if any (expired or not), read inside a transaction the caller holds, the row
   * locked until it commits: `SHARE` (a write fenced by the lease) or `UPDATE` (a change of the lease or the thread).
   */
  readonly holder: (
    threadId: string,
    lock: "SHARE" | "UPDATE",
    operation: string
  ) => Effect.Effect<LeaseHolder | undefined, SqlError | StoreError>
  /** This process, as the owner of the leases it takes (`leaseOwner()`). */
  readonly owner: string
}

/** The leases of a store through `access`, this process as their owner. */
export const make = ({ q, run, transaction }: PgAccess.Access): Leases => {
  const owner = leaseOwner()

  const holder: Leases["holder"] = (threadId, lock, operation) =>
    Effect.flatMap(
      q(`SELECT run_id, owner, expires_at FROM antler_leases WHERE thread_id = $1 FOR ${lock}`, [threadId]),
      (rows) => Effect.map(decodeRows(decodeLeaseRows, rows, operation, "The lease table"), ([first]) => first)
    )

  const acquireLease: ThreadStore["Type"]["acquireLease"] = (request) =>
    transaction(
      Effect.gen(function*() {
        const expires = request.now + request.ttlMs
        const inserted = yield* q(
          `INSERT INTO antler_leases (thread_id, run_id, owner, expires_at) VALUES ($1, $2, $3, $4)
            ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id`,
          [request.threadId, request.runId, owner, expires]
        )
        if (inserted.length > 0) return undefined
        // the row exists: lock it, then decide
        const current = yield* holder(request.threadId, "UPDATE", "lease")
        if (leaseBlocks(current, request, owner)) return current
        yield* q(`UPDATE antler_leases SET run_id = $2, owner = $3, expires_at = $4 WHERE thread_id = $1`, [
          request.threadId,
          request.runId,
          owner,
          expires
        ])
        return undefined
      }),
      "lease",
      `Cannot take the lease of thread "${request.threadId}"`
    )

  const releaseLease: ThreadStore["Type"]["releaseLease"] = (threadId, runId) =>
    Effect.asVoid(run(
      q(`DELETE FROM antler_leases WHERE thread_id = $1 AND run_id = $2 AND owner = $3`, [threadId, runId, owner]),
      "lease",
      `Cannot release the lease of thread "${threadId}"`
    ))

  return { acquireLease, releaseLease, holder, owner }
}
