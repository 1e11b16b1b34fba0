/**
 * The SQLite store's `append`, with group commit. Every append waits for a commit that holds it (a completed
 * step is durable when `append` returns), but appends of concurrent runs that arrive together share one
 * transaction: the first caller leads, lets the others queue up for one scheduler turn, then writes the whole
 * queue. Alone, a step is one auto-committed statement, run at once while the connection is free.
 */
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import { StoreError } from "../../services/RunContext.js"
import type { AppendOptions, ThreadBytes } from "../../services/ThreadStore.js"
import { fencedMessage, LEASE_FENCED, leaseRunOf } from "../../services/ThreadStore.js"
import type * as Redact from "../../state/Redact.js"
import type { StateUpdate } from "../../state/ThreadState.js"
import { checkpointOf, formatParseError } from "../store/Codec.js"
import { decodeBytesRows, iso, toStoreError } from "../store/Rows.js"
import type { Access } from "./Access.js"
import { isBusy } from "./Access.js"
import type { Leases } from "./Leases.js"
import type { Connection } from "./SqliteConnection.js"
import {
  APPEND_CHECKPOINT,
  APPEND_CHECKPOINT_LEASED,
  APPEND_CHECKPOINT_MEASURED,
  APPEND_CHECKPOINT_MEASURED_LEASED,
  ENSURE_THREAD,
  SET_TITLE
} from "./Statements.js"

interface Pending {
  readonly threadId: string
  readonly runId: string
  readonly text: string
  readonly title: string | null | undefined
  /** Measured (`appendMeasured`): the owner whose threads count with those made without one. */
  readonly unownedOf: string | undefined
  /** Fenced by the run's lease (`AppendOptions.leased`): the lease's owner, this process. */
  readonly leasedBy: string | undefined
  /** The run whose lease fences it (`leaseRunOf`: its own, or its writer's). */
  readonly leasedRun: string
  /** How its write ended, once it did (what the thread keeps after it, when measured). */
  exit: Exit.Exit<Measured, StoreError> | undefined
  /**
   * Resumes a follower waiting for the leader's commit (the leader reads `exit` itself). A plain callback:
   * making a `Deferred` copies Effect's whole prototype into a new object, about 5 µs for each step of a
   * busy store.
   */
  resume: ((exit: Exit.Exit<Measured, StoreError>) => void) | undefined
}

/** What a measured checkpoint's write answered (`undefined`: not measured). */
type Measured = ThreadBytes | undefined

const whatOf = (threadId: string) => `Cannot save a checkpoint of thread "${threadId}"`

/** The statement of a checkpoint and its parameters. */
const insertOf = (p: Pending, now: string): readonly [string, ReadonlyArray<unknown>] => {
  if (p.leasedBy === undefined) {
    return p.unownedOf === undefined
      ? [APPEND_CHECKPOINT, [p.runId, now, p.text, p.threadId]]
      : [APPEND_CHECKPOINT_MEASURED, [p.runId, now, p.text, p.threadId, p.unownedOf, p.unownedOf]]
  }
  const lease = [p.leasedRun, p.leasedBy]
  return p.unownedOf === undefined
    ? [APPEND_CHECKPOINT_LEASED, [p.runId, now, p.text, p.threadId, ...lease]]
    : [APPEND_CHECKPOINT_MEASURED_LEASED, [p.runId, now, p.text, p.threadId, ...lease, p.unownedOf, p.unownedOf]]
}

/**
 * What a checkpoint's INSERT answered: whether it was written (no thread row: nothing written), and what the thread
 * keeps after it when measured (its rows, `RETURNING`), or the error of an unreadable row.
 */
interface Inserted {
  readonly written: boolean
  readonly measured: Measured
}

const insertedOf = (p: Pending, result: unknown): Either.Either<Inserted, StoreError> => {
  if (p.unownedOf === undefined) {
    return Either.right({ written: (result as { readonly changes?: number }).changes === 1, measured: undefined })
  }
  return Either.match(decodeBytesRows(result), {
    onLeft: (error) =>
      Either.left(new StoreError({
        operation: "append",
        message: `The thread table has an unreadable row: ${formatParseError(error)}`
      })),
    onRight: (rows) => Either.right({ written: rows.length === 1, measured: rows[0] })
  })
}

/**
 * The `append` of a store on `conn` (measured, as `appendMeasured`, when given `unownedOf`; fenced by the run's lease
 * when `options` ask). `leases.alone` says whether at most one run of this process holds a lease through the store:
 * then no other append can arrive to share a commit, and waiting a scheduler turn for one would be wasted.
 */
