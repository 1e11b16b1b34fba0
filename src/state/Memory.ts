/**
 * Long-term memory as data (SPEC §11): the memory document DeerFlow's DeerMem keeps per user (and per custom
 * agent) — summaries of the user's context and history, and facts with a category and a confidence — and the
 * pure functions around it: the conversation an update reads, the update a model returns and how it is applied
 * (through DeerMem's write gate, bounded in facts, only confident ones kept), and the search of the memory tools.
 * The block injected at the start of a thread is `MemoryInjection.ts`, the update's own schema `MemoryUpdate.ts`,
 * its prompt `MemoryPrompt.ts`, the write gate's rules `MemoryGate.ts` and the signals of a conversation
 * `MemorySignals.ts` (all re-exported here). No I/O here; storage and the update queue live in `layers/FileMemory.ts`.
 */
import type { Message } from "./Message.js"
import * as M from "./Message.js"
import type { SectionUpdate, Update } from "./MemoryUpdate.js"
import { factGateReason, Refusals, removalGateReason, summaryGateReason } from "./MemoryGate.js"
import { categoryOf } from "./MemoryInjection.js"
import * as MemoryCapacity from "./MemoryCapacity.js"
import * as MemoryConsolidation from "./MemoryConsolidation.js"
import * as MemoryEviction from "./MemoryEviction.js"
import * as MemoryReinforcement from "./MemoryReinforcement.js"
import type { Pattern, Signal } from "./MemorySignals.js"
import * as MemoryStaleness from "./MemoryStaleness.js"
import type { Document, Fact, Section } from "./MemorySchema.js"
import { contentKey, expectedValidDaysOf } from "./MemorySchema.js"

import type { Turn } from "./MemoryPrompt.js"

export type { Turn } from "./MemoryPrompt.js"
export {
  clipTurn,
  MANUAL_SOURCE,
  MAX_TURN_CHARS,
  type PromptOptions,
  TURN_EDGE_CHARS,
  updatePrompt,
  type UpdateVariables,
  updateVariables
} from "./MemoryPrompt.js"

export {
  CATEGORIES,
  decodeDocument,
  Document,
  empty,
  Fact,
  History,
  isEmpty,
  Section,
  UserContext,
  withFactIds
} from "./MemorySchema.js"

export { factGateReason, type GateReason, removalGateReason, summaryGateReason } from "./MemoryGate.js"
export { type Pattern, type Patterns, type Signal, signalHints, signalsOf } from "./MemorySignals.js"

export {
  categoryName,
  categoryOf,
  CUT_MARKER,
  formatForInjection,
  head,
  type InjectionOptions,
  isGuaranteed,
  MAX_CHARS_PER_TOKEN
} from "./MemoryInjection.js"

// ---------------------------------------------------------------------------------------------------------
// What an update reads

/** Where `needle` (a tag: no pattern characters) is in `text` from `from` on, in any case; -1 when it is not. */
const indexOfAnyCase = (text: string, needle: string, from: number): number => {
  const pattern = new RegExp(needle, "gi")
  pattern.lastIndex = from
  return pattern.exec(text)?.index ?? -1
}

/**
 * The text without its blocks of the given tags, in any case (`<UPLOADED_FILES>` too, as DeerMem's `re.IGNORECASE`),
 * opening to closing (and the whitespace after each when `trailing`), by search rather than a lazy regex, which
 * rescans to the end of the text for each opening tag without a closing one (quadratic in a text the user or the
 * model wrote).
 */
export const removeBlocks = (text: string, tags: ReadonlyArray<string>, trailing = false): string => {
  let out = text
  for (const tag of tags) {
    const open = `<${tag}>`
    const close = `</${tag}>`
    let from = 0
    let result = ""
    for (;;) {
      const start = indexOfAnyCase(out, open, from)
      if (start < 0) break
      const end = indexOfAnyCase(out, close, start + open.length)
      if (end < 0) break
      let after = end + close.length
      if (trailing) while (after < out.length && /\s/.test(out[after]!)) after++
      result += out.slice(from, start)
      from = after
    }
    if (from > 0) out = result + out.slice(from)
  }
  return out
}

const UPLOADS_TAGS = ["current_uploads", "uploaded_files"]

/** A user message worth remembering from: visible, or a hidden, well-formed answer to a clarification question. */
const isUserTurn = (message: Message): boolean =>
  message.type === "human" && message.name !== "summary" &&
  (!M.isHidden(message) || M.isHumanInputResponse(message.additional_kwargs?.human_input_response))

