/**
 * The planning half of Summarization (SPEC §5.18), pure: the settings check, the triggers, where the keep policy
 * cuts (never between an AI message and its tool results), what is rescued from before the cut, the state update
 * of a compaction and the request rebuilt after it. Shared by the automatic compaction (the middleware) and the
 * manual one (`Compaction.ts`).
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { posix } from "node:path"
import type { ContextSize, SummarizationConfig } from "../../services/AppConfig.js"
import type { ModelRequest } from "../../services/ModelService.js"
import type { Message, ToolCall } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import type { Redactor } from "../../state/Redact.js"
import type { StateUpdate, ThreadState } from "../../state/ThreadState.js"
import type * as Tokens from "../../state/Tokens.js"
import * as DurableContext from "../DurableContext.js"

/** The summarization settings cannot work with the run's model. */
export class SummarizationConfigError extends Schema.TaggedError<SummarizationConfigError>()(
  "SummarizationConfigError",
  {
    reason: Schema.Literal("unknown_context_window", "invalid_setting"),
    /** The setting at fault, as a config path (`summarization.trigger[1]`). */
    path: Schema.String,
    message: Schema.String
  }
) {}

// ---------------------------------------------------------------------------------------------------------
// Settings

/** Bounds of the skill rescue. */
export interface SkillRescue {
  /** Most recent distinct SKILL.md files kept (0 disables the rescue). */
  readonly maxSkills: number
  /** A read group larger than this many tokens per skill it loads is not kept. */
  readonly tokensPerSkill: number
  /** All kept read groups together stay within this many tokens. */
  readonly totalTokens: number
}

/** Default skill rescue: the last 3 skills, at most 5,000 tokens each and 12,000 in all. */
export const defaultSkillRescue: SkillRescue = { maxSkills: 3, tokensPerSkill: 5000, totalTokens: 12000 }

/** What `plan` needs. */
export interface PlanSettings {
  readonly keep: ContextSize
  /** The run model's context window in tokens (required by a `fraction` keep). */
  readonly window: number | undefined
  /** Tool names whose `path` argument loads a file (`read_file`, ...). */
  readonly skillReadTools: ReadonlySet<string>
  /** The container path of skills (`/mnt/skills`). */
  readonly skillsRoot: string
  readonly skillRescue: SkillRescue
}

/** Normalises a trigger setting to a list (none → never). */
export const triggersOf = (trigger: SummarizationConfig["trigger"]): ReadonlyArray<ContextSize> =>
  trigger == null ? [] : Array.isArray(trigger) ? trigger : [trigger as ContextSize]

/**
 * Checks that every `fraction` trigger or keep has a context window to be a fraction of. Fails with a
 * readable error naming the setting and the model.
 */
export const validate = (
  triggers: ReadonlyArray<ContextSize>,
  keep: ContextSize,
  window: number | undefined,
  modelName: string | undefined
): Either.Either<void, SummarizationConfigError> => {
  const unknown = (path: string) =>
    Either.left(
      new SummarizationConfigError({
        reason: "unknown_context_window",
        path,
        message: `${path} is a fraction of the model's context window, but the context window of ` +
          `${modelName === undefined ? "the run's model" : `model "${modelName}"`} is not known. ` +
          `Set \`context_window\` on that entry of \`models\`, or use a \`tokens\` or \`messages\` size instead.`
      })
    )
  if (window === undefined) {
    for (let i = 0; i < triggers.length; i++) {
      if (triggers[i]!.type === "fraction") return unknown(`summarization.trigger[${i}]`)
    }
    if (keep.type === "fraction") return unknown("summarization.keep")
  }
  return Either.void
}

// ---------------------------------------------------------------------------------------------------------
// Trigger

/** Which trigger fired, and what was observed. */
export interface TriggerHit {
  readonly trigger: ContextSize
  /** Messages or tokens observed. */
  readonly observed: number
  /** The limit compared against (tokens for a fraction). */
  readonly limit: number
  /** For token triggers: whether the count or the model's reported usage reached the limit. */
  readonly source?: "counted" | "reported"
}

/** The `usage_metadata.total_tokens` of the last AI message, if it reported one. */
export const lastReportedTotal = (messages: ReadonlyArray<Message>): number | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type === "ai") return message.usage_metadata?.total_tokens
  }
  return undefined
}

/**
 * The first trigger that fires for this state, if any. `counted` gives the token count of messages plus
 * summary; it is called at most once, and only when a token trigger exists.
 */
