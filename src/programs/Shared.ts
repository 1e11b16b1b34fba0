/**
 * A value built in a scope of its own and shared by the runs that use it (the factory's agents, the subagent runner
 * of a configuration). Each run holds it while it uses it; once the value is retired (new runs get another one: a
 * configuration edit, replaced MCP servers, changed skills) and no run holds it any more, its scope is closed, which
 * releases what it built (model clients, chains, their middlewares' resources). A run under way keeps its value
 * until it ends.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"

/** A shared value and its use count (see the module header). */
export interface Shared<A> {
  readonly value: A
  /** One more user, at once (a synchronous step: no interruption between finding the value and holding it). */
  readonly hold: () => void
  /** One user less; closes the scope when it was the last one of a retired value. */
  readonly release: Effect.Effect<void>
  /** No new user will get it; closes the scope now if no user holds it. */
  readonly retire: Effect.Effect<void>
  /** How many users hold it now. */
  readonly users: () => number
  /** Whether its scope was closed. */
  readonly closed: () => boolean
}

/** `value`, built in `scope`, shared (see the module header); neither held nor retired yet. */
export const make = <A>(value: A, scope: Scope.CloseableScope): Shared<A> => {
  let users = 0
  let retired = false
  let closed = false
  // (decided in one synchronous step: a release and a retire that race close the scope once)
  const closeIfUnused = Effect.suspend(() => {
    if (closed || !retired || users > 0) return Effect.void
    closed = true
    return Scope.close(scope, Exit.void)
  })
  return {
    value,
    hold: () => {
      users += 1
    },
    release: Effect.suspend(() => {
      users = Math.max(0, users - 1)
      return closeIfUnused
    }),
    retire: Effect.suspend(() => {
      retired = true
      return closeIfUnused
    }),
    users: () => users,
    closed: () => closed
  }
}

/**
 * `use` of a value `get` finds and holds (handing it to `onHold` in the step that holds it), released once `use`
 * ended, failed or was interrupted.
 */
export const using = <A, E, R, B, E2, R2>(
  get: (onHold: (shared: Shared<A>) => void) => Effect.Effect<A, E, R>,
  use: (value: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> =>
  Effect.suspend(() => {
    let held: Shared<A> | undefined
    return get((shared) => {
      held = shared
    }).pipe(
      Effect.flatMap(use),
      Effect.ensuring(Effect.suspend(() => held?.release ?? Effect.void))
    )
  })

/** Shared values kept by key for the users to come (see `kept`). */
export interface Kept<A> {
  /** The value kept under `key`, held; none when there is none. */
  readonly hold: (key: string) => Shared<A> | undefined
  /**
   * Keeps `shared` under `key` (replacing nothing: the caller looked first), at once; past the most kept, the value
   * used longest ago is no longer kept, and the effect returned retires it (closed once no user holds it).
   */
  readonly keep: (key: string, shared: Shared<A>) => Effect.Effect<void>
  /** Retires every value kept (each is closed once no user holds it) and keeps none. */
  readonly retireAll: Effect.Effect<void>
}

/**
 * An empty `Kept` of at most `max` values (default: no bound), the one used longest ago given up first: what keys
 * the values may come from a request (a run's settings), and each kept value holds what it built.
 */
export const kept = <A>(max = Number.POSITIVE_INFINITY): Kept<A> => {
  // (in the order of their last use: a Map iterates in insertion order, and a value held is inserted again)
  const values = new Map<string, Shared<A>>()
  return {
    hold: (key) => {
      const found = values.get(key)
      if (found !== undefined) {
        values.delete(key)
        values.set(key, found)
        found.hold()
      }
      return found
    },
    keep: (key, shared) => {
      values.set(key, shared)
      const evicted: Array<Shared<A>> = []
      for (const [oldest, value] of values) {
        if (values.size <= max) break
        values.delete(oldest)
        evicted.push(value)
      }
      return Effect.forEach(evicted, (value) => value.retire, { discard: true })
    },
    retireAll: Effect.suspend(() => {
      const retired = [...values.values()]
      values.clear()
      return Effect.forEach(retired, (shared) => shared.retire, { discard: true })
    })
  }
}
