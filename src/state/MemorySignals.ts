/**
 * The signals of a conversation (DeerMem's `message_patterns`): what the user's recent lines say (a correction,
 * a confirmation, a preference...), named to the memory model as hints after the conversation and used by the
 * update queue to admit a conversation worth remembering when it is full.
 */

/** A line of a conversation, as `Memory.Turn`. */
type Line = { readonly role: "user" | "assistant"; readonly text: string }

/** What a user's recent words say, as DeerMem names it (a hint to the memory model, never stored). */
export type Signal = "correction" | "reinforcement" | "preference" | "identity" | "goal" | "decision"

/** A pattern of a user's message: whether it occurs in a text (`test`), whether it is the whole text (`matches`). */
export interface Pattern {
  readonly test: (text: string) => boolean
  readonly matches: (text: string) => boolean
}

/**
 * Patterns read from DeerMem's `patterns_dir` (`layers/memory/PatternFiles.ts`): those of a signal, or of the pure
 * acknowledgements (`trivial`), replace the built-in ones; a signal without patterns here keeps the built-in ones.
 */
export interface Patterns {
  readonly signals?: Partial<Readonly<Record<Signal, ReadonlyArray<Pattern>>>> | undefined
  readonly trivial?: ReadonlyArray<Pattern> | undefined
}

/** DeerMem's signal patterns (`message_patterns/*.yaml`), in its order. */
const SIGNAL_PATTERNS: ReadonlyArray<readonly [Signal, ReadonlyArray<RegExp>]> = [
  ["correction", [
    /\bthat(?:'s| is) (?:wrong|incorrect)\b/i,
    /\byou misunderstood\b/i,
    /\btry again\b/i,
    /\bredo\b/i,
    /不对|你理解错了|你理解有误|重试|重新来|换一种|改用/
  ]],
  ["reinforcement", [
    /\byes[,.]?\s+(?:exactly|perfect|that(?:'s| is) (?:right|correct|it))\b/i,
    /\bperfect(?:[.!?]|$)/i,
    /\bexactly\s+(?:right|correct)\b/i,
    /\bthat(?:'s| is)\s+(?:exactly\s+)?(?:right|correct|what i (?:wanted|needed|meant))\b/i,
    /\bkeep\s+(?:doing\s+)?that\b/i,
    /\bjust\s+(?:like\s+)?(?:that|this)\b/i,
    /\bthis is (?:great|helpful)\b(?:[.!?]|$)/i,
    /\bthis is what i wanted\b(?:[.!?]|$)/i,
    /对[，,]?\s*就是这样(?:[。！？!?.]|$)/,
    /完全正确(?:[。！？!?.]|$)/,
    /(?:对[，,]?\s*)?就是这个意思(?:[。！？!?.]|$)/,
    /正是我想要的(?:[。！？!?.]|$)/,
    /继续保持(?:[。！？!?.]|$)/,
    /(?:以后|今后)(?:都|一直)?保持这样(?:[。！？!?.]|$)/
  ]],
  ["preference", [
    /\bI (?:really )?(?:prefer|like|love|enjoy|favor)\b/i,
    /\bI (?:really )?(?:hate|dislike|don.t like|cannot stand)\b/i,
    /\bmy favorite\b/i,
    /\bI.d rather\b/i,
    /我喜欢|我偏好|我更喜欢|我偏爱|我讨厌|我不喜欢|我钟爱|我最喜欢/
  ]],
  ["identity", [
    /\bI am (?:a |an )?[a-z][a-z -]{2,}\b/i,
    /\bI work as\b/i,
    /\bI.m (?:a |an )?[a-z][a-z -]{2,}\b/i,
    /\bmy job is\b/i,
    /我是|我的职业是|我的工作是|我担任/
  ]],
  ["goal", [
    /\bI (?:plan to|want to|am going to|aim to|intend to)\b/i,
    /\bmy goal is\b/i,
    /\bI.m going to\b/i,
    /\bnext I.ll\b/i,
    /我的目标是|我打算|我准备|接下来我要|我想做/
  ]],
  ["decision", [
    /\blet.s (?:go with|use|pick|choose)\b/i,
    /\bI.ll (?:go with|use|pick|choose)\b/i,
    /\bwe (?:should|will) (?:go with|use|pick|choose)\b/i,
    /\bI (?:decide|chose|selected) to\b/i,
    /就用|决定用|决定采用|我们选|我选|就采用/
  ]]
]

/** How many of the last lines of a conversation are read for signals (DeerMem's `messages[-6:]`). */
const SIGNAL_WINDOW = 6

/**
 * The signals of a conversation: those whose patterns (`custom`'s, else the built-in ones) match a user line among
 * its last six lines.
 */
export const signalsOf = (turns: ReadonlyArray<Line>, custom?: Patterns): ReadonlySet<Signal> => {
  const recent = turns.slice(-SIGNAL_WINDOW).filter((t) => t.role === "user").map((t) => t.text.trim())
  const found = new Set<Signal>()
  for (const [signal, builtIn] of SIGNAL_PATTERNS) {
    const patterns: ReadonlyArray<{ readonly test: (text: string) => boolean }> = custom?.signals?.[signal] ?? builtIn
    if (recent.some((text) => text !== "" && patterns.some((p) => p.test(text)))) found.add(signal)
  }
  return found
}

/** DeerMem's hint for each signal (`MemoryUpdater._build_signal_hints`), word for word. */
const SIGNAL_HINTS: Readonly<Record<Signal, string>> = {
  correction: "IMPORTANT: Explicit correction signals were detected in this conversation. " +
    "Record a correction with confidence >= 0.95 only when it describes a durable, user-level " +
    "working preference that is safe to reuse across unrelated tasks. A correction to facts, files, " +
    "directions, or constraints in the current task is thread- or project-scoped and must not be stored.",
  reinforcement: "IMPORTANT: Positive reinforcement signals were detected in this conversation. " +
    "Record the confirmed approach, style, or preference with high confidence only if it is a durable, " +
    "user-level pattern. Approval of the current result or current task is thread-scoped and must not be stored.",
  preference: "IMPORTANT: A preference signal was detected. Record it with high confidence only when it is a " +
    "durable, user-level preference; a one-off choice for the current task is thread-scoped and must not be stored.",
  identity: "IMPORTANT: An identity signal was detected. Record the user's stated role, profession, or background " +
    "only when it is user-level and durable across tasks.",
  goal: "IMPORTANT: A goal signal was detected. Record only a durable, user-level goal that remains useful across " +
    "unrelated tasks; the objective of the current task, sprint, PR, or thread must not be stored.",
  decision: "IMPORTANT: A decision signal was detected. Record only a durable, user-level decision or working " +
    "pattern; a choice made for the current task, file, PR, or thread must not be stored."
}

/** The hints of signals, one a line, in DeerMem's order (empty without a signal). */
export const hintsFor = (signals: ReadonlySet<Signal>): string =>
  SIGNAL_PATTERNS.flatMap(([signal]) => (signals.has(signal) ? [SIGNAL_HINTS[signal]] : [])).join("\n")

/** The hints of a conversation's signals (`hintsFor(signalsOf(turns))`). */
export const signalHints = (turns: ReadonlyArray<Line>, custom?: Patterns): string => hintsFor(signalsOf(turns, custom))
