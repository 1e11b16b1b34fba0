/**
 * The SQLite store's `append`, with group commit. Every append waits for a commit that holds it (a completed
 * step is durable when `append` returns), but appends of concurrent runs that arrive together share one
 * transaction: the first caller leads, lets the others queue up for one scheduler turn, then writes the whole
 * queue. Alone, a step is one auto-committed statement, run at once while the connection is free.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import type { StoreError } from "../../services/RunContext.js"
import type { ThreadStore } from "../../services/ThreadStore.js"
import type * as Redact from "../../state/Redact.js"
import { checkpointOf } from "../store/Codec.js"
import { iso, toStoreError } from "../store/Rows.js"
import type { Access } from "./Access.js"
import { isBusy } from "./Access.js"
import type { Connection } from "./SqliteConnection.js"
import { APPEND_CHECKPOINT, ENSURE_THREAD, SET_TITLE } from "./Statements.js"

interface Pending {
  readonly threadId: string
  readonly runId: string
  readonly text: string
  readonly title: string | null | undefined
  /** How its write ended, once it did. */
  exit: Exit.Exit<void, StoreError> | undefined
  /**
   * Resumes a follower waiting for the leader's commit (the leader reads `exit` itself). A plain callback:
   * making a `Deferred` copies Effect's whole prototype into a new object, about 5 µs for each step of a
   * busy store.
   */
  resume: ((exit: Exit.Exit<void, StoreError>) => void) | undefined
}

const whatOf = (threadId: string) => `Cannot save a checkpoint of thread "${threadId}"`

/**
 * The `append` of a store on `conn`. `alone` says whether at most one run of this process holds a lease through
 * the store: then no other append can arrive to share a commit, and waiting a scheduler turn for one would be
 * wasted.
 */
export const make = (
  conn: Connection,
  access: Access,
  redactor: Redact.Redactor,
  alone: () => boolean
): ThreadStore["Type"]["append"] => {
  const { exclusive, lock, transaction } = access
  let queue: Array<Pending> = []
  let leading = false

  /** One checkpoint, inside a transaction the caller holds: creates the thread and sets its title as needed. */
  const writeOne = (p: Pending, now: string) => {
    const insert = conn.executeRaw(APPEND_CHECKPOINT, [p.runId, now, p.text, p.threadId])
    const general = conn.executeRaw(ENSURE_THREAD, [p.threadId, now, now]).pipe(
      Effect.zipRight(insert),
      Effect.zipRight(p.title === undefined ? Effect.void : conn.executeRaw(SET_TITLE, [p.title, p.threadId]))
    )
    if (p.title !== undefined) return Effect.asVoid(general)
    return Effect.flatMap(insert, (result) =>
      (result as { readonly changes?: number }).changes === 1 ? Effect.void : Effect.asVoid(general))
  }

  /** A single checkpoint: the usual step is one statement (SQLite takes the write lock before reading). */
  const writeAlone = (p: Pending, now: string) =>
    p.title === undefined
      ? Effect.flatMap(
        exclusive(
          conn.executeRaw(APPEND_CHECKPOINT, [p.runId, now, p.text, p.threadId]),
          "append",
          whatOf(p.threadId)
        ),
        (result) =>
          (result as { readonly changes?: number }).changes === 1
            ? Effect.void
            : transaction(writeOne(p, now), "append", whatOf(p.threadId))
      )
      : transaction(writeOne(p, now), "append", whatOf(p.threadId))

  const settle = (p: Pending, exit: Exit.Exit<void, StoreError>) => {
    p.exit = exit
    const resume = p.resume
    p.resume = undefined
    if (resume !== undefined) resume(exit)
  }

  /** Writes a batch and settles each caller; a failed batch is retried one by one, so one bad step fails alone. */
  const writeBatch = (batch: ReadonlyArray<Pending>) =>
    Effect.clockWith((clock) => {
      const now = iso(clock.unsafeCurrentTimeMillis())
      const one = (p: Pending) => Effect.map(Effect.exit(writeAlone(p, now)), (exit) => settle(p, exit))
      if (batch.length === 1) return one(batch[0]!)
      const oneByOne = Effect.forEach(batch, one, { discard: true })
      const all = Effect.forEach(batch, (p) => writeOne(p, now), { discard: true })
      return Effect.flatMap(
        Effect.exit(transaction(all, "append", whatOf(batch[0]!.threadId))),
        (exit) => Exit.isSuccess(exit) ? Effect.sync(() => batch.forEach((p) => settle(p, exit))) : oneByOne
      )
    })

  /**
   * A follower's wait: until the leader settles it (at once when it already has). Interrupted, it stops
   * waiting; its step is written all the same, as it was queued.
   */
  const follow = (p: Pending) =>
    Effect.async<void, StoreError>((resume) => {
      if (p.exit !== undefined) return resume(p.exit)
      p.resume = resume
      return Effect.sync(() => {
        p.resume = undefined
      })
    })

  const lead = (own: Pending) =>
    Effect.uninterruptible(
      Effect.yieldNow().pipe(
        Effect.zipRight(Effect.suspend(() => {
          const batch = queue
          queue = []
          leading = false
          return writeBatch(batch)
        }))
      )
    ).pipe(Effect.zipRight(Effect.suspend(() => own.exit!)))

  /**
   * The usual step of a run alone on the store, written now: one auto-committed statement, run synchronously
   * while the connection is free (no effect step, no scheduler turn). `undefined` when it cannot be written
   * this way: the connection is busy, another process holds the file's write lock, or the thread row is
   * missing; the caller then takes the general path, which handles each of these.
   */
  const writeNow = (p: Pending, now: string): Exit.Exit<void, StoreError> | undefined =>
    lock.ifFree(() => {
      const written = conn.writeNow(APPEND_CHECKPOINT, [p.runId, now, p.text, p.threadId])
      if (Either.isRight(written)) return written.right.changes === 1 ? Exit.void : undefined
      return isBusy(written.left) ? undefined : Exit.fail(toStoreError("append", whatOf(p.threadId))(written.left))
    })

  return (threadId, runId, given) =>
    Effect.clockWith((clock) => {
      const checkpoint = checkpointOf(threadId, given, redactor)
      if (Either.isLeft(checkpoint)) return Effect.fail(checkpoint.left)
      const { text, title } = checkpoint.right
      const pending: Pending = { threadId, runId, text, title, exit: undefined, resume: undefined }
      if (!leading && title === undefined && alone()) {
        const exit = writeNow(pending, iso(clock.unsafeCurrentTimeMillis()))
        if (exit !== undefined) return exit
      }
      queue.push(pending)
      if (leading) return follow(pending)
      leading = true
      return lead(pending)
    })
}
