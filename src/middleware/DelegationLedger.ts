/**
 * The delegation ledger (SPEC §5.17, DeerFlow's `delegation_ledger`): the work the lead agent handed to subagents,
 * kept in the thread's `delegations` across compactions. Each `task` call is an entry in progress; its result (the
 * status contract in the result's `additional_kwargs`) settles it; only entries that change the ledger are written,
 * and a finished entry never turns back into an unfinished one. `renderLedger` is what the model reads of it, inside
 * DurableContext's projection (`DurableContext.ts`, which keeps and projects it).
 */
import { charsOf, headChars, joinChars } from "../state/Chars.js"
import type { AIMessage, Message, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import { escapeText } from "../state/Markup.js"
import { isTerminal, MAX_DELEGATIONS } from "../state/Reducers.js"
import * as SubagentStatus from "../state/SubagentStatus.js"
import type { DelegationEntry, DelegationStatus, SubagentStopReason } from "../state/ThreadState.js"

/** Heading of the delegation ledger section. */
export const LEDGER_HEADING = "## Work already delegated"

/** The longest ledger projected, in characters. */
export const MAX_LEDGER_CHARS = 6000

/** The name of the tool whose calls the ledger records. */
export const TASK_TOOL = "task"

const MAX_DESCRIPTION_CHARS = 200
const MAX_RESULT_CHARS_SHOWN = 120
const TRUNCATED = " ... [truncated]"

/** A description bounded to 200 characters, marked when cut (so a cut is never mistaken for the task). */
export const boundDescription = (text: string): string => {
  const chars = charsOf(text)
  return chars.length <= MAX_DESCRIPTION_CHARS ? text :
    `${joinChars(chars, 0, MAX_DESCRIPTION_CHARS - TRUNCATED.length)}${TRUNCATED}`
}

const STATUS_ONLY: Partial<Record<DelegationStatus, string>> = {
  failed: "Task failed.",
  cancelled: "Task cancelled by user.",
  timed_out: "Task timed out.",
  polling_timed_out: "Task polling timed out."
}

/**
 * The messages of the current run: those after the latest human message stamped with this run's id
 * (ThreadData stamps it), else after the latest human message the user wrote.
 */
export const currentRun = (messages: ReadonlyArray<Message>, runId: string): ReadonlyArray<Message> => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.type === "human" && m.additional_kwargs?.run_id === runId) return messages.slice(i)
  }
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.type === "human" && !M.isHidden(m)) return messages.slice(i)
  }
  return messages
}

/** The ledger entry of one `task` call, in progress. */
export const pendingEntry = (
  call: { readonly id: string; readonly args: Readonly<Record<string, unknown>> },
  runId: string | undefined,
  createdAt: string
): DelegationEntry => {
  const text = (value: unknown) => (typeof value === "string" ? value : value == null ? "" : String(value))
  const description = text(call.args.description).trim() !== "" ? text(call.args.description) : text(call.args.prompt)
  return {
    id: call.id,
    ...(runId !== undefined ? { run_id: runId } : {}),
    description: boundDescription(description),
    subagent_type: text(call.args.subagent_type),
    status: "in_progress",
    created_at: createdAt
  }
}

/** The `task` calls of an AI message that have an id. */
export const taskCalls = (message: AIMessage) => M.toolCalls(message).filter((c) => c.name === TASK_TOOL && c.id !== "")

/** Whether a message is an AI message with a `task` call (with an id). */
export const delegates = (message: Message): boolean =>
  message.type === "ai" && (message.tool_calls ?? []).some((c) => c.name === TASK_TOOL && c.id !== "")

/**
 * The entry with what a `task` result says about it: status, stop reason, a brief of the result or error, its
 * sha256 and the result message's id. A result without the status contract (the task never ran: refused
 * arguments, a guardrail, a call left open by a crash and answered "interrupted") still settles the entry:
 * `failed` for an error result, else `completed` (DeerFlow leaves such entries in progress forever).
 */
