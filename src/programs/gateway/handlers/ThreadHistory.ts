/**
 * A thread's history as the threads endpoints answer it: the state after each checkpoint, newest first, rebuilt by
 * applying the checkpoints' updates in order (`history`), the current state, the state at a checkpoint, and the pages
 * of `/history` (filtered by checkpoint metadata, the first state's messages stamped with their runs and durations,
 * as DeerFlow's `/history`, a page ending at `gateway.max_page_bytes`).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { CheckpointRecord } from "../../../services/ThreadStore.js"
import type * as M from "../../../state/Message.js"
import { applyUpdates, makeIndexes } from "../../../state/Reducers.js"
import type { ThreadState } from "../../../state/ThreadState.js"
import * as TS from "../../../state/ThreadState.js"
import { fail, notFound } from "../api/Problem.js"
import * as Threads from "../api/Threads.js"
import * as Fork from "../Fork.js"
import { matchesFilter } from "../JsonEquality.js"
import * as Protocol from "../Protocol.js"
import { withTurnDurations } from "../TurnDurations.js"
import type { Access, ThreadRef } from "./Access.js"
import { jsonPage } from "./Http.js"

/** The history readers over `access`'s store. */
export const make = ({ store, storeFailed }: Pick<Access, "store" | "storeFailed">, maxPageBytes: number) => {
    /** The states after each checkpoint, newest first: the last `limit` (before `before`); `stamp` as `/history`. */
    const stampedHistory = ({ stored, threadId }: ThreadRef, limit: number, before?: number) =>
      Effect.gen(function*() {
        const all = yield* Effect.mapError(store.checkpoints(stored), storeFailed)
        const records: ReadonlyArray<CheckpointRecord> = before === undefined
          ? all
          : all.filter((r) => r.seq < before)
        const from = Math.max(0, records.length - limit)
        const runRecords = yield* Effect.mapError(store.runs({ threadId: stored }), storeFailed)
        const parentOf = Fork.parentOf(records, runRecords)
        const indexes = makeIndexes()
        let state: ThreadState = TS.empty
        const prefix = applyUpdates(state, records.slice(0, from).flatMap((r) => r.updates), indexes)
        if (Either.isLeft(prefix)) return yield* fail("internal", prefix.left.message)
        state = prefix.right
        const out: Array<ReturnType<typeof Protocol.stateObject>> = []
        for (let i = from; i < records.length; i++) {
          const record = records[i]!
          const next = applyUpdates(state, record.updates, indexes)
          if (Either.isLeft(next)) return yield* fail("internal", next.left.message)
          state = next.right
          out.push(Protocol.stateObject(threadId, state, {
            seq: record.seq,
            parent: parentOf(i),
            created_at: record.created_at,
            run_id: record.run_id,
            step: i
          }))
        }
        const stamp = (entry: (typeof out)[number]): (typeof out)[number] => {
          const stored = entry.values["messages"] as ReadonlyArray<M.Message>
          const messages = withTurnDurations(stored, records, runRecords)
          return { ...entry, values: { ...entry.values, messages } }
        }
        return { states: out.reverse(), stamp }
      })

    const history = (thread: ThreadRef, limit: number, before?: number) =>
      Effect.map(stampedHistory(thread, limit, before), (h) => h.states)

    const currentState = (thread: ThreadRef) =>
      Effect.gen(function*() {
        const [latest] = yield* history(thread, 1)
        if (latest !== undefined) return latest
        return Protocol.stateObject(thread.threadId, TS.empty, {})
      })

    const stateAt = (thread: ThreadRef, checkpointId: unknown) =>
      Effect.gen(function*() {
        const seq = Number(checkpointId)
        if (!Number.isInteger(seq)) return yield* notFound(`Checkpoint ${JSON.stringify(checkpointId)}`)
        const [state] = yield* history(thread, 1, seq + 1)
        if (state === undefined || state.checkpoint.checkpoint_id !== String(seq)) {
          return yield* notFound(`Checkpoint ${seq}`)
        }
        return state
      })

    /** The last `limit` states (before `before`) whose checkpoint metadata has the values of `filter`. */
    const getHistory = (
      thread: ThreadRef,
      limit: number,
      before: unknown,
      filter?: Readonly<Record<string, unknown>> | null
    ) => {
      // a checkpoint (LangGraph's JS SDK) or its id alone (LangGraph's Python SDK, DeerFlow's API)
      const cursor = before as { checkpoint_id?: unknown } | string | null | undefined
      const beforeSeq = typeof cursor === "string"
        ? cursor.trim() === "" ? undefined : Number(cursor)
        : cursor != null && typeof cursor === "object" && cursor.checkpoint_id != null
        ? Number(cursor.checkpoint_id)
        : undefined
      const filtered = filter != null && Object.keys(filter).length > 0
      const matches = (state: typeof Threads.StateObject.Type) =>
        matchesFilter(state.metadata as Record<string, unknown>, filter)
      // (the first state's messages with their runs and durations, as DeerFlow's `/history`)
      return Effect.map(
        stampedHistory(
          thread,
          filtered ? Number.MAX_SAFE_INTEGER : limit,
          Number.isInteger(beforeSeq) ? beforeSeq : undefined
        ),
        ({ stamp, states }) => {
          const [head, ...rest] = states.filter(matches).slice(0, limit)
          // (each state holds the thread's messages: a page of them ends at gateway.max_page_bytes)
          return jsonPage(Threads.StateHistory, head === undefined ? [] : [stamp(head), ...rest], maxPageBytes)
        }
      )
    }

  return { history, currentState, stateAt, getHistory }
}
