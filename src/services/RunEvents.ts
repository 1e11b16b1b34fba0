/**
 * Run events: what a run streams to its caller (the CLI renders them, the gateway sends them as SSE).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Schema from "effect/Schema"
import { Message } from "../state/Message.js"
import { StateUpdate } from "../state/ThreadState.js"

/** Why a run ended. */
export const StopReason = Schema.Literal(
  "completed",
  "interrupted",
  "cancelled",
  "error",
  "recursion_limit",
  "loop_capped",
  "token_capped",
  "safety_capped",
  "model_length_capped",
  "subagent_limit_capped"
)
export type StopReason = typeof StopReason.Type

/** How a run ended: `success` (possibly capped), `interrupted` (waiting for someone), `cancelled` or `error`. */
export const RunStatus = Schema.Literal("success", "interrupted", "cancelled", "error")
export type RunStatus = typeof RunStatus.Type

export const RunStart = Schema.Struct({
  type: Schema.Literal("run_start"),
  thread_id: Schema.String,
  run_id: Schema.String
})

/** A streamed piece of the message being generated (text or reasoning). */
export const TokenDelta = Schema.Struct({
  type: Schema.Literal("token"),
  message_id: Schema.String,
  text: Schema.optional(Schema.String),
  reasoning: Schema.optional(Schema.String)
})

/** A message written to state (added or replaced). */
export const MessageEvent = Schema.Struct({ type: Schema.Literal("message"), message: Message })

/** A state change other than messages (title, artifacts, todos...). */
export const StateEvent = Schema.Struct({ type: Schema.Literal("state"), update: StateUpdate })

/** A custom event named by DeerFlow's protocol (`llm_retry`, `safety_termination`, ...). */
export const CustomEvent = Schema.Struct({
  type: Schema.Literal("custom"),
  name: Schema.String,
  data: Schema.Unknown
})

/** The last event of every run. */
export const RunEnd = Schema.Struct({
  type: Schema.Literal("run_end"),
  status: RunStatus,
  stop_reason: StopReason,
  /** The interrupt payload (a clarification request), when the run waits for someone. */
  interrupt: Schema.optional(Schema.Unknown),
  /** What went wrong, when the run failed. */
  error: Schema.optional(Schema.Struct({ name: Schema.String, message: Schema.String }))
})

export const RunEvent = Schema.Union(RunStart, TokenDelta, MessageEvent, StateEvent, CustomEvent, RunEnd)
export type RunEvent = typeof RunEvent.Type
export type RunEndEvent = typeof RunEnd.Type

/** The event sink of the current run. */
export class RunEvents extends Context.Tag("antler/RunEvents")<
  RunEvents,
  { readonly emit: (event: RunEvent) => Effect.Effect<void> }
>() {}

const discard: RunEvents["Type"] = { emit: () => Effect.void }

/**
 * The sink seen by code that is not built per run (the base model layer streams its tokens here). The run
 * sets it for its fiber; outside a run, events go nowhere.
 */
export const currentSink: FiberRef.FiberRef<RunEvents["Type"]> = FiberRef.unsafeMake(discard)

/** Emits a custom event on the current run's sink. */
export const emitCustom = (name: string, data: unknown): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(currentSink), (sink) => sink.emit({ type: "custom", name, data }))
