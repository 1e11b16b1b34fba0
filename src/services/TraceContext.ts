/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and `tracestate` headers a client
 * sends, decoded strictly (`fromHeaders`), so that a run it starts joins the client's trace (`parentSpan`), and
 * the headers a model call sends onwards (`outgoingHeaders`). Anything that is not valid is ignored whole, never
 * cleaned and never an error: the run is then the root of a trace of its own.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import * as Tracing from "./Tracing.js"

/** A client's span, as its `traceparent` (and `tracestate`) name it: what a run's span is made a child of. */
export interface Remote {
  /** 32 lowercase hexadecimal digits, not all zero. */
  readonly traceId: string
  /** 16 lowercase hexadecimal digits, not all zero: the client's span, the run's parent. */
  readonly spanId: string
  /** The `sampled` flag: whether the client records its trace (OpenTelemetry's default sampler follows it). */
  readonly sampled: boolean
  /** The valid `tracestate`, bounded (see `parseTracestate`), when one came. */
  readonly tracestate?: string | undefined
}

/** The longest `tracestate` kept (W3C: propagate at least 512 characters, cutting whole members). */
export const MAX_TRACESTATE = 512

/** The most members a `tracestate` has (W3C). */
export const MAX_MEMBERS = 32

/** A raw header longer than this is not read at all (a valid one is at most a few hundred characters). */
const MAX_RAW = 8192

const HEX = /^[0-9a-f]+$/
const ZERO = /^0+$/

/**
 * The client's span of a `traceparent` value, or undefined. Version `00` is exactly
 * `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, lowercase, ids not all zero; a later version (not `ff`)
 * is read the same way for its first 55 characters, followed by nothing or a `-` (W3C's rule for versions it
 * does not know).
 */
export const parseTraceparent = (value: unknown): Omit<Remote, "tracestate"> | undefined => {
  if (typeof value !== "string" || value.length < 55 || value.length > MAX_RAW) return undefined
  const version = value.slice(0, 2)
  if (!HEX.test(version) || version === "ff") return undefined
  if (version === "00" ? value.length !== 55 : value.length > 55 && value[55] !== "-") return undefined
  if (value[2] !== "-" || value[35] !== "-" || value[52] !== "-") return undefined
  const traceId = value.slice(3, 35)
  const spanId = value.slice(36, 52)
  const flags = value.slice(53, 55)
  if (!HEX.test(traceId) || !HEX.test(spanId) || !HEX.test(flags)) return undefined
  if (ZERO.test(traceId) || ZERO.test(spanId)) return undefined
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 }
}

// W3C's keys: `simple-key` or `tenant-id@system-id`; values: 1 to 256 printable ASCII characters but `,` and
// `=`, not ending with a space
const KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/

/**
 * A `tracestate` value made valid and bounded, or undefined. Members are `key=value`, separated by commas (empty
 * ones, and spaces around them, are dropped); one malformed member, a key given twice or more than 32 members
 * make the whole value invalid (W3C: an invalid `tracestate` is not propagated). One longer than 512 characters
 * loses its members of over 128 characters, then its last ones, until it fits (W3C's truncation).
 */
export const parseTracestate = (value: unknown): string | undefined => {
  if (typeof value !== "string" || value.length > MAX_RAW) return undefined
  const members: Array<string> = []
  const keys = new Set<string>()
  for (const part of value.split(",")) {
    const member = part.trim()
    if (member === "") continue
    const equals = member.indexOf("=")
    if (equals < 0) return undefined
    const key = member.slice(0, equals)
    if (!KEY.test(key) || !VALUE.test(member.slice(equals + 1)) || keys.has(key)) return undefined
    keys.add(key)
    members.push(member)
    if (members.length > MAX_MEMBERS) return undefined
  }
  const length = (list: ReadonlyArray<string>) => list.reduce((sum, m) => sum + m.length, 0) + list.length - 1
  let kept = members
  if (length(kept) > MAX_TRACESTATE) kept = kept.filter((member) => member.length <= 128)
  while (kept.length > 0 && length(kept) > MAX_TRACESTATE) kept = kept.slice(0, -1)
  return kept.length === 0 ? undefined : kept.join(",")
}

/**
 * The client's span of a request's headers (lowercase names), or undefined: its `traceparent` when valid, with its
 * `tracestate` when that is valid too (a `tracestate` without a valid `traceparent` is ignored).
 */
