/**
 * The memory document DeerFlow's DeerMem keeps per user (and per custom agent), as Schema: summaries of the user's
 * context and history, facts with a category and a confidence, and the threads read so far; decoded from a file
 * with a readable error. `Memory.ts` re-exports it.
 */
import * as Either from "effect/Either"
import { createHash } from "node:crypto"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Json from "./Json.js"

/**
 * A stored summary: text; another value (`12345`, `true`, an object, which an import or a hand edit can plant) is
 * read as its text, as DeerMem's `str()` reads it, so the memory is not refused as damaged for it.
 */
const SummaryText = Schema.transform(Schema.Unknown, Schema.String, {
  strict: true,
  decode: (raw) => typeof raw === "string" ? raw : typeof raw === "object" ? JSON.stringify(raw) : String(raw),
  encode: (text) => text
})

/** One summary of the user or of their history, with when it was last rewritten. */
export const Section = Schema.Struct({
  summary: Schema.optionalWith(SummaryText, { default: () => "", nullable: true }),
  updatedAt: Schema.optionalWith(Schema.String, { default: () => "", nullable: true })
})
export type Section = typeof Section.Type

const section = () => ({ summary: "", updatedAt: "" })

/**
 * What a fact says, for telling repeats apart: its words without case and spacing. Case is folded as DeerMem's
 * `casefold()` folds it (upper, then lower case: `Straße` and `STRASSE` are one), not only lowered.
 */
export const contentKey = (text: string): string => text.replace(/\s+/g, " ").trim().toUpperCase().toLowerCase()

/** The fact categories the update prompt offers (a stored fact may carry any other). */
export const CATEGORIES = ["preference", "knowledge", "context", "behavior", "goal", "correction"] as const

const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$/i

/**
 * A stored fact's confidence as DeerMem reads one (`_coerce_source_confidence`): a number, or a number's text
 * (`"0.9"`), kept within 0 and 1; anything else (`"high"`, `true`, infinite) is 0.5. A file or an import written
 * by hand or by an older version keeps its facts.
 */
export const confidenceOf = (raw: unknown): number => {
  const value = typeof raw === "number" ? raw
    : typeof raw === "string" && DECIMAL.test(raw.trim()) ? Number(raw.trim())
    : Number.NaN
  return Number.isFinite(value) ? Math.max(0, Math.min(1, value)) : 0.5
}

const StoredConfidence = Schema.transform(Schema.Unknown, Schema.Number, {
  strict: true,
  decode: confidenceOf,
  encode: (value) => value
})

/** A stored count: a non-negative whole number; anything else (`"3"`, `-1`, `true`) is none. */
const StoredCount = Schema.transform(Schema.Unknown, Schema.UndefinedOr(Schema.Number), {
  strict: true,
  decode: (raw) => typeof raw === "number" && Number.isSafeInteger(raw) && raw >= 0 ? raw : undefined,
  encode: (value) => value
})

/** Ids a merged fact keeps at most (DeerMem merges at most 20 facts into one). */
export const MAX_CONSOLIDATED_FROM = 20

/** Stored fact ids: the texts of a list, at most `MAX_CONSOLIDATED_FROM`; anything else is none. */
const StoredIds = Schema.transform(Schema.Unknown, Schema.Array(Schema.String), {
  strict: true,
  decode: (raw) =>
    Array.isArray(raw)
      ? raw.slice(0, MAX_CONSOLIDATED_FROM).filter((id): id is string => typeof id === "string")
      : [],
  encode: (value) => value
})

/**
 * A fact's lifetime in days as DeerMem reads one (`_read_expected_valid_days`): a finite number (not `true`),
 * truncated to whole days, kept when positive; anything else (`0.5`, `-5`, `"365"`, `true`) is none, so the fact
 * falls back to `staleness_age_days`.
 */
export const expectedValidDaysOf = (raw: unknown): number | undefined => {
  if (typeof raw !== "number" || !Number.isFinite(raw)) return undefined
  const days = Math.trunc(raw)
  return days > 0 ? days : undefined
}

/** A stored lifetime: one that `expectedValidDaysOf` does not read is left out (the fact keeps the others). */
const StoredLifetime = Schema.optionalToOptional(Schema.Unknown, Schema.Number, {
  decode: Option.flatMap((raw) => Option.fromNullable(expectedValidDaysOf(raw))),
  encode: (value) => value
})

/**
 * One remembered fact. A fact read without a category (an older or hand-written file) keeps none: it is shown
 * as `context` (`categoryOf`) but is not of the guaranteed categories (`isGuaranteed`), as in DeerMem, and it is
 * written back without one.
 */
