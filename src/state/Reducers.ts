/**
 * Pure reducers: how each field of `ThreadState` merges an update. Semantics follow DeerFlow's
 * `thread_state.py` and LangGraph's `add_messages` exactly; conflicts are typed failures, never silent
 * overwrites. Nothing here performs I/O or uses services.
 */
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { headChars } from "./Chars.js"
import type { Message, MessageWrite } from "./Message.js"
import { REMOVE_ALL_MESSAGES } from "./Message.js"
import type {
  BackgroundTask,
  DelegationEntry,
  DelegationStatus,
  GoalState,
  GoalUpdate,
  Promoted,
  PromotedUpdate,
  SandboxState,
  StateUpdate,
  ThreadState,
  TokenUsage,
  TokenUsageDelta,
  Todo,
  ViewedImages
} from "./ThreadState.js"
import { MAX_BACKGROUND_TASKS, SkillEntry } from "./ThreadState.js"

/** Two different sandbox ids were written to one thread. */
export class SandboxConflict extends Schema.TaggedError<SandboxConflict>()("SandboxConflict", {
  existing: Schema.NullishOr(Schema.String),
  incoming: Schema.NullishOr(Schema.String)
}) {
  override get message() {
    return `Conflicting sandbox state updates: the thread is bound to sandbox ${JSON.stringify(this.existing)}, ` +
      `an update tried to bind it to ${JSON.stringify(this.incoming)}`
  }
}

/** A messages write removed an id that is not in the thread. */
export class UnknownMessageRemoval extends Schema.TaggedError<UnknownMessageRemoval>()("UnknownMessageRemoval", {
  id: Schema.String
}) {
  override get message() {
    return `Attempting to delete a message with an id that does not exist in the thread: ${this.id}`
  }
}

/** Any failure of a reducer. */
export type ReducerError = SandboxConflict | UnknownMessageRemoval

// ---------------------------------------------------------------------------------------------------------
// messages

/**
 * An id → position index per messages array, so a write costs O(size of the write) instead of O(thread).
 * Arrays made by appending share their parent's map; a lookup is verified against the array itself, and
 * falls back to a scan when another array derived from the same parent claimed that id. An optimisation only:
 * the owner of a thread's successive states (a run, a store's fold) keeps one and passes it to every write;
 * without one, each write indexes its array afresh.
 */
export type Indexes = WeakMap<ReadonlyArray<Message>, Map<string, number>>

/** A fresh index cache for one owner of successive states. */
export const makeIndexes = (): Indexes => new WeakMap()

const indexOf = (messages: ReadonlyArray<Message>, indexes: Indexes): Map<string, number> => {
  let index = indexes.get(messages)
  if (index === undefined) {
    index = new Map()
    for (let i = 0; i < messages.length; i++) index.set(messages[i]!.id, i)
    indexes.set(messages, index)
  }
  return index
}

/** The position of the message with this id, or -1. */
export const findMessage = (messages: ReadonlyArray<Message>, id: string, indexes: Indexes = makeIndexes()): number => {
  const position = indexOf(messages, indexes).get(id)
  if (position === undefined) return -1
  if (position < messages.length && messages[position]!.id === id) return position
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.id === id) return i
  return -1
}

/**
 * LangGraph's `add_messages`: a message with a known id replaces it in place, a new id is appended, a removal
 * deletes (after the whole write is processed; a later message with the same id cancels it), removing an
 * unknown id fails, and a remove-all marker keeps only what follows the last marker.
 */
