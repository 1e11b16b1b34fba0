/**
 * The memory update a model answers (SPEC §11), read from its answer: the JSON object in it (the first with
 * `user`, `history` and `newFacts`, else the fenced or braced text), its malformed parts dropped as DeerMem
 * normalises them, then decoded. How an update is applied to the document is `Memory.ts`.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Json from "./Json.js"
import { Consolidation, consolidationsOf } from "./MemoryConsolidation.js"
import { gateLabel } from "./MemoryGate.js"
import { Reinforcement, reinforcementsOf } from "./MemoryReinforcement.js"

export { gateLabel } from "./MemoryGate.js"
import { expectedValidDaysOf } from "./MemorySchema.js"
import * as MemoryStaleness from "./MemoryStaleness.js"

/**
 * A write-gate label the model gave (DeerMem's `scope`, `durability`, `authority`), trimmed and lower-cased; absent
 * when it gave none (or not as text). Read only by the gate (`Memory.ts`), never stored.
 */
const Label = Schema.optional(Schema.String)

/** What the model answers for one summary. */
export const SectionUpdate = Schema.Struct({
  summary: Schema.optional(Schema.NullOr(Schema.String)),
  shouldUpdate: Schema.optional(Schema.NullOr(Schema.Boolean)),
  scope: Label,
  authority: Label
})

/** A new fact the model answers. */
export const FactUpdate = Schema.Struct({
  content: Schema.String,
  category: Schema.optional(Schema.NullOr(Schema.String)),
  confidence: Schema.optional(Schema.NullOr(Schema.Number)),
  sourceError: Schema.optional(Schema.NullOr(Schema.String)),
  /** Days before it is reviewed (`MemoryStaleness.ts`), as `expectedValidDaysOf` reads the model's. */
  expected_valid_days: Schema.optional(Schema.Number),
  scope: Label,
  durability: Label,
  authority: Label
})

/**
 * A fact the model removes: its id, the labels of the write gate (`scope`, a `reason`) and, when a new fact
 * replaces it, that fact's index in `newFacts` (as the model wrote it: the gate refuses one that is not an index).
 */
export const FactRemoval = Schema.Struct({
  id: Schema.String,
  scope: Label,
  reason: Label,
  replacementFactIndex: Schema.optional(Schema.Unknown)
})

/** What the memory model answers (lenient: every part is optional). */
export const Update = Schema.Struct({
  user: Schema.optional(Schema.NullOr(Schema.Struct({
    workContext: Schema.optional(Schema.NullOr(SectionUpdate)),
    personalContext: Schema.optional(Schema.NullOr(SectionUpdate)),
    topOfMind: Schema.optional(Schema.NullOr(SectionUpdate))
  }))),
  history: Schema.optional(Schema.NullOr(Schema.Struct({
    recentMonths: Schema.optional(Schema.NullOr(SectionUpdate)),
    earlierContext: Schema.optional(Schema.NullOr(SectionUpdate)),
    longTermBackground: Schema.optional(Schema.NullOr(SectionUpdate))
  }))),
  newFacts: Schema.optional(Schema.NullOr(Schema.Array(FactUpdate))),
  factsToRemove: Schema.optional(Schema.NullOr(Schema.Array(FactRemoval))),
  /** Facts the user confirmed (`MemoryReinforcement.ts`). */
  factsToReinforce: Schema.optional(Schema.Array(Reinforcement)),
  /** Facts merged into one (`MemoryConsolidation.ts`). */
  factsToConsolidate: Schema.optional(Schema.Array(Consolidation)),
  /** The staleness review's answer (`MemoryStaleness.ts`). */
  staleFactsToRemove: Schema.optional(Schema.NullOr(Schema.Array(MemoryStaleness.StaleRemoval))),
  staleFactsToExtend: Schema.optional(Schema.NullOr(Schema.Array(MemoryStaleness.StaleExtension)))
})
export type Update = typeof Update.Type

/**
 * The JSON value in a model's answer, parsed but not decoded: the first fenced block's, else the text's, from
 * its first `{` to its last `}`. A readable error when there is none. (Found by search: a lazy regex over a
 * fence that never closes is quadratic in the answer.)
 */
