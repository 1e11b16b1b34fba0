/**
 * Run events: what a run streams to its caller (the CLI renders them, the gateway sends them as SSE).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
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

/**
 * Why a run's record says it ended: its run's `StopReason`, or `orphan_recovered` (DeerFlow's) for a run a previous
 * gateway process left unfinished and a starting one recorded as `error`.
 */
export const RecordStopReason = Schema.Union(StopReason, Schema.Literal("orphan_recovered"))
export type RecordStopReason = typeof RecordStopReason.Type

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

/**
 * A state change other than new messages (title, artifacts, todos, removals...). A compaction is one whole: every
 * message removed, the kept ones written again (not new: no `message` event each) and the summary.
 */
export const StateEvent = Schema.Struct({
  type: Schema.Literal("state"),
  update: StateUpdate,
  /** The tool call whose result made this update (LangGraph's `Command` of a tool), when one did. */
  tool_call_id: Schema.optional(Schema.String)
})

/** A custom event named by DeerFlow's protocol (`llm_retry`, `safety_termination`, ...). */
export const CustomEvent = Schema.Struct({
  type: Schema.Literal("custom"),
  name: Schema.String,
  data: Schema.Unknown
})

/**
 * A run's total token usage, summed from the `token_usage` of its state events (the lead agent's calls, its
 * subagents' and the middlewares' own), named as the gateway's `GET /api/threads/{id}/token-usage` names it.
 */
export const RunUsage = Schema.Struct({
  total_input_tokens: Schema.Number,
  total_output_tokens: Schema.Number,
  total_tokens: Schema.Number
})
export type RunUsage = typeof RunUsage.Type

/** The last event of every run. */
export const RunEnd = Schema.Struct({
  type: Schema.Literal("run_end"),
  status: RunStatus,
  stop_reason: StopReason,
  /** The interrupt payload (a clarification request), when the run waits for someone. */
  interrupt: Schema.optional(Schema.Unknown),
  /** What went wrong, when the run failed. */
  error: Schema.optional(Schema.Struct({ name: Schema.String, message: Schema.String })),
  /** The run's total token usage, on the ends the library's `LeadAgent` and the CLI's `--json` give. */
  usage: Schema.optional(RunUsage)
})

export const RunEvent = Schema.Union(RunStart, TokenDelta, MessageEvent, StateEvent, CustomEvent, RunEnd)
export type RunEvent = typeof RunEvent.Type
export type RunEndEvent = typeof RunEnd.Type

/**
 * The event channel of the current run: the only way anything (the model's token deltas, a middleware's custom
 * events, the loop's own events) reaches the run's caller. Provided by the run for its duration.
 */
export class RunEvents extends Context.Tag("antler/RunEvents")<
  RunEvents,
  { readonly emit: (event: RunEvent) => Effect.Effect<void> }
>() {
  /** A channel that drops every event (for calls made outside a run that still need one). */
  static readonly discard: RunEvents["Type"] = { emit: () => Effect.void }
}

/** Emits an event on the current run's channel. */
export const emit = (event: RunEvent): Effect.Effect<void, never, RunEvents> =>
  Effect.flatMap(RunEvents, (events) => events.emit(event))

/** Emits a custom event (`llm_retry`, `sandbox_audit`, ...) on the current run's channel. */
export const emitCustom = (name: string, data: unknown): Effect.Effect<void, never, RunEvents> =>
  Effect.flatMap(RunEvents, (events) => events.emit({ type: "custom", name, data }))

/** Encodes an event to its JSON form (what `--json` prints and the gateway streams). */
export const encode = Schema.encodeSync(RunEvent)
