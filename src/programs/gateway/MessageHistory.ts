/**
 * A thread's message history as DeerFlow's messages page reads it from its run journal, folded from the thread's
 * checkpoints: the state's messages, each with the run (and the time) of the checkpoint that wrote it, and
 * the messages a compaction summarised away, which the page still shows. Each has a `seq` that never changes: its
 * place among every message the thread was ever written (1, 2, ...), so a compaction neither drops the older turns
 * of a reloaded chat nor renumbers them. A fork (a regenerated or edited turn, a run from an older checkpoint) takes
 * the thread back to an earlier state: the messages it drops leave the history, and are kept aside with the run
 * that forked (`dropped`: the page shows them again while a regenerate has not succeeded, see `MessagesPage`); a
 * message the forking run writes again (a regenerated question, under its id) is written anew, with that run and a
 * seq of its own, as DeerFlow's journal writes a regenerate's question again.
 */
import * as Either from "effect/Either"
import { isCompaction } from "../../middleware/summarization/Plan.js"
import type { CheckpointRecord } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import { applyUpdate, makeIndexes } from "../../state/Reducers.js"
import type { ThreadState } from "../../state/ThreadState.js"
import * as TS from "../../state/ThreadState.js"

/**
 * Where a message came from: the run, the time and the index (in the checkpoints) of the checkpoint that first
 * wrote it, and its `seq` in the history.
 */
export interface Origin {
  readonly run_id: string
  readonly created_at: string
  readonly index: number
  readonly seq: number
}

/** A message of the history, with its `seq`, the run that wrote it and when. */
export interface Shown {
  readonly message: M.Message
  readonly seq: number
  readonly run_id: string
  readonly created_at: string
}

/** A message a fork dropped from the history, with the run that forked (`by`). */
export interface Dropped extends Shown {
  readonly by: string
}

/** The thread's state folded from its checkpoints, with the origin of each message and the history. */
export interface Folded {
  readonly state: ThreadState
  /** By message id (also of the messages no longer in the state): the first writing of each. */
  readonly origin: ReadonlyMap<string, Origin>
  /** The state's messages and those compactions summarised away, oldest first. */
  readonly history: ReadonlyArray<Shown>
  /** The messages forks dropped (and that no later fork brought back), oldest first. */
  readonly dropped: ReadonlyArray<Dropped>
}

const clearsAll = (writes: ReadonlyArray<M.MessageWrite>) =>
  writes.some((item) => item.type === "remove" && item.id === M.REMOVE_ALL_MESSAGES)

type Written = Omit<Shown, "message">

/** The thread's state folded from its checkpoints, with the origin of each message and its message history. */
export const fold = (records: ReadonlyArray<CheckpointRecord>): Either.Either<Folded, { readonly message: string }> => {
  const indexes = makeIndexes()
  const origin = new Map<string, Origin>()
  // the writing of each message in the history (the state's, and those summarised away), by id
  const written = new Map<string, Written>()
  // the messages summarised away, by id (the version the compaction removed)
  const archived = new Map<string, M.Message>()
  const dropped: Array<Dropped> = []
  let seq = 0
  let state: ThreadState = TS.empty
  for (const [index, record] of records.entries()) {
    for (const update of record.updates) {
      const next = applyUpdate(state, update, indexes)
      if (Either.isLeft(next)) return Either.left(next.left)
      const writes = update.messages ?? []
      const reset = clearsAll(writes) && !isCompaction(update)
      // (a fork's messages in their order: a message brought back goes after those before it, never before)
      let floor = 0
      for (const message of writes) {
        if (message.type === "remove") continue
        const was = written.get(message.id)
        if (was !== undefined) {
          floor = Math.max(floor, was.seq)
          continue
        }
        // a fork back to a state that held a message some fork dropped brings it back as it was
        const back = reset ? dropped.findLastIndex((d) => d.message.id === message.id && d.seq > floor) : -1
        const [restored] = back >= 0 ? dropped.splice(back, 1) : []
        const now = restored !== undefined
          ? { run_id: restored.run_id, created_at: restored.created_at, seq: restored.seq }
          : { run_id: record.run_id, created_at: record.created_at, seq: ++seq }
        written.set(message.id, now)
        floor = Math.max(floor, now.seq)
        if (!origin.has(message.id)) origin.set(message.id, { ...now, index })
      }
      if (clearsAll(writes)) {
        const kept = new Set(next.right.messages.map((message) => message.id))
        if (!reset) {
          for (const message of state.messages) if (!kept.has(message.id)) archived.set(message.id, message)
        } else {
          // back to an earlier state (a fork's reset): what was written after it goes, summarised or not
          let latest = -1
          for (const message of next.right.messages) latest = Math.max(latest, origin.get(message.id)?.index ?? -1)
          const gone = state.messages.filter((message) => !kept.has(message.id))
          for (const [id, message] of [...archived]) {
            if ((origin.get(id)?.index ?? -1) > latest) {
              archived.delete(id)
              gone.push(message)
            }
          }
          for (const message of gone) {
            const was = written.get(message.id)
            if (was === undefined) continue
            written.delete(message.id)
            dropped.push({ message, ...was, by: record.run_id })
          }
        }
      }
      state = next.right
    }
  }
  const current = new Set(state.messages.map((message) => message.id))
  const history = [...[...archived.values()].filter((message) => !current.has(message.id)), ...state.messages]
    .map((message) => ({ message, ...(written.get(message.id) ?? { seq: 0, run_id: "", created_at: "" }) }))
    .sort((a, b) => a.seq - b.seq)
  return Either.right({ state, origin, history, dropped: dropped.sort((a, b) => a.seq - b.seq) })
}
