/**
 * Saved threads as the terminal shows them: one thread in full (`threads show`), each message readable, and the
 * thread list (`threads`), newest first, one line each with its status in words.
 */
import { activatedSkills } from "../../../services/Skills.js"
import type { LoadedThread, ThreadStatus, ThreadSummary } from "../../../services/ThreadStore.js"
import type { Message } from "../../../state/Message.js"
import * as M from "../../../state/Message.js"
import * as Redact from "../../../state/Redact.js"
import type { ThreadState, Todo } from "../../../state/ThreadState.js"
import type { Style } from "./Style.js"
import { style } from "./Style.js"
import { clip, indent, safeText } from "./Text.js"
import { toolCallLine } from "./ToolCalls.js"

const roleOf = (message: Message): string => {
  switch (message.type) {
    case "human":
      return "user"
    case "ai":
      return "assistant"
    case "tool":
      return `tool ${Redact.controls(message.name ?? "")}`.trim()
    case "system":
      return "system"
  }
}

/** One message of a saved thread, readable. Tool results are clipped at `toolChars`. */
export const message = (m: Message, s: Style, toolChars = 2000): string => {
  const hidden = M.isHidden(m) ? s.dim(" (hidden)") : ""
  const head = `${s.bold(`[${roleOf(m)}]`)}${hidden}`
  let body = Redact.controls(M.text(m))
  if (typeof m.content !== "string") {
    const images = m.content.filter((b) => b.type === "image_url").length
    if (images > 0) body += `${body === "" ? "" : "\n"}(${images} image${images > 1 ? "s" : ""})`
  }
  if (m.type === "tool") {
    body = clip(body, { lines: 40, chars: toolChars })
    if (m.status === "error") return `${head} ${s.red("error")}\n${indent(body, "  ")}`
  }
  const lines = [body === "" ? head : `${head}\n${indent(body, "  ")}`]
  for (const call of M.toolCalls(m)) lines.push(`  ${s.cyan("→")} ${Redact.controls(toolCallLine(call, 400))}`)
  for (const call of M.invalidToolCalls(m)) {
    const why = clip(call.error ?? "invalid arguments", { lines: 1, chars: 200 })
    const args = clip(call.args ?? "", { lines: 1, chars: 200 })
    lines.push(`  ${s.red("→")} ${Redact.controls(`${call.name ?? "?"}: ${why} ${args}`)}`)
  }
  return lines.join("\n")
}

const section = (title: string, s: Style) => `\n${s.bold(title)}`

const TODO_MARK = { pending: "[ ]", in_progress: "[~]", completed: "[x]" } as const

/**
 * A todo list, one indented line per item: `[ ]` pending, `[~]` in progress, `[x]` completed. The model writes
 * the items: `redact`'s secrets are replaced.
 */
export const todoLines = (
  todos: ReadonlyArray<Todo>,
  s: Style = style(false),
  redact: Redact.Redactor = Redact.none
): ReadonlyArray<string> =>
  todos.map((t) => {
    const line = `  ${TODO_MARK[t.status]} ${safeText(t.content, redact)}`
    return t.status === "completed" ? s.dim(line) : line
  })

