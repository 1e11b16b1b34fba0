/**
 * The rows of DeerFlow's messages page (`GET /api/threads/{id}/messages/page`) over a thread's folded history
 * (`MessageHistory`): the history, and the turns a regenerate took back while it has not succeeded. DeerFlow's page
 * reads its run journal, where every run's messages stay, and hides a run once a regenerate of it succeeded
 * (`list_successful_regenerate_sources`); so while a regenerate runs, and after it failed or was stopped, the
 * original answer shows with the attempt after it, and once it succeeded, the new turn alone. An edit's run hides
 * the turn it replaces from its start, as DeerFlow's (and is undone when it does not succeed, see `RunRecords`), and
 * a run from an older checkpoint that is no regenerate drops what came after it.
 */
import type { RunRecord } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import type { Folded, Shown } from "./MessageHistory.js"
import * as RunJournal from "./RunJournal.js"
import { callerMetadata } from "./RunRecords.js"
import * as TurnDurations from "./TurnDurations.js"

/**
 * Whether the run's fork still shows the turn it took back: a regenerate (its metadata names the run it
 * regenerates, DeerFlow's `regenerate_from_run_id`; an edit's is no regenerate here) that has not succeeded
 * (pending, running, failed, stopped).
 */
export const showsReplaced = (record: RunRecord | undefined): boolean => {
  if (record === undefined || record.status === "success") return false
  const metadata = callerMetadata(record)
  const source = metadata["regenerate_from_run_id"]
  return typeof source === "string" && source !== "" && metadata["replay_kind"] !== "edit"
}

/** The page's messages, oldest first: the history, and what a regenerate that has not succeeded took back. */
export const rows = (
  folded: Pick<Folded, "history" | "dropped">,
  runs: ReadonlyMap<string, RunRecord>
): ReadonlyArray<Shown> => {
  const shown = folded.dropped.filter((row) => showsReplaced(runs.get(row.by)))
  if (shown.length === 0) return folded.history
  return [...folded.history, ...shown.map(({ by: _by, ...row }) => row)].sort((a, b) => a.seq - b.seq)
}

/**
 * Whether the page shows a message: one not hidden, and a hidden answer to a clarification question (the app shows
 * the question's card answered with it), as DeerFlow's journal keeps the `ask_clarification` answers.
 */
export const shownOnPage = (message: M.Message) => {
  if (!TurnDurations.hidden(message)) return true
  const response = M.kwarg(message, "human_input_response") as { readonly source?: unknown } | undefined
  return message.type === "human" && M.isHumanInputResponse(response) && response?.source === "ask_clarification"
}

/**
 * Every message run `runId` wrote that the page shows, oldest first (DeerFlow's `list_messages_by_run`): those the
 * thread's history holds, and those a later fork took back, as DeerFlow's journal keeps every run's messages.
 */
export const ofRun = (folded: Pick<Folded, "history" | "dropped">, runId: string): ReadonlyArray<Shown> =>
  [...folded.history, ...folded.dropped.map(({ by: _by, ...row }) => row)]
    .filter((row) => row.run_id === runId && shownOnPage(row.message))
    .sort((a, b) => a.seq - b.seq)

const EVENT_TYPES: Readonly<Record<string, string | undefined>> = {
  human: "llm.human.input",
  ai: "llm.ai.response",
  tool: "llm.tool.result",
  system: "llm.system"
}

/** A message as DeerFlow's journal gives it (its message rows, without the page's `feedback`). */
export interface Row {
  readonly run_id: string | null
  readonly seq: number
  readonly thread_id: string
  readonly event_type: string
  readonly category: string
  readonly content: Record<string, unknown>
  readonly metadata: Record<string, unknown>
  readonly created_at: string | null
}

/**
 * The row of a message of thread `threadId` (its client's id): the question as the user wrote it, as DeerFlow's
 * rows read it from its run events; with `turnDuration`, the run's seconds in its `additional_kwargs`.
 */
export const row = (shown: Shown, threadId: string, turnDuration?: number): Row => {
  const content = RunJournal.original(shown.message) as unknown as Record<string, unknown>
  return {
    run_id: shown.run_id === "" ? null : shown.run_id,
    seq: shown.seq,
    thread_id: threadId,
    event_type: EVENT_TYPES[shown.message.type] ?? "llm.message",
    category: "message",
    content: turnDuration === undefined ? content : {
      ...content,
      additional_kwargs: { ...(content["additional_kwargs"] as object | undefined), turn_duration: turnDuration }
    },
    metadata: { caller: "lead_agent" },
    created_at: shown.created_at === "" ? null : shown.created_at
  }
}

/** Where a page of rows is cut: at most `limit`, after `after_seq` (forwards) or before `before_seq`. */
export interface Cursor {
  readonly limit: number
  readonly before_seq?: number | undefined
  readonly after_seq?: number | undefined
}

/**
 * A page of `rows` (oldest first), as DeerFlow's run-message pages are cut: with `after_seq`, the first `limit` after
 * it; else the last `limit` (before `before_seq`, when given); `has_more` when the window held more than the page.
 */
export const cut = <A extends { readonly seq: number }>(rows: ReadonlyArray<A>, cursor: Cursor) => {
  const { after_seq: after, before_seq: before, limit } = cursor
  const window = rows.filter((r) => (after === undefined || r.seq > after) && (before === undefined || r.seq < before))
  const data = after !== undefined ? window.slice(0, limit) : window.slice(Math.max(0, window.length - limit))
  return { data, has_more: window.length > limit }
}