export const settle = (entry: DelegationEntry, result: ToolMessage): DelegationEntry => {
  const text = M.text(result).trim()
  const structured: SubagentStatus.Structured = SubagentStatus.read(result.additional_kwargs) ?? {
    status: result.status === "error" ? "failed" : "completed",
    ...(text === "" ? {} : result.status === "error" ? { error: text } : { resultBrief: text })
  }
  const brief = structured.resultBrief ?? structured.error ?? STATUS_ONLY[structured.status]
  return {
    ...entry,
    status: structured.status,
    ...(structured.stopReason !== undefined ? { stop_reason: structured.stopReason } : {}),
    ...(brief !== undefined
      ? {
        result_brief: SubagentStatus.bound(brief),
        result_sha256: structured.resultSha256 ?? SubagentStatus.sha256(brief),
        result_ref: result.id !== "" ? result.id : result.tool_call_id
      }
      : {})
  }
}

/**
 * The delegations found in these messages (DeerFlow's `extract_delegations`): every `task` call with an id, in
 * progress, settled by a paired result that carries the status contract.
 */
export const extractDelegations = (
  messages: ReadonlyArray<Message>,
  runId: string | undefined,
  createdAt: string
): ReadonlyArray<DelegationEntry> => {
  const byId = new Map<string, DelegationEntry>()
  for (const message of messages) {
    if (message.type !== "ai") continue
    for (const call of taskCalls(message)) byId.set(call.id, pendingEntry(call, runId, createdAt))
  }
  if (byId.size === 0) return []
  for (const message of messages) {
    if (message.type !== "tool") continue
    const entry = byId.get(message.tool_call_id)
    if (entry !== undefined) byId.set(entry.id, settle(entry, message))
  }
  return Array.from(byId.values())
}

/**
 * Unfinished entries of earlier runs settled by their results, wherever those are in the thread (a run that
 * crashed or was cancelled mid-task gets the results of its open calls at the start of the next run).
 */
export const settleOpen = (
  open: ReadonlyArray<DelegationEntry>,
  messages: ReadonlyArray<Message>
): ReadonlyArray<DelegationEntry> => {
  if (open.length === 0) return open
  const byId = new Map(open.map((e) => [e.id, e]))
  const out: Array<DelegationEntry> = []
  for (const message of messages) {
    if (message.type !== "tool") continue
    const entry = byId.get(message.tool_call_id)
    if (entry !== undefined) out.push(settle(entry, message))
  }
  return out
}

/**
 * The task calls of a response whose ids the run keeps as they are: the run gives a call whose id is empty,
 * repeated in the response, or already used in the thread an id of its own (`Message.uniqueToolCallIds`), and
 * such a call is recorded once it has that id.
 */
export const keptIds = (message: AIMessage, thread: ReadonlyArray<Message>) => {
  const calls = taskCalls(message)
  if (calls.length === 0) return calls
  const used = new Set<string>()
  for (const m of thread) if (m.type === "ai" && m.id !== message.id) for (const c of M.toolCalls(m)) used.add(c.id)
  const counts = new Map<string, number>()
  for (const c of M.toolCalls(message)) counts.set(c.id, (counts.get(c.id) ?? 0) + 1)
  return calls.filter((c) => !used.has(c.id) && counts.get(c.id) === 1)
}

const sameFacts = (a: DelegationEntry, b: DelegationEntry): boolean =>
  a.status === b.status && a.stop_reason === b.stop_reason && a.result_brief === b.result_brief &&
  a.result_sha256 === b.result_sha256 && a.result_ref === b.result_ref && a.description === b.description &&
  a.subagent_type === b.subagent_type

/**
 * The entries that would change the ledger (new ids, or new facts that do not undo a finished entry). A full
 * ledger (`MAX_DELEGATIONS`) evicted its oldest entries: an unknown id found before the oldest entry it kept (or,
 * when that one is not found, outside the newest `MAX_DELEGATIONS` found) is one it evicted, not a new one, so
 * capturing the same calls again changes nothing (DeerFlow's retained window).
 */
