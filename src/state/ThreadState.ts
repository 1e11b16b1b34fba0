/**
 * The typed state of a thread and the shape of an update to it. Every change goes through the reducers in
 * `Reducers.ts`; this module only holds the schemas.
 */
import * as Schema from "effect/Schema"
import { headChars } from "./Chars.js"
import { Message, MessageWrite } from "./Message.js"

/** `{ sandbox_id }`: the sandbox a thread is bound to. Never switches within a thread. */
export const SandboxState = Schema.Struct({ sandbox_id: Schema.optional(Schema.NullOr(Schema.String)) })
export type SandboxState = typeof SandboxState.Type

/** Host directories of the thread (written by ThreadData). */
export const ThreadData = Schema.Struct({
  workspace_path: Schema.optional(Schema.String),
  uploads_path: Schema.optional(Schema.String),
  outputs_path: Schema.optional(Schema.String)
})
export type ThreadData = typeof ThreadData.Type

/** One plan-mode todo. An item read without a status is pending (as DeerFlow reads it). */
export const Todo = Schema.Struct({
  content: Schema.String,
  status: Schema.optionalWith(Schema.Literal("pending", "in_progress", "completed"), { default: () => "pending" })
})
export type Todo = typeof Todo.Type

/** A file uploaded with the current message. */
export const UploadedFile = Schema.Struct({
  filename: Schema.String,
  size: Schema.Number,
  path: Schema.String,
  extension: Schema.String
})
export type UploadedFile = typeof UploadedFile.Type

/** An image the model has looked at, keyed by its virtual path in `viewed_images`. */
export const ViewedImage = Schema.Struct({
  /** Read as `unknown` when missing (DeerFlow's reading). */
  mime_type: Schema.optionalWith(Schema.String, { default: () => "unknown" }),
  size: Schema.Number,
  actual_path: Schema.String
})
export type ViewedImage = typeof ViewedImage.Type

export const ViewedImages = Schema.Record({ key: Schema.String, value: ViewedImage })
export type ViewedImages = typeof ViewedImages.Type

/** Deferred tools promoted for the current tool catalog. */
export const Promoted = Schema.Struct({ catalog_hash: Schema.String, names: Schema.Array(Schema.String) })
export type Promoted = typeof Promoted.Type

/**
 * An update to `promoted`; any part may be missing. `{}` changes nothing; names without a catalog hash are for
 * the current catalog; a different hash replaces the promotions (see `Reducers.mergePromoted`).
 */
export const PromotedUpdate = Schema.Struct({
  catalog_hash: Schema.optional(Schema.String),
  names: Schema.optional(Schema.Array(Schema.String))
})
export type PromotedUpdate = typeof PromotedUpdate.Type

/**
 * A skill loaded earlier in the thread (a reference: the model re-reads the file). Legacy entries decode too:
 * a missing or null `name` or `description` is empty, a missing or null `loaded_at` is 0, and old body keys are
 * dropped. Only `path` is required.
 */
const SkillEntryFields = Schema.Struct({
  name: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  path: Schema.String,
  description: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  loaded_at: Schema.optionalWith(Schema.Number, { default: () => 0, nullable: true })
})

/** The most characters of a skill's description kept in `skill_context` (DeerFlow's cap). */
export const MAX_SKILL_DESCRIPTION = 500

/**
 * A skill entry as DeerFlow normalises one (`_normalize_skill_entry`): exactly these four keys, whatever else a
 * legacy entry carried (its SKILL.md body); the description on one line, at most 500 characters; `loaded_at` an
 * integer, else 0. Decoding a stored thread gives the normalised entry.
 */
export const SkillEntry = Schema.transform(SkillEntryFields, Schema.typeSchema(SkillEntryFields), {
  strict: true,
  decode: (entry) => ({
    name: entry.name,
    path: entry.path,
    description: headChars(entry.description.replace(/\s+/g, " ").trim(), MAX_SKILL_DESCRIPTION),
    loaded_at: Number.isInteger(entry.loaded_at) ? entry.loaded_at : 0
  }),
  encode: (entry) => entry
})
export type SkillEntry = typeof SkillEntry.Type

