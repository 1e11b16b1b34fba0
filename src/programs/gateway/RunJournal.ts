/**
 * A run's events as DeerFlow records them (its run journal, served by `GET /api/threads/{id}/runs/{run_id}/events`),
 * built from the events the run streams: `run.start`; a message written, as `llm.human.input`, `llm.ai.response`
 * or `llm.tool.result` (a message written again under its id replaces its event, or drops it when it became one the
 * app does not show); a subagent's `task_*` events as
 * `subagent.start`, `subagent.step` (DeerFlow's compact step: kind, text, tool calls) and `subagent.end`; and
 * `run.end` with how the run ended. Bounded: at most `MAX_EVENTS` events and `MAX_BYTES` of JSON per run (past
 * either, later events are left out, `run.end` and `run.delivery` always kept), a message's content cut to
 * `MAX_CONTENT_CHARS`, a step's text to `STEP_MAX_CHARS`. The memory block the run's model read is
 * `context:memory` (its SHA-256 only, once a run). Of the middleware actions DeerFlow's journal records,
 * SafetyFinishReason's `middleware:safety_termination` and Guardrail's `middleware:guardrail` are kept (from their
 * custom events); model-call traces and the other middleware records are not. After the run's end,
 * `run.delivery` (DeerFlow's receipt, category `outputs`): the files its tools presented (their `artifacts`
 * updates), `{presented, paths, by_tool}`, with DeerFlow's verdict when the run changed outputs (see `Delivery`).
 */
import { MEMORY_EVENT } from "../../middleware/DynamicContext.js"
import { ORIGINAL_USER_CONTENT, originalUserContent } from "../../middleware/InputSanitization.js"
import type { RunEvent } from "../../services/RunEvents.js"
import type { StoredRunEvent } from "../../services/ThreadStore.js"
import { headChars } from "../../state/Chars.js"
import { pythonDumpsUnsorted } from "../../state/Json.js"
import type { Message } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import type { Redactor } from "../../state/Redact.js"
import * as Redact from "../../state/Redact.js"
import * as Delivery from "./Delivery.js"
import type * as WorkspaceChanges from "./WorkspaceChanges.js"

/** The most events kept of one run. */
export const MAX_EVENTS = 2000
/** The most JSON characters kept of one run's events. */
export const MAX_BYTES = 1_000_000
/** A message's text beyond this is cut in its event. */
export const MAX_CONTENT_CHARS = 32_000
/**
 * The most characters of presented paths `run.delivery` lists (each path and tool once); later ones left out. The
 * same bound as each list of the verdict (`Delivery.MAX_LISTED_CHARS`).
 */
export const MAX_DELIVERY_CHARS = Delivery.MAX_LISTED_CHARS
/** DeerFlow's cap on a subagent step's text (and a tool call's arguments, as JSON). */
export const STEP_MAX_CHARS = 8192

const MESSAGE_EVENTS: Readonly<Record<string, string | undefined>> = {
  human: "llm.human.input",
  ai: "llm.ai.response",
  tool: "llm.tool.result"
}

const TERMINAL: Readonly<Record<string, string | undefined>> = {
  task_completed: "completed",
  task_failed: "failed",
  task_cancelled: "cancelled",
  task_timed_out: "timed_out"
}

/**
 * Whether events hold a subagent's end (`task_completed`, `task_failed`, `task_cancelled`, `task_timed_out`): the
 * journal is then kept at once, as DeerFlow's worker flushes it, so its steps are read before the run ends.
 */
export const endsSubagent = (events: ReadonlyArray<RunEvent>): boolean =>
  events.some((e) => e.type === "custom" && TERMINAL[e.name] !== undefined)

/** A text cut to at most `max` characters, and whether it was. */
type Cut = (text: string, max: number) => [string, boolean]

// (in characters as DeerFlow's Python counts them, code points: a cut never leaves half an emoji)
const cut: Cut = (text, max) => {
  const head = headChars(text, max)
  return [head, head !== text]
}