export const Fact = Schema.Struct({
  id: Schema.String,
  content: Schema.String,
  category: Schema.optionalWith(Schema.String, { nullable: true, exact: true }),
  confidence: Schema.optionalWith(StoredConfidence, { default: () => 0.5, nullable: true }),
  createdAt: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  /** The thread it was learned in (by the memory update or the model's `memory_add`), or `manual` (the user's). */
  source: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  /** For a correction: what the assistant got wrong (DeerMem's `sourceError`), shown as what to avoid. */
  sourceError: Schema.optional(Schema.String),
  /** When the user last confirmed it (DeerMem's), read by the `hybrid-v1` capacity policy. */
  lastConfirmedAt: Schema.optional(Schema.String),
  /** How often the user confirmed it (DeerMem's; one that is not a count is read as none). */
  confirmationCount: Schema.optional(StoredCount),
  /** For a fact consolidation merged (`source: consolidation`): when, and the ids of the facts it replaced. */
  consolidatedAt: Schema.optional(Schema.String),
  consolidatedFrom: Schema.optional(StoredIds),
  /**
   * Days after which it is reviewed (DeerMem's `expected_valid_days`, see `MemoryStaleness.ts`): set by the memory
   * model for a new fact, or by a staleness review that keeps it; without it, `staleness_age_days`.
   */
  expected_valid_days: StoredLifetime
})
export type Fact = typeof Fact.Type

/** The user's context: work, personal, what is on their mind now. */
export const UserContext = Schema.Struct({
  workContext: Schema.optionalWith(Section, { default: section, nullable: true }),
  personalContext: Schema.optionalWith(Section, { default: section, nullable: true }),
  topOfMind: Schema.optionalWith(Section, { default: section, nullable: true })
})

/** What happened with the user: recently, earlier, long ago. */
export const History = Schema.Struct({
  recentMonths: Schema.optionalWith(Section, { default: section, nullable: true }),
  earlierContext: Schema.optionalWith(Section, { default: section, nullable: true }),
  longTermBackground: Schema.optionalWith(Section, { default: section, nullable: true })
})

/**
 * A memory document (`memory.json`, DeerMem's shape). Every field may be missing in a file (older or
 * hand-written files decode). `threads` is Antler's watermark: per thread, the last message already read.
 */
export const Document = Schema.Struct({
  version: Schema.optionalWith(Schema.String, { default: () => "1.0", nullable: true }),
  lastUpdated: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  user: Schema.optionalWith(UserContext, {
    default: () => ({ workContext: section(), personalContext: section(), topOfMind: section() }),
    nullable: true
  }),
  history: Schema.optionalWith(History, {
    default: () => ({ recentMonths: section(), earlierContext: section(), longTermBackground: section() }),
    nullable: true
  }),
  facts: Schema.optionalWith(Schema.Array(Fact), { default: () => [], nullable: true }),
  threads: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), {
    default: () => ({}),
    nullable: true
  })
})
export type Document = typeof Document.Type

/** A document with nothing remembered. */
export const empty = (): Document => Schema.decodeSync(Document)({})

/** Whether a document remembers nothing (no summary, no fact). */
export const isEmpty = (doc: Document): boolean =>
  doc.facts.length === 0 &&
  [...Object.values(doc.user), ...Object.values(doc.history)].every((s) => s.summary.trim() === "")

/**
 * A stored document (parsed, not decoded) whose facts each have an id, as DeerMem's storage gives them one
 * (`str(id or "fact_<hex>")`): a fact written without one (by hand, in an older file, in an import) is kept under
 * `fact_` and 12 hex digits of a hash of its place and content, so every read of the same file gives it the same
 * id until a write stores it, instead of being left out as unreadable; an id that is a number is read as its text.
 */
export const withFactIds = (raw: unknown): unknown => {
  if (!Json.isRecord(raw) || !Array.isArray(raw.facts)) return raw
  let changed = false
  const facts = raw.facts.map((fact: unknown, index) => {
    if (!Json.isRecord(fact)) return fact
    const id = fact.id
    if (typeof id === "number" && Number.isFinite(id) && id !== 0) {
      changed = true
      return { ...fact, id: String(id) }
    }
    // (DeerMem's `or`: a missing, null, empty, zero or false id is none)
    if (!(id === undefined || id === null || id === "" || id === 0 || id === false)) return fact
    changed = true
    const hash = createHash("sha256").update(`${index}\n${JSON.stringify(fact.content) ?? ""}`, "utf8").digest("hex")
    return { ...fact, id: `fact_${hash.slice(0, 12)}` }
  })
  return changed ? { ...raw, facts } : raw
}

/** Decodes a document read from a file (JSON text); a readable error when it is not one. */
export const decodeDocument = (text: string): Either.Either<Document, string> => {
  let raw: unknown
  try {
    raw = withFactIds(Json.parse(text))
  } catch (error) {
    return Either.left(`not valid JSON (${(error as Error).message})`)
  }
  return Either.mapLeft(
    Schema.decodeUnknownEither(Document)(raw),
    (error) => ParseResult.TreeFormatter.formatErrorSync(error)
  )
}

