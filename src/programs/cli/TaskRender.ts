/**
 * Subagent progress in the terminal: the `task_*` events of a run as compact lines nested under the lead
 * agent's output, one per event, each naming its task (tasks running at once interleave). Pure string building
 * in `Render`'s style; every text from a model or a tool goes through the caller's `safe` (secrets hidden,
 * control characters made visible) and is clipped to one line.
 */
import { TaskEvent } from "../../services/SubagentRunner.js"
import type { Message } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import type { Style } from "./render/Style.js"

const NAMES: ReadonlySet<string> = new Set(Object.values(TaskEvent))

/** Whether a custom event is a subagent's progress. */
export const isTaskEvent = (name: string): boolean => NAMES.has(name)

const oneLine = (text: string, max: number): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`
}

const str = (value: unknown): string => (typeof value === "string" ? value : "")

const usageText = (usage: unknown): string => {
  const total = (usage as { total_tokens?: unknown } | null | undefined)?.total_tokens
  return typeof total === "number" ? ` · ${total} tokens` : ""
}

const preview = (value: unknown, max: number): string => {
  try {
    return oneLine(JSON.stringify(value) ?? "", max)
  } catch {
    return ""
  }
}

const stepText = (message: Message): string | undefined => {
  if (message.type === "ai") {
    const calls = M.toolCalls(message)
    if (calls.length > 0) return calls.map((c) => `→ ${c.name}(${preview(c.args, 60)})`).join("  ")
    return undefined // the answer is shown when the task ends
  }
  if (message.type === "tool") {
    const body = oneLine(M.text(message), 80)
    return `${message.status === "error" ? "✗" : "←"} ${body === "" ? "(empty result)" : body}`
  }
  return undefined
}

/**
 * The line of a task event (ending with a newline), or "" when the event adds nothing worth a line (a step
 * that only says the subagent is thinking).
 */
export const line = (name: string, data: unknown, s: Style, safe: (text: string) => string): string => {
  const d = (typeof data === "object" && data !== null ? data : {}) as Record<string, unknown>
  const label = safe(oneLine(str(d.description) || str(d.task_id) || "task", 60))
  const head = `  ${s.dim("│")} ${s.bold(label)}`
  switch (name) {
    case TaskEvent.started: {
      const who = [str(d.subagent_type), str(d.model_name)].filter((x) => x !== "").map((x) => safe(x)).join(" · ")
      return `  ${s.cyan("┌")} ${s.bold(label)} ${s.dim(`(${who || "subagent"})`)}\n`
    }
    case TaskEvent.running: {
      const message = d.message as Message | undefined
      const text = message === undefined ? undefined : stepText(message)
      return text === undefined ? "" : `${head} ${s.dim(safe(text))}\n`
    }
    case TaskEvent.completed: {
      const capped = str(d.stop_reason) !== "" ? ` (capped: ${safe(str(d.stop_reason))})` : ""
      const result = oneLine(str(d.result), 100)
      return `  ${s.green("└")} ${s.bold(label)} ${s.green(`completed${capped}`)}${s.dim(usageText(d.usage))}` +
        `${result === "" ? "" : ` ${s.dim(`— ${safe(result)}`)}`}\n`
    }
    case TaskEvent.failed:
    case TaskEvent.timedOut:
    case TaskEvent.cancelled: {
      const status = name === TaskEvent.failed ? "failed" : name === TaskEvent.timedOut ? "timed out" : "cancelled"
      const error = oneLine(str(d.error), 120)
      const paint = name === TaskEvent.cancelled ? s.yellow : s.red
      const detail = error === "" ? "" : ` ${s.dim(`— ${safe(error)}`)}`
      return `  ${paint("└")} ${s.bold(label)} ${paint(status)}${detail}\n`
    }
  }
  return ""
}
