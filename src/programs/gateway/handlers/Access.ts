/**
 * What a request's user reaches: their threads, by the ids their client knows (`ThreadIds`), those threads'
 * state and runs. Anything else is "not found" (404), never "forbidden": another user's thread of the same id
 * is, for this user, a thread nobody has. Shared by the thread, run and file handlers.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StoreError } from "../../../services/RunContext.js"
import type { RunRecord, ThreadSummary } from "../../../services/ThreadStore.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import * as TS from "../../../state/ThreadState.js"
import { fail, GatewayError, notFound } from "../api/Problem.js"
import type * as Factory from "../../Factory.js"
import * as ThreadLease from "../../ThreadLease.js"
import * as Protocol from "../Protocol.js"
import { QuotaExceeded, Quotas } from "../Quotas.js"
import * as QuotaReservations from "../QuotaReservations.js"
import { Runs } from "../Runs.js"
import * as StorageQuota from "../StorageQuota.js"
import * as ThreadIds from "../ThreadIds.js"

/** A user's thread: as stored, and as the client calls it. */
export interface ThreadRef {
  readonly stored: string
  readonly threadId: string
}

/** The user's threads and runs over the store and the run manager. */
export const make = Effect.gen(function*() {
  const store = yield* ThreadStore
  const runs = yield* Runs
  const quotas = yield* Quotas

  // (a write the storage quotas stopped once it was kept is the user's quota, not a fault: see `StorageQuota`)
  const storeFailed = (error: { readonly message: string }) =>
    StorageQuota.isStopped(error)
      ? new GatewayError({ reason: "forbidden", message: error.message })
      : new GatewayError({ reason: "internal", message: error.message, cause: error })

  /**
   * A write outside a run (`what`, of the client's thread `threadId`) the store refused: its lease's fence as a 409
   * (another run took the thread while the write stalled: `ThreadLease.takenWhile`), else as `storeFailed`.
   */
  const writeFailed = (threadId: string, what: string) => (error: StoreError) =>
    ThreadLease.isFenced(error) ? fail("conflict", ThreadLease.takenWhile(threadId, what)) : storeFailed(error)

  /** A gateway error as is, a quota's refusal as a 403 saying which quota (see `quotaRefused`), else a 500. */
  const refused = (error: GatewayError | QuotaExceeded | { readonly message: string }) =>
    error instanceof GatewayError ? error : error instanceof QuotaExceeded ? quotaRefused(error) : storeFailed(error)

  /**
   * The user's thread the client calls `threadId`, or 404 (also when only another user has a thread of that
   * id). Its `thread_id` is the stored id: the one for the store, the runs and the thread's files; clients are
   * shown `threadId`.
   */
  const ownedThread = (userId: string, threadId: string) =>
    Effect.flatMap(Effect.mapError(ThreadIds.find(store, userId, threadId), storeFailed), (info) =>
      Option.isSome(info) ? Effect.succeed(info.value) : Effect.fail(notFound(`Thread ${threadId}`)))

  /** The user's thread `threadId` as stored and as the client calls it, or 404. */
  const threadRef = (userId: string, threadId: string) =>
    Effect.map(ownedThread(userId, threadId), (thread): ThreadRef => ({ stored: thread.thread_id, threadId }))

  /**
   * The user's thread `threadId`, or none for an id that could name a new thread: DeerFlow's app makes up a new
   * chat's thread id and reads the chat's uploads, messages, token usage, scheduled tasks and goal before its first
   * run, which DeerFlow answers empty. Another user's thread of that id is, for this user, such a new one (as
   * `ownedThread`); an id no new thread could have is a 404.
   */
  const chatOf = (userId: string, threadId: string) =>
    Effect.gen(function*() {
      const found = yield* Effect.mapError(ThreadIds.find(store, userId, threadId), storeFailed)
      if (Option.isSome(found)) return { stored: found.value.thread_id, threadId } satisfies ThreadRef
      if (ThreadIds.newIdProblem(threadId) !== undefined) return yield* notFound(`Thread ${threadId}`)
      return undefined
    })

  /**
   * Makes the user's thread `threadId` (the user has none of that id: see `ownedThread`); refused (403) when the
   * user has as many threads as `gateway.quotas.max_threads_per_user` allows.
   */
  const newThread = (userId: string, threadId: string, metadata: Readonly<Record<string, unknown>>) =>
    Effect.gen(function*() {
      const problemText = ThreadIds.newIdProblem(threadId)
      if (problemText !== undefined) return yield* fail("unprocessable", `thread_id: ${problemText}.`)
      const made = yield* Effect.mapError(
        quotas.thread(userId, ThreadIds.create(store, userId, threadId, metadata)),
        refused
      )
      if (Option.isNone(made)) return yield* fail("conflict", `Thread ${threadId} already exists.`)
      return made.value
    })

  /**
   * Runs `write`, which adds about `adding` bytes to the user's thread files, when they fit
   * `gateway.quotas.max_user_bytes`; else refused (403) before `write` runs.
   */
  const withBytes = <A, R>(userId: string, adding: number, write: Effect.Effect<A, GatewayError, R>) =>
    Effect.mapError(quotas.bytes(userId, adding, write), refused)

  // (the runs' own: a write is admitted against what the runs and writes admitted before it are to add)
  const reservations = runs.reservations ?? QuotaReservations.inProcess()

  /**
   * Runs `write`, which adds about `adding` bytes to the user's thread `stored` (one to be made: the id it will be
   * stored under, not checked against `max_thread_bytes`), when they keep the thread and the user within
   * `gateway.quotas.max_thread_bytes` and `max_thread_bytes_per_user` besides what the runs and writes admitted
   * before it and not ended are to add; else refused (403) before `write` runs. Admitted, its bytes are reserved
   * under `writer` (its lease's holder, which keeps a shared reservation live) until `write` ended, as a run's are
   * (`QuotaReservations`: shared by the processes of one PostgreSQL database, admitted one at a time).
   */
  const withinStorage = <A, E, R>(
    userId: string,
    stored: string,
    writer: string,
    adding: number,
    write: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | GatewayError, R> => filling(userId, stored, writer, adding, () => write)

  /**
   * `withinStorage` for a write that keeps checkpoints under other runs' ids than `writer` (a copy's, a branch's):
   * it tells each one it kept (`kept`), which frees its reservation by that checkpoint's bytes as a run's own
   * checkpoints free its, so that what it has written is not counted twice, reserved and kept, while it goes.
   */
  const filling = <A, E, R>(
    userId: string,
    stored: string,
    writer: string,
    adding: number,
    write: (kept: (updates: unknown) => Effect.Effect<void>) => Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | GatewayError, R> =>
    Effect.acquireUseRelease(
      Effect.mapError(
        reservations.admit(store, StorageQuota.fromConfig(quotas.limits), {
          userId,
          threadId: stored,
          runId: writer,
          adding,
          pending: 0
        }),
        refused
      ),
      (reserved) => write(reserved.kept),
      (reserved) => reserved.free
    )

  const loadState = (threadId: string) =>
    Effect.map(Effect.mapError(store.load(threadId), storeFailed), (loaded) =>
      Option.match(loaded, {
        onNone: () => ({ state: TS.empty, runs: [] as ReadonlyArray<RunRecord> }),
        onSome: (t) => t
      }))

  /** LangGraph's status of a thread: `busy` while a run holds it, `error` when its last run failed or died. */
  const threadStatus = (summary: ThreadSummary) => {
    if (runs.activeOf(summary.thread_id) !== undefined) return "busy" as const
    switch (summary.status) {
      case "running":
        return "busy" as const
      case "error":
      case "stopped":
        return "error" as const
      default:
        return "idle" as const
    }
  }

  /** The thread object of a stored thread, as its user's client knows it (`threadId`). */
  const fullThread = (summary: ThreadSummary, threadId: string) =>
    Effect.map(loadState(summary.thread_id), (loaded) =>
      Protocol.threadObject(
        { ...summary, thread_id: threadId },
        threadStatus(summary),
        Protocol.publicValues(loaded.state)
      ))

  /** A stored run as its thread's client knows it (with its counts, when they were read). */
  const runObject = (record: RunRecord, threadId: string, counts?: Protocol.RunCounts) =>
    Protocol.runObject({ ...record, thread_id: threadId }, counts)

  /** The counts of each run of the stored thread (from its checkpoints). */
  const runCounts = (threadId: string) =>
    Effect.map(Effect.mapError(store.checkpoints(threadId), storeFailed), Protocol.runCounts)

  /** The run `runId` of the stored thread, or 404. */
  const ownedRun = (threadId: string, runId: string) =>
    Effect.flatMap(Effect.mapError(store.runs({ runId }), storeFailed), (records) => {
      const record = records[0]
      return record !== undefined && record.thread_id === threadId
        ? Effect.succeed(record)
        : Effect.fail(notFound(`Run ${runId}`))
    })

  return {
    store,
    runs,
    quotas,
    storeFailed,
    writeFailed,
    ownedThread,
    threadRef,
    chatOf,
    newThread,
    withBytes,
    withinStorage,
    filling,
    loadState,
    threadStatus,
    fullThread,
    runObject,
    runCounts,
    ownedRun
  }
})

/**
 * A quota's refusal as the gateway answers it: 403 (the request is well formed and within the per-request limits;
 * the user has used what the quota allows), saying which quota, its limit and the user's use.
 */
export const quotaRefused = (error: QuotaExceeded) => fail("forbidden", error.message)

/** What `make` gives. */
export type Access = Effect.Effect.Success<typeof make>

/**
 * The refusal of run settings that `Factory.resolve` rejected: an assistant id naming no agent of the user's is an
 * assistant that does not exist (LangGraph's 404); anything else is a 422 saying what was wrong.
 */
export const settingsRefusal = (
  error: Factory.SettingsError | { readonly message: string },
  assistantId: string | null | undefined
) =>
  "_tag" in error && error._tag === "SettingsError" && error.missingAgent !== undefined &&
    error.missingAgent === Protocol.agentNameOf(assistantId)
    ? fail(
      "not_found",
      `No assistant found for "${assistantId}": no agent of yours is named ` +
        `"${error.missingAgent}" (assistants: ${Protocol.LEAD_AGENT} and your custom agents).`
    )
    : fail("unprocessable", `Run settings: ${error.message}`)
