/**
 * Live exemplars of the short-lived objects every run goes through, kept by an agent for as long as it lives.
 *
 * V8 gives objects hidden classes ("maps") and compiles hot code against them. A map that no live object has
 * any more is dropped at the next full garbage collection, and the optimised code built on it is thrown away
 * with it. Between two runs nothing of a run is alive: every generator adapter, exit, either, scope and fiber
 * of the last run is garbage. A full collection there (an idle server's memory reducer, a forced `gc()`) then
 * undoes the JIT's work on Effect's runtime, and the next run runs slow until it is compiled again.
 *
 * Measured on the benchmark's W1 (a full collection before each run, as the peers' benchmarks do too): the
 * full chain with SQLite went from 330 to 281 µs per step with one exemplar of each shape below kept alive,
 * against nothing kept (10 interleaved runs each). The exemplars cost a few hundred bytes.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberStatus from "effect/FiberStatus"
import * as Hash from "effect/Hash"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as Scope from "effect/Scope"

class Parked extends Context.Tag("antler/Shapes/Parked")<Parked, true>() {}

const hashed = <A extends object>(value: A): A => {
  Hash.hash(value)
  return value
}

/**
 * Makes the exemplars and keeps them until the caller's scope closes (an agent's layer: as long as the agent).
 * One fiber is parked (never resumed, holding no timer) inside the combinators a run nests (an uninterruptible
 * region, a scope, error and exit handlers, a provided service), so its stack holds one of each frame; it is
 * interrupted when the scope closes.
 */
export const keep: Effect.Effect<void, never, Scope.Scope> = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const parked = yield* Effect.forkScoped(
    Effect.uninterruptibleMask((restore) =>
      Effect.onExit(
        Effect.catchAllCause(Effect.provideService(restore(Effect.async<void>(() => {})), Parked, true), () => Effect.void),
        (exit) => Scope.close(scope, exit)
      )
    )
  )
  const exemplars: ReadonlyArray<unknown> = [
    // the adapters `yield*` goes through in every generator: of an effect, and of a service tag (`yield* RunState`)
    Effect.void[Symbol.iterator](),
    (Parked as unknown as Iterable<unknown>)[Symbol.iterator](),
    Either.left(0),
    Either.right(0),
    Option.some(0),
    Exit.fail(0),
    Exit.succeed(0),
    Exit.die(0),
    yield* Effect.exit(Effect.fail(0)),
    // how runs and fibers end: an interrupted fiber (the lease renewal's), errors combined
    Cause.sequential(Cause.interrupt(FiberId.none), Cause.fail(0)),
    Cause.parallel(Cause.die(0), Cause.empty),
    // a fiber id once hashed (the hash is cached on it: a hidden class of its own, which interruption's sets
    // of fiber ids and equality checks are compiled against)
    hashed(FiberId.runtime(0, 0)),
    FiberStatus.running(RuntimeFlags.none),
    FiberStatus.suspended(RuntimeFlags.none, FiberId.none),
    // a span, as a run's `withSpan` makes with Effect's own tracer
    yield* Effect.makeSpan("antler.shapes"),
    yield* Deferred.make<void>(),
    yield* Mailbox.make<void>(),
    scope,
    parked
  ]
  // held by the scope's finalizer, so for as long as the scope is open
  yield* Effect.addFinalizer(() => Effect.sync(() => exemplars.length))
})
