/**
 * DeerMem's write gate (its scope gate): the labels the memory model gives each change of an update decide what
 * is stored. A new fact must be the user's, durable and descriptive; a summary the user's and descriptive; a
 * removal the user's, with a reason. What it refuses is counted for the warning `FileMemory` logs (`Refusals`).
 * Applied by `Memory.applyUpdateGated`.
 */
/** A write-gate label as DeerMem reads one (`_normalize_gate_label`): text, trimmed, lower-cased; else none. */
export const gateLabel = (value: unknown): string | undefined => {
  if (typeof value !== "string") return undefined
  const label = value.trim().toLowerCase()
  return label === "" ? undefined : label
}

/** Why the write gate refused part of an update, as DeerMem counts it (`scope_gate_rejections`). */
export type GateReason = "missing" | "scope" | "durability" | "authority" | "replacement"

type Labelled = { readonly [K in "scope" | "durability" | "authority" | "reason"]?: unknown }

/**
 * Why a new fact is refused (DeerMem's `_fact_scope_gate_reason`): any of `scope`, `durability`, `authority`
 * missing, else the first that is not `user`, `durable`, `descriptive`; undefined when it is stored.
 */
export const factGateReason = (fact: Labelled): GateReason | undefined => {
  const scope = gateLabel(fact.scope)
  const durability = gateLabel(fact.durability)
  const authority = gateLabel(fact.authority)
  if (scope === undefined || durability === undefined || authority === undefined) return "missing"
  if (scope !== "user") return "scope"
  if (durability !== "durable") return "durability"
  if (authority !== "descriptive") return "authority"
  return undefined
}

/** Why a summary is refused (DeerMem's `_summary_scope_gate_reason`): it must be `user` and `descriptive`. */
export const summaryGateReason = (section: Labelled): GateReason | undefined => {
  const scope = gateLabel(section.scope)
  const authority = gateLabel(section.authority)
  if (scope === undefined || authority === undefined) return "missing"
  if (scope !== "user") return "scope"
  if (authority !== "descriptive") return "authority"
  return undefined
}

/** Why a removal is refused (DeerMem's `_removal_scope_gate_reason`): it must be `user`, with a reason. */
export const removalGateReason = (removal: Labelled): GateReason | undefined => {
  const scope = gateLabel(removal.scope)
  const reason = removal.reason
  if (scope === undefined || typeof reason !== "string" || reason.trim() === "") return "missing"
  if (scope !== "user") return "scope"
  return undefined
}

const FACT_REFUSAL: Readonly<Record<GateReason, string>> = {
  missing: "without scope, durability and authority",
  scope: "scope not user",
  durability: "durability not durable",
  authority: "authority not descriptive",
  replacement: ""
}

const SUMMARY_REFUSAL: Readonly<Record<GateReason, string>> = {
  missing: "without scope and authority",
  scope: "scope not user",
  durability: "",
  authority: "authority not descriptive",
  replacement: ""
}

const REMOVAL_REFUSAL: Readonly<Record<GateReason, string>> = {
  missing: "without scope and reason",
  scope: "scope not user",
  durability: "",
  authority: "",
  replacement: "its replacement fact not stored"
}

/** What the write gate refused of one update: summaries by name, facts and removals counted by reason. */
export class Refusals {
  private readonly lines: Array<string> = []
  private readonly counts = new Map<string, { readonly what: readonly [string, string]; n: number }>()
  summary(where: string, reason: GateReason) {
    this.lines.push(`the summary ${where} (${SUMMARY_REFUSAL[reason]})`)
  }
  fact(reason: GateReason) {
    this.count(["new fact", "new facts"], FACT_REFUSAL[reason])
  }
  removal(reason: GateReason) {
    this.count(["removal", "removals"], REMOVAL_REFUSAL[reason])
  }
  consolidation(reason: GateReason) {
    this.count(["merged fact", "merged facts"], FACT_REFUSAL[reason])
  }
  private count(what: readonly [string, string], why: string) {
    const key = `${what[0]} (${why})`
    const entry = this.counts.get(key)
    if (entry === undefined) this.counts.set(key, { what, n: 1 })
    else entry.n++
  }
  /** One line each, in the order first met. */
  all(): ReadonlyArray<string> {
    return [
      ...this.lines,
      ...[...this.counts].map(([key, { n, what }]) => `${n} ${n === 1 ? key : key.replace(what[0], what[1])}`)
    ]
  }
}

