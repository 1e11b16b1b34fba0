/**
 * A run queued behind a thread's active run (`multitask_strategy: "enqueue"`): accepted at once (its id, its
 * record `pending`), started once every run before it on the thread ended. Until then it is a stand-in
 * `ActiveRun` with no events, which becomes the started run's (its events, its state, its end), or ends at once
 * when the run is cancelled while it waits. A queued run cancelled before its turn never runs; one refused when
 * its turn comes (another process holds the thread) ends as an error naming why; one behind a run handed over to
 * another process (a cluster's runner draining) goes with it, `pending`, and runs there in its turn.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type { RunRecord } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import * as TS from "../../state/ThreadState.js"
import type { GatewayError } from "./api/Problem.js"
import type { Frame, StreamMode } from "./Protocol.js"
import * as RunRecords from "./RunRecords.js"

/** What a queued run is, before and after it starts. */
export interface QueuedRun {
  readonly runId: string
  readonly threadId: string
  readonly publicThreadId: string
  readonly userId: string
  readonly modes: ReadonlyArray<StreamMode>
  readonly done: Deferred.Deferred<RunRecord>
  readonly finished: () => boolean
  readonly after: (
    cursor: number,
    requested?: number
  ) => { readonly frames: ReadonlyArray<Frame>; readonly gap?: Frame }
  readonly origin: () => number
  readonly changes: () => number
  readonly onChange: (listener: () => void) => () => void
  readonly state: () => TS.ThreadState
}

