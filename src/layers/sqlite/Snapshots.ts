/**
 * Loading a thread from the SQLite store, through its snapshot: `load` reads the thread, its snapshot (the
 * folded state up to some checkpoint), the checkpoints after it and its runs in one read transaction, and folds
 * the newer checkpoints onto the snapshot. Once `snapshotEvery` checkpoints were folded past it, `load` stores
 * the new state as the thread's snapshot, so later loads decode the state plus the newer checkpoints only.
 * Appends never write snapshots: a step costs the same whatever the thread's size. A snapshot is a cache: one
 * that cannot be written is skipped, one that cannot be read is rebuilt.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { LoadedThread, RunRecord, ThreadStore } from "../../services/ThreadStore.js"
import type { ThreadState } from "../../state/ThreadState.js"
import * as TS from "../../state/ThreadState.js"
import { decodeSnapshot } from "../store/Codec.js"
import { foldCheckpoints } from "../store/Fold.js"
import { decodeRows, decodeRunRows, iso } from "../store/Rows.js"
import type { Access } from "./Access.js"
import type { Connection } from "./SqliteConnection.js"
import { SELECT_CHECKPOINTS, SELECT_RUNS, SELECT_SNAPSHOT, SELECT_THREAD, UPSERT_SNAPSHOT } from "./Statements.js"

/** The `load` of a store on `conn`, writing a snapshot every `snapshotEvery` folded checkpoints (0: never). */
export const makeLoad = (conn: Connection, access: Access, snapshotEvery: number): ThreadStore["Type"]["load"] => {
  const { transaction } = access

  const readCheckpoints = (threadId: string, after: number) =>
    transaction(
      conn.execute(SELECT_CHECKPOINTS, [threadId, after], undefined),
      "load",
      `Cannot load thread "${threadId}"`,
      "BEGIN"
    )

  const writeSnapshot = (threadId: string, seq: number, state: ThreadState) =>
    Effect.clockWith((clock) =>
      transaction(
        Effect.suspend(() => {
          const now = iso(clock.unsafeCurrentTimeMillis())
          return conn.executeRaw(UPSERT_SNAPSHOT, [threadId, seq, now, JSON.stringify(state)])
        }),
        "load",
        `Cannot save a snapshot of thread "${threadId}"`
      )
    ).pipe(Effect.catchAll((error) => Effect.logWarning(error.message)))

  return (threadId) =>
    Effect.gen(function*() {
      // One read transaction: the thread, its snapshot, the checkpoints after it and its runs are one state.
      const read = yield* transaction(
        Effect.gen(function*() {
          const threads = yield* conn.execute(SELECT_THREAD, [threadId], undefined)
          const snapshots = snapshotEvery > 0 ? yield* conn.execute(SELECT_SNAPSHOT, [threadId], undefined) : []
          const after = snapshots.length > 0 ? Number(snapshots[0].seq) : 0
          const checkpoints = yield* conn.execute(SELECT_CHECKPOINTS, [threadId, after], undefined)
          const runs = yield* conn.execute(SELECT_RUNS, [threadId], undefined)
          return { threads, snapshot: snapshots[0], checkpoints, runs }
        }),
        "load",
        `Cannot load thread "${threadId}"`,
        "BEGIN"
      )
      if (read.threads.length === 0 && read.checkpoints.length === 0 && read.snapshot === undefined) {
        return Option.none<LoadedThread>()
      }
      let base = TS.empty
      let baseSeq = 0
      let checkpoints: ReadonlyArray<{ readonly seq: unknown; readonly updates: unknown }> = read.checkpoints
      if (read.snapshot !== undefined) {
        const decoded = decodeSnapshot(read.snapshot.state)
        if (Either.isRight(decoded)) {
          base = decoded.right
          baseSeq = Number(read.snapshot.seq)
        } else {
          yield* Effect.logWarning(
            `The snapshot of thread "${threadId}" is unreadable (${decoded.left}); folding all its checkpoints`
          )
          // Checkpoints are immutable once written: reading them all again gives a consistent (newer) state.
          checkpoints = yield* readCheckpoints(threadId, 0)
        }
      }
      const state = yield* foldCheckpoints(threadId, checkpoints, base)
      const lastSeq = checkpoints.length > 0 ? Number(checkpoints[checkpoints.length - 1]!.seq) : baseSeq
      const count = Number(read.threads[0]?.checkpoints ?? checkpoints.length)
      const records: ReadonlyArray<RunRecord> = yield* decodeRows(
        decodeRunRows,
        read.runs,
        "load",
        `The run table of thread "${threadId}"`
      )
      if (snapshotEvery > 0 && checkpoints.length >= snapshotEvery) yield* writeSnapshot(threadId, lastSeq, state)
      return Option.some<LoadedThread>({ thread_id: threadId, state, checkpoints: count, runs: records })
    })
}