export const make = (
  conn: Connection,
  access: Access,
  redactor: Redact.Redactor,
  leases: Pick<Leases, "alone" | "owner" | "holder">
): (
  threadId: string,
  runId: string,
  updates: ReadonlyArray<StateUpdate>,
  unownedOf: string | undefined,
  options: AppendOptions | undefined
) => Effect.Effect<Measured, StoreError> => {
  const { exclusive, lock, transaction } = access
  const alone = leases.alone
  let queue: Array<Pending> = []
  let leading = false

  const insert = (p: Pending, now: string) =>
    Effect.flatMap(conn.executeRaw(...insertOf(p, now)), (result) => insertedOf(p, result))

  // a fenced checkpoint not inserted, its thread's row there: its run no longer holds the thread's lease
  const refused = (p: Pending) =>
    Effect.flatMap(leases.holder(p.threadId, "append"), (holder) =>
      Effect.fail(new StoreError({ operation: LEASE_FENCED, message: fencedMessage(p.threadId, p.leasedRun, holder) })))

  /**
   * One checkpoint, inside a transaction the caller holds: creates the thread and sets its title as needed (a fenced
   * one refused, the transaction rolled back, when its run's lease is not its own).
   */
  const writeOne = (p: Pending, now: string): Effect.Effect<Measured, StoreError | SqlError> => {
    const general = conn.executeRaw(ENSURE_THREAD, [p.threadId, now, now]).pipe(
      Effect.zipRight(insert(p, now)),
      Effect.tap((inserted) => !inserted.written && p.leasedBy !== undefined ? refused(p) : Effect.void),
      Effect.tap(() => p.title === undefined ? Effect.void : conn.executeRaw(SET_TITLE, [p.title, p.threadId])),
      Effect.map((inserted) => inserted.measured)
    )
    if (p.title !== undefined) return general
    return Effect.flatMap(insert(p, now), (inserted) => inserted.written ? Effect.succeed(inserted.measured) : general)
  }

  /** A single checkpoint: the usual step is one statement (SQLite takes the write lock before reading). */
  const writeAlone = (p: Pending, now: string): Effect.Effect<Measured, StoreError> =>
    p.title === undefined
      ? Effect.flatMap(
        exclusive(insert(p, now), "append", whatOf(p.threadId)),
        (inserted) =>
          inserted.written
            ? Effect.succeed(inserted.measured)
            : transaction(writeOne(p, now), "append", whatOf(p.threadId))
      )
      : transaction(writeOne(p, now), "append", whatOf(p.threadId))

  const settle = (p: Pending, exit: Exit.Exit<Measured, StoreError>) => {
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
      const all = Effect.forEach(batch, (p) => writeOne(p, now))
      return Effect.flatMap(
        Effect.exit(transaction(all, "append", whatOf(batch[0]!.threadId))),
        (exit) =>
          Exit.isSuccess(exit)
            ? Effect.sync(() => batch.forEach((p, i) => settle(p, Exit.succeed(exit.value[i]))))
            : oneByOne
      )
    })

  /**
   * A follower's wait: until the leader settles it (at once when it already has). Interrupted, it stops
   * waiting; its step is written all the same, as it was queued.
   */
  const follow = (p: Pending) =>
    Effect.async<Measured, StoreError>((resume) => {
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
  const writeNow = (p: Pending, now: string): Exit.Exit<Measured, StoreError> | undefined =>
    lock.ifFree(() => {
      const [sql, params] = insertOf(p, now)
      const written: Either.Either<unknown, SqlError> = p.unownedOf === undefined
        ? conn.writeNow(sql, params)
        : conn.writeRowsNow(sql, params)
      if (Either.isLeft(written)) {
        return isBusy(written.left) ? undefined : Exit.fail(toStoreError("append", whatOf(p.threadId))(written.left))
      }
      return Either.match(insertedOf(p, written.right), {
        onLeft: Exit.fail,
        onRight: (inserted) => inserted.written ? Exit.succeed(inserted.measured) : undefined
      })
    })

  return (threadId, runId, given, unownedOf, options) =>
    Effect.clockWith((clock) => {
      const checkpoint = checkpointOf(threadId, given, redactor)
      if (Either.isLeft(checkpoint)) return Effect.fail(checkpoint.left)
      const { text, title } = checkpoint.right
      const leasedRun = leaseRunOf(runId, options)
      const leasedBy = leasedRun === undefined ? undefined : leases.owner
      const pending: Pending = {
        threadId,
        runId,
        text,
        title,
        unownedOf,
        leasedBy,
        leasedRun: leasedRun ?? runId,
        exit: undefined,
        resume: undefined
      }
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
