/**
 * What a request's user reaches: their threads, by the ids their client knows (`ThreadIds`), those threads'
 * state and runs. Anything else is "not found" (404), never "forbidden": another user's thread of the same id
 * is, for this user, a thread nobody has. Shared by the thread, run and file handlers.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { RunRecord, ThreadSummary } from "../../../services/ThreadStore.js"
import { ThreadStore } from "../../../services/ThreadStore.js"
import * as TS from "../../../state/ThreadState.js"
import { fail, GatewayError, notFound } from "../api/Problem.js"
import type * as Factory from "../../Factory.js"
import * as Protocol from "../Protocol.js"
import { Runs } from "../Runs.js"
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

  const storeFailed = (error: { readonly message: string }) =>
    new GatewayError({ reason: "internal", message: error.message, cause: error })

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

  /** Makes the user's thread `threadId` (the user has none of that id: see `ownedThread`). */
  const newThread = (userId: string, threadId: string, metadata: Readonly<Record<string, unknown>>) =>
    Effect.gen(function*() {
      const problemText = ThreadIds.newIdProblem(threadId)
      if (problemText !== undefined) return yield* fail("unprocessable", `thread_id: ${problemText}.`)
      const made = yield* Effect.mapError(ThreadIds.create(store, userId, threadId, metadata), storeFailed)
      if (Option.isNone(made)) return yield* fail("conflict", `Thread ${threadId} already exists.`)
      return made.value
    })

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

  /** A stored run as its thread's client knows it. */
  const runObject = (record: RunRecord, threadId: string) => Protocol.runObject({ ...record, thread_id: threadId })

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
    storeFailed,
    ownedThread,
    threadRef,
    newThread,
    loadState,
    threadStatus,
    fullThread,
    runObject,
    ownedRun
  }
})

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