/**
 * DeerMem's pure acknowledgements (`message_patterns/trivial.yaml`): a user message that is nothing else, once
 * trailing whitespace and punctuation are removed, says nothing worth remembering.
 */
const TRIVIAL = /^(?:嗯+|ok(?:ay)?|好的[呢]?|好[的呀]?|谢谢|感谢|多谢|对|是的|收到|明白|了解|知道了|got it|thanks|thank you|cheers)$/i
const TRIVIAL_TRAIL = /[ \t\n\r.。,，!！?？;；]+$/

/**
 * Whether a user's message is only an acknowledgement ("ok.", "thanks", "好的！"): the built-in patterns, or those
 * given (DeerMem's `trivial.yaml` of `patterns_dir`), matched against the whole of it.
 */
export const isTrivial = (text: string, patterns?: ReadonlyArray<Pattern>): boolean => {
  const bare = text.trim().replace(TRIVIAL_TRAIL, "")
  return patterns === undefined ? TRIVIAL.test(bare) : bare !== "" && patterns.some((p) => p.matches(bare))
}

/**
 * The conversation of messages after `afterId` (all of them when it is not among them): the user's own
 * messages (uploads blocks removed; a message that was only an uploads block, or only an acknowledgement such as
 * "ok" or "thanks", is dropped with the reply to it) and the assistant's final answers (AI messages without tool
 * calls). Empty unless it has at least one user and one assistant line. `trivial`: the acknowledgements' patterns
 * (default: the built-in ones).
 */
export const conversation = (
  messages: ReadonlyArray<Message>,
  afterId?: string,
  trivial?: ReadonlyArray<Pattern>
): ReadonlyArray<Turn> => {
  let start = 0
  if (afterId !== undefined) {
    const at = messages.findIndex((m) => m.id === afterId)
    if (at >= 0) start = at + 1
  }
  const out: Array<Turn> = []
  let skipReply = false
  for (let i = start; i < messages.length; i++) {
    const message = messages[i]!
    if (isUserTurn(message)) {
      const original = message.additional_kwargs?.original_user_content
      const raw = typeof original === "string" ? original : M.text(message)
      const text = removeBlocks(raw, UPLOADS_TAGS, true).trim()
      skipReply = text === "" || isTrivial(text, trivial)
      if (!skipReply) out.push({ role: "user", text })
    } else if (message.type === "ai" && !M.hasToolCalls(message)) {
      const text = removeBlocks(M.text(message), ["think"]).trim()
      if (text !== "" && !skipReply) out.push({ role: "assistant", text })
      skipReply = false
    }
  }
  const hasUser = out.some((t) => t.role === "user")
  const hasAssistant = out.some((t) => t.role === "assistant")
  return hasUser && hasAssistant ? out : []
}

/** The id of the last message a conversation was read up to. */
export const lastMessageId = (messages: ReadonlyArray<Message>): string | undefined => messages.at(-1)?.id

// ---------------------------------------------------------------------------------------------------------
// The update a model returns (read from its answer in `MemoryUpdate.ts`)

export { decodeUpdate, gateLabel, parseUpdate, Update, updateJson } from "./MemoryUpdate.js"

/** How an update is applied. */
export interface ApplyOptions {
  /** Now, as an ISO timestamp. */
  readonly now: string
  readonly maxFacts: number
  /** Facts less confident than this are not kept. */
  readonly threshold: number
  /** Makes a fresh fact id. */
  readonly newId: () => string
  /** Where new facts come from (the thread id). */
  readonly source: string
  /** DeerMem's `hybrid-v1` capacity policy and its settings; without it, the most confident facts stay (`bound`). */
  readonly hybrid?: MemoryEviction.Settings | undefined
  /** The facts' recall records (`MemoryRecall.forPolicy`), read by `hybrid` (and `shadow`). */
  readonly usage?: ReadonlyMap<string, MemoryEviction.Usage> | undefined
  /** DeerMem's shadow mode (without `hybrid`): what `hybrid-v1` would leave out is in `capacity`, for the audit. */
  readonly shadow?: MemoryEviction.Settings | undefined
  /** The signals of the conversation the update read: a `reinforcement` one lets `hybrid` record confirmations. */
  readonly signals?: ReadonlySet<Signal> | undefined
  /** DeerMem's consolidation settings, when it is enabled: the update's merges are made (`MemoryConsolidation`). */
  readonly consolidation?: MemoryConsolidation.Settings | undefined
  /** The staleness review's settings (`MemoryStaleness.ts`); without them, DeerMem's defaults. */
  readonly staleness?: MemoryStaleness.Settings | undefined
}

