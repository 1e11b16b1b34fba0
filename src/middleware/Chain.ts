/**
 * A middleware chain as checked data: named entries, outermost first, each declaring the ordering facts it
 * relies on ("inside LoopDetection", "last", ...). An app can insert its own middleware at a named position,
 * replace an entry or drop one; a chain that breaks a declared fact fails when it is built, with a typed error
 * naming both entries and the reason, before any run can go wrong in a subtle way.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { Middleware, Ports } from "./Middleware.js"
import * as MW from "./Middleware.js"

/** An ordering fact an entry relies on. */
export type Fact =
  /** This entry stands outside (before, in the list) the named one. */
  | { readonly outside: string; readonly reason: string }
  /** This entry stands inside (after, in the list) the named one. */
  | { readonly inside: string; readonly reason: string }
  /** This entry is the outermost of the chain. */
  | { readonly first: true; readonly reason: string }
  /** This entry is the innermost of the chain. */
  | { readonly last: true; readonly reason: string }

/** One entry of a chain: a stable name, a factory of fresh middleware layers, and its ordering facts. */
export interface Entry<R = any, E = any> {
  readonly name: string
  /** Makes the middleware (a fresh layer value on every call: layers are memoised by reference). */
  readonly make: () => Middleware<R, E>
  readonly facts: ReadonlyArray<Fact>
}

/** Makes an entry. */
export const entry = <R, E>(
  name: string,
  make: () => Middleware<R, E>,
  facts: ReadonlyArray<Fact> = []
): Entry<R, E> => ({
  name,
  make,
  facts
})

/** A chain, outermost first. */
export type Chain<R = any, E = any> = ReadonlyArray<Entry<R, E>>

/** A chain that breaks one of its entries' declared ordering facts, or names an entry that is not there. */
export class ChainError extends Schema.TaggedError<ChainError>()("ChainError", {
  reason: Schema.Literal("order", "duplicate", "unknown_entry"),
  /** The entry whose fact is broken (or the duplicated / missing name). */
  entry: Schema.String,
  /** The other entry of the broken fact, when there is one. */
  other: Schema.optional(Schema.String),
  message: Schema.String
}) {}

/** The names of a chain, outermost first. */
export const names = (chain: Chain): ReadonlyArray<string> => chain.map((e) => e.name)

const indexOf = (chain: Chain, name: string): Either.Either<number, ChainError> => {
  const index = chain.findIndex((e) => e.name === name)
  return index >= 0 ? Either.right(index) : Either.left(
    new ChainError({
      reason: "unknown_entry",
      entry: name,
      message: `The chain has no entry named "${name}". Entries: ${names(chain).join(", ")}`
    })
  )
}

/** Where to put an entry: before (outside) or after (inside) a named entry, or at either end. */
export type Position =
  | { readonly before: string }
  | { readonly after: string }
  | { readonly first: true }
  | { readonly last: true }

/** Inserts an entry at a position. Fails when the position names no entry. */
export const insert = <R, R2>(
  chain: Chain<R>,
  position: Position,
  added: Entry<R2>
): Either.Either<Chain<R | R2>, ChainError> => {
  if ("first" in position) return Either.right([added, ...chain])
  if ("last" in position) return Either.right([...chain, added])
  const target = "before" in position ? position.before : position.after
  return Either.map(indexOf(chain, target), (index) => {
    const at = "before" in position ? index : index + 1
    return [...chain.slice(0, at), added, ...chain.slice(at)]
  })
}

/** Replaces the entry of that name (the replacement keeps the position). */
export const replace = <R, R2>(
  chain: Chain<R>,
  name: string,
  replacement: Entry<R2>
): Either.Either<Chain<R | R2>, ChainError> =>
  Either.map(indexOf(chain, name), (index) => chain.map((e, i) => (i === index ? replacement : e)))

/** Drops the entry of that name. */
export const drop = <R>(chain: Chain<R>, name: string): Either.Either<Chain<R>, ChainError> =>
  Either.map(indexOf(chain, name), (index) => chain.filter((_, i) => i !== index))

/**
 * Checks every declared fact. A fact about an entry that is not in the chain holds (optional entries, such as
 * the guardrail, may be absent); two entries with one name are an error.
 */
export const validate = <R>(chain: Chain<R>): Either.Either<Chain<R>, ChainError> => {
  const position = new Map<string, number>()
  for (let i = 0; i < chain.length; i++) {
    const name = chain[i]!.name
    if (position.has(name)) {
      return Either.left(
        new ChainError({
          reason: "duplicate",
          entry: name,
          message: `The chain has two entries named "${name}" (positions ${position.get(name)! + 1} and ${i + 1})`
        })
      )
    }
    position.set(name, i)
  }
  const broken = (entry: string, other: string | undefined, rule: string, reason: string) =>
    Either.left(
      new ChainError({
        reason: "order",
        entry,
        ...(other !== undefined ? { other } : {}),
        message: `${entry} must stand ${rule}: ${reason}. Order: ${names(chain).join(" > ")}`
      })
    )
  for (let i = 0; i < chain.length; i++) {
    const { facts, name } = chain[i]!
    for (const fact of facts) {
      if ("first" in fact) {
        const outside = chain[0]!.name
        if (i !== 0) return broken(name, outside, `first (outermost), but ${outside} is outside it`, fact.reason)
      } else if ("last" in fact) {
        const last = chain[chain.length - 1]!.name
        if (i !== chain.length - 1) return broken(name, last, `last (innermost), but ${last} is inside it`, fact.reason)
      } else if ("outside" in fact) {
        const j = position.get(fact.outside)
        if (j !== undefined && j < i) return broken(name, fact.outside, `outside ${fact.outside}`, fact.reason)
      } else {
        const j = position.get(fact.inside)
        if (j !== undefined && j > i) return broken(name, fact.inside, `inside ${fact.inside}`, fact.reason)
      }
    }
  }
  return Either.right(chain)
}

/**
 * Builds a checked chain over a base with `Middleware.stack`: fails with `ChainError` when a declared fact is
 * broken, before any layer is built.
 */
export const build = <R, E, EB, RB>(
  chain: Chain<R, E>,
  baseLayer: Layer.Layer<Ports, EB, RB>
): Either.Either<Layer.Layer<Ports, E | EB, Exclude<R, Ports> | RB>, ChainError> =>
  Either.map(validate(chain), (valid) => MW.stack(valid.map((e) => e.make()), baseLayer))

/**
 * The chain with a probe standing just outside each entry, calling `record(name, port)` whenever a model or tool
 * call passes into that entry: a trace of the order a built chain really applies (tests, debugging).
 */
export const traced = <R, E>(
  chain: Chain<R, E>,
  record: (name: string, port: "model" | "tool") => void
): Chain<R, E> =>
  chain.map((e) => ({
    ...e,
    make: () =>
      Layer.provide(
        MW.make({
          model: (request, next) => Effect.suspend(() => (record(e.name, "model"), next(request))),
          tool: (call, next) => Effect.suspend(() => (record(e.name, "tool"), next(call)))
        }),
        e.make()
      )
  }))