const list = (lines: ReadonlyArray<string>, s: Style) => (lines.length === 0 ? s.dim("  (none)") : lines.join("\n"))

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** The full state of a thread, readable: header, messages, then title, artifacts, todos, token usage. */
export const thread = (loaded: LoadedThread, options: { readonly color: boolean }): string => {
  const s = style(options.color)
  const state: ThreadState = loaded.state
  const lines: Array<string> = []
  lines.push(`${s.bold("thread")} ${loaded.thread_id}`)
  lines.push(`${s.bold("title")}  ${state.title === null ? s.dim("(none)") : Redact.controls(state.title)}`)
  lines.push(s.dim(`${plural(loaded.checkpoints, "checkpoint")}, ${plural(loaded.runs.length, "run")}`))
  for (const run of loaded.runs) {
    const reason = run.stop_reason ? ` (${run.stop_reason})` : ""
    lines.push(s.dim(`  run ${run.run_id}  ${run.status}${reason}  ${run.started_at}`))
  }
  lines.push(section(`messages (${state.messages.length})`, s))
  for (const m of state.messages) lines.push(message(m, s))
  const skills = activatedSkills(state.messages)
  if (skills.length > 0) {
    lines.push(section("skills activated", s), ...skills.map((name) => `  /${Redact.controls(name)}`))
  }
  if (state.summary_text !== null) {
    lines.push(section("summary", s), indent(Redact.controls(state.summary_text), "  "))
  }
  lines.push(section("artifacts", s), list(state.artifacts.map((a) => `  ${Redact.controls(a)}`), s))
  if (state.todos !== null) lines.push(section("todos", s), list(todoLines(state.todos, s), s))
  if (state.uploaded_files !== null && state.uploaded_files.length > 0) {
    const files = state.uploaded_files.map((f) => `  ${Redact.controls(f.filename)} (${f.size} bytes)`)
    lines.push(section("uploaded files", s), list(files, s))
  }
  if (state.token_usage !== null) {
    const t = state.token_usage.total
    lines.push(
      section("token usage", s),
      `  total: ${t.input_tokens} in, ${t.output_tokens} out, ${t.total_tokens} total (${t.calls} calls)`
    )
    for (const [model, u] of Object.entries(state.token_usage.by_model)) {
      lines.push(`  ${Redact.controls(model)}: ${u.input_tokens} in, ${u.output_tokens} out (${u.calls} calls)`)
    }
    const purposes = Object.entries(state.token_usage.by_purpose ?? {})
    // only worth a line when something besides the agent's own calls spent tokens (summaries, titles)
    if (purposes.length > 1 || (purposes.length === 1 && purposes[0]![0] !== "agent")) {
      for (const [purpose, u] of purposes) lines.push(`  for ${purpose}: ${u.total_tokens} total (${u.calls} calls)`)
    }
  }
  if (state.sandbox?.sandbox_id) {
    lines.push(section("sandbox", s), `  ${Redact.controls(state.sandbox.sandbox_id)}`)
  }
  return `${lines.join("\n")}\n`
}

/** A thread's status in words (`threadList`). */
export const statusWords = (status: ThreadStatus | undefined, stopReason?: string | null): string => {
  switch (status) {
    case undefined:
      return "new"
    case "success":
      return stopReason === undefined || stopReason === null || stopReason === "completed"
        ? "completed"
        : `completed (${stopReason})`
    case "interrupted":
      return "waiting for your answer"
    case "error":
      return "failed"
    case "cancelled":
      return "cancelled"
    case "running":
      return "running"
    case "stopped":
      return "stopped (its process ended)"
  }
}

const pad2 = (n: number) => String(n).padStart(2, "0")

/** A time for a list: `2026-12-01 09:32`, local time. */
export const shortTime = (iso: string): string => {
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  return `${date.getFullYear()}-${pad2(date.getMonth() + 1)}-${pad2(date.getDate())} ` +
    `${pad2(date.getHours())}:${pad2(date.getMinutes())}`
}

/** The thread list: newest first, one line each (id, last change, status, steps, title). */
export const threadList = (
  threads: ReadonlyArray<ThreadSummary>,
  home: string,
  options: { readonly color: boolean; readonly invocation?: string | undefined }
): string => {
  const s = style(options.color)
  const invocation = options.invocation ?? "antler"
  if (threads.length === 0) {
    return `No threads yet in ${home}.
Start one with: ${invocation} run "<prompt>"   (or try: ${invocation} demo)
`
  }
  // ISO 8601 times sort as strings (no localeCompare: its first use loads a collator, tens of milliseconds)
  const sorted = [...threads].sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0))
  const width = Math.max(...sorted.map((t) => t.thread_id.length))
  const words = sorted.map((t) => statusWords(t.status, t.stop_reason))
  const statusWidth = Math.max(...words.map((w) => w.length))
  const paint = (t: ThreadSummary) =>
    t.status === "error" ? s.red : t.status === "interrupted" || t.status === "running" ? s.yellow : s.dim
  const rows = sorted.map((t, i) =>
    [
      t.thread_id.padEnd(width),
      s.dim(shortTime(t.updated_at)),
      paint(t)(words[i]!.padEnd(statusWidth)),
      s.dim(`${t.checkpoints} steps`.padStart(9)),
      t.title === null ? s.dim("(untitled)") : Redact.controls(t.title)
    ].join("  ")
  )
  const footer = `${threads.length} thread${threads.length === 1 ? "" : "s"} in ${home} · ` +
    `show one: ${invocation} threads show ID · continue the latest: ${invocation} run --continue "..."`
  return `${rows.join("\n")}\n${s.dim(footer)}\n`
}