// (what `search` compares: words without case and spacing)
const normalise = (text: string) => text.replace(/\s+/g, " ").trim().toLowerCase()

/** Whether two facts say the same words (ignoring case, folded as DeerMem folds it, and spacing): a repeat. */
export const sameContent = (a: string, b: string): boolean => contentKey(a) === contentKey(b)

/** Keeps the `max` most confident facts (ties: the newer one), in their original order. */
export const bound = (facts: ReadonlyArray<Fact>, max: number): ReadonlyArray<Fact> =>
  MemoryCapacity.decide(facts, max).kept

/**
 * The `max` facts a memory keeps: with DeerMem's `hybrid-v1` settings and the time (milliseconds), those the policy
 * scores highest (with the facts' recall records, `usage`); else the most confident (`bound`).
 */
export const boundFacts = (
  facts: ReadonlyArray<Fact>,
  max: number,
  hybrid?: MemoryCapacity.Hybrid | undefined
): ReadonlyArray<Fact> => MemoryCapacity.decide(facts, max, hybrid).kept

// ---------------------------------------------------------------------------------------------------------
// The write gate (DeerMem's scope gate): what the model labels as the user's, durable and descriptive is stored

/** A document an update made, and what the write gate refused of the update (empty when nothing was). */
export interface Applied {
  readonly value: Document
  readonly refused: ReadonlyArray<string>
  /** What the staleness review removed and extended (ids), and how many of its decisions it ignored. */
  readonly staleness: Omit<MemoryStaleness.Reviewed<Fact>, "facts">
  /** What `maxFacts` left out of the update, for the eviction audit (`MemoryAudit`; nothing when it left none). */
  readonly capacity: MemoryCapacity.Decision<Fact>
}

const applySection = (
  where: string,
  current: Section,
  update: typeof SectionUpdate.Type | null | undefined,
  now: string,
  refusals: Refusals
): Section => {
  if (update == null || update.shouldUpdate === false) return current
  const summary = update.summary?.trim()
  if (summary === undefined || summary === "") return current
  const refused = summaryGateReason(update)
  if (refused !== undefined) {
    refusals.summary(where, refused)
    return current
  }
  if (summary === current.summary) return current
  return { summary, updatedAt: now }
}

/**
 * Applies a model's update through DeerMem's write gate: summaries it rewrote (`shouldUpdate` not false, a
 * non-empty summary) labelled `scope: user` and `authority: descriptive`; facts it removed (by id) with
 * `scope: user` and a reason; new facts labelled `scope: user`, `durability: durable`, `authority: descriptive`, at
 * or above the confidence threshold and not already known (same words, ignoring case and spacing); then the most
 * confident `maxFacts` kept (with `hybrid`, those DeerMem's `hybrid-v1` policy keeps); what names an upload event
 * is then left out (`stripUploadMentions`). A removal with a `replacementFactIndex` is made last, and only when that
 * new fact is in the result under another id (it passed the gate and the threshold and was kept): a replacement
 * that was refused must not leave only the deletion of what it replaced. Under `hybrid` with a `reinforcement`
 * signal, the facts the user confirmed are recorded first (`MemoryReinforcement`); then the staleness review's
 * decisions are applied to the facts due for review (`MemoryStaleness.reviewFacts`, at `now`; a confirmation
 * restarts a fact's window); a new fact keeps its `expected_valid_days`, at most `MemoryStaleness.creationCap`;
 * with `consolidation`, the update's merges are made last (`MemoryConsolidation`: through the same gate as a new
 * fact). What the gate refused is named in `refused` (for the warning the caller logs).
 */
