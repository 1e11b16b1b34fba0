/**
 * Request passes that follow a thread's history as it grows. Within a run, each request carries the messages of
 * the one before plus the step's new ones: a pass that remembers the last array it read (per thread) and what it
 * made of it reads only what was appended. Whether an array extends the last one is checked by identity, slot by
 * slot: reading array slots is a few instructions each, where reading a property of a message (messages come in
 * many shapes, so every such read is a megamorphic lookup) costs tens. Anything else (a compaction, a replaced
 * message, another thread) is a miss and the pass reads the whole array, so results are always those of a full
 * pass.
 */
import type { Message } from "../../state/Message.js"

/** Whether `next` starts with every message of `previous`, the same objects (a history that only grew). */
export const extendsHistory = (next: ReadonlyArray<Message>, previous: ReadonlyArray<Message>): boolean => {
  if (next.length < previous.length) return false
  // newest first: a history that changed most likely changed near its end
  for (let i = previous.length - 1; i >= 0; i--) if (next[i] !== previous[i]) return false
  return true
}

/** The last array a pass read for a thread, and what it made of it. */
export interface Seen<A> {
  readonly input: ReadonlyArray<Message>
  readonly value: A
}

/** What a pass remembers, per thread. */
export interface Memo<A> {
  /** The last result for a history that `messages` extends (`input.length` is where the new part starts). */
  readonly get: (messages: ReadonlyArray<Message>) => Seen<A> | undefined
  readonly set: (messages: ReadonlyArray<Message>, value: A) => void
}

/**
 * A memo for one pass of one agent. Entries are keyed by a history's first message (so concurrent runs of
 * different threads keep their own) and weakly: an entry goes with the thread's messages.
 */
export const makeMemo = <A>(): Memo<A> => {
  const seen = new WeakMap<Message, Seen<A>>()
  return {
    get: (messages) => {
      if (messages.length === 0) return undefined
      const last = seen.get(messages[0]!)
      return last !== undefined && extendsHistory(messages, last.input) ? last : undefined
    },
    set: (messages, value) => {
      if (messages.length > 0) seen.set(messages[0]!, { input: messages, value })
    }
  }
}

/**
 * `messages` with `f` applied to each (`f` returns the same object for a message it leaves as is, and depends
 * on nothing but the message): the same array when nothing changes. With a memo, the messages a previous call
 * already mapped are taken from its result.
 */
export const mapMessages = (
  messages: ReadonlyArray<Message>,
  f: (message: Message) => Message,
  memo?: Memo<ReadonlyArray<Message>>
): ReadonlyArray<Message> => {
  const last = memo?.get(messages)
  const from = last === undefined ? 0 : last.input.length
  let result: ReadonlyArray<Message>
  if (last !== undefined && last.value !== last.input) {
    // The mapped prefix differs from the prefix itself: the new messages mapped, after it. (One array of the
    // whole length made at once: a copy of the prefix grown by `push` was made twice, its growth copying it
    // again, and a request's history is hundreds of messages long.)
    const tail: Array<Message> = []
    for (let i = from; i < messages.length; i++) tail.push(f(messages[i]!))
    result = tail.length === 0 ? last.value : last.value.concat(tail)
  } else {
    let out: Array<Message> | undefined
    for (let i = from; i < messages.length; i++) {
      const message = messages[i]!
      const mapped = f(message)
      if (out !== undefined) out[i] = mapped
      else if (mapped !== message) {
        // (a copy of the whole, then written over from here on)
        out = messages.slice()
        out[i] = mapped
      }
    }
    result = out ?? messages
  }
  memo?.set(messages, result)
  return result
}

/**
 * The index of the last message that satisfies `test` (which depends on nothing but the message), or -1. With
 * a memo, only the messages after the last array read are tested.
 */
export const lastIndexOf = (
  messages: ReadonlyArray<Message>,
  test: (message: Message) => boolean,
  memo?: Memo<number>
): number => {
  const last = memo?.get(messages)
  const from = last === undefined ? 0 : last.input.length
  let found = -1
  for (let i = messages.length - 1; i >= from; i--) {
    if (test(messages[i]!)) {
      found = i
      break
    }
  }
  if (found < 0 && last !== undefined) found = last.value
  memo?.set(messages, found)
  return found
}
