/**
 * DeerMem's staleness review (`memory.backend_config.staleness_*`): facts past their review window are shown to the
 * memory model in its usual update call, which answers per fact KEEP, REMOVE (`staleFactsToRemove`) or EXTEND
 * (`staleFactsToExtend`, a new window).
 *
 * - A fact's window is its `expected_valid_days` (the memory model gives one to a new fact, capped at
 *   `staleness_age_days` x `staleness_max_lifetime_multiplier`), else `staleness_age_days`; it runs from the fact's
 *   `lastConfirmedAt` (an explicit confirmation), else its `createdAt`. A fact of a protected category
 *   (`staleness_protected_categories`: corrections) or without a readable time is never a candidate.
 * - The section is added to the update prompt when the review is on and at least `staleness_min_candidates` facts
 *   are candidates (`stalenessSection`).
 * - The model's answer is untrusted (`reviewFacts`): only candidates are removed or extended, whatever ids it names
 *   (and whether or not the review is on); at most `staleness_max_removals_per_cycle` removals, the least confident
 *   first; a fact it proposes to remove is never extended; an extension sets the window to the fact's age plus the
 *   days given, at most `staleness_max_extension_days`.
 *
 * Pure: the time is an argument (milliseconds).
 */
import * as Schema from "effect/Schema"
import { escapeText } from "./Markup.js"
import { DAY_MS, parseTime } from "./MemoryEviction.js"
import { expectedValidDaysOf, type Fact } from "./MemorySchema.js"
import { isRecord } from "./Json.js"

/** The settings of the review (DeerMem's `staleness_*` options). */
export interface Settings {
  /** Whether the update prompt asks for a review (`staleness_review_enabled`); the answer is checked either way. */
  readonly enabled: boolean
  /** The window of a fact without `expected_valid_days` (`staleness_age_days`). */
  readonly ageDays: number
  /** Candidates needed for the prompt to ask for a review (`staleness_min_candidates`). */
  readonly minCandidates: number
  /** Facts one review removes at most (`staleness_max_removals_per_cycle`). */
  readonly maxRemovalsPerCycle: number
  /** Categories never reviewed (`staleness_protected_categories`). */
  readonly protectedCategories: ReadonlyArray<string>
  /** A new fact's `expected_valid_days` is at most `ageDays` times this (`staleness_max_lifetime_multiplier`). */
  readonly maxLifetimeMultiplier: number
  /** An extended window is at most this many days (`staleness_max_extension_days`). */
  readonly maxExtensionDays: number
}

/** DeerMem's defaults. */
export const DEFAULT_SETTINGS: Settings = {
  enabled: true,
  ageDays: 90,
  minCandidates: 3,
  maxRemovalsPerCycle: 10,
  protectedCategories: ["correction"],
  maxLifetimeMultiplier: 20,
  maxExtensionDays: 3650
}


/** The furthest a JavaScript time reaches from 1970, in milliseconds. */
const MAX_TIME_MS = 8.64e15

/**
 * `time` plus `days` (milliseconds), or undefined when that is not a time (DeerMem's `_safe_add_days`): a window
 * of a billion days ends after any date, and must not make a time that compares as one.
 */
export const addDays = (time: number, days: number): number | undefined => {
  const result = time + days * DAY_MS
  return Number.isFinite(result) && Math.abs(result) <= MAX_TIME_MS ? result : undefined
}

/** A fact as the review reads it (a stored fact, whatever else it holds). */
export type Reviewable = Pick<Fact, "id" | "content" | "confidence" | "createdAt"> & {
  readonly category?: string | undefined
  readonly lastConfirmedAt?: string | undefined
  readonly expected_valid_days?: number | undefined
}

/** The days a fact stays valid before it is reviewed: its `expected_valid_days`, else `ageDays`. */
export const windowDays = (fact: Reviewable, settings: Settings): number =>
  expectedValidDaysOf(fact.expected_valid_days) ?? settings.ageDays

