/**
 * Long-term memory (SPEC §11): what an agent remembers about its user across threads. One service per app:
 * the runs of every agent of the app hand their conversations to its update queue (debounced; one internal
 * model call per update), and read the memory block injected at the start of a thread from it. The memory of
 * a custom agent is its own; the default agent's is the user's.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { MemoryConfig } from "./AppConfig.js"
import type { Message } from "../state/Message.js"
import type { Document, Fact } from "../state/Memory.js"

/** Whose memory: a user, and a custom agent's own memory when `agentName` is set. */
export interface Scope {
  readonly userId: string
  readonly agentName?: string | undefined
}

/** A conversation handed to the update queue after a run. */
export interface Pending extends Scope {
  readonly threadId: string
  /** The thread's messages (the queue reads those it has not read yet). */
  readonly messages: ReadonlyArray<Message>
  /** The model the run used (the update uses `memory.model_name`, else this one). */
  readonly modelName?: string | undefined
  /**
   * Whether the user's role may use a model (`authorization.enabled`; absent: any): `memory.model_name` it may not
   * use is passed over for `modelName`, the run's, which it may.
   */
  readonly allows?: ((model: string) => Effect.Effect<boolean>) | undefined
  /** Process it without waiting for the debounce (messages about to be summarised away). */
  readonly immediate?: boolean | undefined
}

/** Reading or writing memory failed. */
export class MemoryError extends Schema.TaggedError<MemoryError>()("MemoryError", {
  reason: Schema.Literal("io", "corrupt", "locked", "not_found"),
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** The memory service. */
export interface Service {
  /** Whether memory is on (`memory.enabled`, and a backend other than `noop`). */
  readonly enabled: boolean
  /** `middleware` (updated after runs) or `tool` (the model uses memory tools). */
  readonly mode: "middleware" | "tool"
  /**
   * The memory block's body for a scope (without its tags), within `max_injection_tokens`; empty when nothing
   * is remembered, memory is off, or it cannot be read (a warning is logged).
   */
  readonly context: (scope: Scope) => Effect.Effect<string>
  /** Queues a conversation for an update (a later one of the same thread replaces a pending one). */
  readonly enqueue: (pending: Pending) => Effect.Effect<void>
  /** Runs every pending update now and waits for them (and for one already running). */
  readonly flush: Effect.Effect<void>
  /** How many updates are waiting. */
  readonly pending: Effect.Effect<number>
  readonly load: (scope: Scope) => Effect.Effect<Document, MemoryError>
  /** Forgets everything of a scope. */
  readonly clear: (scope: Scope) => Effect.Effect<void, MemoryError>
  /** Changes the facts of a scope (memory tools): the function gets the document and returns the new one. */
  readonly modify: <A>(scope: Scope, f: (doc: Document) => readonly [A, Document]) => Effect.Effect<A, MemoryError>
  /**
   * The same memory (its files, its update queue) under another `memory` section: an edit of `config.yaml` that
   * `antler serve` took, for the runs and requests after it. What it injects, and the updates of the conversations
   * it queues, read that section (on or off, the injection, the debounce, the update model, the limits, DeerMem's
   * policies); where the files are and the backend stay those of the start.
   */
  readonly under: (config: MemoryConfig) => Service
  /**
   * Records that `memory_search` returned these facts (DeerMem's recall records, which its `hybrid-v1` capacity
   * policy reads); nothing under the `confidence` policy. A failure is a warning: a recall is a hint, not memory.
   */
  readonly recall: (scope: Scope, factIds: ReadonlyArray<string>) => Effect.Effect<void>
}

/** The memory service of an app. */
export class Memory extends Context.Tag("antler/Memory")<Memory, Service>() {}

export type { Document, Fact }
