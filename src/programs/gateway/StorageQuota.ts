/**
 * The quotas on what threads keep in the database (`gateway.quotas.max_thread_bytes`, one thread's checkpoints, run
 * records and run events; `max_thread_bytes_per_user`, all of a user's): a thread's state is folded from its
 * checkpoints at each run and `GET .../state`, so without them a thread run long enough with large messages, and a
 * user's threads together, would be as large as their user makes them. Read from the byte counters the store keeps
 * with every write (`ThreadStore.bytesOf`, `bytesOwned`): a check is one indexed read, never a scan.
 *
 * Three places: before a request that adds to a thread (`admit`: a run, a state update, a copy), refused with a
 * `QuotaExceeded` (a 403 naming the quota, the use and what would be added) before anything is kept, a run against
 * what the runs accepted before it are to add (`Reservations`); after every checkpoint of the gateway's store
 * (`bounded`), so that a run that grows its thread past a quota mid-run ends there, an error saying so, its last step
 * kept whole (its tool calls then answered as a stopped run's are); and before a run's recorded events are kept
 * (`fits`: past a quota, only its end and receipt are, `RunExecution`). A thread or a user may so pass a quota, for
 * each run going at once, by its last step and a few KB (its record's end, its end and receipt events); processes
 * sharing PostgreSQL check the same counters and, for runs, each other's reservations (`QuotaReservations`).
 */
import * as Effect from "effect/Effect"
import type { QuotasConfig } from "../../services/config/Server.js"
import { StoreError } from "../../services/RunContext.js"
import type { ThreadBytes, ThreadStore } from "../../services/ThreadStore.js"
import { DEFAULT_USER } from "./Auth.js"
import * as InputBounds from "./InputBounds.js"
import { QuotaExceeded } from "./Quotas.js"

/** The limits, in bytes (0: no limit). */
export interface Limits {
  /** One thread (`max_thread_bytes`). */
  readonly thread: number
  /** All of a user's threads (`max_thread_bytes_per_user`). */
  readonly user: number
}

/** The limits of `gateway.quotas`. */
export const fromConfig = (quotas: QuotasConfig): Limits => ({
  thread: quotas.max_thread_bytes,
  user: quotas.max_thread_bytes_per_user
})

/** Whether there is a limit at all. */
export const limited = (limits: Limits) => limits.thread > 0 || limits.user > 0

/**
 * How many times a run's first checkpoint keeps its input messages: as sent, again as the input middlewares rewrite
 * them (a name, the run's id and time), and again under the id the dynamic context moves the user's message to
 * (`StorageQuota25FirstStep.test.ts` measures 3.03 for a message of 40 KB, the rest its framing).
 */
export const FIRST_STEP_COPIES = 3

/** What a run's first checkpoint keeps besides its messages' copies, at most: the thread's paths, a reminder. */
export const FIRST_STEP_FRAMING = 4 * 1024

/**
 * What the first checkpoint adds to each input message, at most, besides its copies: the id a message sent without
 * one is given (`"id":"<uuid>",`, 42 bytes) and its type (`"type":"human",`, 15), so that an input of many small
 * messages is covered too (`{"content":""}`, 15 bytes sent with its comma, is kept as 74, 29 over three copies:
 * `StorageQuota26FirstStepMessages.test.ts`, on SQLite and PostgreSQL alike; past the framing at about 100).
 */
export const FIRST_STEP_PER_MESSAGE = 64

/**
 * What a run whose input messages are `messages` keeps with its first step, at most, in bytes: what its admission
 * reserves for them (`QuotaReservations`), so that a run admitted near a limit does not pass it with its first step.
 */
export const firstStepBytes = (messages: unknown): number =>
  FIRST_STEP_COPIES * InputBounds.jsonBytes(messages) +
  FIRST_STEP_PER_MESSAGE * (Array.isArray(messages) ? messages.length : 1) +
  FIRST_STEP_FRAMING

/** What the threads of `userId` keep (the local user's include those made without an owner: the CLI's). */
const ownedBy = (store: ThreadStore["Type"], userId: string) => store.bytesOwned(userId, userId === DEFAULT_USER)

/** What runs accepted and not yet ended are to add, in bytes (see `Reservations`). */
export interface Reserved {
  /** To the thread. */
  readonly thread: number
  /** To the user's threads. */
  readonly user: number
}