/**
 * `cut` of a text masked with `hide` first (the process's secrets and the run's): a cut inside a secret would keep its
 * beginning, which the masks of whole values after it (the events' as they are kept and served) do not find.
 */
const maskedCut = (hide: Redactor): Cut => (text, max) => text.length <= max ? [text, false] : cut(hide.text(text), max)

/**
 * A question as the user wrote it (DeerFlow's `restore_original_human_message`): a middleware put context before
 * its text (the uploads block) and kept the user's own in `original_user_content`; the text blocks become that
 * text, at the first one's place, other blocks kept (blocks without text get it first).
 */
export const original = (message: Message): Message => {
  const text = originalUserContent(message)
  if (message.type !== "human" || text === undefined) return message
  const { [ORIGINAL_USER_CONTENT]: _original, ...rest } = message.additional_kwargs as Record<string, unknown>
  let content: Message["content"] = text
  if (typeof message.content !== "string") {
    const first = message.content.findIndex((b) => b.type === "text")
    content = first < 0
      ? [{ type: "text", text }, ...message.content]
      : message.content.flatMap((block, i) => block.type !== "text" ? [block] : i === first ? [{ ...block, text }] : [])
  }
  return { ...message, content, additional_kwargs: rest } as Message
}

/** A message as its event keeps it: its content cut to `MAX_CONTENT_CHARS` of text when longer. */
const bounded = (given: Message, cut: Cut): unknown => {
  const message = original(given)
  const text = M.text(message)
  if (JSON.stringify(message.content).length <= MAX_CONTENT_CHARS) return message
  const [kept] = cut(text, MAX_CONTENT_CHARS)
  return { ...message, content: kept, additional_kwargs: { ...message.additional_kwargs, content_truncated: true } }
}

const record = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined

/** DeerFlow's compact step of a subagent's message (`build_subagent_step`). */
const step = (taskId: string, index: number, message: Record<string, unknown>, cut: Cut) => {
  const kind = message.type === "tool" ? "tool" : "ai"
  const content = message.content
  const raw = typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((b) => (typeof b === "string" ? b : typeof b?.text === "string" ? b.text : ""))
      .filter((part) => part !== "")
      .join("\n")
    : ""
  const [text, truncated] = cut(raw, STEP_MAX_CHARS)
  const out: Record<string, unknown> = { task_id: taskId, message_index: index, kind, text, truncated }
  if (kind === "tool") out.tool_name = message.name ?? null
  else {
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls as ReadonlyArray<unknown> : []
    out.tool_calls = calls.map((call) => {
      const c = record(call) ?? {}
      // (DeerFlow measures and previews them as Python's json.dumps writes them)
      const args = typeof c.args === "string" ? c.args : pythonDumpsUnsorted(c.args ?? {})
      const [head, truncated] = cut(args, STEP_MAX_CHARS)
      return truncated
        ? { name: c.name ?? null, args: head, args_truncated: true }
        : { name: c.name ?? null, args: c.args ?? {} }
    })
  }
  return out
}

/** The DeerFlow event of a subagent's `task_*` event; none for anything else. */
const subagentEvent = (
  name: string,
  data: unknown,
  cut: Cut
): Omit<StoredRunEvent, "seq" | "created_at"> | undefined => {
  const fields = record(data)
  const taskId = fields?.task_id
  if (fields === undefined || typeof taskId !== "string" || taskId === "") return undefined
  if (name === "task_started") {
    const description = typeof fields.description === "string" ? fields.description : null
    return {
      event_type: "subagent.start",
      category: "subagent",
      content: { task_id: taskId, description },
      metadata: { task_id: taskId }
    }
  }
  if (name === "task_running") {
    const index = fields.message_index
    const message = record(fields.message)
    if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || message === undefined) return undefined
    return {
      event_type: "subagent.step",
      category: "subagent",
      content: step(taskId, index, message, cut),
      metadata: { task_id: taskId, message_index: index }
    }
  }
  const status = TERMINAL[name]
  if (status === undefined) return undefined
  const content: Record<string, unknown> = { task_id: taskId, status }
  if (typeof fields.model_name === "string" && fields.model_name.trim() !== "") {
    content.model_name = fields.model_name.trim()
  }
  if (fields.usage !== undefined && fields.usage !== null) content.usage = fields.usage
  for (const key of ["result", "error"] as const) {
    if (fields[key] === undefined || fields[key] === null) continue
    const [text, truncated] = cut(String(fields[key]), STEP_MAX_CHARS)
    content[key] = text
    if (truncated) content[`${key}_truncated`] = true
  }
  return { event_type: "subagent.end", category: "subagent", content, metadata: { task_id: taskId } }
}

