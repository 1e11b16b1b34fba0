/**
 * Per-user quotas (`gateway.quotas`): how many threads a user may have, how many bytes of files their threads
 * may hold on disk and how many bytes of JSON their LangGraph store items may hold (counted in the store, item by
 * item as it is put), so that no user fills the database or the disk for everyone (an open gateway's local user is one
 * user, with the same limits). Use is measured when it is about to grow, never kept in a tally that a delete, a
 * run's tool or another process could make wrong: threads are counted in the store (the user's, by owner), bytes
 * by a walk of the user's thread directories (`{home}/users/{user}/threads`), stopped once past the limit or after
 * `MEASURE_BUDGET_MS` (a use that cannot be measured in time is refused: the quota protects the disk).
 *
 * A check and what it admits run under the user's own lock, one at a time per user in this process, so two
 * concurrent requests cannot both pass a check that only one of them fits. Bytes are admitted (the lock of the
 * user's bytes) around the thread they may make (the lock of the user's threads), always in that order. Processes
 * sharing a PostgreSQL database share them too (`SharedQuotas`): a thread's count and its making hold a lock of the
 * user's in the database, and the bytes a request is to write are reserved there until written, each check counting
 * the other processes' reservations.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { AppConfigService } from "../../services/AppConfig.js"
import type { QuotasConfig } from "../../services/config/Server.js"
import type { StoreError } from "../../services/RunContext.js"
import { threadPaths } from "../../services/Sandbox.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import { formatBytes } from "../Upload.js"
import { DEFAULT_USER } from "./Auth.js"
import * as SharedQuotas from "./SharedQuotas.js"

/** How long measuring a user's files may take before the request is refused, in milliseconds. */
export const MEASURE_BUDGET_MS = 10_000

/**
 * A request that would take a user past a quota: `threads` (`max_threads_per_user`), `bytes` (`max_user_bytes`),
 * `unmeasured` (the user's files could not be measured within `MEASURE_BUDGET_MS`, `used` counted so far), `store`
 * (`max_store_bytes_per_user`), or what threads keep in the database (see `StorageQuota`): `thread_history` (one
 * thread, `max_thread_bytes`) and `user_history` (all the user's, `max_thread_bytes_per_user`).
 */
export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded", {
  reason: Schema.Literal("threads", "bytes", "unmeasured", "store", "thread_history", "user_history"),
  user: Schema.String,
  limit: Schema.Number,
  used: Schema.Number,
  adding: Schema.Number
}) {
  override get message(): string {
    switch (this.reason) {
      case "threads":
        return `Thread quota reached: user ${this.user} has ${this.used} thread${this.used === 1 ? "" : "s"}, ` +
          `the most gateway.quotas.max_threads_per_user allows (${this.limit}); delete a thread to make another.`
      case "bytes":
        return `Storage quota exceeded: the threads of user ${this.user} hold ${formatBytes(this.used)} of files ` +
          `and this would add ${formatBytes(this.adding)}, past gateway.quotas.max_user_bytes ` +
          `(${formatBytes(this.limit)}); delete threads or uploads to free space.`
      case "store":
        return `Store quota exceeded: the store items of user ${this.user} hold ${formatBytes(this.used)} ` +
          `and this would make it ${formatBytes(this.used + this.adding)}, past ` +
          `gateway.quotas.max_store_bytes_per_user (${formatBytes(this.limit)}); delete items to free space.`
      case "thread_history":
        return historyMessage(
          this,
          `this thread of user ${this.user} keeps`,
          "max_thread_bytes",
          "start a new thread (or delete this one)"
        )
      case "user_history":
        return historyMessage(
          this,
          `the threads of user ${this.user} keep`,
          "max_thread_bytes_per_user",
          "delete threads to free space"
        )
      case "unmeasured":
        return `Storage quota: the files of user ${this.user} could not be measured within ` +
          `${MEASURE_BUDGET_MS / 1000} s (more than ${formatBytes(this.used)} counted), so nothing more is stored ` +
          `(gateway.quotas.max_user_bytes, ${formatBytes(this.limit)}); delete threads to free space.`
    }
  }
}

/** Bytes exactly, and for people. */
const exactly = (bytes: number) => (bytes < 1024 ? formatBytes(bytes) : `${bytes} bytes (${formatBytes(bytes)})`)

/**
 * What a `thread_history` or `user_history` refusal says: before a request (`adding` what it would add) or after a
 * write that took the thread past (`adding` 0: a run stops there).
 */
