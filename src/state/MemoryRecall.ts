/**
 * DeerMem's recall records (its `fact-usage.json`): for each fact `memory_search` returned, a decaying access heat,
 * how many times it was returned and when last, read by the `hybrid-v1` capacity policy (`MemoryEviction.ts`).
 * Stored apart from the memory document, as DeerMem does, so that a recall never rewrites the facts:
 *
 *     { "fact_0a1b2c3d4e5f": { "accessHeat": 1.98, "accessCount": 2, "lastAccessedAt": "2026-08-13T09:00:00.000Z" } }
 *
 * A recall decays a fact's heat by its half-life since the last access (`eviction_access_half_life_days`), then
 * adds 1. Only facts still in the memory are recorded, and the records of facts no longer in it are dropped, so
 * the records are never more than the facts. Nothing read from a file is trusted: an entry that is not an object is
 * dropped, a heat that is not a non-negative number or a time that is not one counts as none. Pure.
 */
import * as Json from "./Json.js"
import { DAY_MS, parseTime } from "./MemoryEviction.js"
import type * as MemoryEviction from "./MemoryEviction.js"

/** A fact's recall record as DeerMem writes it (one read from a file may hold anything else). */
export type Entry = {
  readonly accessHeat: number
  readonly accessCount: number
  readonly lastAccessedAt: string
}

/** The recall records of one memory, by fact id: the entries are objects, their fields unchecked. */
export type Usage = Readonly<Record<string, Readonly<Record<string, unknown>>>>

/** No records. */
export const empty: Usage = {}

/** The records of a file's text: `empty` for text that is not a JSON object; entries that are not objects dropped. */
export const parse = (text: string): Usage => {
  let raw: unknown
  try {
    raw = Json.parse(text)
  } catch {
    return empty
  }
  if (!Json.isRecord(raw)) return empty
  return Object.fromEntries(Object.entries(raw).filter(([, entry]) => Json.isRecord(entry))) as Usage
}

/** The text of the records as stored. */
export const text = (usage: Usage): string => `${JSON.stringify(usage, null, 2)}\n`

/** The records as the capacity policy reads them. */
export const forPolicy = (usage: Usage): ReadonlyMap<string, MemoryEviction.Usage> => new Map(Object.entries(usage))

/** Only the records of the facts in `facts` (the same object when none is dropped). */
export const keepOnly = (usage: Usage, facts: ReadonlySet<string>): Usage => {
  const entries = Object.entries(usage)
  const kept = entries.filter(([id]) => facts.has(id))
  return kept.length === entries.length ? usage : Object.fromEntries(kept)
}

const iso = (ms: number): string => new Date(ms).toISOString()

/**
 * The records after a recall of `ids` at `now` (milliseconds): each of them that is in `facts` gets its heat decayed
 * over `halfLifeDays` since its last access, plus 1, one more access and `now` as its last (DeerMem's
 * `record_fact_accesses`); an id given twice counts once, and `__proto__` never (no file read keeps that key).
 */
export const record = (
  usage: Usage,
  ids: ReadonlyArray<string>,
  options: { readonly now: number; readonly halfLifeDays: number; readonly facts: ReadonlySet<string> }
): Usage => {
  // (`__proto__` is a key no file read keeps: see `Json.parse`)
  const recalled = [...new Set(ids)].filter((id) => id !== "" && id !== "__proto__" && options.facts.has(id))
  if (recalled.length === 0) return usage
  // (a Map: an id such as `__proto__` is a key like any other)
  const next = new Map(Object.entries(usage))
  for (const id of recalled) {
    const previous = Object.hasOwn(usage, id) ? usage[id]! : {}
    const rawHeat = previous.accessHeat
    let heat = typeof rawHeat === "number" || typeof rawHeat === "string" ? Number(rawHeat) : 0
    if (!Number.isFinite(heat) || heat < 0 || rawHeat === "") heat = 0
    const last = parseTime(previous.lastAccessedAt)
    if (last === undefined) {
      heat = 0
    } else {
      const elapsedDays = Math.max(0, (options.now - last) / DAY_MS)
      heat *= 2 ** (-elapsedDays / options.halfLifeDays)
    }
    const rawCount = previous.accessCount
    const count = typeof rawCount === "number" && Number.isSafeInteger(rawCount) && rawCount >= 0 ? rawCount : 0
    const entry: Entry = { accessHeat: heat + 1, accessCount: count + 1, lastAccessedAt: iso(options.now) }
    next.set(id, entry)
  }
  return Object.fromEntries(next)
}
