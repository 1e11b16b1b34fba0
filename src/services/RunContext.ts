/**
 * Per-run context: who and what the run is (thread, run, user, runtime options), its stop-reason slot, and
 * the holder of the thread state through which middlewares read state and submit updates.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { ReducerError } from "../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"
import type { ModelError } from "./ModelError.js"
import type { RunEvents, StopReason } from "./RunEvents.js"
import type * as SkillSecrets from "./SkillSecrets.js"

/** Options of one run (DeerFlow's merged `configurable` + `context`). */
export interface RunOptions {
  readonly modelName?: string | undefined
  readonly recursionLimit: number
  readonly toolConcurrency: number
  readonly isPlanMode?: boolean | undefined
  readonly thinkingEnabled?: boolean | undefined
  readonly reasoningEffort?: string | undefined
  /** A custom agent's `model_settings.temperature` / `max_tokens`, over the model's own. */
  readonly temperature?: number | undefined
  readonly maxTokens?: number | undefined
  readonly nonInteractive?: boolean | undefined
  /**
   * Whether the run is an admin's: one that may change what every user's agent reads (the default agent's
   * `SOUL.md`, through `setup_agent`). Set by whoever starts the run, never from its settings: the CLI's runs
   * (its local user owns the data directory), a gateway token marked `admin`. Absent: not an admin's.
   */
  readonly admin?: boolean | undefined
  /**
   * The request's secrets for skills (`context.secrets`): given to the `bash` commands of the skills in use that
   * declare them (`required-secrets`), never stored. Set by whoever starts the run; a subagent's run has its parent's.
   */
  readonly secrets?: SkillSecrets.RequestSecrets | undefined
  /**
   * A subagent's run: the skills whose secrets its parent had bound for the `task` call it answers
   * (`SkillSecrets.DelegatedSkills`); they bind for its `bash` commands too, where its skills allow them.
   */
  readonly delegatedSkills?: ReadonlyArray<string> | undefined
  /** Anything else a middleware reads by name. */
  readonly extra?: Readonly<Record<string, unknown>> | undefined
}

/** Who and what the current run is. */
export class RunContext extends Context.Tag("antler/RunContext")<
  RunContext,
  {
    readonly threadId: string
    readonly runId: string
    readonly userId: string
    readonly options: RunOptions
    /** The run's stop reason so far (a single slot, as in DeerFlow). */
    readonly stopReason: Effect.Effect<StopReason | undefined>
    /** Sets the stop reason; with `ifEmpty`, only when none is set yet. */
    readonly setStopReason: (reason: StopReason, ifEmpty?: boolean) => Effect.Effect<void>
  }
>() {}

/** The per-run holder of thread state. Updates go through the reducers and are journaled for checkpoints. */
export class RunState extends Context.Tag("antler/RunState")<
  RunState,
  {
    readonly get: Effect.Effect<ThreadState>
    readonly update: (update: StateUpdate) => Effect.Effect<void, ReducerError>
  }
>() {}

/**
 * The services of the run a call happens in. The ports' effects (a model call, a tool call, the run loop) run
 * inside a run and may use them: the model publishes its token deltas on `RunEvents`, a tool finds its thread
 * through `RunContext`, a hook reads and updates the thread through `RunState`.
 */
export type RunServices = RunContext | RunState | RunEvents

/** The run hit its recursion limit (too many model calls). The run ends with this as its stop, not a crash. */
export class RecursionLimitReached extends Schema.TaggedError<RecursionLimitReached>()("RecursionLimitReached", {
  limit: Schema.Number
}) {
  override get message() {
    return `The run made ${this.limit} model calls without finishing (recursion limit ${this.limit})`
  }
}

/** Saving the thread failed. */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", {
  operation: Schema.String,
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** A failure that ends a run with status `error`. */
export type RunFailure = ReducerError | StoreError | ModelError