const historyMessage = (error: QuotaExceeded, keep: string, key: string, then: string) =>
  error.adding > 0
    ? `Thread storage quota reached: ${keep} ${exactly(error.used)} in the database and this would add ` +
      `${exactly(error.adding)}, past gateway.quotas.${key} (${exactly(error.limit)}); ${then}.`
    : `Thread storage quota exceeded: ${keep} ${exactly(error.used)} in the database, past gateway.quotas.${key} ` +
      `(${exactly(error.limit)}); writing stopped after this step: ${then}.`

const STAT_BATCH = 32

/** A run's launch error as the scheduler keeps it: a quota's refusal is `refused` (the user's limit, not a fault). */
export const launchError = (error: { readonly message: string }): { message: string; refused: boolean } => ({
  message: error.message,
  refused: error instanceof QuotaExceeded
})

/** What the bytes of a directory were found to be: `complete` false when the walk stopped early. */
export interface Measured {
  readonly bytes: number
  readonly complete: boolean
}

/**
 * The bytes of the regular files under `dir` (symbolic links neither followed nor counted; a missing directory
 * holds 0), the walk stopped once past `stopAbove` (then complete: the use is known to be over) or at `deadline`
 * (`performance.now()` milliseconds; then not complete). Files that vanish meanwhile are not counted.
 */
export const measure = async (dir: string, stopAbove: number, deadline: number): Promise<Measured> => {
  let bytes = 0
  const pending = [dir]
  while (pending.length > 0) {
    if (bytes > stopAbove) return { bytes, complete: true }
    if (performance.now() > deadline) return { bytes, complete: false }
    const current = pending.pop()!
    let entries: Array<Fs.Dirent>
    try {
      entries = await Fs.promises.readdir(current, { withFileTypes: true })
    } catch {
      continue
    }
    for (const entry of entries) if (entry.isDirectory()) pending.push(Path.join(current, entry.name))
    const files = entries.filter((entry) => entry.isFile())
    // (a few at a time: a directory of many files does not queue them all on libuv's threads at once)
    for (let at = 0; at < files.length; at += STAT_BATCH) {
      const sizes = await Promise.all(files.slice(at, at + STAT_BATCH).map((entry) =>
        Fs.promises.lstat(Path.join(current, entry.name)).then((stat) => stat.size, () => 0)
      ))
      for (const size of sizes) bytes += size
    }
  }
  return { bytes, complete: true }
}

