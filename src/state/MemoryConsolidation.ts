/**
 * DeerMem's memory consolidation (`memory.backend_config.consolidation_enabled`, off by default: a merge is lossy).
 * When a category holds many facts (`consolidation_min_facts`), the update prompt shows the largest such groups
 * (`consolidation_max_groups_per_cycle`, each at most `consolidation_max_sources` facts) and the memory model may
 * answer `factsToConsolidate`: groups of fact ids, each with one richer fact that replaces them. What it answers is
 * untrusted: a merge is made only when
 *
 * - its sources are 2 to `consolidation_max_sources` distinct facts the memory still holds (after the update's
 *   removals and the `max_facts` trim), of a category shown for merging (never a protected one,
 *   `staleness_protected_categories`: corrections by default), none used by an earlier merge of the same update;
 * - the merged fact passes the write gate as a new fact does (`scope: user`, `durability: durable`,
 *   `authority: descriptive`), and its confidence (the model's, at most its sources' highest; that highest when
 *   the model gave none) reaches `fact_confidence_threshold`;
 *
 * and at most `consolidation_max_groups_per_cycle` merges are made per update. The merged fact has
 * `source: consolidation`, the ids it replaced (`consolidatedFrom`), when it was made (`consolidatedAt`), its
 * newest source's `createdAt` and their `sourceError`s. Pure.
 */
import * as Schema from "effect/Schema"
import { escapeAttribute } from "./Markup.js"
import { factGateReason, gateLabel, type GateReason } from "./MemoryGate.js"
import { DAY_MS, parseTime } from "./MemoryEviction.js"
import type { Fact } from "./MemorySchema.js"
import { contentKey, MAX_CONSOLIDATED_FROM } from "./MemorySchema.js"
import * as MemoryStaleness from "./MemoryStaleness.js"
import { isRecord } from "./Json.js"

/** DeerMem's consolidation settings (`consolidation_*`, and the categories never merged). */
export interface Settings {
  /** Facts a category needs before it is shown for merging. */
  readonly minFacts: number
  /** Groups shown, and merges made, per update at most. */
  readonly maxGroups: number
  /** Facts shown per group, and merged into one, at most. */
  readonly maxSources: number
  /** Categories never merged (`staleness_protected_categories`). */
  readonly protectedCategories: ReadonlyArray<string>
}

/** DeerMem's defaults. */
export const DEFAULT_SETTINGS: Settings = {
  minFacts: 8,
  maxGroups: 3,
  maxSources: 8,
  protectedCategories: ["correction"]
}

/** The fact a merge makes, as the model answers it (labels of the write gate included, never stored). */
export const Consolidated = Schema.Struct({
  content: Schema.String,
  category: Schema.String,
  confidence: Schema.optional(Schema.Number),
  scope: Schema.optional(Schema.String),
  durability: Schema.optional(Schema.String),
  authority: Schema.optional(Schema.String)
})

/** One merge the model answers: the ids of the facts it replaces and the fact that replaces them. */
export const Consolidation = Schema.Struct({
  sourceIds: Schema.Array(Schema.String),
  consolidated: Consolidated
})
export type Consolidation = typeof Consolidation.Type

/**
 * The merges of an update's JSON as DeerMem normalises them: entries with at least two distinct text ids (in their
 * order; more than `MAX_CONSOLIDATED_FROM` can never be merged and the entry is dropped) and a `consolidated` object
 * with text content (trimmed); its category trimmed (`context` when none), its confidence kept when it is a finite
 * number, its gate labels normalised (`gateLabel`). Anything else is none.
 */
export const consolidationsOf = (raw: unknown): ReadonlyArray<Consolidation> =>
  (Array.isArray(raw) ? raw : []).flatMap((entry: unknown) => {
    if (!isRecord(entry) || !Array.isArray(entry.sourceIds) || !isRecord(entry.consolidated)) return []
    // (a hostile list is not walked: more entries than could be distinct mergeable ids)
    if (entry.sourceIds.length > MAX_CONSOLIDATED_FROM * 4) return []
    const ids = [...new Set(entry.sourceIds.filter((id): id is string => typeof id === "string" && id !== ""))]
    if (ids.length < 2 || ids.length > MAX_CONSOLIDATED_FROM) return []
    const fact = entry.consolidated
    const content = typeof fact.content === "string" ? fact.content.trim() : ""
    if (content === "") return []
    const category = typeof fact.category === "string" && fact.category.trim() !== "" ? fact.category.trim() : "context"
    const confidence = typeof fact.confidence === "number" && Number.isFinite(fact.confidence)
      ? { confidence: fact.confidence }
      : {}
    const labels = Object.fromEntries(["scope", "durability", "authority"].flatMap((name) => {
      const label = gateLabel(fact[name])
      return label === undefined ? [] : [[name, label]]
    }))
    return [{ sourceIds: ids, consolidated: { content, category, ...confidence, ...labels } }]
  })