export const addMessages = (
  existing: ReadonlyArray<Message>,
  write: ReadonlyArray<MessageWrite>,
  indexes: Indexes = makeIndexes()
): Either.Either<ReadonlyArray<Message>, UnknownMessageRemoval> => {
  let start = 0
  let base = existing
  for (let i = write.length - 1; i >= 0; i--) {
    const item = write[i]!
    if (item.type === "remove" && item.id === REMOVE_ALL_MESSAGES) {
      start = i + 1
      base = []
      break
    }
  }
  if (start === write.length && base === existing) return Either.right(existing)

  let replaced: Map<number, Message> | undefined
  let deleted: Set<string> | undefined
  const appended: Array<Message> = []
  // Where an id was appended: a scan of the few appended so far (a step writes one to a handful), an index
  // once there are more.
  let appendedAt: Map<string, number> | undefined
  const appendedIndex = (id: string): number | undefined => {
    if (appendedAt !== undefined) return appendedAt.get(id)
    for (let j = 0; j < appended.length; j++) if (appended[j]!.id === id) return j
    return undefined
  }

  for (let i = start; i < write.length; i++) {
    const item = write[i]!
    const inBase = findMessage(base, item.id, indexes)
    const inAppended = inBase === -1 ? appendedIndex(item.id) : undefined
    if (item.type === "remove") {
      if (inBase === -1 && inAppended === undefined) return Either.left(new UnknownMessageRemoval({ id: item.id }))
      ;(deleted ??= new Set()).add(item.id)
      continue
    }
    deleted?.delete(item.id)
    if (inBase !== -1) (replaced ??= new Map()).set(inBase, item)
    else if (inAppended !== undefined) appended[inAppended] = item
    else {
      if (appendedAt === undefined && appended.length === 16) appendedAt = new Map(appended.map((m, j) => [m.id, j]))
      appendedAt?.set(item.id, appended.length)
      appended.push(item)
    }
  }

  if (replaced === undefined && deleted === undefined) {
    if (appended.length === 0) return Either.right(base)
    const next = base.concat(appended)
    if (base.length > 0) {
      const index = indexOf(base, indexes)
      for (let i = 0; i < appended.length; i++) index.set(appended[i]!.id, base.length + i)
      indexes.set(next, index)
    }
    return Either.right(next)
  }

  let next = base.concat(appended)
  if (replaced !== undefined) for (const [position, message] of replaced) next[position] = message
  if (deleted !== undefined && deleted.size > 0) next = next.filter((message) => !deleted.has(message.id))
  else if (base.length > 0) {
    const index = indexOf(base, indexes)
    for (let i = 0; i < appended.length; i++) index.set(appended[i]!.id, base.length + i)
    indexes.set(next, index)
  }
  return Either.right(next)
}

// ---------------------------------------------------------------------------------------------------------
// other fields

/** Idempotent sandbox binding: the same id twice is fine, a different id is a conflict. */
export const mergeSandbox = (
  existing: SandboxState | null,
  incoming: SandboxState | null | undefined
): Either.Either<SandboxState | null, SandboxConflict> => {
  if (incoming == null) return Either.right(existing)
  if (existing === null) return Either.right(incoming)
  if ((existing.sandbox_id ?? null) === (incoming.sandbox_id ?? null)) return Either.right(existing)
  return Either.left(new SandboxConflict({ existing: existing.sandbox_id, incoming: incoming.sandbox_id }))
}

/** Concatenation without duplicates, first occurrence order kept. `null` keeps what is there. */
export const mergeArtifacts = (
  existing: ReadonlyArray<string>,
  incoming: ReadonlyArray<string> | null | undefined
): ReadonlyArray<string> => {
  if (incoming == null || incoming.length === 0) return existing
  const seen = new Set(existing)
  let out: Array<string> | undefined
  for (const path of incoming) {
    if (seen.has(path)) continue
    seen.add(path)
    ;(out ??= existing.slice()).push(path)
  }
  return out ?? existing
}

/** An explicit list replaces (an empty list clears); `null` keeps. */
export const mergeTodos = (
  existing: ReadonlyArray<Todo> | null,
  incoming: ReadonlyArray<Todo> | null | undefined
): ReadonlyArray<Todo> | null => (incoming == null ? existing : incoming)

/** Shallow merge, new keys win; `{}` empties everything; `null` keeps. */
export const mergeViewedImages = (
  existing: ViewedImages,
  incoming: ViewedImages | null | undefined
): ViewedImages => {
  if (incoming == null) return existing
  if (Object.keys(incoming).length === 0) return {}
  return { ...existing, ...incoming }
}

const dedupe = (names: ReadonlyArray<string>): ReadonlyArray<string> => Array.from(new Set(names))

/**
 * Promotions for a catalog: a new catalog hash replaces (stale names are dropped), the same hash unions the
 * names in order, and names without a hash join the current catalog's. `null` and `{}` keep what is there
 * (the same object whenever nothing changes).
 */
export const mergePromoted = (
  existing: Promoted | null,
  incoming: PromotedUpdate | null | undefined
): Promoted | null => {
  if (incoming == null) return existing
  const names = incoming.names ?? []
  const hash = incoming.catalog_hash
  if (hash !== undefined && (existing === null || existing.catalog_hash !== hash)) {
    return { catalog_hash: hash, names: dedupe(names) }
  }
  if (existing === null) return existing
  const merged = dedupe([...existing.names, ...names])
  const same = merged.length === existing.names.length && merged.every((name, i) => name === existing.names[i])
  return same ? existing : { catalog_hash: existing.catalog_hash, names: merged }
}