export const fromHeaders = (headers: Readonly<Record<string, string | undefined>>): Remote | undefined => {
  const parent = parseTraceparent(headers.traceparent)
  if (parent === undefined) return undefined
  const tracestate = parseTracestate(headers.tracestate)
  return tracestate === undefined ? parent : { ...parent, tracestate }
}

/**
 * The parent span a process was started under, from the environment as OpenTelemetry carries it there: `TRACEPARENT`
 * and `TRACESTATE`, read as the headers are (`fromHeaders`); undefined without a valid `TRACEPARENT`.
 */
export const fromEnvironment: Effect.Effect<Remote | undefined> = Effect.map(
  Effect.orElseSucceed(
    Config.all([Config.option(Config.string("TRACEPARENT")), Config.option(Config.string("TRACESTATE"))]),
    () => [Option.none(), Option.none()] as const
  ),
  ([traceparent, tracestate]) =>
    fromHeaders({ traceparent: Option.getOrUndefined(traceparent), tracestate: Option.getOrUndefined(tracestate) })
)

/** A `traceparent` header's value (version `00`). */
export const format = (traceId: string, spanId: string, sampled: boolean): string =>
  `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`

/** OpenTelemetry's trace state (its `TraceState` interface), over a valid `tracestate`. */
class TraceState {
  constructor(readonly text: string) {}
  private entries(): Array<[string, string]> {
    return this.text.split(",").map((member) => {
      const equals = member.indexOf("=")
      return [member.slice(0, equals), member.slice(equals + 1)]
    })
  }
  get(key: string): string | undefined {
    return this.entries().find(([k]) => k === key)?.[1]
  }
  set(key: string, value: string): TraceState {
    const rest = this.entries().filter(([k]) => k !== key).map(([k, v]) => `${k}=${v}`)
    return new TraceState(parseTracestate([`${key}=${value}`, ...rest].join(",")) ?? this.text)
  }
  unset(key: string): TraceState {
    return new TraceState(this.entries().filter(([k]) => k !== key).map(([k, v]) => `${k}=${v}`).join(","))
  }
  serialize(): string {
    return this.text
  }
}

// (@effect/opentelemetry reads an external parent's flags and trace state from these services of its context, under
// these keys: its `Tracer.OtelTraceFlags` and `Tracer.OtelTraceState`, named here to keep it an optional package)
const OtelTraceFlags = Context.GenericTag<{ readonly flags: unique symbol }, number>(
  "@effect/opentelemetry/Tracer/OtelTraceFlags"
)
const OtelTraceState = Context.GenericTag<{ readonly state: unique symbol }, TraceState>(
  "@effect/opentelemetry/Tracer/OtelTraceState"
)

/** The client's span as the parent of a run's span: the run joins its trace, its `sampled` flag and its state. */
export const parentSpan = (remote: Remote): Tracer.ExternalSpan => {
  let context = Context.make(OtelTraceFlags, remote.sampled ? 1 : 0)
  if (remote.tracestate !== undefined) context = Context.add(context, OtelTraceState, new TraceState(remote.tracestate))
  return Tracer.externalSpan({ traceId: remote.traceId, spanId: remote.spanId, sampled: remote.sampled, context })
}

/** The client's `tracestate` above `span`, if a client's span is its ancestor. */
const stateAbove = (span: Tracer.AnySpan): string | undefined => {
  let current: Tracer.AnySpan | undefined = span
  for (let depth = 0; current !== undefined && depth < 64; depth++) {
    if (current._tag === "ExternalSpan") {
      return Option.getOrUndefined(Context.getOption(current.context, OtelTraceState))?.text
    }
    current = Option.getOrUndefined(current.parent)
  }
  return undefined
}

/**
 * The W3C headers that carry the current span's context onwards (a model call's request): `traceparent`, and the
 * client's `tracestate` when the run joined a client's trace. None when the app does not trace (Effect's own
 * spans are known to no one) or outside a span.
 */
export const outgoingHeaders: Effect.Effect<Readonly<Record<string, string>>> = Effect.flatMap(
  Tracing.traced,
  (traced) =>
    !traced ? Effect.succeed({}) : Effect.map(Effect.option(Effect.currentSpan), (span) => {
      if (Option.isNone(span)) return {}
      const { sampled, spanId, traceId } = span.value
      const tracestate = stateAbove(span.value)
      return {
        traceparent: format(traceId, spanId, sampled),
        ...(tracestate === undefined ? {} : { tracestate })
      }
    })
)