/**
 * Guardrail's audit record of a denied call, or of a call let through after its provider failed: who called which
 * tool and why it was decided so, never the call's arguments nor the caller's identity beyond its role.
 */
const guardrailEvent = (fields: Record<string, unknown>): Omit<StoredRunEvent, "seq" | "created_at"> => {
  const changes = {
    tool_name: fields.tool_name ?? null,
    tool_call_id: fields.tool_call_id ?? null,
    agent_id: fields.agent_id ?? null,
    is_subagent: fields.is_subagent === true,
    user_role: fields.user_role ?? null,
    allow: fields.allow === true,
    policy_id: fields.policy_id ?? null,
    reason_codes: fields.reason_codes ?? [],
    reason_messages: fields.reason_messages ?? [],
    fail_closed: fields.fail_closed ?? null,
    provider_error: fields.provider_error === true
  }
  const action = typeof fields.action === "string" ? fields.action : "deny_tool_call"
  return {
    event_type: "middleware:guardrail",
    category: "middleware",
    content: { name: "GuardrailMiddleware", hook: "wrap_tool_call", action, changes },
    metadata: {}
  }
}

/**
 * DeerFlow's `middleware:{tag}` audit record (`RunJournal.record_middleware`) of a middleware's custom event:
 * `safety_termination` (SafetyFinishReason suppressed a response's tool calls: names and ids, never arguments),
 * `guardrail` (a call denied, or allowed after the provider failed) and `skill_secrets` (the secrets a request's
 * skills bind changed: skill and secret names, never values).
 */
const middlewareEvent = (
  name: string,
  data: unknown
): Omit<StoredRunEvent, "seq" | "created_at"> | undefined => {
  const fields = record(data)
  if (fields === undefined) return undefined
  if (name === "guardrail") return guardrailEvent(fields)
  if (name === "skill_secrets") {
    // (names only: the event never holds a value)
    const { action, ...changes } = fields
    return {
      event_type: "middleware:skill_secrets",
      category: "middleware",
      content: {
        name: "SkillActivationMiddleware",
        hook: "wrap_model_call",
        action: action ?? "bind_secrets",
        changes
      },
      metadata: {}
    }
  }
  if (name !== "safety_termination") return undefined
  const changes = {
    detector: fields.detector ?? null,
    reason_field: fields.reason_field ?? null,
    reason_value: fields.reason_value ?? null,
    suppressed_tool_call_count: fields.suppressed_tool_call_count ?? 0,
    suppressed_tool_call_names: fields.suppressed_tool_call_names ?? [],
    suppressed_tool_call_ids: fields.suppressed_tool_call_ids ?? [],
    message_id: fields.message_id ?? null,
    extras: record(fields.extras) ?? {}
  }
  return {
    event_type: "middleware:safety_termination",
    category: "middleware",
    content: { name: "SafetyFinishReasonMiddleware", hook: "after_model", action: "suppress_tool_calls", changes },
    metadata: {}
  }
}

