/**
 * The memory update queue (DeerMem's `MemoryUpdateQueue`): one pending conversation per (thread, user, agent), with
 * the settings of the service that queued it; after a run its conversation waits `debounce_seconds` (a new run of
 * the same thread restarts the wait and replaces it, keeping the signals of the one it replaces), then the queue is
 * drained, one update at a time. A conversation about to be summarised away (`immediate`) is updated at once. A full
 * queue (`queue_max_depth`) still takes a conversation with a signal. When the queue's scope closes, what is pending
 * runs within `shutdown_flush_timeout_seconds`; when the app is stopped (a signal), within `STOP_FLUSH_SECONDS`.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type { Pending } from "../../services/Memory.js"
import type * as MemoryDoc from "../../state/Memory.js"
import type { Settings } from "./Settings.js"

/**
 * How long pending updates may take when the app is stopped (a signal: SIGTERM, Ctrl-C) rather than ending by
 * itself: the process must end within about two seconds of the signal. What is dropped is read again after the
 * thread's next run (its watermark did not move).
 */
export const STOP_FLUSH_SECONDS = 0.5

/** A conversation in the update queue, with the settings its update reads. */
export interface Queued {
  readonly item: Pending
  readonly settings: Settings
  /**
   * The signals of the thread's conversation at each run queued for it (DeerMem's queue keeps those of a run it
   * replaces): its update's hints name them, and reinforce with them.
   */
  readonly signals: ReadonlySet<MemoryDoc.Signal>
}

const keyOf = (p: Pending) => JSON.stringify([p.threadId, p.userId, p.agentName ?? null])

/** The update queue of a memory service. */
export interface UpdateQueue {
  /** Queues a conversation under these settings (nothing where memory is off or in `tool` mode). */
  readonly enqueue: (st: Settings, item: Pending) => Effect.Effect<void>
  /** Runs what is pending now. */
  readonly flush: Effect.Effect<void>
  /** How many conversations wait for their update. */
  readonly pending: Effect.Effect<number>
}

/**
 * The queue over `update` (one conversation's update, which never fails), in the scope: closing it runs what is
 * pending. `signalsOf` gives the signals of a conversation as queued; `started`, the settings the stop reads until
 * a conversation is queued (then those of the last one queued).
 */
export const make = (options: {
  readonly update: (queued: Queued) => Effect.Effect<void>
  readonly signalsOf: (item: Pending) => ReadonlySet<MemoryDoc.Signal>
  readonly started: Settings
}): Effect.Effect<UpdateQueue, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { update } = options
    const scope = yield* Effect.scope
    // the settings of the last conversation queued (what the app's stop reads: `shutdown_flush_timeout_seconds`)
    let latest = options.started
    const pending = new Map<string, Queued>()
    const urgent: Array<Queued> = []
    const running = yield* Effect.makeSemaphore(1)
    let timer: Fiber.RuntimeFiber<void, never> | undefined

    // An item leaves the queue once its update is done: one interrupted (the app stopping) is still pending.
    const drain = running.withPermits(1)(Effect.gen(function*() {
      for (;;) {
        const next: Queued | undefined = urgent[0] ?? pending.values().next().value
        if (next === undefined) return
        yield* update(next)
        if (urgent[0] === next) urgent.shift()
        else if (pending.get(keyOf(next.item)) === next) pending.delete(keyOf(next.item))
      }
    }))

    const stopTimer = Effect.suspend(() => {
      const current = timer
      timer = undefined
      return current === undefined ? Effect.void : Fiber.interrupt(current)
    })

    const enqueue = (st: Settings, item: Pending): Effect.Effect<void> => {
      if (!st.enabled || st.config.mode === "tool") return Effect.void
      latest = st
      const key = keyOf(item)
      // the signals of the last six lines of the whole thread, with those of a run it replaces (DeerMem's)
      const own = options.signalsOf(item)
      const before = pending.get(key)?.signals
      const queued: Queued = { item, settings: st, signals: before === undefined ? own : new Set([...before, ...own]) }
      if (item.immediate) {
        return Effect.asVoid(Effect.forkIn(Effect.zipRight(Effect.sync(() => void urgent.push(queued)), drain), scope))
      }
      const backend = st.config.backend_config
      return Effect.gen(function*() {
        // a full queue still takes a conversation whose user corrected, confirmed or told something (a signal, as
        // DeerMem admits one): a later run may not say it again
        const full = !pending.has(key) && backend.queue_max_depth > 0 && pending.size >= backend.queue_max_depth
        if (full && own.size === 0) {
          return yield* Effect.logWarning(
            `Memory queue full (${backend.queue_max_depth} pending): thread ${item.threadId} is read after its next run`
          )
        }
        pending.set(key, queued)
        yield* stopTimer
        // the timer only waits: stopping it never interrupts an update already running
        const wait = Effect.sleep(`${backend.debounce_seconds} seconds`)
        timer = yield* Effect.forkIn(Effect.zipRight(wait, Effect.asVoid(Effect.forkIn(drain, scope))), scope)
      })
    }

    const flush = Effect.zipRight(stopTimer, drain)

    // Finalizers run uninterruptibly; the flush must not (a model call forks a watchdog it interrupts, and the
    // shutdown timeout interrupts the flush). An app stopped from outside (interrupted: a signal) must end at once:
    // its flush gets `STOP_FLUSH_SECONDS` at most.
    yield* Effect.addFinalizer((exit) =>
      Effect.suspend(() => {
        if (pending.size === 0 && urgent.length === 0) return Effect.void
        const stopped = Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
        const limit = latest.config.shutdown_flush_timeout_seconds
        const seconds = stopped ? Math.min(STOP_FLUSH_SECONDS, limit) : limit
        return Effect.interruptible(flush).pipe(
          Effect.timeout(`${seconds} seconds`),
          Effect.catchAll(() =>
            Effect.logWarning(
              "Memory updates still pending when the app stopped were dropped (their turns are read after their " +
                "threads' next run)"
            )
          )
        )
      })
    )

    return { enqueue, flush, pending: Effect.sync(() => pending.size + urgent.length) }
  })