/** A queued run's stand-in, and how it becomes the started run (or ends unstarted). */
export const make = (identity: {
  readonly runId: string
  readonly threadId: string
  readonly publicThreadId: string
  readonly userId: string
  readonly modes: ReadonlyArray<StreamMode>
}) => {
  let started: QueuedRun | undefined
  let ended = false
  let handedOver = false
  const listeners = new Set<() => void>()
  const wake = () => {
    const woken = [...listeners]
    listeners.clear()
    for (const listener of woken) listener()
  }
  const done = Deferred.unsafeMake<RunRecord>(FiberId.none)
  const END: ReadonlyArray<Frame> = [{ id: 1, event: "end", data: "null" }]
  const run: QueuedRun = {
    ...identity,
    done,
    finished: () => ended || handedOver || (started?.finished() ?? false),
    after: (cursor, requested) => started?.after(cursor, requested) ?? { frames: ended && cursor < 1 ? END : [] },
    origin: () => started?.origin() ?? 0,
    // a change when it starts or ends unstarted, then the started run's own (counted after that one)
    changes: () => (started !== undefined ? started.changes() + 1 : ended ? 1 : 0),
    onChange: (listener) => {
      if (started !== undefined) return started.onChange(listener)
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    state: () => started?.state() ?? TS.empty
  }
  return {
    run,
    /** The run started: the stand-in follows it from now on, and ends with it. */
    start: (real: QueuedRun) =>
      Effect.suspend(() => {
        started = real
        wake()
        return Effect.flatMap(Deferred.await(real.done), (record) => Deferred.succeed(done, record))
      }),
    /**
     * The run goes to another process with the run ahead of it (handed over, see `Runs.handOver`): it is left as
     * recorded (`record`, pending) for its durable message there; its followers here see their streams end without
     * `end`, as a handed-over run's do.
     */
    handOver: (record: RunRecord) =>
      Effect.sync(() => {
        handedOver = true
        wake()
        Deferred.unsafeDone(done, Exit.succeed(record))
      }),
    /** The run ended before it started (cancelled, or refused when its turn came). */
    end: (record: RunRecord) =>
      Effect.sync(() => {
        ended = true
        wake()
        Deferred.unsafeDone(done, Exit.succeed(record))
      })
  }
}

/** What a queued run is asked with (a run request's fields the queue reads). */
export interface QueuedRequest {
  readonly threadId: string
  readonly publicThreadId?: string | undefined
  readonly userId: string
  readonly modes: ReadonlyArray<StreamMode>
  readonly assistantId: string
  readonly multitaskStrategy: "reject" | "interrupt" | "rollback" | "enqueue"
  readonly metadata: Readonly<Record<string, unknown>>
  readonly kwargs?: Readonly<Record<string, unknown>> | undefined
  /** The run's id, when the caller chose it. */
  readonly runId?: string | undefined
}

/** What the queues need of the run manager. */
export interface Manager<Req extends QueuedRequest> {
  readonly saveRun: (record: RunRecord) => Effect.Effect<void, GatewayError>
  readonly baseRecord: (threadId: string, runId: string, at: string) => RunRecord
  readonly now: Effect.Effect<string>
  /** Runs a fiber of the server's (as long as the server). */
  readonly run: (id: string, effect: Effect.Effect<void>) => Effect.Effect<unknown>
  /** The runs the manager knows, by id (a queued run is known from the start). */
  readonly known: Map<string, QueuedRun>
  readonly active: (threadId: string) => QueuedRun | undefined
  /** Starts a run now under the given id (refused while the thread has an active run). */
  readonly start: (request: Req, runId: string) => Effect.Effect<QueuedRun, GatewayError>
}

/** The runs queued behind each thread's active run, in order, and how a run joins them or leaves. */
export const makeQueues = <Req extends QueuedRequest>(manager: Manager<Req>) => {
  type Entry = { readonly runId: string; readonly end: (record: RunRecord) => Effect.Effect<void> }
  const queues = new Map<string, Array<Entry>>()
  const dequeue = (threadId: string, runId: string) => {
    const rest = (queues.get(threadId) ?? []).filter((entry) => entry.runId !== runId)
    if (rest.length === 0) queues.delete(threadId)
    else queues.set(threadId, rest)
  }

  /** Accepts a run behind the thread's active run (and the runs queued before it); it starts in its turn. */
  const enqueue = (request: Req) =>
    Effect.gen(function*() {
      const runId = request.runId ?? M.newId()
      const { threadId } = request
      yield* manager.saveRun({
        ...manager.baseRecord(threadId, runId, yield* manager.now),
        metadata: {
          assistant_id: request.assistantId,
          multitask_strategy: request.multitaskStrategy,
          metadata: request.metadata,
          ...(request.kwargs !== undefined ? { kwargs: request.kwargs } : {}),
          user_id: request.userId
        }
      })
      const queued = make({
        runId,
        threadId,
        publicThreadId: request.publicThreadId ?? threadId,
        userId: request.userId,
        modes: request.modes
      })
      manager.known.set(runId, queued.run)
      queues.set(threadId, [...(queues.get(threadId) ?? []), { runId, end: queued.end }])
      const waiter = Effect.gen(function*() {
        for (;;) {
          const queue = queues.get(threadId) ?? []
          if (!queue.some((entry) => entry.runId === runId)) return
          const ahead = queue[0]!.runId === runId ? undefined : manager.known.get(queue[0]!.runId)
          const current = manager.active(threadId) ?? ahead
          if (current !== undefined) {
            const ahead = yield* Deferred.await(current.done)
            if (RunRecords.unfinished(ahead)) {
              // the run ahead was handed over to another process, unfinished: this one goes there after it (its
              // durable message, in a cluster), never started here
              dequeue(threadId, runId)
              return yield* queued.handOver(manager.baseRecord(threadId, runId, yield* manager.now))
            }
            continue
          }
          const started = yield* Effect.either(manager.start({ ...request, multitaskStrategy: "reject" }, runId))
          // another run took the thread first (one not queued): this one waits for that one too
          if (Either.isLeft(started) && manager.active(threadId) !== undefined) continue
          dequeue(threadId, runId)
          if (Either.isRight(started)) return yield* queued.start(started.right)
          const at = yield* manager.now
          const record: RunRecord = {
            ...manager.baseRecord(threadId, runId, at),
            status: "error",
            stop_reason: "error",
            ended_at: at,
            error: started.left.message
          }
          yield* Effect.ignore(manager.saveRun(record))
          return yield* queued.end(record)
        }
      })
      yield* manager.run(`queued-${runId}`, waiter)
      return queued.run
    })

  /** Ends a queued run that has not started (cancelled); false when the run is not waiting in the queue. */
  const cancel = (threadId: string, runId: string) =>
    Effect.gen(function*() {
      const waiting = queues.get(threadId)?.find((entry) => entry.runId === runId)
      if (waiting === undefined) return false
      dequeue(threadId, runId)
      const at = yield* manager.now
      const record: RunRecord = {
        ...manager.baseRecord(threadId, runId, at),
        status: "cancelled",
        stop_reason: "cancelled",
        ended_at: at
      }
      yield* Effect.ignore(manager.saveRun(record))
      yield* waiting.end(record)
      return true
    })

  return { enqueue, cancel, has: (threadId: string) => queues.has(threadId) }
}