/** When a fact's window starts: its `lastConfirmedAt`, else its `createdAt`; undefined when neither is a time. */
export const reviewedAt = (fact: Reviewable): number | undefined =>
  parseTime(fact.lastConfirmedAt) ?? parseTime(fact.createdAt)

/**
 * The day a fact's window starts as the section shows it: the date its `lastConfirmedAt` (else `createdAt`) is
 * written with, in its own offset (DeerMem's `.date()`), not that time's UTC day; empty when neither is a time.
 */
export const reviewedDay = (fact: Reviewable): string => {
  const text = parseTime(fact.lastConfirmedAt) !== undefined
    ? fact.lastConfirmedAt
    : parseTime(fact.createdAt) !== undefined
    ? fact.createdAt
    : undefined
  return text === undefined ? "" : text.trim().slice(0, 10)
}

/** Whether a fact is due for review at `now`: not protected, and its window over (DeerMem's candidate). */
export const isCandidate = (fact: Reviewable, settings: Settings, now: number): boolean => {
  // (a fact without a category is read as "" there, as DeerMem reads it)
  if (settings.protectedCategories.includes(fact.category ?? "")) return false
  const reviewed = reviewedAt(fact)
  if (reviewed === undefined) return false
  const cutoff = addDays(now, -windowDays(fact, settings))
  return cutoff !== undefined && reviewed < cutoff
}

/** The facts due for review at `now`, in their order (DeerMem's `_select_stale_candidates`). */
export const candidates = <F extends Reviewable>(
  facts: ReadonlyArray<F>,
  settings: Settings,
  now: number
): ReadonlyArray<F> => facts.filter((fact) => isCandidate(fact, settings, now))

/** The largest `expected_valid_days` a new fact is stored with (DeerMem's creation-time cap). */
export const creationCap = (settings: Settings): number =>
  Math.trunc(settings.ageDays * settings.maxLifetimeMultiplier)

// ---------------------------------------------------------------------------------------------------------
// The prompt

/** DeerMem's guidance on a new fact's lifetime (`memory_update.chat.yaml`), word for word. */
export const LIFETIME_GUIDANCE = [
  "- Fact lifetime (``expected_valid_days``, optional integer):",
  "  How many days before this fact should be reviewed for possible removal.",
  "  The system schedules review automatically; omit when uncertain.",
  "  * <= 14: highly transient - active bugs, immediate tasks, today's focus",
  "  * 15-60: short-term - current experiments, in-progress side projects, near-term goals",
  "  * 60-180: medium-term - current role, active tech stack, ongoing preferences",
  "  * 180-365: stable - professional background, established working patterns",
  "  * > 365: very stable - core skills, native language, personality traits",
  "  Assign the value that semantically fits; values above the server-configured",
  "  ceiling are silently reduced on storage."
].join("\n")

/** The review's keys in the example answer of the update prompt (DeerMem's output format). */
export const ANSWER_KEYS = `  "staleFactsToRemove": [{"id": "fact_id", "reason": "brief explanation"}],
  "staleFactsToExtend": [{"id": "fact_id", "extend_by_days": 365, "reason": "brief explanation"}]`

/** One candidate as the section lists it: `- [id | category | confidence | reviewed | valid:Nd] "content"`. */
const candidateLine = (fact: Reviewable, settings: Settings): string => {
  const category = escapeText(fact.category?.trim() || "context")
  return `- [${escapeText(fact.id)} | ${category} | ${fact.confidence.toFixed(2)} | ${reviewedDay(fact)} | ` +
    `valid:${windowDays(fact, settings)}d] "${escapeText(fact.content)}"`
}

/**
 * DeerMem's `staleness_review.yaml` for the given candidates, word for word, or `template`'s (a `prompts_dir`'s,
 * given the list of facts for its `{stale_facts}`); empty without candidates.
 */
