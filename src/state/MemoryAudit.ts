/**
 * DeerMem's eviction audit (its `eviction-audit.json`): one event for each write of a memory that left facts out
 * because of `max_facts`, the newest last, at most `eviction_audit_max_entries` (the oldest go first; 0 writes
 * none). An event holds no fact's content, only what explains the decision:
 *
 *     { "occurredAt": "2026-08-13T09:00:00.000Z", "reason": "capacity", "policyVersion": "hybrid-v1",
 *       "maxFacts": 100, "reservedCorrectionSlots": 1,
 *       "evicted": [{ "factId": "fact_0a1b", "category": "context", "score": 0.41,
 *                     "components": { "confidence": 0.6, "confirmationFreshness": 0.02, "accessHeat": 0 } }] }
 *
 * When a fact is forgotten (deleted, cleared, removed by an update), its entries leave the events, and an event
 * left with none goes (DeerMem's `clear_fact_metadata`, which also keeps a `shadow` comparison, written by DeerMem's
 * shadow mode, in step). Nothing read from a file is trusted: what is not an event is dropped. Pure.
 */
import * as Json from "./Json.js"
import type * as MemoryCapacity from "./MemoryCapacity.js"
import { head } from "./MemoryInjection.js"
import { MAX_LABEL_CHARS } from "./MemoryLimits.js"

/** A fact an event says was left out. */
export interface EvictedEntry {
  readonly factId: string
  readonly category: string
  readonly score: number
  readonly components: Readonly<Record<string, number>>
}

/** One write's evictions, as DeerMem records them. */
export type Event = {
  readonly occurredAt: string
  readonly reason: "capacity"
  readonly policyVersion: MemoryCapacity.Policy
  readonly maxFacts: number
  readonly reservedCorrectionSlots: number
  readonly evicted: ReadonlyArray<EvictedEntry>
  /** Shadow mode: what `hybrid-v1` would have left out, and whether that differs. */
  readonly shadow?: MemoryCapacity.Shadow
}

/** The events of an audit file, oldest first (those read from a file: objects, their fields unchecked). */
export type Events = ReadonlyArray<Readonly<Record<string, unknown>>>

/** The event of a capacity decision at `occurredAt` (milliseconds); undefined when it left nothing out. */
export const event = (
  decision: Pick<MemoryCapacity.Decision<unknown>, "policy" | "evicted" | "reservedCorrectionSlots" | "shadow">,
  options: { readonly maxFacts: number; readonly occurredAt: number }
): Event | undefined =>
  decision.evicted.length === 0 ? undefined : {
    occurredAt: new Date(options.occurredAt).toISOString(),
    reason: "capacity",
    policyVersion: decision.policy,
    maxFacts: options.maxFacts,
    reservedCorrectionSlots: decision.reservedCorrectionSlots,
    evicted: decision.evicted.map((item) => ({
      factId: head(item.factId, MAX_LABEL_CHARS),
      category: head(item.category, MAX_LABEL_CHARS),
      score: item.score,
      components: { ...item.components }
    })),
    ...(decision.shadow === undefined ? {} : {
      shadow: { ...decision.shadow, wouldEvict: decision.shadow.wouldEvict.map((id) => head(id, MAX_LABEL_CHARS)) }
    })
  }

/** The events of a file's text: none for text that is not a JSON array; what is not an object dropped. */
export const parse = (text: string): Events => {
  let raw: unknown
  try {
    raw = Json.parse(text)
  } catch {
    return []
  }
  return Array.isArray(raw) ? raw.filter(Json.isRecord) : []
}

/** The text of the events as stored. */
export const text = (events: Events): string => `${JSON.stringify(events, null, 2)}\n`

/** The events with `added` after them, the newest `max` kept (`max` 0: the audit is off, nothing is added). */
export const append = (events: Events, added: ReadonlyArray<Event>, max: number): Events => {
  const limit = Math.max(0, Math.floor(max))
  if (limit === 0 || added.length === 0) return events
  const all = [...events, ...added]
  return all.length > limit ? all.slice(all.length - limit) : all
}

const factIdOf = (item: unknown): string | undefined =>
  Json.isRecord(item) && typeof item.factId === "string" ? item.factId : undefined

/**
 * The events without the facts in `forgotten`: their entries leave `evicted` (an event left with none, or whose
 * `evicted` is not a list, goes), and a `shadow` comparison loses them from `wouldEvict` and says again whether it
 * `disagrees` (a `shadow` that is not an object with a `wouldEvict` list goes). The same array when nothing changes.
 */
export const forget = (events: Events, forgotten: ReadonlySet<string>): Events => {
  if (forgotten.size === 0) return events
  let changed = false
  const out: Array<Readonly<Record<string, unknown>>> = []
  for (const raw of events) {
    const evicted = raw.evicted
    if (!Array.isArray(evicted)) {
      changed = true
      continue
    }
    const left = evicted.filter((item) => {
      const id = factIdOf(item)
      return id !== undefined && !forgotten.has(id)
    })
    if (left.length === 0) {
      changed = true
      continue
    }
    const next: Record<string, unknown> = { ...raw, evicted: left }
    let touched = left.length !== evicted.length
    if ("shadow" in raw) {
      const shadow = raw.shadow
      if (!Json.isRecord(shadow) || !Array.isArray(shadow.wouldEvict)) {
        delete next.shadow
        touched = true
      } else {
        const would = shadow.wouldEvict.filter((id): id is string => typeof id === "string" && !forgotten.has(id))
        const actual = new Set(left.map(factIdOf))
        const shadowed = new Set(would)
        const disagrees = shadowed.size !== actual.size || would.some((id) => !actual.has(id))
        if (would.length !== shadow.wouldEvict.length || shadow.disagrees !== disagrees) {
          next.shadow = { ...shadow, wouldEvict: would, disagrees }
          touched = true
        }
      }
    }
    changed ||= touched
    out.push(touched ? next : raw)
  }
  return changed ? out : events
}