const NONE: Reserved = { thread: 0, user: 0 }

/** What a thread and its user keep, as an admission reads them (`thread` undefined: no such thread, or unchecked). */
export interface Counted {
  readonly thread: number | undefined
  readonly user: number
}

/**
 * The `QuotaExceeded` of the first limit that adding `adding` bytes to what is kept (`counted`) and reserved
 * (`reserved`) would pass (its `used` what is kept plus what is reserved), or undefined when both stay within.
 */
export const exceeded = (
  limits: Limits,
  userId: string,
  counted: Counted,
  reserved: Reserved,
  adding: number
): QuotaExceeded | undefined => {
  if (limits.thread > 0 && counted.thread !== undefined && counted.thread + reserved.thread + adding > limits.thread) {
    const used = counted.thread + reserved.thread
    return new QuotaExceeded({ reason: "thread_history", user: userId, limit: limits.thread, used, adding })
  }
  const used = counted.user + reserved.user
  if (limits.user > 0 && used + adding > limits.user) {
    return new QuotaExceeded({ reason: "user_history", user: userId, limit: limits.user, used, adding })
  }
  return undefined
}

/**
 * Succeeds when adding `adding` bytes to the thread `threadId` of `userId` (as stored; undefined for a thread to be
 * made), besides what runs already accepted are to add (`reserved`), keeps both within their limits; else fails with
 * the `QuotaExceeded` of the first limit it would pass (`exceeded`).
 */
export const admit = (
  store: ThreadStore["Type"],
  limits: Limits,
  userId: string,
  threadId: string | undefined,
  adding: number,
  reserved: Reserved = NONE
): Effect.Effect<void, QuotaExceeded | StoreError> =>
  Effect.gen(function*() {
    if (!limited(limits)) return
    const found = threadId === undefined || limits.thread === 0 ? undefined : yield* store.bytesOf(threadId)
    const thread = found?.bytes
    // (the thread first: the user's counter is read only when the thread is within its limit)
    const over = exceeded({ ...limits, user: 0 }, userId, { thread, user: 0 }, reserved, adding)
    if (over !== undefined) return yield* over
    if (limits.user === 0) return
    const past = exceeded(limits, userId, { thread, user: yield* ownedBy(store, userId) }, reserved, adding)
    if (past !== undefined) return yield* past
  })

/**
 * What the runs and writes a process admitted and that have not ended are to add to their threads, by thread and by
 * user, so that those of one user admitted together are each admitted against what the others will add, not each
 * against the counters as they were before any of them wrote (`admit`'s `reserved`). A process's own
 * (`QuotaReservations.inProcess`; PostgreSQL's are shared: `PgQuotaReservations`). Each is held by its run or writer
 * id; what that run writes to its thread turns reserved bytes into kept ones (`drain`, as the write returns), so
 * that they are not counted twice, reserved and kept, while it goes.
 */
export interface Reservations {
  readonly of: (userId: string, threadId: string) => Reserved
  /** Reserves `bytes` for `holder` (a run's or a writer's id; added to what it holds). */
  readonly reserve: (holder: string, userId: string, threadId: string, bytes: number) => Effect.Effect<void>
  /** Down to at most `bytes` what `holder` holds. */
  readonly lower: (holder: string, bytes: number) => Effect.Effect<void>
  /** Frees what `holder` holds on `threadId` by `bytes` (what its write just kept there). */
  readonly drain: (holder: string, threadId: string, bytes: number) => Effect.Effect<void>
  /** Frees all `holder` holds. */
  readonly free: (holder: string) => Effect.Effect<void>
  /** Whether `holder` holds bytes on `threadId`. */
  readonly holds: (holder: string, threadId: string) => boolean
}

