/**
 * Thread leases in the SQLite store: one active run per thread, across processes, through one `leases` row per
 * thread (the run that holds it, its owner, when it expires), taken and checked in one write transaction. The
 * store also counts the leases its own process holds: while a single run does, its appends never wait to share
 * a commit (`GroupCommit`).
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { StoreError } from "../../services/RunContext.js"
import type { LeaseHolder, ThreadStore } from "../../services/ThreadStore.js"
import { leaseBlocks, leaseOwner } from "../../services/ThreadStore.js"
import { decodeRows } from "../store/Rows.js"
import type { Access } from "./Access.js"
import type { Connection } from "./SqliteConnection.js"
import { DELETE_LEASE, SELECT_LEASE, UPSERT_LEASE } from "./Statements.js"

const LeaseRow = Schema.Struct({ run_id: Schema.String, owner: Schema.String, expires_at: Schema.Number })
const decodeLeaseRows = Schema.decodeUnknownEither(Schema.Array(LeaseRow))

/** The leases of a store. */
export interface Leases {
  readonly acquireLease: ThreadStore["Type"]["acquireLease"]
  readonly releaseLease: ThreadStore["Type"]["releaseLease"]
  /** The holder of a thread's lease row, if any (expired or not), read inside a transaction the caller holds. */
  readonly holder: (
    threadId: string,
    operation: string
  ) => Effect.Effect<LeaseHolder | undefined, SqlError | StoreError>
  /** Whether at most one run of this process holds a lease through this store. */
  readonly alone: () => boolean
  /** This process, as the owner of the leases it takes (`leaseOwner()`). */
  readonly owner: string
}

/** The leases of a store on `conn`, this process as their owner. */
export const make = (conn: Connection, access: Access): Leases => {
  const { exclusive, transaction } = access
  // The runs of this process that hold a lease through this store (by thread and run).
  const leased = new Set<string>()
  const leaseKey = (threadId: string, runId: string) => `${threadId}\u0000${runId}`
  const owner = leaseOwner()

  const holder = (threadId: string, operation: string) =>
    Effect.flatMap(
      conn.execute(SELECT_LEASE, [threadId], undefined),
      (rows) => Effect.map(decodeRows(decodeLeaseRows, rows, operation, "The lease table"), ([first]) => first)
    )

  const acquireLease: ThreadStore["Type"]["acquireLease"] = (request) =>
    transaction(
      Effect.gen(function*() {
        const current = yield* holder(request.threadId, "lease")
        if (leaseBlocks(current, request, owner)) return current
        yield* conn.executeRaw(UPSERT_LEASE, [request.threadId, request.runId, owner, request.now + request.ttlMs])
        leased.add(leaseKey(request.threadId, request.runId))
        return undefined
      }),
      "lease",
      `Cannot take the lease of thread "${request.threadId}"`
    )

  const releaseLease: ThreadStore["Type"]["releaseLease"] = (threadId, runId) =>
    Effect.asVoid(
      exclusive(
        conn.executeRaw(DELETE_LEASE, [threadId, runId, owner]),
        "lease",
        `Cannot release the lease of thread "${threadId}"`
      )
    ).pipe(Effect.ensuring(Effect.sync(() => leased.delete(leaseKey(threadId, runId)))))

  return { acquireLease, releaseLease, holder, alone: () => leased.size <= 1, owner }
}
