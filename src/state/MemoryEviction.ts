/**
 * DeerMem's `hybrid-v1` capacity policy (`memory.backend_config.fact_eviction_policy: hybrid-v1`): which facts stay
 * when a memory holds more than `max_facts`. Each fact is scored from three signals, each between 0 and 1:
 *
 * - its confidence (0.5 when missing or not a number);
 * - how fresh its confirmation is: 2^(-days / half-life) since its `lastConfirmedAt`, else half that since its
 *   `createdAt` (being written is weaker evidence than being confirmed), 0 without a valid time;
 * - how often it was recalled lately (`usage`): its access heat, decayed over its own half-life since it was last
 *   accessed, as log(1 + heat) / log(9), at most 1;
 *
 * weighted 0.65, 0.25 and 0.10 by default. The best scores stay (ties: the earlier fact), except that some room is
 * kept for corrections (what the assistant got wrong): ceil(max_facts x 10%), at most 10, taken by the best
 * `correction` facts when there are any; room no correction needs goes back to the others.
 *
 * A pure function of the facts, the usage and the time: the same input always keeps the same facts. Nothing from a
 * file is trusted: a value that is not a number or a time counts as missing.
 */

/** The weights and half-lives of the policy (DeerMem's `eviction_*` settings). */
export interface Settings {
  readonly confidenceWeight: number
  readonly confirmationWeight: number
  readonly accessWeight: number
  readonly confirmationHalfLifeDays: number
  readonly accessHalfLifeDays: number
  readonly correctionReservedFraction: number
  readonly correctionReservedMax: number
}

/** DeerMem's defaults. */
export const DEFAULT_SETTINGS: Settings = {
  confidenceWeight: 0.65,
  confirmationWeight: 0.25,
  accessWeight: 0.1,
  confirmationHalfLifeDays: 90,
  accessHalfLifeDays: 30,
  correctionReservedFraction: 0.1,
  correctionReservedMax: 10
}

/** A fact as far as the policy reads it (a memory file's fact, whatever else it holds). */
export interface Scorable {
  readonly id?: unknown
  readonly category?: unknown
  readonly confidence?: unknown
  readonly createdAt?: unknown
  readonly lastConfirmedAt?: unknown
}

/** How a fact has been recalled: its heat and when it was last accessed (DeerMem's usage record). */
export interface Usage {
  readonly accessHeat?: unknown
  readonly lastAccessedAt?: unknown
}

/** A fact's score and the signals it is made of. */
export interface Score {
  readonly value: number
  readonly components: {
    readonly confidence: number
    readonly confirmationFreshness: number
    readonly accessHeat: number
  }
}

/** A fact the policy left out: its id and category and why (never its content). */
export interface Evicted {
  readonly factId: string
  readonly category: string
  readonly score: number
  readonly components: Score["components"]
}

/** What the policy decided. */
export interface Decision<F> {
  /** The facts kept, in their order in the memory. */
  readonly kept: ReadonlyArray<F>
  /** The facts left out, the lowest score first. */
  readonly evicted: ReadonlyArray<Evicted>
  /** Each fact's score, by id. */
  readonly scores: ReadonlyMap<string, Score>
  /** The room given to corrections (0 when none competed for it). */
  readonly reservedCorrectionSlots: number
}

/** A day, in milliseconds. */
export const DAY_MS = 86_400_000

const fraction = (value: unknown, fallback: number): number => {
  if (typeof value !== "number" && typeof value !== "string") return fallback
  if (typeof value === "string" && value.trim() === "") return fallback
  const number = Number(value)
  return Number.isFinite(number) ? Math.max(0, Math.min(number, 1)) : fallback
}

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?(Z|[+-](\d{2}):?(\d{2}))?$/

const inRange = (text: string | undefined, low: number, high: number): boolean =>
  text === undefined || (Number(text) >= low && Number(text) <= high)

/** Whether the fields of a matched time are a time's, as Python's `fromisoformat` checks them (no 30 February). */
const validFields = (match: RegExpExecArray): boolean => {
  const [, year, month, day, hour, minute, second, , offsetHours, offsetMinutes] = match
  const monthDays = new Date(Date.UTC(Number(year), Number(month), 0)).getUTCDate()
  return Number(year) >= 1 && inRange(month, 1, 12) && inRange(day, 1, monthDays) && inRange(hour, 0, 23) &&
    inRange(minute, 0, 59) && inRange(second, 0, 59) && inRange(offsetHours, 0, 23) && inRange(offsetMinutes, 0, 59)
}

/**
 * An ISO 8601 time in milliseconds; one without an offset is UTC (as DeerMem reads it); a date that is none (30
 * February, hour 24) is none, as Python's `fromisoformat` refuses it.
 */
