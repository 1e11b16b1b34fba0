/**
 * The size limits of long-term memory: what a memory document may hold (facts: how many and how long each;
 * each summary's length; the short fields and the watermarks), and what a memory model's answer may bring
 * before it is decoded. A model's answer is untrusted (it echoes what a conversation says, and a hostile
 * server answers anything), and so is a `memory.json` someone else wrote: over the limits, text is cut, and
 * what was cut is named (one line each) for the warning the caller logs. Pure; the limits come from
 * `memory.backend_config` (`max_facts`, `max_fact_chars`, `max_summary_chars`).
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Json from "./Json.js"
import type { Section, Update } from "./Memory.js"
import { Document, head, MAX_WATERMARKS } from "./Memory.js"
import * as MemoryCapacity from "./MemoryCapacity.js"
import type * as MemoryEviction from "./MemoryEviction.js"
import { confidenceOf, Fact, withFactIds } from "./MemorySchema.js"
import * as MemoryStaleness from "./MemoryStaleness.js"
import type * as MemoryUpdate from "./MemoryUpdate.js"

/** The limits of a memory document. */
export interface Limits {
  /** Facts kept at most (the most confident). */
  readonly maxFacts: number
  /** Characters of one fact's content at most. */
  readonly maxFactChars: number
  /** Characters of one summary at most. */
  readonly maxSummaryChars: number
  /**
   * DeerMem's `hybrid-v1` capacity policy, when configured: which facts a document written past `maxFacts` keeps
   * (without it, or without the time, the most confident).
   */
  readonly hybrid?: MemoryEviction.Settings | undefined
  /** DeerMem's shadow mode (without `hybrid`): what `hybrid-v1` would leave out is computed for the audit. */
  readonly shadow?: MemoryEviction.Settings | undefined
}

/** Characters of a short field (an id, a category, a source, a timestamp, the version, a watermark) at most. */
export const MAX_LABEL_CHARS = 200

/** A value within its limits, and what was cut to get there (empty when nothing was). */
export interface Capped<A> {
  readonly value: A
  readonly cut: ReadonlyArray<string>
}

const chars = (n: number) => `${n.toLocaleString("en-US")} characters`

/** Counts what was cut of one kind, and names it once with how many. */
class Cuts {
  private readonly lines: Array<string> = []
  private readonly counts = new Map<string, number>()
  add(line: string) {
    this.lines.push(line)
  }
  count(what: string, n = 1) {
    this.counts.set(what, (this.counts.get(what) ?? 0) + n)
  }
  all(): ReadonlyArray<string> {
    return [...this.lines, ...[...this.counts].map(([what, n]) => `${n} ${what}`)]
  }
}

const label = (text: string, cuts: Cuts): string => {
  if (text.length <= MAX_LABEL_CHARS) return text
  cuts.count(`short fields (ids, categories, sources, timestamps) over ${chars(MAX_LABEL_CHARS)}`)
  return head(text, MAX_LABEL_CHARS)
}

const capSection = (where: string, section: Section, limits: Limits, cuts: Cuts): Section => {
  let { summary, updatedAt } = section
  if (summary.length > limits.maxSummaryChars) {
    cuts.add(`the summary ${where} (${chars(summary.length)}, kept ${chars(limits.maxSummaryChars)})`)
    summary = head(summary, limits.maxSummaryChars)
  }
  updatedAt = label(updatedAt, cuts)
  return summary === section.summary && updatedAt === section.updatedAt ? section : { summary, updatedAt }
}

