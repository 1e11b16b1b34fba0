/**
 * The subagent port: how the `task` tool hands a sub-task to a subagent without knowing how subagents are
 * built. A program provides it (`programs/Subagents.ts`: a registry of subagent types, each running the
 * subagent chain over the app's model, store and sandbox, in a bounded pool per app); a middleware only calls
 * `run` from inside the parent's tool call.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { Outcome } from "../state/SubagentStatus.js"
import type { RunServices } from "./RunContext.js"

/** A subagent type as the lead agent's prompt lists it. */
export interface SubagentType {
  readonly name: string
  readonly description: string
}

/** One delegated task. */
export interface TaskRequest {
  /** The `task` call's id (the id of the task in every event). */
  readonly toolCallId: string
  /** A short description (3-5 words) the user sees. */
  readonly description: string
  /** The full instructions for the subagent. */
  readonly prompt: string
  readonly subagentType: string
  /** The parent agent's tool groups (`undefined` = all); the subagent's tools are limited to them too. */
  readonly toolGroups?: ReadonlyArray<string> | undefined
  /** The parent agent's skills allowlist (`undefined` = all enabled skills). */
  readonly skills?: ReadonlyArray<string> | undefined
}

/** The subagent runner of an app. */
export interface Service {
  /** The subagent types a task may name, in the order the prompt lists them. */
  readonly types: ReadonlyArray<SubagentType>
  /**
   * Runs a task to its end inside the parent's tool call: it reads the parent's run (thread, user, model,
   * sandbox) and streams progress to the parent's events (`task_started`, `task_running`, then one of
   * `task_completed`, `task_failed`, `task_cancelled`, `task_timed_out`). Never fails: how the subagent ended
   * is the outcome. Interrupting it cancels the subagent (and emits `task_cancelled`).
   */
  readonly run: (request: TaskRequest) => Effect.Effect<Outcome, never, RunServices>
}

/** The subagent runner. */
export class SubagentRunner extends Context.Tag("antler/SubagentRunner")<SubagentRunner, Service>() {}

/** Subagents were enabled for an agent, but the app provides no `SubagentRunner`. */
export class SubagentRunnerMissing extends Schema.TaggedError<SubagentRunnerMissing>()("SubagentRunnerMissing", {
  message: Schema.String
}) {}

/** Names of the custom events a task streams to its parent run. */
export const TaskEvent = {
  started: "task_started",
  running: "task_running",
  completed: "task_completed",
  failed: "task_failed",
  cancelled: "task_cancelled",
  timedOut: "task_timed_out"
} as const
