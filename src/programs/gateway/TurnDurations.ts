/**
 * A run's `turn_duration`, which DeerFlow's app shows under the run's last answer: its whole seconds, and where the
 * messages page and the newest state of `/history` put it.
 */
import type { CheckpointRecord, RunRecord } from "../../services/ThreadStore.js"
import type * as M from "../../state/Message.js"

/** Whether the app hides a message (a date reminder, a goal continuation). */
export const hidden = (message: M.Message) =>
  (message.additional_kwargs as Record<string, unknown> | undefined)?.hide_from_ui === true

/**
 * A run's `turn_duration` as DeerFlow's app shows it under the run's last answer: the whole seconds from its start to
 * its end (none while it runs: the app times a live run itself).
 */
export const turnDuration = (record: RunRecord | undefined): number | undefined => {
  if (record === undefined || record.ended_at === null) return undefined
  const seconds = Math.floor((Date.parse(record.ended_at) - Date.parse(record.started_at)) / 1000)
  return Number.isFinite(seconds) ? Math.max(0, seconds) : undefined
}

/**
 * A state's `messages` as DeerFlow's `/history` gives its newest state's: each answer and tool result with the
 * `run_id` of the run that wrote it, and each ended run's last shown answer with the run's `turn_duration`.
 */
export const withTurnDurations = (
  messages: ReadonlyArray<M.Message>,
  checkpoints: ReadonlyArray<CheckpointRecord>,
  runs: ReadonlyArray<RunRecord>
): ReadonlyArray<M.Message> => {
  // (each message's run: the one of the checkpoint that first wrote it)
  const origin = new Map<string, string>()
  for (const record of checkpoints) {
    for (const message of record.updates.flatMap((u) => u.messages ?? [])) {
      if (!origin.has(message.id)) origin.set(message.id, record.run_id)
    }
  }
  const records = new Map(runs.map((r) => [r.run_id, r]))
  const runOf = (message: M.Message) => {
    const run = origin.get(message.id)
    return run !== undefined && records.has(run) ? run : undefined
  }
  const lastAnswer = new Map<string, number>()
  messages.forEach((message, index) => {
    const run = runOf(message)
    if (message.type === "ai" && run !== undefined && !hidden(message)) lastAnswer.set(run, index)
  })
  return messages.map((message, index) => {
    const run = message.type === "ai" || message.type === "tool" ? runOf(message) : undefined
    if (run === undefined) return message
    const duration = lastAnswer.get(run) === index ? turnDuration(records.get(run)) : undefined
    const stamped = { ...message, run_id: run }
    if (duration === undefined) return stamped
    return { ...stamped, additional_kwargs: { ...message.additional_kwargs, turn_duration: duration } }
  })
}