export const applyUpdateGated = (doc: Document, update: Update, options: ApplyOptions): Applied => {
  const refusals = new Refusals()
  // confirmations first, so that the trim below already counts them (only where they count: hybrid-v1)
  const confirming = options.hybrid !== undefined && options.signals?.has("reinforcement") === true
  const current = confirming
    ? MemoryReinforcement.reinforce(doc.facts, update.factsToReinforce ?? [], options.now)
    : doc.facts
  const removed = new Set<string>()
  const paired: Array<{ readonly id: string; readonly index: number }> = []
  for (const removal of update.factsToRemove ?? []) {
    const refused = removalGateReason(removal) ?? (removal.id.trim() === "" ? "missing" : undefined)
    if (refused !== undefined) {
      refusals.removal(refused)
      continue
    }
    const index = removal.replacementFactIndex
    if (index === undefined) {
      removed.add(removal.id)
    } else if (typeof index === "number" && Number.isInteger(index) && index >= 0) {
      paired.push({ id: removal.id, index })
    } else {
      refusals.removal("replacement")
    }
  }
  const staleness = options.staleness ?? MemoryStaleness.DEFAULT_SETTINGS
  const { facts: reviewed, ...review } =
    MemoryStaleness.reviewFacts(current, update, staleness, Date.parse(options.now))
  const facts: Array<Fact> = reviewed.filter((f) => !removed.has(f.id))
  const known = new Set(facts.map((f) => contentKey(f.content)))
  // what each new fact that passed the gate and the threshold says: a removal it replaces checks it was kept
  const replacements = new Map<number, string>()
  for (const [index, candidate] of (update.newFacts ?? []).entries()) {
    const refused = factGateReason(candidate)
    if (refused !== undefined) {
      refusals.fact(refused)
      continue
    }
    const content = candidate.content.trim()
    const confidence = Math.min(1, Math.max(0, candidate.confidence ?? 0.5))
    if (content === "" || confidence < options.threshold) continue
    replacements.set(index, contentKey(content))
    if (known.has(contentKey(content))) continue
    known.add(contentKey(content))
    const sourceError = candidate.sourceError?.trim()
    const lifetime = expectedValidDaysOf(candidate.expected_valid_days)
    facts.push({
      id: options.newId(),
      content,
      category: candidate.category?.trim() || "context",
      confidence,
      createdAt: options.now,
      source: options.source,
      ...(sourceError ? { sourceError } : {}),
      ...(lifetime === undefined
        ? {}
        : { expected_valid_days: Math.min(lifetime, MemoryStaleness.creationCap(staleness)) })
    })
  }
  const { now } = options
  const policy = (settings: MemoryEviction.Settings | undefined) =>
    settings === undefined ? undefined : { settings, now: Date.parse(now), usage: options.usage }
  const capacity = MemoryCapacity.decide(facts, options.maxFacts, policy(options.hybrid), policy(options.shadow))
  const applied = stripUploadMentions({
    ...doc,
    lastUpdated: now,
    user: {
      workContext: applySection("user.workContext", doc.user.workContext, update.user?.workContext, now, refusals),
      personalContext: applySection(
        "user.personalContext",
        doc.user.personalContext,
        update.user?.personalContext,
        now,
        refusals
      ),
      topOfMind: applySection("user.topOfMind", doc.user.topOfMind, update.user?.topOfMind, now, refusals)
    },
    history: {
      recentMonths: applySection(
        "history.recentMonths",
        doc.history.recentMonths,
        update.history?.recentMonths,
        now,
        refusals
      ),
      earlierContext: applySection(
        "history.earlierContext",
        doc.history.earlierContext,
        update.history?.earlierContext,
        now,
        refusals
      ),
      longTermBackground: applySection(
        "history.longTermBackground",
        doc.history.longTermBackground,
        update.history?.longTermBackground,
        now,
        refusals
      )
    },
    facts: capacity.kept
  })
  const replaced = new Set<string>()
  for (const { id, index } of paired) {
    const key = replacements.get(index)
    if (key === undefined || !applied.facts.some((f) => f.id !== id && contentKey(f.content) === key)) {
      refusals.removal("replacement")
    } else {
      replaced.add(id)
    }
  }
  const value = replaced.size === 0 ? applied : { ...applied, facts: applied.facts.filter((f) => !replaced.has(f.id)) }
  // merges last: a source the trim or a removal took is gone, so a merge cannot delete it (or outlive its sources)
  if (options.consolidation === undefined || (update.factsToConsolidate ?? []).length === 0) {
    return { value, refused: refusals.all(), staleness: review, capacity }
  }
  const merged = MemoryConsolidation.consolidate(value.facts, update.factsToConsolidate ?? [], {
    settings: options.consolidation,
    threshold: options.threshold,
    now,
    newId: options.newId,
    admissible: (content) => !UPLOAD_EVENT.test(content),
    staleness
  })
  for (const reason of merged.refused) refusals.consolidation(reason)
  return {
    value: merged.facts === value.facts ? value : { ...value, facts: merged.facts },
    refused: refusals.all(),
    staleness: review,
    capacity
  }
}

/** Applies a model's update (`applyUpdateGated`), without what its write gate refused. */
export const applyUpdate = (doc: Document, update: Update, options: ApplyOptions): Document =>
  applyUpdateGated(doc, update, options).value

/**
 * What names an upload event (DeerMem's pattern): "uploaded a test file", "uploading document attachments", "file
 * upload", an uploads path or block. Narrow on purpose: "works with CSV files" or "prefers PDF export" stay.
 */
