/**
 * What a PostgreSQL thread store tells of its threads without loading them: their summaries (title, times, last
 * run, lease), listed newest first, all or one owner's, how many an owner has and what they keep in bytes.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ThreadStore } from "../../services/ThreadStore.js"
import type * as PgAccess from "./PgAccess.js"
import { countOf, decodeBytesRows, decodeRows, decodeThreadRows, threadSummary } from "./Rows.js"

const LAST_CHECKPOINT_AT =
  `(SELECT c.created_at FROM antler_checkpoints c WHERE c.thread_id = t.thread_id ORDER BY c.seq DESC LIMIT 1)`
const LAST_RUN = (column: string) =>
  `(SELECT r.${column} FROM antler_runs r WHERE r.thread_id = t.thread_id
    ORDER BY r.started_at DESC, r.ord DESC LIMIT 1)`
const THREAD_COLUMNS = `t.thread_id, t.title, t.created_at, COALESCE(${LAST_CHECKPOINT_AT}, t.updated_at) AS updated_at,
  (SELECT COUNT(*) FROM antler_checkpoints c WHERE c.thread_id = t.thread_id) AS checkpoints, t.owner, t.metadata,
  ${LAST_RUN("run_id")} AS run_id, ${LAST_RUN("status")} AS status, ${LAST_RUN("stop_reason")} AS stop_reason,
  l.run_id AS lease_run_id, l.owner AS lease_owner, l.expires_at AS lease_expires_at`
const THREADS_FROM = `antler_threads t LEFT JOIN antler_leases l ON l.thread_id = t.thread_id`

/** The summaries of a store's threads. */
export type Summaries = Pick<
  ThreadStore["Type"],
  "list" | "listOwned" | "countOwned" | "bytesOf" | "bytesOwned" | "info"
>

/** The summaries of the threads of a store through `access`. */
export const make = ({ q, run }: PgAccess.Access): Summaries => {
  const summaries = (rows: ReadonlyArray<unknown>, operation: "list" | "listOwned") =>
    Effect.gen(function*() {
      const millis = yield* Clock.currentTimeMillis
      return (yield* decodeRows(decodeThreadRows, rows, operation, "The thread table")).map((row) =>
        threadSummary(row, millis)
      )
    })

  const list: ThreadStore["Type"]["list"] = Effect.flatMap(
    run(
      q(`SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} ORDER BY updated_at DESC, t.ord DESC`),
      "list",
      "Cannot list threads"
    ),
    (rows) => summaries(rows, "list")
  )

  const listOwned: ThreadStore["Type"]["listOwned"] = (owner, unowned) =>
    Effect.flatMap(
      run(
        q(
          `SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} WHERE t.owner = $1 OR ($2 AND t.owner IS NULL)
            ORDER BY updated_at DESC, t.ord DESC`,
          [owner, unowned]
        ),
        "listOwned",
        `Cannot list the threads of ${owner}`
      ),
      (rows) => summaries(rows, "listOwned")
    )

  const countOwned: ThreadStore["Type"]["countOwned"] = (owner, unowned) =>
    Effect.flatMap(
      run(
        q(`SELECT COUNT(*) AS n FROM antler_threads WHERE owner = $1 OR ($2 AND owner IS NULL)`, [owner, unowned]),
        "countOwned",
        `Cannot count the threads of ${owner}`
      ),
      (rows) => countOf(rows, "countOwned")
    )

  const bytesOf: ThreadStore["Type"]["bytesOf"] = (threadId) =>
    Effect.flatMap(
      run(
        q(
          `SELECT t.bytes, t.owner, COALESCE(o.bytes, 0) AS owned FROM antler_threads t
            LEFT JOIN antler_owner_bytes o ON o.owner = COALESCE(t.owner, '') WHERE t.thread_id = $1`,
          [threadId]
        ),
        "bytesOf",
        `Cannot read thread "${threadId}"`
      ),
      (rows) => Effect.map(decodeRows(decodeBytesRows, rows, "bytesOf", "The thread table"), (found) => found[0])
    )

  const bytesOwned: ThreadStore["Type"]["bytesOwned"] = (owner, unowned) =>
    Effect.flatMap(
      run(
        q(
          `SELECT COALESCE(SUM(bytes), 0) AS n FROM antler_owner_bytes WHERE owner = $1 OR ($2 AND owner = '')`,
          [owner, unowned]
        ),
        "bytesOwned",
        `Cannot count the bytes of the threads of ${owner}`
      ),
      (rows) => countOf(rows, "bytesOwned")
    )

  const info: ThreadStore["Type"]["info"] = (threadId) =>
    Effect.gen(function*() {
      const rows = yield* run(
        q(`SELECT ${THREAD_COLUMNS} FROM ${THREADS_FROM} WHERE t.thread_id = $1`, [threadId]),
        "info",
        `Cannot read thread "${threadId}"`
      )
      const threads = yield* decodeRows(decodeThreadRows, rows, "info", "The thread table")
      const millis = yield* Clock.currentTimeMillis
      return threads.length === 0 ? Option.none() : Option.some(threadSummary(threads[0]!, millis))
    })

  return { list, listOwned, countOwned, bytesOf, bytesOwned, info }
}