export const sectionOf = (
  facts: ReadonlyArray<Reviewable>,
  settings: Settings,
  template?: ((staleFacts: string) => string) | undefined
): string =>
  facts.length === 0
    ? ""
    : template !== undefined
    ? template(facts.map((fact) => candidateLine(fact, settings)).join("\n"))
    : `## Staleness Review

The following facts have reached their individual review window and may no longer
accurately reflect the user's current situation. Each entry shows a \`\`valid:Nd\`\`
annotation - the number of days this fact was expected to remain valid before
re-evaluation. Use it to calibrate conservatism: a \`\`valid:30d\`\` fact was
considered volatile at creation; a \`\`valid:365d\`\` fact was considered stable.

<stale_facts>
${facts.map((fact) => candidateLine(fact, settings)).join("\n")}
</stale_facts>

For each fact, decide KEEP, REMOVE, or EXTEND:
- KEEP: Still likely valid - even if not mentioned in this conversation.
  Stable attributes (native language, core expertise, personality traits) often
  remain true indefinitely.
- REMOVE: Outdated, contradicted by recent context, or no longer relevant.
  Examples: tech-stack migrations, job changes, relocated offices, abandoned projects.
- EXTEND: Keep but recalibrate the review window (see below).

Add REMOVE decisions to "staleFactsToRemove" in your output JSON.
Each entry must be {"id": "fact_id", "reason": "brief explanation"}.
The reason should cite what signal in the conversation (or absence thereof)
supports the removal.

Optionally, for facts you KEEP and wish to recalibrate, add them to
"staleFactsToExtend" with the number of days from now before the next review:
{"id": "fact_id", "extend_by_days": 365, "reason": "brief explanation"}
Use this when the current window seems miscalibrated - e.g. a core skill marked
\`\`valid:30d\`\` that is clearly stable, or a goal nearing completion whose window
should shrink. Omit facts whose current window already seems appropriate.

Be conservative - when in doubt, KEEP. Removing a valid fact is worse than
keeping a slightly stale one, because the next review cycle will re-evaluate it.`

/**
 * The section the update prompt ends with (DeerMem's `_prepare_update_prompt`): the review of the facts due at
 * `now`, when it is on and they are at least `minCandidates` (in `template`'s words when given); else empty.
 */
export const stalenessSection = (
  facts: ReadonlyArray<Reviewable>,
  settings: Settings,
  now: number,
  template?: ((staleFacts: string) => string) | undefined
): string => {
  if (!settings.enabled) return ""
  const due = candidates(facts, settings, now)
  return due.length >= settings.minCandidates ? sectionOf(due, settings, template) : ""
}

// ---------------------------------------------------------------------------------------------------------
// The answer

/** The keys of the review's answer (lists of decisions). */
export const KEYS = ["staleFactsToRemove", "staleFactsToExtend"] as const

/** A fact the model removes as stale, and why. */
export const StaleRemoval = Schema.Struct({ id: Schema.String, reason: Schema.String })
export type StaleRemoval = typeof StaleRemoval.Type

/** A fact the model keeps with a new window: `extend_by_days` from now. */
export const StaleExtension = Schema.Struct({
  id: Schema.String,
  extend_by_days: Schema.Number,
  reason: Schema.String
})
export type StaleExtension = typeof StaleExtension.Type

const reasonOf = (entry: Record<string, unknown>): string => typeof entry.reason === "string" ? entry.reason : ""

/**
 * The removals of an answer as DeerMem normalises them: entries that are objects with a non-empty text `id`; a
 * `reason` that is not text is empty. Anything else (not a list, a bare id) is none.
 */
export const normaliseRemovals = (raw: unknown): ReadonlyArray<StaleRemoval> =>
  (Array.isArray(raw) ? raw : []).flatMap((entry: unknown) =>
    isRecord(entry) && typeof entry.id === "string" && entry.id !== ""
      ? [{ id: entry.id, reason: reasonOf(entry) }]
      : []
  )