/** A run's journal: fed the run's events as streamed, read while the run goes on and once it ended. */
export interface RunJournal {
  /** Records what of `events` DeerFlow's journal holds. */
  readonly push: (events: ReadonlyArray<RunEvent>) => void
  /** Records what the run changed in the thread's files (bounded by `WorkspaceChanges`; always kept). */
  readonly workspace: (changes: WorkspaceChanges.Changes) => void
  /** What the run's tools presented so far (its receipt without a verdict). */
  readonly delivery: () => Delivery.Receipt
  /**
   * Records the run's end and its delivery receipt (always kept): `delivery` (the receipt with its verdict, see
   * `Delivery.verdict`), or what the run's tools presented.
   */
  readonly end: (
    ended: {
      readonly status: string
      readonly stop_reason: string | null
      readonly error?: string | null | undefined
      /** The error's class (`error_type`), when the run failed. */
      readonly error_type?: string | undefined
    },
    delivery?: Delivery.Receipt
  ) => void
  /** The events recorded so far, in order, numbered from 1. */
  readonly events: () => ReadonlyArray<StoredRunEvent>
  /** How many events were recorded so far (those left out past the bounds not counted). */
  readonly count: () => number
}

/** The events a run's journal keeps past a storage quota: its workspace changes, its end and its receipt. */
export const ALWAYS_KEPT: ReadonlyArray<string> = ["workspace_changes", "run.end", "run.error", "run.delivery"]

/** Of a run's events, those always kept (`ALWAYS_KEPT`), numbered from 1. */
export const alwaysKept = (events: ReadonlyArray<StoredRunEvent>): ReadonlyArray<StoredRunEvent> =>
  events.filter((e) => ALWAYS_KEPT.includes(e.event_type)).map((e, i) => ({ ...e, seq: i + 1 }))

const CALLER = { caller: "lead_agent" }
// the events always kept, past the bounds: the workspace changes, the run's end and its delivery receipt
const FORCED = 3

/** DeerFlow's delivery receipt: each presented path once per tool (in order), by the tool that presented it. */
const deliveryContent = (produced: ReadonlyArray<readonly [string, string | undefined]>): Delivery.Receipt => {
  const paths: Array<string> = []
  const byTool: Record<string, Array<string>> = {}
  for (const [path, tool] of produced) {
    paths.push(path)
    if (tool !== undefined) (byTool[tool] ??= []).push(path)
  }
  return { presented: paths.length, paths, by_tool: byTool }
}

/**
 * A fresh journal; `now` is the time each event is stamped with (ISO 8601). `hide` (the process's secrets and the
 * run's) masks a text before the journal cuts it.
 */