const capFact = (fact: Fact, limits: Limits, cuts: Cuts): Fact => {
  let content = fact.content
  if (content.length > limits.maxFactChars) {
    cuts.count(`fact contents over ${chars(limits.maxFactChars)} (cut to it)`)
    content = head(content, limits.maxFactChars)
  }
  let sourceError = fact.sourceError
  if (sourceError !== undefined && sourceError.length > limits.maxFactChars) {
    cuts.count(`fact sourceErrors over ${chars(limits.maxFactChars)} (cut to it)`)
    sourceError = head(sourceError, limits.maxFactChars)
  }
  const id = label(fact.id, cuts)
  const category = fact.category === undefined ? undefined : label(fact.category, cuts)
  const createdAt = label(fact.createdAt, cuts)
  const source = label(fact.source, cuts)
  const lastConfirmedAt = fact.lastConfirmedAt === undefined ? undefined : label(fact.lastConfirmedAt, cuts)
  const consolidatedAt = fact.consolidatedAt === undefined ? undefined : label(fact.consolidatedAt, cuts)
  const from = fact.consolidatedFrom?.map((source) => label(source, cuts))
  const consolidatedFrom = from?.every((source, i) => source === fact.consolidatedFrom![i])
    ? fact.consolidatedFrom
    : from
  return content === fact.content && id === fact.id && category === fact.category &&
      createdAt === fact.createdAt && source === fact.source && sourceError === fact.sourceError &&
      lastConfirmedAt === fact.lastConfirmedAt && consolidatedAt === fact.consolidatedAt &&
      consolidatedFrom === fact.consolidatedFrom
    ? fact
    : {
      ...fact,
      id,
      content,
      ...(category === undefined ? {} : { category }),
      createdAt,
      source,
      ...(sourceError === undefined ? {} : { sourceError }),
      ...(lastConfirmedAt === undefined ? {} : { lastConfirmedAt }),
      ...(consolidatedAt === undefined ? {} : { consolidatedAt }),
      ...(consolidatedFrom === undefined ? {} : { consolidatedFrom })
    }
}

/**
 * A document within its limits: each summary and fact cut to its length, the most confident `maxFacts` facts
 * (with `limits.hybrid` and `now`, in milliseconds, those `hybrid-v1` keeps), the short fields cut, the newest
 * `MAX_WATERMARKS` watermarks (a watermark whose thread or message id is over `MAX_LABEL_CHARS` is dropped: a cut
 * id would name another message). The same document when nothing is over. `usage`, the facts' recall records, is
 * read by `hybrid-v1`; `capacity` is what `maxFacts` left out (for the eviction audit), when it left any.
 */
export const capDocument = (
  doc: Document,
  limits: Limits,
  now?: number,
  usage?: ReadonlyMap<string, MemoryEviction.Usage> | undefined
): Capped<Document> & { readonly capacity?: MemoryCapacity.Decision<Fact> } => {
  const cuts = new Cuts()
  const user = {
    workContext: capSection("user.workContext", doc.user.workContext, limits, cuts),
    personalContext: capSection("user.personalContext", doc.user.personalContext, limits, cuts),
    topOfMind: capSection("user.topOfMind", doc.user.topOfMind, limits, cuts)
  }
  const history = {
    recentMonths: capSection("history.recentMonths", doc.history.recentMonths, limits, cuts),
    earlierContext: capSection("history.earlierContext", doc.history.earlierContext, limits, cuts),
    longTermBackground: capSection("history.longTermBackground", doc.history.longTermBackground, limits, cuts)
  }
  let facts = doc.facts
  let capacity: MemoryCapacity.Decision<Fact> | undefined
  if (facts.length > limits.maxFacts) {
    const hybrid = limits.hybrid !== undefined && now !== undefined
      ? { settings: limits.hybrid, now, usage }
      : undefined
    cuts.add(
      `${facts.length - limits.maxFacts} facts over max_facts (${limits.maxFacts}; ` +
        `${hybrid === undefined ? "the least confident" : "the lowest scored by hybrid-v1"})`
    )
    const shadow = limits.shadow !== undefined && now !== undefined
      ? { settings: limits.shadow, now, usage }
      : undefined
    capacity = MemoryCapacity.decide(facts, limits.maxFacts, hybrid, shadow)
    facts = capacity.kept
  }
  const cappedFacts = facts.map((fact) => capFact(fact, limits, cuts))
  if (cappedFacts.some((fact, i) => fact !== facts[i])) facts = cappedFacts
  let threads = doc.threads
  const entries = Object.entries(threads)
  const valid = entries.filter(([thread, message]) =>
    thread.length <= MAX_LABEL_CHARS && message.length <= MAX_LABEL_CHARS
  )
  if (valid.length < entries.length) {
    cuts.count("watermarks with an id too long to keep (dropped)", entries.length - valid.length)
  }
  if (valid.length > MAX_WATERMARKS) {
    cuts.count(`watermarks over ${MAX_WATERMARKS} (the oldest)`, valid.length - MAX_WATERMARKS)
  }
  if (valid.length < entries.length || valid.length > MAX_WATERMARKS) {
    threads = Object.fromEntries(valid.slice(Math.max(0, valid.length - MAX_WATERMARKS)))
  }
  const version = label(doc.version, cuts)
  const lastUpdated = label(doc.lastUpdated, cuts)
  const cut = cuts.all()
  if (cut.length === 0) return { value: doc, cut }
  const value = { ...doc, version, lastUpdated, user, history, facts, threads }
  return capacity === undefined ? { value, cut } : { value, cut, capacity }
}