const MAX_SKILL_ENTRIES = 8
const MAX_SKILL_DESCRIPTION = 500

// Entries are decoded here rather than trusted: threads written by older versions hold entries without a
// description (or with extra body keys), and a reducer must not throw on them.
const decodeSkill = Schema.decodeUnknownOption(SkillEntry)

const normalizeSkill = (raw: unknown): SkillEntry | undefined => {
  const entry = Option.getOrUndefined(decodeSkill(raw))
  if (entry === undefined) return undefined
  return {
    name: entry.name,
    path: entry.path,
    description: headChars(entry.description.replace(/\s+/g, " ").trim(), MAX_SKILL_DESCRIPTION),
    loaded_at: Number.isInteger(entry.loaded_at) ? entry.loaded_at : 0
  }
}

/**
 * Loaded skills by path: a re-read moves the entry to the end; only the last 8 are kept. Every entry is
 * normalised (DeerFlow's `{name, path, description, loaded_at}`: description whitespace-collapsed and at most 500
 * characters, loaded_at an integer or 0, legacy keys dropped); an entry without a path is skipped.
 */
export const mergeSkillContext = (
  existing: ReadonlyArray<SkillEntry>,
  incoming: ReadonlyArray<SkillEntry> | null | undefined
): ReadonlyArray<SkillEntry> => {
  if (incoming == null || incoming.length === 0) return existing
  const byPath = new Map<string, SkillEntry>()
  for (const raw of [...existing, ...incoming]) {
    const entry = normalizeSkill(raw)
    if (entry === undefined) continue
    byPath.delete(entry.path)
    byPath.set(entry.path, entry)
  }
  return Array.from(byPath.values()).slice(-MAX_SKILL_ENTRIES)
}

const zeroTotals = { input_tokens: 0, output_tokens: 0, total_tokens: 0, calls: 0 }

/** Adds each model call's usage to the thread total and to its model's total. */
export const addTokenUsage = (
  existing: TokenUsage | null,
  deltas: ReadonlyArray<TokenUsageDelta> | undefined
): TokenUsage | null => {
  if (deltas === undefined || deltas.length === 0) return existing
  let total = existing?.total ?? zeroTotals
  const byModel = { ...existing?.by_model }
  const byPurpose = { ...existing?.by_purpose }
  for (const delta of deltas) {
    const add = (t: typeof zeroTotals) => ({
      input_tokens: t.input_tokens + delta.input_tokens,
      output_tokens: t.output_tokens + delta.output_tokens,
      total_tokens: t.total_tokens + delta.total_tokens,
      calls: t.calls + 1
    })
    total = add(total)
    byModel[delta.model] = add(byModel[delta.model] ?? zeroTotals)
    const purpose = delta.purpose ?? "agent"
    byPurpose[purpose] = add(byPurpose[purpose] ?? zeroTotals)
  }
  return { total, by_model: byModel, by_purpose: byPurpose }
}

/** How many delegation entries a thread keeps (the newest). */
export const MAX_DELEGATIONS = 50

const TERMINAL: ReadonlySet<DelegationStatus> = new Set([
  "completed",
  "failed",
  "cancelled",
  "timed_out",
  "polling_timed_out"
])

/** Whether a delegation status is final (a subagent result came back, or it ended without one). */
export const isTerminal = (status: DelegationStatus): boolean => TERMINAL.has(status)

/**
 * The delegation ledger (DeerFlow's `merge_delegations`): entries keyed by id in first-seen order; a later
 * entry replaces an earlier one of the same id, except that a terminal status is never replaced by a
 * non-terminal one (a late `in_progress` capture cannot undo a result). A replacement keeps the original
 * `created_at` and inherits a `run_id` it lacks. Only the last 50 entries are kept. `null` or `[]` keep what is
 * there (the same array).
 */
export const mergeDelegations = (
  existing: ReadonlyArray<DelegationEntry>,
  incoming: ReadonlyArray<DelegationEntry> | null | undefined
): ReadonlyArray<DelegationEntry> => {
  if (incoming == null || incoming.length === 0) return existing
  const byId = new Map<string, DelegationEntry>()
  let changed = false
  for (const entry of existing) byId.set(entry.id, entry)
  for (const entry of incoming) {
    const previous = byId.get(entry.id)
    if (previous === undefined) {
      byId.set(entry.id, entry)
      changed = true
      continue
    }
    if (isTerminal(previous.status) && !isTerminal(entry.status)) continue
    const runId = entry.run_id ?? previous.run_id
    const next: DelegationEntry = {
      ...entry,
      created_at: previous.created_at,
      ...(runId !== undefined ? { run_id: runId } : {})
    }
    if (sameEntry(previous, next)) continue
    byId.set(entry.id, next)
    changed = true
  }
  if (!changed && byId.size <= MAX_DELEGATIONS) return existing
  return Array.from(byId.values()).slice(-MAX_DELEGATIONS)
}

