/**
 * DeerMem's confirmations (`factsToReinforce`): the memory model names the existing facts the user explicitly
 * confirmed in the new conversation. Under `hybrid-v1`, when one of the user's recent lines carries a reinforcement
 * signal ("yes, exactly", "keep doing that"), each such fact labelled `scope: user` with a reason gets
 * `lastConfirmedAt` (now) and one more `confirmationCount`: its confirmation is fresh again for the capacity
 * policy (`MemoryEviction.ts`). The signal proves a confirmation happened; the model binds it to a fact. Pure.
 */
import * as Schema from "effect/Schema"
import { gateLabel } from "./MemoryGate.js"
import { isRecord } from "./Json.js"

/** A fact the model says the user confirmed: its id, the write gate's `scope` and a `reason`. */
export const Reinforcement = Schema.Struct({
  id: Schema.String,
  scope: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String)
})
export type Reinforcement = typeof Reinforcement.Type

/**
 * The confirmations of an update's JSON as DeerMem normalises them: entries that are objects with a non-empty
 * text id (trimmed), their `scope` a gate label (`gateLabel`) and their reason trimmed, each kept only when given.
 * Anything else (not a list, an entry without an id) is none.
 */
export const reinforcementsOf = (raw: unknown): ReadonlyArray<Reinforcement> =>
  (Array.isArray(raw) ? raw : []).flatMap((entry: unknown) => {
    if (!isRecord(entry) || typeof entry.id !== "string" || entry.id.trim() === "") return []
    const scope = gateLabel(entry.scope)
    const reason = typeof entry.reason === "string" ? entry.reason.trim() : ""
    return [{
      id: entry.id.trim(),
      ...(scope === undefined ? {} : { scope }),
      ...(reason === "" ? {} : { reason })
    }]
  })

/** Whether the write gate lets a confirmation through: `scope: user`, with a reason. */
export const isAdmitted = (entry: Reinforcement): boolean =>
  gateLabel(entry.scope) === "user" && entry.reason !== undefined && entry.reason.trim() !== ""

/** The count after one more confirmation (DeerMem's): a stored non-negative integer plus one; else 1. */
export const nextConfirmationCount = (prior: unknown): number =>
  typeof prior === "number" && Number.isSafeInteger(prior) && prior >= 0 ? prior + 1 : 1

/** A fact as far as a confirmation changes it. */
export interface Confirmable {
  readonly id: string
  readonly lastConfirmedAt?: string | undefined
  readonly confirmationCount?: number | undefined
}

/**
 * The facts with the confirmations the gate admits applied (`isAdmitted`): each fact named gets `lastConfirmedAt`
 * `now` and its `confirmationCount` plus one (once per update, however often it is named); the others, and the
 * order, stay as they are. An id no fact has changes nothing.
 */
export const reinforce = <F extends Confirmable>(
  facts: ReadonlyArray<F>,
  entries: ReadonlyArray<Reinforcement>,
  now: string
): ReadonlyArray<F> => {
  const confirmed = new Set(entries.filter(isAdmitted).map((entry) => entry.id))
  if (confirmed.size === 0) return facts
  return facts.map((fact) =>
    confirmed.has(fact.id)
      ? { ...fact, lastConfirmedAt: now, confirmationCount: nextConfirmationCount(fact.confirmationCount) }
      : fact
  )
}

/** The example entry the update prompt shows (DeerMem's). */
export const PROMPT_EXAMPLE =
  `"factsToReinforce": [\n    {"id": "fact_id_1", "scope": "user|thread|project", ` +
  `"reason": "explicit user confirmation of this existing fact"}\n  ]`

/** DeerMem's rule for confirmations in the update prompt, word for word. */
export const PROMPT_RULE = "- Add an existing fact to factsToReinforce only when the new conversation explicitly " +
  "confirms that same durable fact is still true. Include its exact id, scope, and reason. Do not reinforce a fact " +
  "merely because it was shown in Current Memory State, was automatically injected, was retrieved, or was " +
  "extracted again."
