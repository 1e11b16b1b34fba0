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
import type { Folded, Shown } from "./MessageHistory.js"
import { callerMetadata } from "./RunRecords.js"

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
