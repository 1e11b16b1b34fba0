/**
 * Model hooks, fused. A middleware whose model work is "change the request, then look at the response" may give
 * it as hooks (`Middleware.ModelHooks`) instead of a wrapper. A wrapper costs Effect's run loop two or three steps
 * a call even when it changes nothing (`flatMap(next(request), after)` and the `succeed` it returns); hooks that
 * answer with a plain value cost a function call. Adjacent hooked layers are fused into one call of the inner
 * port: the `before` hooks in order (outermost first), the inner call, the `after` hooks in reverse, in one
 * `suspend` and one `flatMap` however many there are. A hook that needs an effect returns one, and the rest of the
 * walk goes on after it: the same order, the same results as the wrappers the hooks stand for.
 */
import * as Effect from "effect/Effect"
import type { ModelError, ModelRequest, ModelResponse } from "../../services/ModelService.js"
import type { RunServices } from "../../services/RunContext.js"

/** A value, or an effect making it (a hook's common path returns the value itself). */
export type Now<A> = A | Effect.Effect<A, ModelError, RunServices>

/** A model call's work before and after the inner call (see `Middleware.ModelHooks`). */
export interface Hooks {
  readonly before?: ((request: ModelRequest, next: Next) => Now<ModelRequest>) | undefined
  readonly after?:
    | ((response: ModelResponse, request: ModelRequest, sent: ModelRequest, next: Next) => Now<ModelResponse>)
    | undefined
}

/** What a model call is. */
type Call = Effect.Effect<ModelResponse, ModelError, RunServices>

/** A model call. */
export type Next = (request: ModelRequest) => Call

const fused: unique symbol = Symbol.for("antler/Middleware/fusedModelHooks")

/** A call made here: its hooks and the call below them, so that a hooked layer over it fuses with it. */
type Fused = Next & { readonly [fused]?: { readonly hooks: ReadonlyArray<Hooks>; readonly core: Next } }

const make = (hooks: ReadonlyArray<Hooks>, core: Next): Next => {
  const count = hooks.length
  const last = hooks.findLastIndex((h) => h.after !== undefined)
  // the call below hook i (what a wrapper in its place would get as `next`), made when it is called; the list is
  // made when this call first runs (a layer's call fused into an outer one never runs itself)
  let nexts: ReadonlyArray<Next> | undefined
  const nextsOf = (): ReadonlyArray<Next> => {
    const below = new Array<Next | undefined>(count)
    return hooks.map((_, i): Next => (request) =>
      (below[i] ??= i === count - 1 ? core : make(hooks.slice(i + 1), core))(request)
    )
  }
  // `seen[i]`: the request hook i received; `seen[i + 1]`: the one it passed on (`seen[count]` goes to `core`)
  const backward = (from: number, response: ModelResponse, seen: Array<ModelRequest>): Call => {
    let current = response
    nexts ??= nextsOf()
    for (let i = from; i >= 0; i--) {
      const after = hooks[i]!.after
      if (after === undefined) continue
      const out = after(current, seen[i]!, seen[i + 1]!, nexts[i]!)
      if (Effect.isEffect(out)) return i === 0 ? out : Effect.flatMap(out, (next) => backward(i - 1, next, seen))
      current = out
    }
    return Effect.succeed(current)
  }
  const forward = (from: number, request: ModelRequest, seen: Array<ModelRequest>): Call => {
    let current = request
    for (let i = from; i < count; i++) {
      const before = hooks[i]!.before
      const out = before === undefined ? current : before(current, (nexts ??= nextsOf())[i]!)
      if (Effect.isEffect(out)) {
        return Effect.flatMap(out, (next) => {
          seen[i + 1] = next
          return forward(i + 1, next, seen)
        })
      }
      current = out
      seen[i + 1] = current
    }
    return last < 0 ? core(current) : Effect.flatMap(core(current), (response) => backward(last, response, seen))
  }
  const call: Fused = (request) =>
    Effect.suspend(() => {
      const seen = new Array<ModelRequest>(count + 1)
      seen[0] = request
      return forward(0, request, seen)
    })
  return Object.assign(call, { [fused]: { hooks, core } })
}

/** The call of `hooks` over `inner`, fused with the hooks `inner` was made of, if it was made here. */
export const over = (hooks: Hooks, inner: Next): Next => {
  const below = (inner as Fused)[fused]
  return below === undefined ? make([hooks], inner) : make([hooks, ...below.hooks], below.core)
}

/** A hook's answer as an effect. */
export const lift = <A>(value: Now<A>): Effect.Effect<A, ModelError, RunServices> =>
  Effect.isEffect(value) ? value : Effect.succeed(value)