/** Empty reservations. */
export const makeReservations = (): Reservations => {
  const users = new Map<string, number>()
  const threads = new Map<string, number>()
  const holders = new Map<string, { userId: string; threadId: string; bytes: number }>()
  const add = (map: Map<string, number>, key: string, bytes: number) => {
    const next = (map.get(key) ?? 0) + bytes
    if (next === 0) map.delete(key)
    else map.set(key, next)
  }
  /** `holder`'s bytes set to `bytes` (0: forgotten). */
  const set = (holder: string, bytes: number) => {
    const held = holders.get(holder)
    if (held === undefined) return
    const change = Math.max(0, bytes) - held.bytes
    add(users, held.userId, change)
    add(threads, held.threadId, change)
    if (bytes <= 0) holders.delete(holder)
    else holders.set(holder, { ...held, bytes })
  }
  return {
    of: (userId, threadId) => ({ thread: threads.get(threadId) ?? 0, user: users.get(userId) ?? 0 }),
    reserve: (holder, userId, threadId, bytes) =>
      Effect.sync(() => {
        if (bytes <= 0) return
        const held = holders.get(holder)
        if (held === undefined) holders.set(holder, { userId, threadId, bytes: 0 })
        set(holder, (held?.bytes ?? 0) + bytes)
      }),
    lower: (holder, bytes) => Effect.sync(() => set(holder, Math.min(bytes, holders.get(holder)?.bytes ?? 0))),
    drain: (holder, threadId, bytes) =>
      Effect.sync(() => {
        const held = holders.get(holder)
        if (held !== undefined && held.threadId === threadId) set(holder, held.bytes - bytes)
      }),
    free: (holder) => Effect.sync(() => set(holder, 0)),
    holds: (holder, threadId) => holders.get(holder)?.threadId === threadId
  }
}

/**
 * Whether the thread `threadId` of `userId` can keep `adding` bytes more within the limits (a run's recorded events
 * as they grow: `RunExecution`), or may have shrunk (`adding` ≤ 0).
 */
export const fits = (
  store: ThreadStore["Type"],
  limits: Limits,
  userId: string,
  threadId: string,
  adding: number
): Effect.Effect<boolean, StoreError> =>
  adding <= 0 || !limited(limits)
    ? Effect.succeed(true)
    : admit(store, limits, userId, threadId, adding).pipe(
      Effect.as(true),
      Effect.catchTag("QuotaExceeded", () => Effect.succeed(false))
    )

/** The `StoreError` operation of a write stopped by a quota once kept (see `bounded`). */
export const STOPPED = "quota"

/** Whether `error` is a write stopped by a quota once kept (a 403 to a client, not a store's fault). */
export const isStopped = (error: unknown): boolean => error instanceof StoreError && error.operation === STOPPED

/**
 * Fails, as a `StoreError` (operation `STOPPED`) carrying the quota's message, when the thread keeps more than a
 * limit allows, as measured by the write that just kept a checkpoint (`found`: the run it belongs to ends there; a
 * handler answers 403).
 */
const checkAfter = (limits: Limits, found: ThreadBytes): Effect.Effect<void, StoreError> => {
  const user = found.owner ?? DEFAULT_USER
  const exceeded = (reason: "thread_history" | "user_history", limit: number, used: number) =>
    new StoreError({ operation: STOPPED, message: new QuotaExceeded({ reason, user, limit, used, adding: 0 }).message })
  if (limits.thread > 0 && found.bytes > limits.thread) return exceeded("thread_history", limits.thread, found.bytes)
  if (limits.user > 0 && found.owned > limits.user) return exceeded("user_history", limits.user, found.owned)
  return Effect.void
}

/**
 * The store with every checkpoint checked against the limits once written (see the module's doc): the gateway's
 * store, so that its runs, state updates, copies and branches are bounded however they write. The check reads what
 * the checkpoint's own write answered (`appendMeasured`: the local user's threads counted with those made without an
 * owner), and what the run or write that wrote it reserved in this process is drained by it (`drain`:
 * `QuotaReservations`), so a checkpoint costs the statements it cost without quotas: on SQLite one (the INSERT, its
 * `RETURNING` the counters), where it was two (the INSERT, then a SELECT of the counters); on PostgreSQL four in one
 * transaction (the thread ensured and locked, the INSERT, the thread's UPDATE returning the counters), where it was
 * five.
 */
export const bounded = (
  store: ThreadStore["Type"],
  limits: Limits,
  drain: (threadId: string, runId: string, updates: unknown) => Effect.Effect<void> = () => Effect.void
): ThreadStore["Type"] =>
  !limited(limits) ? store : {
    ...store,
    append: (threadId, runId, updates, options) =>
      Effect.flatMap(
        store.appendMeasured(threadId, runId, updates, DEFAULT_USER, options),
        (found) => Effect.zipRight(drain(threadId, runId, updates), checkAfter(limits, found))
      )
  }
