/**
 * The run's state read without an effect of its own. `RunState.get` is an effect, so a wrapper that reads the
 * state costs two steps of Effect's run loop for it (the read and the `flatMap` over it), and a step of the
 * lead chain reads it in about ten places. The run's own holder (`Run.execute`) also carries a plain function
 * returning the current state, under a symbol: `withState` reads through it, in the one step of a `suspend`, at
 * the moment the effect runs (as `flatMap(state.get, f)` does). A `RunState` made elsewhere (a test's, a
 * detached call's) has none, and is read through its `get`: same result, one step more.
 */
import * as Effect from "effect/Effect"
import type { RunState } from "../../services/RunContext.js"
import type { ThreadState } from "../../state/ThreadState.js"

const current: unique symbol = Symbol.for("antler/RunState/current")

type Readable = RunState["Type"] & { readonly [current]?: () => ThreadState }

/** The holder's service with its synchronous read attached (the service itself, for `RunState`). */
export const readable = <S extends RunState["Type"]>(service: S, read: () => ThreadState): S =>
  Object.assign(service, { [current]: read })

/** `Effect.flatMap(state.get, f)`, with the state read when the effect runs. */
export const withState = <A, E, R>(
  state: RunState["Type"],
  f: (current: ThreadState) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const read = (state as Readable)[current]
  return read === undefined ? Effect.flatMap(state.get, f) : Effect.suspend(() => f(read()))
}

/**
 * `f` over the state read now, for model hooks (`Middleware.ModelHooks`, which run when the call runs): a plain
 * call when the holder has a synchronous read, else `withState` (and `f`'s value lifted into the effect).
 */
export const atOnce = <A, E, R>(
  state: RunState["Type"],
  f: (current: ThreadState) => A | Effect.Effect<A, E, R>
): A | Effect.Effect<A, E, R> => {
  const read = (state as Readable)[current]
  if (read !== undefined) return f(read())
  return withState(state, (s) => {
    const out = f(s)
    return Effect.isEffect(out) ? out : Effect.succeed(out)
  })
}