export const firstHit = (
  messages: ReadonlyArray<Message>,
  summary: string | null,
  triggers: ReadonlyArray<ContextSize>,
  window: number | undefined,
  counted: () => number
): TriggerHit | undefined => {
  let tokens: number | undefined
  let reported: number | undefined | null = null
  for (const trigger of triggers) {
    if (trigger.type === "messages") {
      const observed = messages.length + (summary !== null && summary !== "" ? 1 : 0)
      if (observed >= trigger.value) return { trigger, observed, limit: trigger.value }
      continue
    }
    const limit = trigger.type === "tokens" ? trigger.value : Math.floor((window ?? 0) * trigger.value)
    if (limit <= 0) continue
    tokens ??= counted()
    if (tokens >= limit) return { trigger, observed: tokens, limit, source: "counted" }
    if (reported === null) reported = lastReportedTotal(messages)
    if (reported !== undefined && reported >= limit) return { trigger, observed: reported, limit, source: "reported" }
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------
// Cutoff

/**
 * Where the keep policy cuts: messages before the index are summarised. `messages` N → `length - N`;
 * `tokens`/`fraction` → the earliest index whose suffix fits the budget (0 when everything fits; never past
 * the last message, which is always kept).
 */
export const policyCutoff = (prefix: Tokens.Prefix, keep: ContextSize, window: number | undefined): number => {
  const n = prefix.length
  if (keep.type === "messages") return Math.max(0, n - keep.value)
  const budget = keep.type === "tokens" ? keep.value : Math.floor((window ?? 0) * keep.value)
  const total = prefix.total
  if (total <= budget) return 0
  let lo = 0
  let hi = n
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (total - prefix.at(mid) <= budget) hi = mid
    else lo = mid + 1
  }
  if (lo >= n) return n <= 1 ? 0 : n - 1
  return lo
}

/**
 * Moves a cutoff so it separates no AI message from its tool results: back to the AI message whose results
 * it would split (repeated until stable), then forward past tool results at the cutoff whose call exists
 * nowhere before them (orphans are summarised, not kept).
 */
export const safeCutoff = (messages: ReadonlyArray<Message>, cutoff: number): number => {
  const n = messages.length
  if (cutoff <= 0) return 0
  if (cutoff >= n) return n
  const caller = new Map<string, number>()
  for (let i = 0; i < n; i++) {
    const message = messages[i]!
    if (message.type !== "ai") continue
    for (const call of message.tool_calls ?? []) if (!caller.has(call.id)) caller.set(call.id, i)
  }
  let c = cutoff
  for (;;) {
    let earliest = c
    for (let i = c; i < n; i++) {
      const message = messages[i]!
      if (message.type !== "tool") continue
      const at = caller.get(message.tool_call_id)
      if (at !== undefined && at < earliest) earliest = at
    }
    if (earliest === c) break
    c = earliest
  }
  while (c > 0 && c < n) {
    const message = messages[c]!
    if (message.type !== "tool") break
    const at = caller.get(message.tool_call_id)
    if (at !== undefined && at < c) break
    c++
  }
  return c
}

// ---------------------------------------------------------------------------------------------------------
// Rescue

/** Whether a message is a dynamic-context reminder (the date system message, the memory message). */
export const isReminder = (message: Message): boolean => message.additional_kwargs?.dynamic_context_reminder === true

/** A real user message: human, not hidden, not named `summary`. */
export const isRealUserMessage = M.isRealUserMessage

/** Index of the latest real user message, or -1. */
export const latestUserMessage = (messages: ReadonlyArray<Message>): number => {
  for (let i = messages.length - 1; i >= 0; i--) if (isRealUserMessage(messages[i]!)) return i
  return -1
}

/** The SKILL.md path a tool call reads, if it is a read of a skill file under the skills root. */
export const skillReadPath = (call: ToolCall, settings: Pick<PlanSettings, "skillReadTools" | "skillsRoot">) => {
  if (!settings.skillReadTools.has(call.name)) return undefined
  const raw = call.args.path ?? call.args.file_path
  if (typeof raw !== "string") return undefined
  const path = posix.normalize(raw)
  const root = settings.skillsRoot.replace(/\/+$/, "")
  return path.startsWith(`${root}/`) && path.endsWith("/SKILL.md") ? path : undefined
}

/**
 * Indices (ascending) of the messages before `cutoff` to keep although they are older than the cut:
 * reminders, the latest real user message, and the most recent successful SKILL.md reads as complete groups
 * (the AI message and every result of its calls), newest first, within the rescue bounds.
 */
export const rescuedIndices = (
  messages: ReadonlyArray<Message>,
  cutoff: number,
  settings: PlanSettings,
  tokensOf: (message: Message) => number
): ReadonlyArray<number> => {
  const keep = new Set<number>()
  for (let i = 0; i < cutoff; i++) if (isReminder(messages[i]!)) keep.add(i)
  const user = latestUserMessage(messages)
  if (user !== -1 && user < cutoff) keep.add(user)

  const rescue = settings.skillRescue
  if (rescue.maxSkills > 0) {
    const resultAt = new Map<string, number>()
    for (let i = 0; i < cutoff; i++) {
      const message = messages[i]!
      if (message.type === "tool") resultAt.set(message.tool_call_id, i)
    }
    const seen = new Set<string>()
    let spent = 0
    for (let i = cutoff - 1; i >= 0 && seen.size < rescue.maxSkills; i--) {
      const message = messages[i]!
      if (message.type !== "ai" || message.tool_calls === undefined || message.tool_calls.length === 0) continue
      const paths: Array<string> = []
      const group = [i]
      let complete = (message.invalid_tool_calls?.length ?? 0) === 0
      for (const call of message.tool_calls) {
        const at = resultAt.get(call.id)
        if (at === undefined || at < i) {
          complete = false
          break
        }
        group.push(at)
        const path = skillReadPath(call, settings)
        const result = messages[at]!
        if (path === undefined || result.type !== "tool" || result.status === "error") continue
        if (!seen.has(path) && !paths.includes(path)) paths.push(path)
      }
      if (!complete || paths.length === 0) continue
      let cost = 0
      for (const at of group) cost += tokensOf(messages[at]!)
      if (cost > rescue.tokensPerSkill * paths.length || spent + cost > rescue.totalTokens) continue
      if (seen.size + paths.length > rescue.maxSkills) continue
      spent += cost
      for (const path of paths) seen.add(path)
      for (const at of group) keep.add(at)
    }
  }
  return [...keep].sort((a, b) => a - b)
}

/** A compaction: which messages go into the summary and which stay. */
export interface Plan {
  /** The keep policy's cut, before the safe-cutoff adjustment. */
  readonly target: number
  /** The cut used: messages before it are summarised unless rescued. */
  readonly cutoff: number
  /** Messages before the cut that stay, in their order. */
  readonly rescued: ReadonlyArray<Message>
  /** Messages that go into the summary and leave the state. */
  readonly summarized: ReadonlyArray<Message>
  /** `messages[cutoff..]`. */
  readonly kept: ReadonlyArray<Message>
}

/** The compaction of these messages under the keep policy, or `undefined` when there is nothing to summarise. */
export const plan = (
  messages: ReadonlyArray<Message>,
  settings: PlanSettings,
  prefix: Tokens.Prefix,
  tokensOf: (message: Message) => number
): Plan | undefined => {
  const target = policyCutoff(prefix, settings.keep, settings.window)
  const cutoff = safeCutoff(messages, target)
  if (cutoff <= 0) return undefined
  const rescuedAt = rescuedIndices(messages, cutoff, settings, tokensOf)
  if (rescuedAt.length >= cutoff) return undefined
  const rescued: Array<Message> = []
  const summarized: Array<Message> = []
  let r = 0
  for (let i = 0; i < cutoff; i++) {
    if (r < rescuedAt.length && rescuedAt[r] === i) {
      rescued.push(messages[i]!)
      r++
    } else summarized.push(messages[i]!)
  }
  return { target, cutoff, rescued, summarized, kept: messages.slice(cutoff) }
}

/** The state update of a compaction: the messages become `rescued ++ kept`, and the summary is stored. */
export const compactionUpdate = (compaction: Plan, summary: string): StateUpdate => ({
  messages: [M.remove(M.REMOVE_ALL_MESSAGES), ...compaction.rescued, ...compaction.kept],
  summary_text: summary
})

/**
 * Whether a stored update is a compaction's (`compactionUpdate`, with the summary call's `token_usage`): every
 * message removed first, the summary set, nothing else. A fork's reset also removes every message and sets the
 * summary, but sets the title, todos and goal too.
 */
export const isCompaction = (update: StateUpdate): boolean => {
  const first = update.messages?.[0]
  if (first?.type !== "remove" || first.id !== M.REMOVE_ALL_MESSAGES || typeof update.summary_text !== "string") {
    return false
  }
  const allowed = new Set(["messages", "summary_text", "token_usage"])
  for (const key in update) if (Object.hasOwn(update, key) && !allowed.has(key)) return false
  return true
}

/**
 * The request after a compaction: the summarised messages (and any result the request carried for their tool
 * calls) are dropped — request-only messages added by outer wrappers stay where they were — and the durable
 * projection is rebuilt from the new state, so the request carries the new summary.
 */
export const rebuildRequest = (
  request: ModelRequest,
  compaction: Plan,
  state: Pick<ThreadState, "summary_text" | "skill_context"> & Partial<Pick<ThreadState, "delegations">>,
  hide?: Redactor
): ModelRequest => {
  const gone = new Set<string>()
  const goneCalls = new Set<string>()
  for (const message of compaction.summarized) {
    gone.add(message.id)
    for (const call of M.toolCalls(message)) goneCalls.add(call.id)
  }
  const messages = request.messages.filter((message) =>
    !gone.has(message.id) && !(message.type === "tool" && goneCalls.has(message.tool_call_id))
  )
  return { ...request, messages: DurableContext.reproject(messages, state, hide) }
}