/**
 * The extensions of an answer as DeerMem normalises them: a non-empty text `id` and an `extend_by_days` that is a
 * finite number (not `true`), truncated to whole days and positive (`0.9` is none).
 */
export const normaliseExtensions = (raw: unknown): ReadonlyArray<StaleExtension> =>
  (Array.isArray(raw) ? raw : []).flatMap((entry: unknown) => {
    if (!isRecord(entry) || typeof entry.id !== "string" || entry.id === "") return []
    const days = typeof entry.extend_by_days === "number" && Number.isFinite(entry.extend_by_days)
      ? Math.trunc(entry.extend_by_days)
      : 0
    return days > 0 ? [{ id: entry.id, extend_by_days: days, reason: reasonOf(entry) }] : []
  })

/** The review's part of an answer. */
export interface Decisions {
  readonly staleFactsToRemove?: ReadonlyArray<StaleRemoval> | null | undefined
  readonly staleFactsToExtend?: ReadonlyArray<StaleExtension> | null | undefined
}

/** What a review did: the facts after it, the ids removed and extended, and how many decisions named no candidate. */
export interface Reviewed<F> {
  readonly facts: ReadonlyArray<F>
  readonly removed: ReadonlyArray<string>
  readonly extended: ReadonlyArray<string>
  /** Decisions naming a fact that is not due for review (unknown, protected or fresh): ignored. */
  readonly ignored: number
}

/**
 * The facts after the model's review at `now` (DeerMem's `_apply_updates`), checked against the candidates (run
 * whether or not the review is on): the candidates it removes, at most `maxRemovalsPerCycle` (the least confident
 * first, the earlier on a tie); the candidates it extends and does not propose to remove (even one the cap spared)
 * get `expected_valid_days` = their age in whole days since `createdAt` + the days given, at most
 * `maxExtensionDays` (the last decision for a fact counts; one without a readable `createdAt` is left). The other
 * facts are the same objects, in their order.
 */
export const reviewFacts = <F extends Reviewable>(
  facts: ReadonlyArray<F>,
  decisions: Decisions,
  settings: Settings,
  now: number
): Reviewed<F> => {
  const removals = decisions.staleFactsToRemove ?? []
  const extensions = decisions.staleFactsToExtend ?? []
  if (removals.length === 0 && extensions.length === 0) return { facts, removed: [], extended: [], ignored: 0 }
  const due = new Set(candidates(facts, settings, now).map((fact) => fact.id))
  const proposed = new Set(removals.map((entry) => entry.id))
  const ignored = [...removals, ...extensions].filter((entry) => !due.has(entry.id)).length
  const removable = facts
    .map((fact, index) => ({ fact, index }))
    .filter(({ fact }) => proposed.has(fact.id) && due.has(fact.id))
  const ranked = removable.length <= settings.maxRemovalsPerCycle
    ? removable
    : [...removable].sort((a, b) => a.fact.confidence - b.fact.confidence || a.index - b.index)
      .slice(0, Math.max(0, settings.maxRemovalsPerCycle))
  const removed = new Set(ranked.map(({ fact }) => fact.id))
  const extend = new Map<string, number>()
  for (const entry of extensions) {
    if (due.has(entry.id) && !proposed.has(entry.id) && entry.extend_by_days >= 1) {
      extend.set(entry.id, Math.trunc(entry.extend_by_days))
    }
  }
  const extended: Array<string> = []
  const kept = facts.flatMap((fact): ReadonlyArray<F> => {
    if (removed.has(fact.id)) return []
    const days = extend.get(fact.id)
    const created = days === undefined ? undefined : parseTime(fact.createdAt)
    if (days === undefined || created === undefined) return [fact]
    const age = Math.max(0, Math.floor((now - created) / DAY_MS))
    extended.push(fact.id)
    return [{ ...fact, expected_valid_days: Math.min(age + days, settings.maxExtensionDays) }]
  })
  return { facts: kept, removed: [...removed], extended, ignored }
}
