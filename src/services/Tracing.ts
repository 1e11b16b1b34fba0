/**
 * Spans only when the app traces. Without a tracer of its own, an Effect program runs with Effect's native
 * tracer, whose spans go nowhere. Making one still costs: it is about as much as a tool call's own work, and
 * about 35 effect steps at the start of every run for the date reminder's span.
 */
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import * as Tracer from "effect/Tracer"

/** Effect's own tracer, used when the app provides none. */
const untraced = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/** `Effect.withSpan(effect, name, options)` when the app provides a tracer; `effect` as it is otherwise. */
export const withSpanWhenTraced = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  name: string,
  options?: Tracer.SpanOptions
): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) => tracer === untraced ? effect : Effect.withSpan(effect, name, options))

/**
 * Whether the app provides a tracer: read once where the tracer cannot change in between (a run's loop reads it
 * once for all its tool calls' spans).
 */
export const traced: Effect.Effect<boolean> = Effect.tracerWith((tracer) => Effect.succeed(tracer !== untraced))

/**
 * `withSpanWhenTraced(make(), name, options)`, with the effect made when it runs: one step of the run loop for
 * both the check and the making (a hot path's `suspend` folded into the tracer's check).
 */
export const spanWhenTraced = <A, E, R>(
  make: () => Effect.Effect<A, E, R>,
  name: string,
  options?: Tracer.SpanOptions
): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) => tracer === untraced ? make() : Effect.withSpan(make(), name, options))

/** The name of the span a run is traced under (`Effect.withSpan` or `Stream.withSpan`, with `runSpanOptions`). */
export const RUN_SPAN = "antler.run"

/**
 * The options of a run's span, with the given attributes (thread, run, model...): the root of its own trace, or,
 * given the span of the client that asked for the run (`TraceContext.parentSpan`), its child in the client's trace.
 */
export const runSpanOptions = (
  attributes: Readonly<Record<string, string>>,
  parent?: Tracer.AnySpan | undefined
): Tracer.SpanOptions => parent === undefined ? { root: true, attributes } : { parent, attributes }
