/**
 * The memory block injected at the start of a thread (SPEC §11), as DeerMem writes it: the summaries of the user's
 * context and history, then the facts, within a token budget (summaries first; facts of the guaranteed categories
 * from their own budget, the others on what is left), and how a fact is shown (its category). Pure functions over
 * a memory document (`MemorySchema.ts`); `Memory.ts` re-exports them.
 */
import { escapeText } from "./Markup.js"
import type { Document, Fact, Section } from "./MemorySchema.js"

/** The category a fact is shown and searched by: its own, trimmed, or `context` when it has none (DeerMem's). */
export const categoryOf = (fact: Fact): string => fact.category?.trim() || "context"

/**
 * A category given to a fact (by the model's `memory_add`/`memory_update` or the memory settings) as it is stored:
 * trimmed, and `context` when blank (DeerMem's `category.strip() or "context"`).
 */
export const categoryName = (category: string | null | undefined): string => category?.trim() || "context"

/**
 * Whether a fact is of one of the guaranteed categories: by its own category only, so a fact without one is never
 * promoted into a guaranteed `context` pool (DeerMem's `_category_match`).
 */
export const isGuaranteed = (fact: Fact, categories: ReadonlySet<string>): boolean => {
  const own = fact.category?.trim()
  return own !== undefined && own !== "" && categories.has(own)
}

/** How the injected block is bounded. */
export interface InjectionOptions {
  readonly maxTokens: number
  /** Tokens of a text; the block's texts are counted escaped (`escapeText`), as the model reads them. */
  readonly count: (text: string) => number
  /** Fact categories selected first, from `guaranteedBudget`. */
  readonly guaranteedCategories: ReadonlyArray<string>
  readonly guaranteedBudget: number
  /** Whether facts are part of the block (in tool mode the model searches them instead). */
  readonly includeFacts: boolean
}

const oneLine = (text: string) => text.replace(/\s+/g, " ").trim()

// a correction says what to avoid, as DeerMem's line does; the category is one line too (a line break in it would
// start a line reading as a fact of its own)
const factLine = (fact: Fact) => {
  const category = categoryOf(fact)
  const line = `- [${oneLine(category)} | ${fact.confidence.toFixed(2)}] ${oneLine(fact.content)}`
  const avoid = category === "correction" && fact.sourceError !== undefined ? oneLine(fact.sourceError) : ""
  return avoid === "" ? line : `${line} (avoid: ${avoid})`
}

const sectionLines = (title: string, entries: ReadonlyArray<readonly [string, Section]>): string | undefined => {
  const lines = entries
    .filter(([, s]) => s.summary.trim() !== "")
    .map(([label, s]) => `- ${label}: ${s.summary.trim()}`)
  return lines.length === 0 ? undefined : `${title}:\n${lines.join("\n")}`
}

/**
 * Characters per token that no ordinary text exceeds on average (o200k: about 4 for English, 8 for a run of one
 * letter): a head of `max` × this many characters holds more than `max` tokens, so what follows it is never
 * counted (counting costs time in proportion to the text).
 */
export const MAX_CHARS_PER_TOKEN = 16

/** The head of a text of at most `max` UTF-16 units, not ending between the halves of a surrogate pair. */
export const head = (text: string, max: number): string => {
  if (text.length <= max) return text
  let end = Math.max(0, Math.floor(max))
  const last = text.charCodeAt(end - 1)
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end--
  return text.slice(0, end)
}

/** What DeerMem appends to summaries it cut to the budget. */
export const CUT_MARKER = "\n..."

/**
 * The longest head of a text within `max` tokens, about: the head is sized from the count of the text (at least 5%
 * shorter each time) until it fits, so a text far over the budget costs a few counts of at most
 * `max × MAX_CHARS_PER_TOKEN` characters.
 */
const headWithin = (text: string, max: number, count: (text: string) => number): string => {
  if (max <= 0) return ""
  let out = head(text, max * MAX_CHARS_PER_TOKEN)
  let tokens = count(out)
  while (out.length > 0 && tokens > max) {
    out = head(out, Math.min(Math.floor(out.length * 0.95), Math.floor((out.length * max) / tokens)))
    tokens = count(out)
  }
  return out
}

/**
 * The summaries cut to `room` tokens as DeerMem cuts them: the head that fits with the marker, its trailing
 * whitespace removed, then `CUT_MARKER`. Empty when no head fits (a lone marker says nothing).
 */
const cutSummaries = (text: string, room: number, count: (text: string) => number): string => {
  const kept = headWithin(text, room - count(CUT_MARKER), count).trimEnd()
  return kept === "" ? "" : `${kept}${CUT_MARKER}`
}