/** Token counts summed over model calls. */
export const TokenTotals = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  total_tokens: Schema.Number,
  calls: Schema.Number
})
export type TokenTotals = typeof TokenTotals.Type

/**
 * Token usage of the thread: the grand total, one entry per model, and one per purpose (`agent`, `summarization`...).
 */
export const TokenUsage = Schema.Struct({
  total: TokenTotals,
  by_model: Schema.Record({ key: Schema.String, value: TokenTotals }),
  by_purpose: Schema.optional(Schema.Record({ key: Schema.String, value: TokenTotals }))
})
export type TokenUsage = typeof TokenUsage.Type

/** One model call's usage, as written by TokenUsage; the reducer adds it to the totals. */
export const TokenUsageDelta = Schema.Struct({
  model: Schema.String,
  /** What the call was for: `agent` (the default), or an internal purpose such as `summarization`. */
  purpose: Schema.optional(Schema.String),
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  total_tokens: Schema.Number
})
export type TokenUsageDelta = typeof TokenUsageDelta.Type

/** Where a delegated task stands: in progress, or one of the subagent status contract's terminal values. */
export const DelegationStatus = Schema.Literal(
  "in_progress",
  "completed",
  "failed",
  "cancelled",
  "timed_out",
  "polling_timed_out"
)
export type DelegationStatus = typeof DelegationStatus.Type

/** Why a guard cap ended a subagent early (SPEC §2.3). */
export const SubagentStopReason = Schema.Literal("token_capped", "turn_capped", "loop_capped")
export type SubagentStopReason = typeof SubagentStopReason.Type

/**
 * One entry of the delegation ledger (DeerFlow's `DelegationEntry`): a `task` call of the lead agent, by its
 * tool-call id, with where it stands and a bounded brief of its result.
 */
export const DelegationEntry = Schema.Struct({
  id: Schema.String,
  /** The run that delegated it. */
  run_id: Schema.optional(Schema.String),
  /** Empty when the entry was written without one (another client, an older version). */
  description: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  subagent_type: Schema.optionalWith(Schema.String, { default: () => "", nullable: true }),
  status: DelegationStatus,
  /** At most 2000 characters of the result (or error), head and tail. */
  result_brief: Schema.optional(Schema.String),
  /** sha256 (hex) of the full result. */
  result_sha256: Schema.optional(Schema.String),
  /** The id of the tool message that carries the full result. */
  result_ref: Schema.optional(Schema.String),
  stop_reason: Schema.optional(SubagentStopReason),
  created_at: Schema.String
})
export type DelegationEntry = typeof DelegationEntry.Type

/** What keeps a goal from being met, as the goal loop's evaluator names it (DeerFlow's blockers). */
export const GoalBlocker = Schema.Literal(
  "none",
  "missing_evidence",
  "needs_user_input",
  "run_failed",
  "external_wait",
  "goal_not_met_yet"
)

/** How the goal loop judged the last turn (DeerFlow's `last_evaluation`). */
export const GoalEvaluation = Schema.Struct({
  satisfied: Schema.Boolean,
  blocker: GoalBlocker,
  reason: Schema.String,
  evidence_summary: Schema.optional(Schema.String),
  run_id: Schema.optional(Schema.String),
  evaluated_at: Schema.optional(Schema.String),
  progress_key: Schema.optional(Schema.String),
  stand_down_reason: Schema.optional(Schema.String)
})
export type GoalEvaluation = typeof GoalEvaluation.Type

/** The thread's goal (DeerFlow's `GoalState`, SPEC §2.3): what the thread works towards across turns. */
export const GoalState = Schema.Struct({
  objective: Schema.String,
  status: Schema.Literal("active"),
  created_at: Schema.String,
  updated_at: Schema.String,
  continuation_count: Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  max_continuations: Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  no_progress_count: Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  max_no_progress_continuations: Schema.Number.pipe(Schema.int(), Schema.nonNegative()),
  last_evaluation: Schema.optional(GoalEvaluation)
})
export type GoalState = typeof GoalState.Type