export const updateJson = (text: string): Either.Either<unknown, string> => {
  const complete = completeUpdateObject(text)
  if (complete !== undefined) return Either.right(complete)
  let body = text
  const fence = text.indexOf("```")
  if (fence >= 0) {
    const from = text.startsWith("json", fence + 3) ? fence + 7 : fence + 3
    const close = text.indexOf("```", from)
    if (close >= 0) body = text.slice(from, close)
  }
  const start = body.indexOf("{")
  const end = body.lastIndexOf("}")
  if (start < 0 || end <= start) return Either.left("the answer holds no JSON object")
  try {
    return Either.right(Json.parse(body.slice(start, end + 1)))
  } catch (error) {
    return Either.left(`the answer's JSON does not parse (${(error as Error).message})`)
  }
}

/** How many `{` of an answer are tried as the start of a complete update (the search stays bounded). */
const MAX_OBJECT_STARTS = 64


/**
 * The first JSON object of an answer that has `user`, `history` and `newFacts` (DeerMem's test of a memory update),
 * so an example object the model wrote before it is passed over; undefined when there is none.
 */
const completeUpdateObject = (text: string): unknown => {
  let from = 0
  for (let tries = 0; tries < MAX_OBJECT_STARTS; tries++) {
    const start = text.indexOf("{", from)
    if (start < 0) return undefined
    from = start + 1
    const end = Json.objectEnd(text, start)
    if (end === undefined) return undefined
    let value: unknown
    try {
      value = Json.parse(text.slice(start, end))
    } catch {
      continue
    }
    if (Json.isRecord(value) && "user" in value && "history" in value && "newFacts" in value) return value
  }
  return undefined
}

/**
 * A confidence the model wrote: a finite number, or a string holding one; null when missing (0.5 then). A `null`
 * confidence is none of these (undefined: the fact is malformed), as DeerMem reads `fact.get("confidence", 0.5)`.
 */
const confidenceOf = (value: unknown): number | null | undefined => {
  if (value === undefined) return null
  const n = typeof value === "number" ? value : typeof value === "string" && value.trim() !== "" ? Number(value) : NaN
  return Number.isFinite(n) ? n : undefined
}

/** The gate labels of an entry that has them (`gateLabel`), under their names. */
const labelsOf = (entry: Record<string, unknown>, names: ReadonlyArray<string>) =>
  Object.fromEntries(names.flatMap((name) => {
    const label = gateLabel(entry[name])
    return label === undefined ? [] : [[name, label]]
  }))

/** A summary section as read: the write-gate labels normalised (`gateLabel`). */
const sectionOf = (section: Record<string, unknown>) => {
  const { scope: _scope, authority: _authority, ...rest } = section
  return { ...rest, ...labelsOf(section, ["scope", "authority"]) }
}

/**
 * An update's JSON with its malformed parts dropped, as DeerMem normalises one: `user` / `history` that are not
 * objects (and sections that are not), new facts without text content or a numeric confidence (a number in a
 * string is read), a category that is not text ("context" then), removals that name no id. Write-gate labels are
 * normalised (`gateLabel`) and a removal's reason trimmed; a removal given as a bare id is kept without labels (the
 * gate then refuses it, as DeerMem's does). Removals with a new fact dropped fail the whole update: a replacement
 * that was lost must not leave only the deletion of what it replaced. Confirmations and merges are read by their
 * own modules (`MemoryReinforcement.reinforcementsOf`, `MemoryConsolidation.consolidationsOf`). A new fact's
 * `expected_valid_days` is kept when `expectedValidDaysOf` reads it; the staleness review's decisions are
 * normalised as `MemoryStaleness.ts` says.
 */