export const parseTime = (value: unknown): number | undefined => {
  if (typeof value !== "string") return undefined
  const text = value.trim()
  const match = ISO_TIME.exec(text)
  if (match === null || !validFields(match)) return undefined
  const offset = match[7]
  const dated = text.replace(" ", "T").replace(/([+-]\d{2})(\d{2})$/, "$1:$2")
  const ms = Date.parse(offset === undefined && dated.includes("T") ? `${dated}Z` : dated)
  return Number.isFinite(ms) ? ms : undefined
}

const decay = (elapsedDays: number, halfLifeDays: number): number =>
  halfLifeDays <= 0 ? 0 : 2 ** (-Math.max(0, elapsedDays) / halfLifeDays)

const freshness = (fact: Scorable, now: number, halfLifeDays: number): number => {
  const confirmed = parseTime(fact.lastConfirmedAt)
  if (confirmed !== undefined) return decay((now - confirmed) / DAY_MS, halfLifeDays)
  const created = parseTime(fact.createdAt)
  return created === undefined ? 0 : 0.5 * decay((now - created) / DAY_MS, halfLifeDays)
}

const heat = (usage: Usage | undefined, now: number, halfLifeDays: number): number => {
  if (usage === undefined) return 0
  const accessed = parseTime(usage.lastAccessedAt)
  const raw = usage.accessHeat
  if (accessed === undefined || (typeof raw !== "number" && typeof raw !== "string")) return 0
  const value = Number(raw)
  if (!Number.isFinite(value) || value <= 0) return 0
  const decayed = value * decay((now - accessed) / DAY_MS, halfLifeDays)
  return Math.min(1, Math.log1p(decayed) / Math.log(9))
}

const idOf = (fact: Scorable, index: number): string =>
  fact.id === undefined || fact.id === null || fact.id === "" ? `__missing_${index}` : String(fact.id)

/** A fact's score under `hybrid-v1`. */
export const score = (
  fact: Scorable,
  options: { readonly now: number; readonly usage?: Usage | undefined; readonly settings?: Settings | undefined }
): Score => {
  const s = options.settings ?? DEFAULT_SETTINGS
  const confidence = fraction(fact.confidence, 0.5)
  const confirmationFreshness = freshness(fact, options.now, s.confirmationHalfLifeDays)
  const accessHeat = heat(options.usage, options.now, s.accessHalfLifeDays)
  return {
    value: s.confidenceWeight * confidence + s.confirmationWeight * confirmationFreshness + s.accessWeight * accessHeat,
    components: { confidence, confirmationFreshness, accessHeat }
  }
}

/** Keeps at most `maxFacts` of `facts` under `hybrid-v1` (see the module header); nothing is left out below it. */
export const select = <F extends Scorable>(
  facts: ReadonlyArray<F>,
  options: {
    readonly maxFacts: number
    /** Now, in milliseconds. */
    readonly now: number
    readonly usage?: ReadonlyMap<string, Usage> | undefined
    readonly settings?: Settings | undefined
  }
): Decision<F> => {
  const settings = options.settings ?? DEFAULT_SETTINGS
  const scores = new Map<string, Score>()
  const items = facts.map((fact, index) => {
    const id = idOf(fact, index)
    const scored = score(fact, { now: options.now, usage: options.usage?.get(id), settings })
    scores.set(id, scored)
    return { fact, index, id, scored }
  })
  const max = Math.max(0, Math.floor(options.maxFacts))
  if (facts.length <= max) return { kept: facts, evicted: [], scores, reservedCorrectionSlots: 0 }
  const ranked = [...items].sort((a, b) => b.scored.value - a.scored.value || a.index - b.index)
  const selected = new Set<number>()
  let reserved = 0
  if (max > 0) {
    const slots = Math.min(settings.correctionReservedMax, Math.ceil(max * settings.correctionReservedFraction))
    const corrections = ranked.filter((item) =>
      typeof item.fact.category === "string" && item.fact.category.trim().toLowerCase() === "correction"
    )
    reserved = Math.max(0, Math.min(slots, corrections.length, max))
    for (const item of corrections.slice(0, reserved)) selected.add(item.index)
  }
  for (const item of ranked) {
    if (selected.size >= max) break
    selected.add(item.index)
  }
  const evicted = ranked.filter((item) => !selected.has(item.index)).reverse().map((item): Evicted => ({
    factId: item.id,
    category: typeof item.fact.category === "string" && item.fact.category !== "" ? item.fact.category : "context",
    score: item.scored.value,
    components: item.scored.components
  }))
  return {
    kept: facts.filter((_, index) => selected.has(index)),
    evicted,
    scores,
    reservedCorrectionSlots: reserved
  }
}