/** A category whose facts may be merged, and its facts (in the memory's order). */
export interface Group {
  readonly category: string
  readonly facts: ReadonlyArray<Fact>
}

/**
 * The categories that may be merged (DeerMem's `_select_consolidation_candidates`): those holding at least
 * `minFacts` facts (a fact without a category counts as `context`; one with a blank category in none), protected
 * ones left out, the largest first (ties: by name).
 */
export const candidates = (facts: ReadonlyArray<Fact>, settings: Settings): ReadonlyArray<Group> => {
  const byCategory = new Map<string, Array<Fact>>()
  for (const fact of facts) {
    const category = (fact.category ?? "context").trim()
    if (category === "") continue
    const group = byCategory.get(category)
    if (group === undefined) byCategory.set(category, [fact])
    else group.push(fact)
  }
  const protectedOnes = new Set(settings.protectedCategories)
  return [...byCategory]
    .filter(([category, group]) => group.length >= settings.minFacts && !protectedOnes.has(category))
    .map(([category, group]) => ({ category, facts: group }))
    .sort((a, b) => b.facts.length - a.facts.length || (a.category < b.category ? -1 : a.category > b.category ? 1 : 0))
}

/**
 * The consolidation part of the update prompt (DeerMem's `consolidation.yaml`, word for word): the largest
 * `maxGroups` groups, each its first `maxSources` facts (`- [id | confidence] "content"`, escaped so no fact can
 * close its block); empty when no category may be merged. `template`: a `prompts_dir`'s words instead, given the
 * groups for its `{consolidation_groups}` and `maxGroups` for its `{max_groups}`.
 */
export const promptSection = (
  facts: ReadonlyArray<Fact>,
  settings: Settings,
  template?: ((groups: string, maxGroups: number) => string) | undefined
): string => {
  const groups = candidates(facts, settings).slice(0, settings.maxGroups)
  if (groups.length === 0) return ""
  const blocks = groups.map(({ category, facts: group }) => {
    const shown = group.slice(0, settings.maxSources)
    const lines = shown.map((f) =>
      `- [${escapeAttribute(f.id)} | ${f.confidence.toFixed(2)}] "${escapeAttribute(f.content)}"`
    )
    return `<consolidation_candidates category="${escapeAttribute(category)}" count="${shown.length}">\n` +
      `${lines.join("\n")}\n</consolidation_candidates>`
  })
  if (template !== undefined) return template(blocks.join("\n\n"), settings.maxGroups)
  return `## Memory Consolidation

The following fact categories have accumulated many individual entries.
Review each group and identify facts that can be synthesized into a single,
richer consolidated fact that preserves all key information.

${blocks.join("\n\n")}

For each group, decide:
- CONSOLIDATE: Multiple facts can be merged into one richer fact.
  Specify the source fact IDs and the consolidated content.
- SKIP: Facts are distinct enough to remain separate.

Add consolidation decisions to "factsToConsolidate" in your output JSON.
Each entry: {"sourceIds": ["fact_id_1", "fact_id_2"], "consolidated": {"content": "...", "category": "...", \
"confidence": 0.9, "scope": "user|thread|project", "durability": "durable|temporary", \
"authority": "descriptive|transactional"}}

Rules:
- The consolidated fact must preserve ALL key details from source facts
- Only consolidate facts that describe the same aspect of the user
- Classify every consolidated fact. It is eligible only when it is user-scoped, durable, descriptive, and safe to \
inject into unrelated future threads.
- Confidence of consolidated fact = max of source confidences
- Be conservative - when in doubt, keep facts separate
- Maximum ${settings.maxGroups} consolidation groups per cycle`
}

/** How merges are applied. */
export interface Options {
  readonly settings: Settings
  /** Facts less confident than this are not kept (`fact_confidence_threshold`). */
  readonly threshold: number
  /** Now, as an ISO timestamp. */
  readonly now: string
  /** Makes a fresh fact id. */
  readonly newId: () => string
  /** Whether a merged fact's content may be stored at all (one naming an upload event may not); default: yes. */
  readonly admissible?: ((content: string) => boolean) | undefined
  /** The staleness review's settings, for a merged fact's `expected_valid_days` (`inheritedLifetime`). */
  readonly staleness?: MemoryStaleness.Settings | undefined
}


