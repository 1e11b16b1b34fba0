/**
 * The checkpoints a new branch is seeded with (DeerFlow's `build_branch_history_seed_events`): one per inherited
 * turn, each under a run id of its own (`branch-seed-<branch>-<n>`), as a turn's run wrote it in the parent. A
 * message's run is a turn to DeerFlow's app (regenerate supersedes a whole run's messages, a run's duration and
 * rating go under its last answer), so the inherited turns must not share one. The checkpoint before the last
 * turn holds the parent's state before that turn, so regenerating or editing the branch's latest answer starts
 * from the turns before it, as in the parent.
 */
import * as M from "../../state/Message.js"
import type { StateUpdate, ThreadState } from "../../state/ThreadState.js"
import * as TS from "../../state/ThreadState.js"
import * as Fork from "./Fork.js"

/** A checkpoint to write: its run id and its updates. */
export interface Seed {
  readonly runId: string
  readonly updates: ReadonlyArray<StateUpdate>
}

/**
 * Whether a message opens a turn: a question the user wrote, or a hidden answer to a clarification question
 * (its run resumes as a run of its own).
 */
export const opensTurn = (message: M.Message): boolean =>
  M.isRealUserMessage(message) ||
  (message.type === "human" && M.isHumanInputResponse(message.additional_kwargs?.human_input_response))

/**
 * Where each turn of `messages` starts: at a message that opens one, or at the hidden human messages right
 * before it (a date reminder the turn's run put there). What comes before the first turn goes with it.
 */
export const turnStarts = (messages: ReadonlyArray<M.Message>): ReadonlyArray<number> => {
  const starts: Array<number> = []
  messages.forEach((message, index) => {
    if (!opensTurn(message)) return
    let start = index
    while (start > 0) {
      const before = messages[start - 1]!
      if (before.type !== "human" || !M.isHidden(before) || opensTurn(before)) break
      start--
    }
    starts.push(starts.length === 0 ? 0 : Math.max(start, starts[starts.length - 1]! + 1))
  })
  return starts.length === 0 ? [0] : starts
}

/** `messages` cut into its turns (see `turnStarts`). */
export const turns = (messages: ReadonlyArray<M.Message>): ReadonlyArray<ReadonlyArray<M.Message>> => {
  const starts = turnStarts(messages)
  return starts.map((start, i) => messages.slice(start, starts[i + 1] ?? messages.length))
}

const same = (a: M.Message, b: M.Message) => a.id === b.id && JSON.stringify(a) === JSON.stringify(b)

/**
 * The checkpoints of branch `branchId` holding `head` (the parent's state at the branch's answer): the turns of
 * `base` (the parent's state before the last turn; undefined when it has none), one checkpoint each, then the
 * last turn with the rest of `head`. Without a base, one checkpoint.
 */
export const seeds = (branchId: string, base: ThreadState | undefined, head: ThreadState): ReadonlyArray<Seed> => {
  const runId = (n: number) => `branch-seed-${branchId}-${n}`
  const earlier = base === undefined || base.messages.length === 0 ? [] : turns(base.messages)
  if (base === undefined || earlier.length === 0 || turnStarts(head.messages).length < 2) {
    return [{ runId: runId(1), updates: Fork.resetUpdates(TS.empty, head) }]
  }
  const first = Fork.resetUpdates(TS.empty, { ...base, messages: earlier[0]! })
  const middle = earlier.slice(1).map((messages) => [{ messages }])
  // the last turn: the messages after the base when the head goes on from it, else the head's messages whole
  const prefix = base.messages.length <= head.messages.length &&
    base.messages.every((message, i) => same(message, head.messages[i]!))
  const [last, ...rest] = Fork.resetUpdates(base, head)
  const lastUpdates = last === undefined
    ? [{ messages: head.messages.slice(base.messages.length) }]
    : [prefix ? { ...last, messages: head.messages.slice(base.messages.length) } : last, ...rest]
  return [first, ...middle, lastUpdates].map((updates, i) => ({ runId: runId(i + 1), updates }))
}