const UPLOAD_EVENT = new RegExp(
  String.raw`\b(?:upload(?:ed|ing)?(?:\s+\w+){0,3}\s+(?:file|files?|document|documents?|attachment|attachments?)` +
    String.raw`|file\s+upload|\/mnt\/user-data\/uploads\/|<(?:uploaded_files|current_uploads)>)`,
  "i"
)

const isSentenceEnd = (c: string) => c === "." || c === "!" || c === "?"

/**
 * A summary without its sentences about an upload event, as DeerMem's scrub leaves it: each stretch between two
 * of `.`, `!`, `?` that names one goes, with the mark that ends it and the blanks after; runs of spaces are then
 * collapsed. (Sentence by sentence: one regex over the whole text rescans each stretch from every position.)
 */
export const withoutUploadMentions = (text: string): string => {
  let out = ""
  let at = 0
  while (at < text.length) {
    let end = at
    while (end < text.length && !isSentenceEnd(text[end]!)) end++
    let next = end < text.length ? end + 1 : end
    if (UPLOAD_EVENT.test(text.slice(at, end))) {
      while (next < text.length && /\s/.test(text[next]!)) next++
    } else {
      out += text.slice(at, next)
    }
    at = next
  }
  return out.trim().replace(/ {2,}/g, " ")
}

/**
 * A document without upload events (uploads belong to one thread: a later one would look for files that are not
 * there): scrubbed summaries (`withoutUploadMentions`), and no fact that names one.
 */
export const stripUploadMentions = (doc: Document): Document => {
  const scrub = (section: Section): Section => {
    const summary = withoutUploadMentions(section.summary)
    return summary === section.summary ? section : { ...section, summary }
  }
  return {
    ...doc,
    user: {
      workContext: scrub(doc.user.workContext),
      personalContext: scrub(doc.user.personalContext),
      topOfMind: scrub(doc.user.topOfMind)
    },
    history: {
      recentMonths: scrub(doc.history.recentMonths),
      earlierContext: scrub(doc.history.earlierContext),
      longTermBackground: scrub(doc.history.longTermBackground)
    },
    facts: doc.facts.filter((fact) => !UPLOAD_EVENT.test(fact.content))
  }
}

/** Most threads whose watermark a document keeps (the oldest are forgotten first). */
export const MAX_WATERMARKS = 500

/** Records that a thread was read up to `messageId`. */
export const withWatermark = (doc: Document, threadId: string, messageId: string): Document => {
  const { [threadId]: _, ...others } = doc.threads
  const entries = Object.entries(others)
  const kept = entries.slice(Math.max(0, entries.length - (MAX_WATERMARKS - 1)))
  return { ...doc, threads: { ...Object.fromEntries(kept), [threadId]: messageId } }
}

// ---------------------------------------------------------------------------------------------------------
// Facts as the memory tools see them

/**
 * The signs around a query's word ("TypeScript?", `"alpha beta"`, "(tea),"), left out as DeerFlow's tokenizer
 * (unicode61) leaves them out; `+` and `#` stay (C++, C#).
 */
const LEADING_SIGNS = /^[^\p{L}\p{M}\p{N}+#]+/u
const TRAILING_SIGNS = /[^\p{L}\p{M}\p{N}+#]+$/u

/**
 * Facts whose content or category contains any word of the query (case-insensitive, without the signs around
 * it), those holding more words first, then the more confident; an empty query: every fact, the most confident
 * first; a query of signs alone: none.
 */
export const search = (doc: Document, query: string, options: {
  readonly category?: string | undefined
  readonly limit: number
}): ReadonlyArray<Fact> => {
  const all = normalise(query)
  const words = all.split(" ")
    .map((w) => w.replace(LEADING_SIGNS, "").replace(TRAILING_SIGNS, ""))
    .filter((w) => w !== "")
  // a query of signs alone names nothing (DeerFlow's tokenizer leaves it no word)
  if (all !== "" && words.length === 0) return []
  return doc.facts
    .filter((f) => options.category === undefined || categoryOf(f) === options.category)
    .map((fact) => {
      const hay = normalise(`${fact.content} ${categoryOf(fact)}`)
      const hits = words.filter((w) => hay.includes(w)).length
      return { fact, hits }
    })
    .filter((r) => words.length === 0 || r.hits > 0)
    .sort((a, b) => b.hits - a.hits || b.fact.confidence - a.fact.confidence)
    .slice(0, Math.max(1, options.limit))
    .map((r) => r.fact)
}