/**
 * A memory file's JSON (parsed, not decoded) with at most `maxFacts` facts (the most confident, each confidence
 * read as the decoded fact's: `confidenceOf`) and `MAX_WATERMARKS` watermarks (the last ones), so that
 * decoding a file someone filled with a hundred thousand facts does not hold the process; `capDocument` does the
 * rest once it is decoded.
 */
export const capRawDocument = (raw: unknown, limits: Limits): Capped<unknown> => {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { value: raw, cut: [] }
  const record = raw as Record<string, unknown>
  const cut: Array<string> = []
  let out: Record<string, unknown> | undefined
  const facts = record.facts
  if (Array.isArray(facts) && facts.length > limits.maxFacts) {
    const confidence = (fact: unknown) => {
      const value = typeof fact === "object" && fact !== null
        ? (fact as { confidence?: unknown }).confidence
        : undefined
      return confidenceOf(value)
    }
    const kept = new Set(
      facts.map((fact, index) => ({ c: confidence(fact), index }))
        .sort((a, b) => b.c - a.c || b.index - a.index)
        .slice(0, limits.maxFacts)
        .map((r) => r.index)
    )
    cut.push(`${facts.length - limits.maxFacts} facts over max_facts (${limits.maxFacts}; the least confident)`)
    ;(out ??= { ...record }).facts = facts.filter((_, index) => kept.has(index))
  }
  const threads = record.threads
  if (typeof threads === "object" && threads !== null && !Array.isArray(threads)) {
    const entries = Object.entries(threads)
    if (entries.length > MAX_WATERMARKS) {
      cut.push(`${entries.length - MAX_WATERMARKS} watermarks over ${MAX_WATERMARKS} (the oldest)`)
      ;(out ??= { ...record }).threads = Object.fromEntries(entries.slice(entries.length - MAX_WATERMARKS))
    }
  }
  return { value: out ?? raw, cut }
}

/**
 * A memory model's answer (its JSON, parsed but not decoded) with at most `maxFacts` new facts, fact ids to
 * remove, confirmations, merges and staleness decisions of each kind: no update can keep more, and decoding a
 * hostile answer's hundred thousand facts would hold the process for seconds. Anything that is not an object with
 * such arrays is left for the decoder to refuse.
 */
export const capRawUpdate = (raw: unknown, limits: Limits): Capped<unknown> => {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { value: raw, cut: [] }
  const record = raw as Record<string, unknown>
  const cut: Array<string> = []
  let out: Record<string, unknown> | undefined
  for (const key of ["newFacts", "factsToRemove", "factsToReinforce", "factsToConsolidate", ...MemoryStaleness.KEYS]) {
    const list = record[key]
    if (Array.isArray(list) && list.length > limits.maxFacts) {
      cut.push(
        `${list.length - limits.maxFacts} of the update's ${list.length} ${key} (at most max_facts, ${limits.maxFacts})`
      )
      ;(out ??= { ...record })[key] = list.slice(0, limits.maxFacts)
    }
  }
  return { value: out ?? raw, cut }
}

type SectionUpdate = typeof MemoryUpdate.SectionUpdate.Type

const capSectionUpdate = (
  where: string,
  section: SectionUpdate | null | undefined,
  limits: Limits,
  cuts: Cuts
): SectionUpdate | null | undefined => {
  const summary = section?.summary
  if (section == null || summary == null || summary.length <= limits.maxSummaryChars) return section
  cuts.add(`the summary ${where} (${chars(summary.length)}, kept ${chars(limits.maxSummaryChars)})`)
  return { ...section, summary: head(summary, limits.maxSummaryChars) }
}

/**
 * A decoded update within the limits of what it may store: summaries and fact contents (new or merged) cut to their
 * lengths, categories to `MAX_LABEL_CHARS` (so that repeats are recognised on what is stored).
 */
