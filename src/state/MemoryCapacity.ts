/**
 * Which facts a memory written past `max_facts` keeps, and which it leaves out and why (DeerMem's capacity
 * decision, `select_facts_for_capacity`): under `confidence` the most confident (ties: the newer fact), under
 * `hybrid-v1` those DeerMem's policy scores highest (`MemoryEviction.ts`, with the facts' recall records). The
 * facts left out are what the eviction audit records (`MemoryAudit.ts`): their ids, categories, scores and the
 * signals of the score, never their content. In DeerMem's shadow mode (`fact_eviction_shadow_enabled` under
 * `confidence`), what `hybrid-v1` would have left out is computed too, for the audit only. Pure.
 */
import * as MemoryEviction from "./MemoryEviction.js"
import type { Fact } from "./MemorySchema.js"

/** The capacity policies (`memory.backend_config.fact_eviction_policy`), as DeerMem names them. */
export type Policy = "confidence" | "hybrid-v1"

/** A fact left out: its id and category, its score and the signals of the score (never its content). */
export interface Evicted {
  readonly factId: string
  readonly category: string
  readonly score: number
  readonly components: Readonly<Record<string, number>>
}

/** What a capacity decision kept and left out. */
export interface Decision<F> {
  readonly policy: Policy
  /** The facts kept, in their order in the memory (the same array when nothing was left out). */
  readonly kept: ReadonlyArray<F>
  /** The facts left out, the lowest score first. */
  readonly evicted: ReadonlyArray<Evicted>
  /** The room given to corrections (`hybrid-v1` only; 0 when none competed for it). */
  readonly reservedCorrectionSlots: number
  /** Shadow mode: what `hybrid-v1` would have left out (sorted ids), and whether that differs from `evicted`. */
  readonly shadow?: Shadow | undefined
}

/** What `hybrid-v1` would have decided, beside a `confidence` decision (DeerMem's shadow audit). */
export interface Shadow {
  readonly policyVersion: "hybrid-v1"
  readonly wouldEvict: ReadonlyArray<string>
  readonly disagrees: boolean
}

/** `hybrid-v1`'s settings, the time (milliseconds) and the recall records of the facts, by id. */
export interface Hybrid {
  readonly settings: MemoryEviction.Settings
  readonly now: number
  readonly usage?: ReadonlyMap<string, MemoryEviction.Usage> | undefined
}

const categoryOf = (fact: Fact): string =>
  fact.category === undefined || fact.category === "" ? "context" : fact.category

/**
 * The facts `max` keeps (see the module header); nothing is left out at or below it. `shadow` (under `confidence`
 * only): `hybrid-v1`'s settings for the shadow comparison of a decision that leaves facts out.
 */
export const decide = (
  facts: ReadonlyArray<Fact>,
  max: number,
  hybrid?: Hybrid | undefined,
  shadow?: Hybrid | undefined
): Decision<Fact> => {
  if (hybrid !== undefined) {
    const selected = MemoryEviction.select(facts, {
      maxFacts: max,
      now: hybrid.now,
      usage: hybrid.usage,
      settings: hybrid.settings
    })
    return {
      policy: "hybrid-v1",
      kept: selected.kept,
      evicted: selected.evicted,
      reservedCorrectionSlots: selected.reservedCorrectionSlots
    }
  }
  if (facts.length <= max) return { policy: "confidence", kept: facts, evicted: [], reservedCorrectionSlots: 0 }
  const ranked = facts.map((fact, index) => ({ fact, index }))
    .sort((a, b) => b.fact.confidence - a.fact.confidence || b.index - a.index)
  const room = Math.max(0, max)
  const kept = new Set(ranked.slice(0, room).map((r) => r.index))
  const evicted = ranked.slice(room).map(({ fact }) => fact.id)
  const would = shadow === undefined ? undefined : decide(facts, max, shadow).evicted.map((e) => e.factId).sort()
  return {
    ...(would === undefined ? {} : {
      shadow: {
        policyVersion: "hybrid-v1",
        wouldEvict: would,
        disagrees: would.length !== evicted.length || would.some((id) => !evicted.includes(id))
      }
    }),
    policy: "confidence",
    kept: facts.filter((_, index) => kept.has(index)),
    evicted: ranked.slice(room).reverse().map(({ fact }) => ({
      factId: fact.id,
      category: categoryOf(fact),
      score: fact.confidence,
      components: { confidence: fact.confidence }
    })),
    reservedCorrectionSlots: 0
  }
}