/**
 * A merged fact's `expected_valid_days` (DeerMem's): it is reviewed at its sources' earliest deadline (each one's
 * `createdAt` plus its window, `expected_valid_days` else `staleness_age_days`), counted in whole days from the
 * merged fact's `createdAt` (`newest`); at least 1 (a source already past its deadline: reviewed next time), at
 * most `MemoryStaleness.creationCap`. A source whose window reaches no date has `staleness_age_days`'s.
 */
export const inheritedLifetime = (
  sources: ReadonlyArray<Fact>,
  newest: number,
  settings: MemoryStaleness.Settings
): number => {
  const deadlines = sources.map((f) => {
    const created = parseTime(f.createdAt) ?? newest
    return MemoryStaleness.addDays(created, MemoryStaleness.windowDays(f, settings)) ??
      MemoryStaleness.addDays(created, settings.ageDays) ?? newest
  })
  const days = Math.floor((Math.min(...deadlines) - newest) / DAY_MS)
  return Math.min(Math.max(days, 1), MemoryStaleness.creationCap(settings))
}

/** The facts after the merges, and why the write gate refused those it refused. */
export interface Result {
  readonly facts: ReadonlyArray<Fact>
  readonly refused: ReadonlyArray<GateReason>
}

/**
 * The facts with the model's merges made (see the module header): each merge that passes replaces its sources
 * by its fact, at the end of the memory; a merge that does not changes nothing. Whatever the model answers, no fact
 * outside a merged group is removed, and the memory never grows.
 */
export const consolidate = (
  facts: ReadonlyArray<Fact>,
  decisions: ReadonlyArray<Consolidation>,
  options: Options
): Result => {
  const { settings } = options
  const refused: Array<GateReason> = []
  if (decisions.length === 0) return { facts, refused }
  const byId = new Map(facts.map((f) => [f.id, f]))
  const allowed = new Set(candidates(facts, settings).flatMap((group) => group.facts.map((f) => f.id)))
  const consumed = new Set<string>()
  const merged: Array<Fact> = []
  for (const decision of decisions) {
    if (merged.length >= settings.maxGroups) break
    const ids = decision.sourceIds
    if (new Set(ids).size !== ids.length || ids.length < 2 || ids.length > settings.maxSources) continue
    if (ids.some((id) => consumed.has(id) || !byId.has(id) || !allowed.has(id))) continue
    const candidate = decision.consolidated
    const content = candidate.content.trim()
    if (content === "" || !(options.admissible?.(content) ?? true)) continue
    const reason = factGateReason(candidate)
    if (reason !== undefined) {
      refused.push(reason)
      continue
    }
    const sources = ids.map((id) => byId.get(id)!)
    const highest = Math.max(...sources.map((f) => f.confidence))
    const given = candidate.confidence
    const confidence = given !== undefined && Number.isFinite(given)
      ? Math.min(Math.max(0, Math.min(given, 1)), highest)
      : highest
    if (confidence < options.threshold) continue
    // the same words as a fact it does not replace: no second copy (its sources stay)
    const key = contentKey(content)
    const others = [...facts.filter((f) => !consumed.has(f.id) && !ids.includes(f.id)), ...merged]
    if (others.some((f) => contentKey(f.content) === key)) continue
    // the newest source's time, so that the fact ages with what it says (a source without a valid time: now)
    const times = sources.map((f) => parseTime(f.createdAt))
    const newest = times.some((t) => t === undefined)
      ? options.now
      : sources[times.indexOf(Math.max(...(times as Array<number>)))]!.createdAt
    const errors = [...new Set(sources.flatMap((f) => f.sourceError?.trim() ? [f.sourceError] : []))]
    const lifetime = options.staleness === undefined
      ? undefined
      : inheritedLifetime(sources, parseTime(newest) ?? Date.parse(options.now), options.staleness)
    for (const id of ids) consumed.add(id)
    merged.push({
      id: options.newId(),
      content,
      category: candidate.category.trim() || "context",
      confidence,
      createdAt: newest,
      source: "consolidation",
      ...(errors.length === 0 ? {} : { sourceError: errors.join("\n") }),
      consolidatedAt: options.now,
      consolidatedFrom: [...ids],
      ...(lifetime === undefined ? {} : { expected_valid_days: lifetime })
    })
  }
  if (merged.length === 0) return { facts, refused }
  return { facts: [...facts.filter((f) => !consumed.has(f.id)), ...merged], refused }
}
