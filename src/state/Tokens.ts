/**
 * Token counting with a real tokenizer (o200k, the encoding of the GPT-4o / GPT-5 family), cached so that a
 * check over a long thread costs O(new messages): each message object is tokenized once (a WeakMap keyed by
 * the message), and running totals are kept per messages array so a thread that grew by a few messages is
 * summed from the previous total. Pure: no Effect services, no I/O.
 */
import type { countTokens } from "gpt-tokenizer/encoding/o200k_base"
import { createRequire } from "node:module"
import type { Message } from "./Message.js"

// The o200k encoding is 3 MB of JavaScript (its BPE ranks): it loads when a text is first tokenized, not with
// this module, so a command (or a run whose checks never need an exact count) does not pay for it. Node caches
// the module after the first `require`.
const requireCjs = createRequire(import.meta.url)
const tokenizer = (): typeof countTokens =>
  (requireCjs("gpt-tokenizer/encoding/o200k_base") as { countTokens: typeof countTokens }).countTokens

/**
 * The longest run of one kind (whitespace, or anything else) tokenized in one piece. BPE merging is quadratic
 * in the length of a pre-tokenized chunk, and o200k's chunks have no bound for letters without spaces (CJK text,
 * `aaaa…`), punctuation or whitespace: 256 KB of one letter took half a minute, 16 KB of CJK text over a second.
 * A longer run is counted in pieces of this length, which keeps counting linear in the text's length; a cut
 * inside such a run may change the count by a token.
 */
export const MAX_RUN = 128

const isSpace = (code: number): boolean =>
  code === 32 || (code >= 9 && code <= 13) || code === 0xa0 || code === 0x3000 || code === 0x2028 || code === 0x2029

/**
 * The o200k token count of a text. Special-token text such as `<|endoftext|>` in user content is counted as
 * ordinary text (the tokenizer would throw on it by default). Runs longer than `MAX_RUN` without a change
 * between whitespace and the rest are counted in pieces (never between the halves of a surrogate pair).
 */
export const countText = (text: string): number => {
  if (text === "") return 0
  const count = tokenizer()
  const options = { disallowedSpecial: new Set<string>() }
  if (text.length <= MAX_RUN) return count(text, options)
  let total = 0
  let start = 0
  let runStart = 0
  let runSpace = isSpace(text.charCodeAt(0))
  for (let i = 1; i < text.length; i++) {
    const code = text.charCodeAt(i)
    const space = isSpace(code)
    if (space !== runSpace) {
      runSpace = space
      runStart = i
    } else if (i - runStart >= MAX_RUN && (code < 0xdc00 || code > 0xdfff)) {
      total += count(text.slice(start, i), options)
      start = i
      runStart = i
    }
  }
  return total + count(text.slice(start), options)
}

/**
 * A network-free estimate of tokens (DeerMem's `_char_based_token_estimate`, memory's `token_counting: char`): a
 * quarter token per character, half a token per CJK character (ideographs U+4E00–U+9FFF, kana U+3040–U+30FF,
 * Hangul syllables U+AC00–U+D7A3), each part rounded down. Characters are code points, as Python counts them.
 */
export const estimateText = (text: string): number => {
  let chars = 0
  let cjk = 0
  for (const ch of text) {
    chars++
    const code = ch.codePointAt(0)!
    // CJK ideographs, kana, Hangul syllables
    if ((code >= 0x4e00 && code <= 0x9fff) || (code >= 0x3040 && code <= 0x30ff) ||
      (code >= 0xac00 && code <= 0xd7a3)) {
      cjk++
    }
  }
  return Math.floor((chars - cjk) / 4) + Math.floor(cjk / 2)
}

/** Framing tokens of one chat message (role, separators), as in OpenAI's chat format. */
export const MESSAGE_OVERHEAD = 4

/** Tokens charged for one image block; providers bill by size, this is the cost of a 1024×1024 image. */
export const IMAGE_TOKENS = 765

/**
 * The text a message is counted from: its text blocks, its name, and for AI messages each tool call's name
 * and JSON arguments. Images are charged `IMAGE_TOKENS` each, separately.
 */
export const countedText = (message: Message): string => {
  let out = ""
  const add = (part: string | undefined) => {
    if (part !== undefined && part !== "") out = out === "" ? part : `${out}\n${part}`
  }
  if (typeof message.content === "string") add(message.content)
  else {
    for (const block of message.content) {
      if (block.type === "text" && typeof block.text === "string") add(block.text)
      else if (block.type !== "image_url") {
        const other = block as Record<string, unknown>
        if (typeof other.text === "string") add(other.text)
        if (typeof other.thinking === "string") add(other.thinking)
      }
    }
  }
  add(message.name)
  if (message.type === "ai") {
    for (const call of message.tool_calls ?? []) add(`${call.name}(${JSON.stringify(call.args)})`)
    for (const call of message.invalid_tool_calls ?? []) add(`${call.name ?? ""}(${call.args ?? ""})`)
  }
  return out
}

const imagesIn = (message: Message): number => {
  if (typeof message.content === "string") return 0
  let n = 0
  for (const block of message.content) if (block.type === "image_url") n++
  return n
}