const normaliseUpdate = (raw: unknown): Either.Either<unknown, string> => {
  // (not an update at all: left for the decoder to refuse)
  if (!Json.isRecord(raw) || (raw.newFacts != null && !Array.isArray(raw.newFacts))) return Either.right(raw)
  // an object that changes nothing a memory has (`{"user": "alice"}` from the conversation) is not an update: it
  // would pass for an empty one, and the turns it answered would count as read
  const changes = Json.isRecord(raw.user) || Json.isRecord(raw.history) || Array.isArray(raw.newFacts) ||
    Array.isArray(raw.factsToRemove) || MemoryStaleness.KEYS.some((key) => Array.isArray(raw[key]))
  if (!changes) {
    return Either.left("the answer's JSON is not a memory update (no user, history, newFacts or factsToRemove)")
  }
  const sections = (value: unknown, keys: ReadonlyArray<string>) =>
    Json.isRecord(value)
      ? Object.fromEntries(keys.flatMap((k) => {
        const section = value[k]
        return Json.isRecord(section) ? [[k, sectionOf(section)]] : []
      }))
      : {}
  const newFacts: Array<unknown> = []
  let dropped = false
  for (const fact of Array.isArray(raw.newFacts) ? raw.newFacts : []) {
    const content = Json.isRecord(fact) && typeof fact.content === "string" ? fact.content : ""
    const confidence = Json.isRecord(fact) && typeof fact.confidence !== "boolean"
      ? confidenceOf(fact.confidence)
      : undefined
    if (!Json.isRecord(fact) || content.trim() === "" || confidence === undefined) {
      dropped = true
      continue
    }
    const lifetime = expectedValidDaysOf(fact.expected_valid_days)
    newFacts.push({
      content,
      ...(lifetime === undefined ? {} : { expected_valid_days: lifetime }),
      ...(typeof fact.category === "string" ? { category: fact.category } : {}),
      ...(confidence === null ? {} : { confidence }),
      ...(typeof fact.sourceError === "string" ? { sourceError: fact.sourceError } : {}),
      ...labelsOf(fact, ["scope", "durability", "authority"])
    })
  }
  const factsToRemove = (Array.isArray(raw.factsToRemove) ? raw.factsToRemove : []).flatMap((entry: unknown) => {
    const id = typeof entry === "string" ? entry : Json.isRecord(entry) && typeof entry.id === "string" ? entry.id : ""
    if (id.trim() === "") return []
    if (!Json.isRecord(entry)) return [{ id: id.trim() }]
    const reason = typeof entry.reason === "string" ? entry.reason.trim() : ""
    return [{
      id: id.trim(),
      ...labelsOf(entry, ["scope"]),
      ...(reason === "" ? {} : { reason }),
      // kept as written, valid or not: the gate refuses a removal whose replacement is not an index
      ...("replacementFactIndex" in entry ? { replacementFactIndex: entry.replacementFactIndex } : {})
    }]
  })
  if (factsToRemove.length > 0 && dropped) {
    return Either.left("the answer removes facts while some of its new facts are malformed (nothing is changed)")
  }
  return Either.right({
    user: sections(raw.user, ["workContext", "personalContext", "topOfMind"]),
    history: sections(raw.history, ["recentMonths", "earlierContext", "longTermBackground"]),
    newFacts,
    factsToRemove,
    factsToReinforce: reinforcementsOf(raw.factsToReinforce),
    factsToConsolidate: consolidationsOf(raw.factsToConsolidate),
    staleFactsToRemove: MemoryStaleness.normaliseRemovals(raw.staleFactsToRemove),
    staleFactsToExtend: MemoryStaleness.normaliseExtensions(raw.staleFactsToExtend)
  })
}

/**
 * Decodes the JSON of an update (see `updateJson`), its malformed parts dropped first (`normaliseUpdate`); a
 * readable error when it is not one.
 */
export const decodeUpdate = (raw: unknown): Either.Either<Update, string> =>
  Either.flatMap(normaliseUpdate(raw), (normalised) =>
    Either.mapLeft(
      Schema.decodeUnknownEither(Update, { onExcessProperty: "ignore" })(normalised),
      (error) => `the answer's JSON is not a memory update: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
    ))

/** The update in a model's answer (`updateJson`, then `decodeUpdate`). A readable error when there is none. */
export const parseUpdate = (text: string): Either.Either<Update, string> =>
  Either.flatMap(updateJson(text), decodeUpdate)