/**
 * Facts of one group in strict order (the first that does not fit ends it: a shorter, less confident fact never
 * takes its place), within `budget` tokens for their lines (`cost`: a line's tokens; the newline before each line
 * after the first costs one more).
 */
const selectFacts = (ranked: ReadonlyArray<Fact>, budget: number, cost: (fact: Fact) => number) => {
  const chosen: Array<Fact> = []
  let spent = 0
  for (const fact of ranked) {
    const tokens = cost(fact) + (chosen.length > 0 ? 1 : 0)
    if (spent + tokens > budget) break
    spent += tokens
    chosen.push(fact)
  }
  return { chosen, spent }
}

/**
 * The body of the memory block (without its tags): `User Context:`, `History:` and `Facts:` sections, joined
 * by blank lines, as DeerMem's `format_memory_for_injection` spends its budget. Facts go by confidence; those of
 * the guaranteed categories come first, from their own `guaranteedBudget`; the other facts get what the summaries,
 * the header and the guaranteed facts leave of `maxTokens`. When the whole is still over `maxTokens` plus what the
 * guaranteed facts took, the summaries are cut (ending in `CUT_MARKER`) and the facts kept. Empty when nothing is
 * remembered.
 */
export const formatForInjection = (doc: Document, options: InjectionOptions): string => {
  const { maxTokens } = options
  // the block is escaped where it is placed (`<memory>`): its budget is spent on what the model reads, as DeerMem
  // escapes its lines before counting them (a text full of `<` and `&` would otherwise be far over it)
  const count = (text: string) => options.count(escapeText(text))
  const context = sectionLines("User Context", [
    ["Work", doc.user.workContext],
    ["Personal", doc.user.personalContext],
    ["Current Focus", doc.user.topOfMind]
  ])
  const history = sectionLines("History", [
    ["Recent", doc.history.recentMonths],
    ["Earlier", doc.history.earlierContext],
    ["Background", doc.history.longTermBackground]
  ])
  const prefix = [context, history].filter((s): s is string => s !== undefined).join("\n\n")
  const separator = count("\n\n")
  // summaries longer than the budget could hold are over it: what follows the head is never counted
  const bounded = head(prefix, Math.max(maxTokens, options.guaranteedBudget) * MAX_CHARS_PER_TOKEN)
  const prefixTokens = prefix === "" ? 0 : bounded.length < prefix.length ? Number.POSITIVE_INFINITY : count(prefix)

  let facts = ""
  let guaranteedSpent = 0
  if (options.includeFacts && doc.facts.length > 0) {
    const guaranteed = new Set(options.guaranteedCategories)
    const byConfidence = [...doc.facts].sort((a, b) => b.confidence - a.confidence)
    const costs = new Map<Fact, number>()
    // each fact counted once; one longer than any budget allows is not counted at all
    const most = Math.max(options.guaranteedBudget, maxTokens) * MAX_CHARS_PER_TOKEN
    const cost = (fact: Fact) => {
      let tokens = costs.get(fact)
      if (tokens === undefined) {
        const line = factLine(fact)
        tokens = line.length > most ? Number.POSITIVE_INFINITY : count(line)
        costs.set(fact, tokens)
      }
      return tokens
    }
    const first = selectFacts(byConfidence.filter((f) => isGuaranteed(f, guaranteed)), options.guaranteedBudget, cost)
    guaranteedSpent = first.spent
    const header = "Facts:"
    // the summaries are charged first: the other facts get what is left
    const used = (prefix === "" ? 0 : prefixTokens + separator) + count(header) + 1 + first.spent +
      (first.chosen.length > 0 ? 1 : 0)
    const rest = maxTokens - used > 0
      ? selectFacts(byConfidence.filter((f) => !isGuaranteed(f, guaranteed)), maxTokens - used, cost).chosen
      : []
    const chosen = [...first.chosen, ...rest]
    if (chosen.length > 0) facts = `${header}\n${chosen.map(factLine).join("\n")}`
  }

  const limit = maxTokens + guaranteedSpent
  const factsTokens = facts === "" ? 0 : count(facts)
  if (prefix === "" || prefixTokens + (facts === "" ? 0 : separator + factsTokens) <= limit) {
    return prefix === "" ? facts : facts === "" ? prefix : `${prefix}\n\n${facts}`
  }
  // over: the facts are kept whole, the summaries cut to what they leave
  const kept = cutSummaries(prefix, limit - (facts === "" ? 0 : factsTokens + separator), count)
  return kept === "" ? facts : facts === "" ? kept : `${kept}\n\n${facts}`
}