export const make = (now: () => string, hide: Redactor = Redact.none): RunJournal => {
  const cut = maskedCut(hide)
  // (an event dropped when its message is written again as one the journal does not record: `undefined`)
  const events: Array<StoredRunEvent | undefined> = []
  const byMessage = new Map<string, number>()
  let bytes = 0
  let seq = 0
  let full = false
  let answers = 0
  let memory = false
  // the lead's tool calls by id (their names), and the paths its tools presented with the tool's name, once each
  const callNames = new Map<string, string>()
  const produced: Array<readonly [string, string | undefined]> = []
  const producedKeys = new Set<string>()
  let producedChars = 0

  const present = (artifacts: unknown, toolCallId: string | undefined) => {
    if (!Array.isArray(artifacts)) return
    const tool = toolCallId === undefined ? undefined : callNames.get(toolCallId)
    for (const path of artifacts) {
      if (typeof path !== "string" || path === "") continue
      const key = JSON.stringify([path, tool ?? null])
      if (producedKeys.has(key) || producedChars + path.length > MAX_DELIVERY_CHARS) continue
      producedKeys.add(key)
      producedChars += path.length
      produced.push([path, tool])
    }
  }

  const add = (event: Omit<StoredRunEvent, "seq" | "created_at">, force = false) => {
    const size = JSON.stringify(event).length
    if (!force && (full || events.length >= MAX_EVENTS - FORCED || bytes + size > MAX_BYTES)) {
      full = true
      return -1
    }
    bytes += size
    events.push({ seq: ++seq, created_at: now(), ...event })
    return events.length - 1
  }

  const message = (written: Message) => {
    if (written.type === "ai") {
      for (const call of written.tool_calls ?? []) if (call.id !== "") callNames.set(call.id, call.name)
    }
    const type = MESSAGE_EVENTS[written.type]
    const at = byMessage.get(written.id)
    if (type === undefined || M.isHidden(written)) {
      // a message turned into one the app does not show (the user's input made a date reminder): its event goes
      if (at !== undefined) {
        bytes -= JSON.stringify(events[at]).length
        events[at] = undefined
        byMessage.delete(written.id)
      }
      return
    }
    const content = bounded(written, cut)
    if (at !== undefined) {
      const before = events[at]!
      const size = JSON.stringify(content).length - JSON.stringify(before.content).length
      if (bytes + size > MAX_BYTES) return
      bytes += size
      events[at] = { ...before, content }
      return
    }
    // DeerFlow's contract: a model's answer says which call of the run it was, its usage and latency (not timed here)
    const metadata = written.type === "ai"
      ? { caller: "lead_agent", usage: written.usage_metadata ?? {}, latency_ms: null, llm_call_index: ++answers }
      : { caller: "lead_agent" }
    const index = add({ event_type: type, category: "message", content, metadata })
    if (index >= 0) byMessage.set(written.id, index)
  }

  return {
    push: (given) => {
      for (const event of given) {
        switch (event.type) {
          case "run_start":
            add({ event_type: "run.start", category: "trace", content: { chain: "lead_agent" }, metadata: CALLER })
            break
          case "message":
            message(event.message)
            break
          case "state":
            present(event.update.artifacts, event.tool_call_id)
            break
          case "custom": {
            // DeerFlow's `record_memory_context`: the block's identity, never its text; once a run (a goal's
            // continuations enter the agent again)
            const hash = event.name === MEMORY_EVENT ? record(event.data)?.content_sha256 : undefined
            if (typeof hash === "string") {
              if (!memory && add({ event_type: "context:memory", category: "context", content: { content_sha256: hash },
                metadata: {} }) >= 0) memory = true
              break
            }
            const mapped = subagentEvent(event.name, event.data, cut) ?? middlewareEvent(event.name, event.data)
            if (mapped !== undefined) add(mapped)
            break
          }
          default:
            break
        }
      }
    },
    // DeerFlow's: a line saying how much changed as the content, the comparison in the metadata
    workspace: (changes) => {
      const { summary: s } = changes
      const count = s.created + s.modified + s.deleted + s.symlink_created
      const content = `${count} file${count === 1 ? "" : "s"} changed +${s.additions} -${s.deletions}`
      const metadata = { workspace_changes: changes }
      add({ event_type: "workspace_changes", category: "workspace", content, metadata }, true)
    },
    // DeerFlow's contract (contracts/run_event_stream_contract.json): `run.end` says its status in its metadata,
    // `run.error` is the error's message with its `error_type`
    delivery: () => deliveryContent(produced),
    end: (ended, delivery) => {
      const ending = { status: ended.status, stop_reason: ended.stop_reason }
      if (ended.status !== "error") {
        add({ event_type: "run.end", category: "outputs", content: ending, metadata: ending }, true)
      } else {
        const message = cut(ended.error ?? "The run failed", STEP_MAX_CHARS)[0]
        const metadata = { ...ending, error_type: ended.error_type ?? "Error" }
        add({ event_type: "run.error", category: "error", content: message, metadata }, true)
      }
      // DeerFlow's terminal receipt, whatever the ending (a run that presented nothing: `presented: 0`)
      const content = delivery ?? deliveryContent(produced)
      add({ event_type: "run.delivery", category: "outputs", content, metadata: {} }, true)
    },
    count: () => seq,
    // numbered from 1 as kept (an event dropped leaves no gap)
    events: () =>
      events
        .filter((e): e is StoredRunEvent => e !== undefined)
        .map((e, i) => (e.seq === i + 1 ? e : { ...e, seq: i + 1 }))
  }
}