export const capUpdate = (update: Update, limits: Limits): Capped<Update> => {
  const cuts = new Cuts()
  const user = update.user == null ? update.user : {
    workContext: capSectionUpdate("user.workContext", update.user.workContext, limits, cuts),
    personalContext: capSectionUpdate("user.personalContext", update.user.personalContext, limits, cuts),
    topOfMind: capSectionUpdate("user.topOfMind", update.user.topOfMind, limits, cuts)
  }
  const history = update.history == null ? update.history : {
    recentMonths: capSectionUpdate("history.recentMonths", update.history.recentMonths, limits, cuts),
    earlierContext: capSectionUpdate("history.earlierContext", update.history.earlierContext, limits, cuts),
    longTermBackground: capSectionUpdate(
      "history.longTermBackground",
      update.history.longTermBackground,
      limits,
      cuts
    )
  }
  const newFacts = update.newFacts?.map((fact) => {
    let content = fact.content
    if (content.length > limits.maxFactChars) {
      cuts.count(`new facts over ${chars(limits.maxFactChars)} (cut to it)`)
      content = head(content, limits.maxFactChars)
    }
    let sourceError = fact.sourceError
    if (sourceError != null && sourceError.length > limits.maxFactChars) {
      cuts.count(`new facts' sourceErrors over ${chars(limits.maxFactChars)} (cut to it)`)
      sourceError = head(sourceError, limits.maxFactChars)
    }
    const category = fact.category == null ? fact.category : label(fact.category, cuts)
    return content === fact.content && category === fact.category && sourceError === fact.sourceError
      ? fact
      : { ...fact, content, category, sourceError }
  })
  const factsToConsolidate = update.factsToConsolidate?.map((merge) => {
    const fact = merge.consolidated
    let content = fact.content
    if (content.length > limits.maxFactChars) {
      cuts.count(`merged facts over ${chars(limits.maxFactChars)} (cut to it)`)
      content = head(content, limits.maxFactChars)
    }
    const category = label(fact.category, cuts)
    return content === fact.content && category === fact.category
      ? merge
      : { ...merge, consolidated: { ...fact, content, category } }
  })
  const cut = cuts.all()
  if (cut.length === 0) return { value: update, cut }
  return { value: { ...update, user, history, newFacts, factsToConsolidate }, cut }
}

/**
 * Decodes a memory file's text within `limits` (`capRawDocument` before decoding, `capDocument` after), with
 * `prepare` applied to the decoded document before it is cut (a redactor: a secret cut in half would no longer
 * be recognised); a readable error when it is not a memory document.
 */
export const decodeDocument = (
  text: string,
  limits: Limits,
  prepare: (doc: Document) => Document = (doc) => doc
): Either.Either<Capped<Document>, string> => {
  let raw: unknown
  try {
    raw = Json.parse(text)
  } catch (error) {
    return Either.left(`not valid JSON (${(error as Error).message})`)
  }
  const readable = readableFacts(withFactIds(raw))
  const bounded = capRawDocument(readable.value, limits)
  return Either.match(Schema.decodeUnknownEither(Document)(bounded.value), {
    onLeft: (error) => Either.left(ParseResult.TreeFormatter.formatErrorSync(error)),
    onRight: (doc) => {
      const capped = capDocument(prepare(doc), limits)
      return Either.right({ value: capped.value, cut: [...readable.cut, ...bounded.cut, ...capped.cut] })
    }
  })
}

const decodeFact = Schema.decodeUnknownEither(Fact)

/**
 * A stored document without the facts that cannot be read (a hand edit's `"content": 42`): they are left out
 * and counted, as DeerMem skips them, instead of the whole memory being unreadable until it is cleared.
 */
const readableFacts = (raw: unknown): Capped<unknown> => {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return { value: raw, cut: [] }
  const facts = (raw as { readonly facts?: unknown }).facts
  if (!Array.isArray(facts)) return { value: raw, cut: [] }
  const kept = facts.filter((fact) => Either.isRight(decodeFact(fact)))
  return kept.length === facts.length
    ? { value: raw, cut: [] }
    : { value: { ...raw, facts: kept }, cut: [`${facts.length - kept.length} facts that could not be read`] }
}