/**
 * Tokens of one message and of message arrays, with caches. `countText` is injectable so tests can see how
 * often the tokenizer actually runs.
 */
export interface Counter {
  /** Tokens of one message (tokenized once per message object). */
  readonly message: (message: Message) => number
  /** Tokens of a text (not cached). */
  readonly text: (text: string) => number
  /** How many times the tokenizer ran on a message so far. */
  readonly tokenized: () => number
}

/** A counter with its own per-message cache. */
export const makeCounter = (count: (text: string) => number = countText): Counter => {
  const cache = new WeakMap<Message, number>()
  let tokenized = 0
  return {
    message: (message) => {
      let n = cache.get(message)
      if (n === undefined) {
        tokenized++
        n = MESSAGE_OVERHEAD + count(countedText(message)) + IMAGE_TOKENS * imagesIn(message)
        cache.set(message, n)
      }
      return n
    },
    text: count,
    tokenized: () => tokenized
  }
}

/** UTF-8 bytes of a text: an upper bound of its o200k tokens (every token stands for at least one byte). */
export const countBytes = (text: string): number => Buffer.byteLength(text, "utf8")

/**
 * A counter of upper bounds (bytes instead of tokens, same framing and image charges): never below the exact
 * count, and far cheaper. A check against a limit that the bound stays under needs no tokenizing at all.
 */
export const makeUpperBoundCounter = (): Counter => makeCounter(countBytes)

/** Tokens of one message (not cached; a `Counter` caches). */
export const messageTokens = (message: Message): number =>
  MESSAGE_OVERHEAD + countText(countedText(message)) + IMAGE_TOKENS * imagesIn(message)

// ---------------------------------------------------------------------------------------------------------
// Running totals

/**
 * Prefix sums of a messages array: `at(i)` is the token count of `messages[0..i)`, `total` of all of them.
 * Arrays that extend an earlier one share its sums.
 */
export interface Prefix {
  readonly length: number
  readonly total: number
  readonly at: (i: number) => number
}

interface Entry {
  /** `sums[i]` = tokens of the first `i` messages, valid for `i <= length`; may be shared with longer arrays. */
  readonly sums: Array<number>
  readonly length: number
}

/**
 * Running totals over successive versions of a thread's messages. A version seen before is answered from
 * its entry; a new version is derived from the last one: the common prefix (checked by object identity, a
 * pointer comparison per message and no tokenizing) keeps its sums, and only the messages after it are
 * counted. So a thread that grew by k messages costs k counts, whatever its length; a rewrite in the middle
 * (replace-by-id, a compaction) recounts from the first changed message, still from the per-message cache.
 */
export interface Totals {
  /** The prefix sums of this version of the messages. */
  readonly of: (messages: ReadonlyArray<Message>) => Prefix
  /** The per-message counter the totals are built from. */
  readonly counter: Counter
}

interface TotalsState {
  readonly counter: Counter
  readonly entries: WeakMap<ReadonlyArray<Message>, Entry>
  last: ReadonlyArray<Message> | undefined
  lastEntry: Entry | undefined
}

// Module functions over the owner's state rather than closures made per owner: an owner is made per run, and a
// closure made per run starts in the interpreter every run; `derive` loops over the whole history.

const derive = (state: TotalsState, messages: ReadonlyArray<Message>): Entry => {
  const { last, lastEntry, counter } = state
  let common = 0
  let sums: Array<number>
  if (last !== undefined && lastEntry !== undefined) {
    // A pointer comparison per message (about 2 µs at 2,000 messages). Remembering which array extends
    // which would avoid it, but a map from each version to the one before keeps every version alive.
    const limit = Math.min(last.length, messages.length)
    while (common < limit && messages[common] === last[common]) common++
    // The shared sums can be extended in place only if nothing else extended them past `common`.
    sums = lastEntry.sums.length === common + 1 ? lastEntry.sums : lastEntry.sums.slice(0, common + 1)
  } else sums = [0]
  let running = sums[common]!
  for (let i = common; i < messages.length; i++) {
    running += counter.message(messages[i]!)
    sums.push(running)
  }
  return { sums, length: messages.length }
}

const prefixOf = (entry: Entry): Prefix => ({
  length: entry.length,
  total: entry.sums[entry.length]!,
  at: (i) => entry.sums[i]!
})

const totalsOf = (state: TotalsState, messages: ReadonlyArray<Message>): Prefix => {
  let entry = state.entries.get(messages)
  if (entry === undefined) {
    entry = derive(state, messages)
    state.entries.set(messages, entry)
  }
  state.last = messages
  state.lastEntry = entry
  return prefixOf(entry)
}

/** Running totals for one owner (a run's middleware): keep one per run, so concurrent threads do not interfere. */
export const makeTotals = (counter: Counter = makeCounter()): Totals => {
  const state: TotalsState = { counter, entries: new WeakMap(), last: undefined, lastEntry: undefined }
  return { counter, of: (messages) => totalsOf(state, messages) }
}

/** Tokens of a list of messages (not cached). */
export const totalTokens = (messages: ReadonlyArray<Message>): number => {
  let n = 0
  for (const message of messages) n += messageTokens(message)
  return n
}