const ENTRY_KEYS = [
  "id",
  "run_id",
  "description",
  "subagent_type",
  "status",
  "result_brief",
  "result_sha256",
  "result_ref",
  "stop_reason",
  "created_at"
] as const

const sameEntry = (a: DelegationEntry, b: DelegationEntry): boolean => ENTRY_KEYS.every((key) => a[key] === b[key])

/** The goal (DeerFlow's `merge_goal`): `null` keeps it, a goal replaces it, `{ clear: true }` removes it. */
export const mergeGoal = (
  existing: GoalState | null,
  incoming: GoalUpdate | null | undefined
): GoalState | null => {
  if (incoming == null) return existing
  if ("clear" in incoming) return null
  return incoming
}

/**
 * The background tasks (DeerFlow's last value, bounded): `null` or absent keeps them; a list replaces them, each
 * task once (its first entry, the newest), at most `MAX_BACKGROUND_TASKS`.
 */
export const mergeBackgroundTasks = (
  existing: ReadonlyArray<BackgroundTask> | undefined,
  incoming: ReadonlyArray<BackgroundTask> | null | undefined
): ReadonlyArray<BackgroundTask> | undefined => {
  if (incoming == null) return existing
  const seen = new Set<string>()
  const out: Array<BackgroundTask> = []
  for (const task of incoming) {
    if (out.length === MAX_BACKGROUND_TASKS) break
    if (seen.has(task.task_id)) continue
    seen.add(task.task_id)
    out.push(task)
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------
// whole state

/** Applies one update to a state, field by field. */
export const applyUpdate = (
  state: ThreadState,
  update: StateUpdate,
  indexes?: Indexes
): Either.Either<ThreadState, ReducerError> => {
  let next = state
  const set = <K extends keyof ThreadState>(key: K, value: ThreadState[K]) => {
    if (next[key] !== value) next = next === state ? { ...state, [key]: value } : Object.assign(next, { [key]: value })
  }
  if (update.messages !== undefined) {
    const messages = addMessages(state.messages, update.messages, indexes)
    if (Either.isLeft(messages)) return Either.left(messages.left)
    set("messages", messages.right)
  }
  if (update.sandbox !== undefined) {
    const sandbox = mergeSandbox(state.sandbox, update.sandbox)
    if (Either.isLeft(sandbox)) return Either.left(sandbox.left)
    set("sandbox", sandbox.right)
  }
  if (update.thread_data !== undefined) set("thread_data", update.thread_data)
  if (update.title !== undefined) set("title", update.title)
  if (update.artifacts !== undefined) set("artifacts", mergeArtifacts(state.artifacts, update.artifacts))
  if (update.todos !== undefined) set("todos", mergeTodos(state.todos, update.todos))
  if (update.uploaded_files !== undefined) set("uploaded_files", update.uploaded_files)
  if (update.viewed_images !== undefined) {
    set("viewed_images", mergeViewedImages(state.viewed_images, update.viewed_images))
  }
  if (update.promoted !== undefined) set("promoted", mergePromoted(state.promoted, update.promoted))
  if (update.summary_text !== undefined) set("summary_text", update.summary_text)
  if (update.skill_context !== undefined) {
    set("skill_context", mergeSkillContext(state.skill_context, update.skill_context))
  }
  if (update.token_usage !== undefined) set("token_usage", addTokenUsage(state.token_usage, update.token_usage))
  if (update.delegations !== undefined) set("delegations", mergeDelegations(state.delegations, update.delegations))
  if (update.goal !== undefined) set("goal", mergeGoal(state.goal, update.goal))
  if (update.background_tasks != null) {
    set("background_tasks", mergeBackgroundTasks(state.background_tasks, update.background_tasks))
  }
  return Either.right(next)
}

/** Applies updates in order; the first failure stops. */
export const applyUpdates = (
  state: ThreadState,
  updates: ReadonlyArray<StateUpdate>,
  indexes: Indexes = makeIndexes()
): Either.Either<ThreadState, ReducerError> => {
  let current = state
  for (const update of updates) {
    const next = applyUpdate(current, update, indexes)
    if (Either.isLeft(next)) return next
    current = next.right
  }
  return Either.right(current)
}