/** The quotas' service. */
export interface Service {
  /** The configured limits (0: no limit). */
  readonly limits: QuotasConfig
  /**
   * Runs `make`, which makes one thread of the user's, when the user has fewer threads than
   * `max_threads_per_user`; else fails with `QuotaExceeded` and `make` does not run.
   */
  readonly thread: <A, E, R>(
    userId: string,
    make: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | QuotaExceeded | StoreError, R>
  /**
   * Runs `write`, which adds about `adding` bytes to the user's thread files, when the user's files and those
   * fit `max_user_bytes`; else fails with `QuotaExceeded` and `write` does not run.
   */
  readonly bytes: <A, E, R>(
    userId: string,
    adding: number,
    write: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | QuotaExceeded | StoreError, R>
  /**
   * Runs `write`, which puts an item weighing `size` bytes (`StoreItems.weightOf`) in the user's store items, when
   * what they hold (`usage`: all of them, and the item it replaces) leaves room for it under
   * `max_store_bytes_per_user`; else fails with `QuotaExceeded` and `write` does not run.
   */
  readonly storeBytes: <A, E, R, E2>(
    userId: string,
    size: number,
    usage: Effect.Effect<{ readonly total: number; readonly item: number }, E2>,
    write: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | E2 | QuotaExceeded, R>
  /** The bytes of one of the user's threads' files (`stored`: its stored id), to admit a copy of them. */
  readonly threadBytes: (userId: string, stored: string) => Effect.Effect<number>
}

/** The per-user quotas of the gateway. */
export class Quotas extends Context.Tag("antler/gateway/Quotas")<Quotas, Service>() {}

/** One lock per user (made the first time the user makes something), so a check and what it admits go together. */
const userLocks = () => {
  const locks = new Map<string, Effect.Semaphore>()
  return (userId: string) =>
    Effect.sync(() => {
      const known = locks.get(userId)
      if (known !== undefined) return known
      const lock = Effect.unsafeMakeSemaphore(1)
      locks.set(userId, lock)
      return lock
    })
}

/**
 * The quotas of `limits` over the store (threads) and the data directory `home` (files), shared with the other
 * processes of `shared` (none: one process's).
 */
export const make = (
  limits: QuotasConfig,
  store: ThreadStore["Type"],
  home: string,
  shared: SharedQuotas.Service = SharedQuotas.inProcess
): Effect.Effect<Service> =>
  Effect.sync(() => {
    const threadLock = userLocks()
    const bytesLock = userLocks()
    const storeLock = userLocks()
    const userThreadsDir = (userId: string) => Path.dirname(Path.dirname(threadPaths(home, userId, "t").root))

    // (a thread made without an owner is the CLI's, the local user's)
    const countThreads = (userId: string) => store.countOwned(userId, userId === DEFAULT_USER)

    /** `write` when `limit` is 0 (no limit); else `check`, then `write`, under the user's lock of `locks`. */
    const guarded = <A, E, R, E2>(
      locks: ReturnType<typeof userLocks>,
      userId: string,
      limit: number,
      check: Effect.Effect<void, E2>,
      write: Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | E2, R> =>
      limit === 0
        ? write
        : Effect.flatMap(locks(userId), (lock) => lock.withPermits(1)(Effect.zipRight(check, write)))

    const thread: Service["thread"] = (userId, make) => {
      const limit = limits.max_threads_per_user
      const check = Effect.flatMap(countThreads(userId), (used) =>
        used >= limit
          ? Effect.fail(new QuotaExceeded({ reason: "threads", user: userId, limit, used, adding: 1 }))
          : Effect.void)
      return limit === 0
        ? make
        : Effect.flatMap(threadLock(userId), (lock) =>
          lock.withPermits(1)(shared.threads(userId, Effect.zipRight(check, make))))
    }

    const bytes: Service["bytes"] = (userId, adding, write) => {
      const limit = limits.max_user_bytes
      // (the files as measured, and what the user's requests in other processes reserved and have not written)
      const check = (reserved: number) =>
        Effect.flatMap(
          Effect.promise(() =>
            measure(userThreadsDir(userId), limit - adding - reserved, performance.now() + MEASURE_BUDGET_MS)
          ),
          ({ bytes: measured, complete }) => {
            const used = measured + reserved
            return !complete
              ? Effect.fail(new QuotaExceeded({ reason: "unmeasured", user: userId, limit, used, adding }))
              : used + adding > limit
              ? Effect.fail(new QuotaExceeded({ reason: "bytes", user: userId, limit, used, adding }))
              : Effect.void
          }
        )
      // (reserved from the check until written or failed, in a scope of its own (not one `write` may be given): the
      // lock orders this process's, the reservation others')
      const admitted = Effect.acquireUseRelease(
        Scope.make(),
        (scope) => Effect.zipRight(Scope.extend(shared.files(userId, adding, check), scope), write),
        (scope, exit) => Scope.close(scope, exit)
      )
      return limit === 0 ? write : Effect.flatMap(bytesLock(userId), (lock) => lock.withPermits(1)(admitted))
    }

    const storeBytes: Service["storeBytes"] = (userId, size, usage, write) => {
      const limit = limits.max_store_bytes_per_user
      // (the item a put replaces is not counted: its new value takes its place)
      const check = Effect.flatMap(usage, ({ item, total }) =>
        total - item + size > limit
          ? Effect.fail(new QuotaExceeded({ reason: "store", user: userId, limit, used: total - item, adding: size }))
          : Effect.void)
      return guarded(storeLock, userId, limit, check, write)
    }

    const threadBytes: Service["threadBytes"] = (userId, stored) =>
      Effect.promise(() =>
        measure(
          Path.dirname(threadPaths(home, userId, stored).root),
          Number.MAX_SAFE_INTEGER,
          performance.now() + MEASURE_BUDGET_MS
        )
      ).pipe(Effect.map((measured) => measured.bytes))

    return { limits, thread, bytes, storeBytes, threadBytes }
  })

/** The quotas of the configuration's `gateway.quotas`, over the app's thread store and data directory. */
export const layer = (): Layer.Layer<Quotas, never, AppConfigService | ThreadStore> =>
  Layer.effect(
    Quotas,
    Effect.gen(function*() {
      const app = yield* AppConfigService
      const shared = yield* Effect.serviceOption(SharedQuotas.SharedQuotas)
      return yield* make(
        app.config.gateway.quotas,
        yield* ThreadStore,
        app.home,
        shared._tag === "Some" ? shared.value : SharedQuotas.inProcess
      )
    })
  )