/** An update to `goal`: a goal replaces the current one; `{ clear: true }` removes it (`null` keeps it). */
export const GoalUpdate = Schema.Union(GoalState, Schema.Struct({ clear: Schema.Literal(true) }))
export type GoalUpdate = typeof GoalUpdate.Type

/**
 * A background task of the thread, as the model's state shows it (DeerFlow's `BackgroundTaskState`): one of the
 * thread's MCP tasks, projected from their records at a run's start. `task_name` is the server's tool name with
 * the prompt's tags neutralised; `updated_at` an ISO time.
 */
export const BackgroundTask = Schema.Struct({
  task_id: Schema.String,
  task_name: Schema.String,
  status: Schema.Literal("submitted", "working", "input_required", "completed", "failed", "cancelled"),
  updated_at: Schema.String
})
export type BackgroundTask = typeof BackgroundTask.Type

/** The most background tasks the state holds (DeerFlow's worker projects 20). */
export const MAX_BACKGROUND_TASKS = 20

/** The whole state of a thread. */
export const ThreadState = Schema.Struct({
  messages: Schema.Array(Message),
  sandbox: Schema.NullOr(SandboxState),
  thread_data: Schema.NullOr(ThreadData),
  title: Schema.NullOr(Schema.String),
  artifacts: Schema.Array(Schema.String),
  todos: Schema.NullOr(Schema.Array(Todo)),
  uploaded_files: Schema.NullOr(Schema.Array(UploadedFile)),
  viewed_images: ViewedImages,
  promoted: Schema.NullOr(Promoted),
  summary_text: Schema.NullOr(Schema.String),
  skill_context: Schema.Array(SkillEntry),
  token_usage: Schema.NullOr(TokenUsage),
  /** The delegation ledger (threads saved before it existed decode with an empty one). */
  delegations: Schema.optionalWith(Schema.Array(DelegationEntry), { default: () => [] }),
  goal: Schema.optionalWith(Schema.NullOr(GoalState), { default: () => null }),
  /** The thread's MCP tasks, newest first (absent until a run with the task runtime projected them). */
  background_tasks: Schema.optional(Schema.Array(BackgroundTask))
})
export type ThreadState = typeof ThreadState.Type

/** A thread with nothing in it. */
export const empty: ThreadState = {
  messages: [],
  sandbox: null,
  thread_data: null,
  title: null,
  artifacts: [],
  todos: null,
  uploaded_files: null,
  viewed_images: {},
  promoted: null,
  summary_text: null,
  skill_context: [],
  token_usage: null,
  delegations: [],
  goal: null
}

/**
 * A change to thread state. Absent fields are untouched; present ones are merged by the field's reducer
 * (see `Reducers.ts` for what `null`, `[]` and `{}` mean per field).
 */
export const StateUpdate = Schema.Struct({
  messages: Schema.optional(Schema.Array(MessageWrite)),
  sandbox: Schema.optional(Schema.NullOr(SandboxState)),
  thread_data: Schema.optional(Schema.NullOr(ThreadData)),
  title: Schema.optional(Schema.NullOr(Schema.String)),
  artifacts: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  todos: Schema.optional(Schema.NullOr(Schema.Array(Todo))),
  uploaded_files: Schema.optional(Schema.NullOr(Schema.Array(UploadedFile))),
  viewed_images: Schema.optional(Schema.NullOr(ViewedImages)),
  promoted: Schema.optional(Schema.NullOr(PromotedUpdate)),
  summary_text: Schema.optional(Schema.NullOr(Schema.String)),
  skill_context: Schema.optional(Schema.NullOr(Schema.Array(SkillEntry))),
  token_usage: Schema.optional(Schema.Array(TokenUsageDelta)),
  delegations: Schema.optional(Schema.NullOr(Schema.Array(DelegationEntry))),
  goal: Schema.optional(Schema.NullOr(GoalUpdate)),
  background_tasks: Schema.optional(Schema.NullOr(Schema.Array(BackgroundTask)))
})
export type StateUpdate = typeof StateUpdate.Type