export const changedEntries = (
  ledger: ReadonlyArray<DelegationEntry>,
  found: ReadonlyArray<DelegationEntry>
): ReadonlyArray<DelegationEntry> => {
  if (found.length === 0) return found
  const known = new Map(ledger.map((e) => [e.id, e]))
  let retainedFrom = 0
  if (ledger.length >= MAX_DELEGATIONS) {
    const oldest = found.findIndex((e) => e.id === ledger[0]!.id)
    retainedFrom = oldest >= 0 ? oldest : found.length - MAX_DELEGATIONS
  }
  return found.filter((entry, i) => {
    const previous = known.get(entry.id)
    if (previous === undefined) return i >= retainedFrom
    if (isTerminal(previous.status) && !isTerminal(entry.status)) return false
    return !sameFacts(previous, entry)
  })
}

const oneLineEscaped = (text: string): string => escapeText(text.replace(/\s+/g, " ").trim())

/** What the model should do about an entry, in DeerFlow's words (`_status_guidance`). */
export const guidance = (status: DelegationStatus, stopReason: SubagentStopReason | undefined): string => {
  if (stopReason !== undefined) {
    return status === "completed"
      ? "hit a guardrail cap with a partial result; reuse the partial result, retry with a tighter scope, or raise " +
        "the per-agent budget (max_turns / token_budget)"
      : "hit a guardrail cap with no usable result; retry with a tighter scope or raise the per-agent budget " +
        "(max_turns / token_budget)"
  }
  switch (status) {
    case "in_progress":
      return "already delegated; do NOT delegate again; wait for or build on the result"
    case "completed":
      return "completed result; do NOT delegate again; reuse this result"
    case "failed":
      return "failed attempt; may retry with a changed plan"
    case "cancelled":
      return "cancelled attempt; may retry with a changed plan"
    case "timed_out":
      return "timed-out attempt; may retry with a changed plan"
    case "polling_timed_out":
      return "polling timed-out attempt; may retry with a changed plan"
  }
}

const entryLine = (entry: DelegationEntry): string => {
  // (an entry written by another client or an older version may lack its description or type)
  const description = typeof entry.description === "string" && entry.description.trim() !== ""
    ? oneLineEscaped(entry.description)
    : "(no description)"
  const type = typeof entry.subagent_type === "string" && entry.subagent_type.trim() !== ""
    ? oneLineEscaped(entry.subagent_type)
    : "unknown"
  let line = `- [${entry.status}] ${description} (via ${type}; ` +
    `${guidance(entry.status, entry.stop_reason)})`
  if (entry.result_brief !== undefined && entry.result_brief !== "") {
    line += ` -> ${oneLineEscaped(SubagentStatus.bound(entry.result_brief, MAX_RESULT_CHARS_SHOWN))}`
  }
  return line
}

/**
 * The ledger as the model reads it (DeerFlow's `render_delegation_ledger`): newest first, one line per entry
 * (status, description, subagent type, what to do, a short result), within `max` characters; entries that do
 * not fit are counted on a last line. Empty when there are no entries.
 */
export const renderLedger = (entries: ReadonlyArray<DelegationEntry>, max: number = MAX_LEDGER_CHARS): string => {
  if (entries.length === 0) return ""
  const lines = [
    LEDGER_HEADING,
    "Newest entries are shown first. In-progress entries are already delegated. Completed entries are reusable " +
    "results. Failed, cancelled, or timed-out entries are prior attempts."
  ]
  const fits = (candidate: string) => [...lines, candidate].join("\n").length <= max
  let omitted = 0
  for (let i = entries.length - 1; i >= 0; i--) {
    const line = entryLine(entries[i]!)
    if (fits(line)) {
      lines.push(line)
      continue
    }
    omitted = i + 1
    break
  }
  if (omitted > 0) {
    const omittedLine = (n: number) =>
      `- ... ${n} older delegation entries omitted from this model view because of context budget`
    while (lines.length > 2 && !fits(omittedLine(omitted))) {
      lines.pop()
      omitted++
    }
    if (fits(omittedLine(omitted))) lines.push(omittedLine(omitted))
  }
  const rendered = lines.join("\n")
  return rendered.length <= max ? rendered : `${headChars(rendered, Math.max(0, max - 4))}\n...`
}
