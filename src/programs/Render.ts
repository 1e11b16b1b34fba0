/**
 * Terminal rendering of runs and threads. Pure string building: a renderer turns each run event into the
 * text to write (tokens as they arrive, each tool call and a clipped result, the end with its stop reason);
 * `thread` and `threadList` render saved threads. Colour is a flag: callers set it only for a TTY.
 * `run` writes a run's events to stdout as they arrive.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Clarification from "../middleware/Clarification.js"
import type { RunEndEvent } from "../services/RunEvents.js"
import { RunEvent as RunEventSchema } from "../services/RunEvents.js"
type RunEvent = typeof RunEventSchema.Type
import type { LoadedThread, ThreadSummary } from "../services/ThreadStore.js"
import type { Message, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { ThreadState } from "../state/ThreadState.js"

/** Styling: identity functions when colour is off. */
export interface Style {
  readonly dim: (text: string) => string
  readonly bold: (text: string) => string
  readonly red: (text: string) => string
  readonly green: (text: string) => string
  readonly yellow: (text: string) => string
  readonly cyan: (text: string) => string
}

const sgr = (open: number, close: number) => (text: string) => text === "" ? text : `\x1b[${open}m${text}\x1b[${close}m`

/** ANSI styling when `color`, plain text otherwise. */
export const style = (color: boolean): Style =>
  color
    ? {
      dim: sgr(2, 22),
      bold: sgr(1, 22),
      red: sgr(31, 39),
      green: sgr(32, 39),
      yellow: sgr(33, 39),
      cyan: sgr(36, 39)
    }
    : { dim: id, bold: id, red: id, green: id, yellow: id, cyan: id }

const id = (text: string) => text

/** Clips text to its first `lines` lines and `chars` characters, saying how much was left out. */
export const clip = (text: string, options: { readonly lines?: number; readonly chars?: number } = {}): string => {
  const maxLines = options.lines ?? 4
  const maxChars = options.chars ?? 200
  const trimmed = text.replace(/\s+$/, "")
  const lines = trimmed.split("\n")
  let out = lines.slice(0, maxLines).join("\n")
  if (out.length > maxChars) out = out.slice(0, maxChars)
  const omitted = trimmed.length - out.length
  return omitted > 0 ? `${out}… (+${omitted} chars)` : out
}

/** One line for a tool call: `name(args)`, the arguments as compact JSON clipped to `chars`. */
export const toolCallLine = (call: Pick<ToolCall, "name" | "args">, chars = 120): string => {
  const args = JSON.stringify(call.args)
  return `${call.name}(${args.length > chars ? `${args.slice(0, chars - 1)}…` : args})`
}

const indent = (text: string, prefix: string) => text.split("\n").map((line) => prefix + line).join("\n")

/** The last line of a run: how it ended and the thread to continue. */
export const endLine = (end: RunEndEvent, threadId: string, s: Style): string => {
  const where = `thread ${threadId}`
  switch (end.status) {
    case "success":
      return s.dim(`— ${end.stop_reason} · ${where}`)
    case "interrupted":
      return s.yellow(`— waiting for your answer (${end.stop_reason}) · ${where}`)
    case "cancelled":
      return s.yellow(`— cancelled; completed steps are saved · ${where}`)
    case "error":
      return `${s.red(`error: ${end.error?.name ?? "Error"}: ${end.error?.message ?? "the run failed"}`)}\n${
        s.dim(`— ${end.stop_reason} · ${where}`)
      }`
  }
}

/** What an interrupt asks, when it carries a question. */
const isQuestion = (payload: unknown): payload is Clarification.HumanInputRequest =>
  typeof payload === "object" && payload !== null &&
  (payload as { kind?: unknown }).kind === "human_input_request" &&
  typeof (payload as { question?: unknown }).question === "string"

/** What an interrupt asks, when it is a clarification question (its full text, with options or fields). */
export const interruptText = (payload: unknown): string | undefined =>
  isQuestion(payload) ? Clarification.display(payload) : typeof payload === "string" ? payload : undefined

/**
 * A renderer for one run's events (stateful: it remembers what it has printed, so a message re-written
 * with the same id only adds its new text). Returns the text to write for each event.
 */
export const human = (options: { readonly color: boolean }) => {
  const s = style(options.color)
  const printed = new Map<string, string>()
  const shownCalls = new Set<string>()
  let threadId = ""
  let atLineStart = true
  let reasoning = false
  const out = (text: string): string => {
    if (text !== "") atLineStart = text.endsWith("\n")
    return text
  }
  const newline = () => (atLineStart ? "" : out("\n"))
  const endReasoning = () => {
    if (!reasoning) return ""
    reasoning = false
    return newline()
  }
  const writeText = (messageId: string, full: string): string => {
    const before = printed.get(messageId) ?? ""
    if (full === before) return ""
    printed.set(messageId, full)
    return out(full.startsWith(before) ? full.slice(before.length) : `${newline()}${full}`)
  }
  return (event: RunEvent): string => {
    switch (event.type) {
      case "run_start":
        threadId = event.thread_id
        return ""
      case "token": {
        let text = ""
        if (event.reasoning !== undefined && event.reasoning !== "") {
          if (!reasoning) {
            text += newline()
            reasoning = true
          }
          text += out(s.dim(event.reasoning))
        }
        if (event.text !== undefined && event.text !== "") {
          text += endReasoning()
          const before = printed.get(event.message_id) ?? ""
          printed.set(event.message_id, before + event.text)
          text += out(event.text)
        }
        return text
      }
      case "message": {
        const message = event.message
        if (message.type === "ai") {
          let text = endReasoning() + writeText(message.id, M.text(message))
          for (const call of M.toolCalls(message)) {
            if (shownCalls.has(call.id)) continue
            shownCalls.add(call.id)
            text += newline() + out(`${s.cyan("→")} ${s.bold(toolCallLine(call))}\n`)
          }
          for (const call of M.invalidToolCalls(message)) {
            text += newline() + out(`${s.red("→")} ${call.name ?? "?"}(${s.red("arguments are not valid JSON")})\n`)
          }
          return text
        }
        if (message.type === "tool") {
          // A clarification question is shown whole when the run ends waiting for its answer.
          if (isQuestion((message.artifact as { human_input?: unknown } | undefined)?.human_input)) return ""
          const body = clip(M.text(message))
          const mark = message.status === "error" ? s.red("✗") : s.green("←")
          const paint = message.status === "error" ? s.red : s.dim
          return newline() + out(`${mark} ${paint(indent(body === "" ? "(empty result)" : body, "  ").slice(2))}\n`)
        }
        return ""
      }
      case "state":
        // Titles, token counts, sandbox and file bookkeeping: `threads show` presents them.
        return ""
      case "custom": {
        const data = event.data === undefined ? "" : ` ${clip(JSON.stringify(event.data), { lines: 1, chars: 160 })}`
        return newline() + out(s.yellow(`[${event.name}]${data}\n`))
      }
      case "run_end": {
        let text = endReasoning() + newline()
        if (event.status === "interrupted") {
          const question = interruptText(event.interrupt)
          if (question !== undefined) {
            text += out(`${s.yellow(question)}\n`)
            text += out(s.dim(`Answer with: antler run --thread ${threadId} "<your answer>"\n`))
          }
        }
        return text + out(`${endLine(event, threadId, s)}\n`)
      }
    }
  }
}

/** One run event as a JSON line (encoded with the event Schema), carrying the thread id and run id. */
export const jsonLine = (event: RunEvent, threadId: string, runId: string): string => {
  const encoded = Either.getOrElse(encodeEvent(event), () => event)
  const { type, ...rest } = encoded as { type: string } & Record<string, unknown>
  return `${JSON.stringify({ type, ...rest, thread_id: threadId, run_id: runId })}\n`
}

const encodeEvent = Schema.encodeEither(RunEventSchema)

// ---------------------------------------------------------------------------------------------------------
// Saved threads

const roleOf = (message: Message): string => {
  switch (message.type) {
    case "human":
      return "user"
    case "ai":
      return "assistant"
    case "tool":
      return `tool ${message.name ?? ""}`.trim()
    case "system":
      return "system"
  }
}

/** One message of a saved thread, readable. Tool results are clipped at `toolChars`. */
export const message = (m: Message, s: Style, toolChars = 2000): string => {
  const hidden = M.isHidden(m) ? s.dim(" (hidden)") : ""
  const head = `${s.bold(`[${roleOf(m)}]`)}${hidden}`
  let body = M.text(m)
  if (typeof m.content !== "string") {
    const images = m.content.filter((b) => b.type === "image_url").length
    if (images > 0) body += `${body === "" ? "" : "\n"}(${images} image${images > 1 ? "s" : ""})`
  }
  if (m.type === "tool") {
    body = clip(body, { lines: 40, chars: toolChars })
    if (m.status === "error") return `${head} ${s.red("error")}\n${indent(body, "  ")}`
  }
  const lines = [body === "" ? head : `${head}\n${indent(body, "  ")}`]
  for (const call of M.toolCalls(m)) lines.push(`  ${s.cyan("→")} ${toolCallLine(call, 400)}`)
  for (const call of M.invalidToolCalls(m)) {
    lines.push(`  ${s.red("→")} ${call.name ?? "?"}: invalid arguments ${call.args ?? ""}`)
  }
  return lines.join("\n")
}

const section = (title: string, s: Style) => `\n${s.bold(title)}`

const list = (lines: ReadonlyArray<string>, s: Style) => (lines.length === 0 ? s.dim("  (none)") : lines.join("\n"))

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** The full state of a thread, readable: header, messages, then title, artifacts, todos, token usage. */
export const thread = (loaded: LoadedThread, options: { readonly color: boolean }): string => {
  const s = style(options.color)
  const state: ThreadState = loaded.state
  const lines: Array<string> = []
  lines.push(`${s.bold("thread")} ${loaded.thread_id}`)
  lines.push(`${s.bold("title")}  ${state.title ?? s.dim("(none)")}`)
  lines.push(s.dim(`${plural(loaded.checkpoints, "checkpoint")}, ${plural(loaded.runs.length, "run")}`))
  for (const run of loaded.runs) {
    const reason = run.stop_reason ? ` (${run.stop_reason})` : ""
    lines.push(s.dim(`  run ${run.run_id}  ${run.status}${reason}  ${run.started_at}`))
  }
  lines.push(section(`messages (${state.messages.length})`, s))
  for (const m of state.messages) lines.push(message(m, s))
  if (state.summary_text !== null) lines.push(section("summary", s), indent(state.summary_text, "  "))
  lines.push(section("artifacts", s), list(state.artifacts.map((a) => `  ${a}`), s))
  if (state.todos !== null) {
    const mark = { pending: "[ ]", in_progress: "[~]", completed: "[x]" } as const
    lines.push(section("todos", s), list(state.todos.map((t) => `  ${mark[t.status]} ${t.content}`), s))
  }
  if (state.uploaded_files !== null && state.uploaded_files.length > 0) {
    const files = state.uploaded_files.map((f) => `  ${f.filename} (${f.size} bytes)`)
    lines.push(section("uploaded files", s), list(files, s))
  }
  if (state.token_usage !== null) {
    const t = state.token_usage.total
    lines.push(
      section("token usage", s),
      `  total: ${t.input_tokens} in, ${t.output_tokens} out, ${t.total_tokens} total (${t.calls} calls)`
    )
    for (const [model, u] of Object.entries(state.token_usage.by_model)) {
      lines.push(`  ${model}: ${u.input_tokens} in, ${u.output_tokens} out (${u.calls} calls)`)
    }
    const purposes = Object.entries(state.token_usage.by_purpose ?? {})
    // only worth a line when something besides the agent's own calls spent tokens (summaries, titles)
    if (purposes.length > 1 || (purposes.length === 1 && purposes[0]![0] !== "agent")) {
      for (const [purpose, u] of purposes) lines.push(`  for ${purpose}: ${u.total_tokens} total (${u.calls} calls)`)
    }
  }
  if (state.sandbox?.sandbox_id) lines.push(section("sandbox", s), `  ${state.sandbox.sandbox_id}`)
  return `${lines.join("\n")}\n`
}

/** The thread list: newest first, one line each. */
export const threadList = (
  threads: ReadonlyArray<ThreadSummary>,
  home: string,
  options: { readonly color: boolean }
): string => {
  const s = style(options.color)
  if (threads.length === 0) return `No threads yet in ${home}. Try: antler demo\n`
  const sorted = [...threads].sort((a, b) => b.updated_at.localeCompare(a.updated_at))
  const width = Math.max(...sorted.map((t) => t.thread_id.length))
  const rows = sorted.map((t) =>
    [
      t.thread_id.padEnd(width),
      s.dim(t.updated_at),
      s.dim(`${t.checkpoints} steps`.padStart(9)),
      t.title ?? s.dim("(untitled)")
    ].join("  ")
  )
  return `${rows.join("\n")}\n${s.dim(`${threads.length} thread${threads.length === 1 ? "" : "s"} in ${home}`)}\n`
}

// ---------------------------------------------------------------------------------------------------------
// Writing to the terminal

/** Writes to stdout. */
export const write = (text: string): Effect.Effect<void> =>
  text === "" ? Effect.void : Effect.sync(() => void process.stdout.write(text))

/** Writes to stderr. */
export const writeError = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stderr.write(text))

/** Whether stdout gets colour: only a TTY, and never with `NO_COLOR`. */
export const useColor = (): boolean => process.stdout.isTTY === true && (process.env.NO_COLOR ?? "") === ""

const noEnd: RunEndEvent = {
  type: "run_end",
  status: "error",
  stop_reason: "error",
  error: { name: "Error", message: "the run ended without an end event" }
}

const cancelledEnd: RunEndEvent = { type: "run_end", status: "cancelled", stop_reason: "cancelled" }

/**
 * Streams a run to stdout (human text, or one JSON object per line with `json`) and returns its end.
 * Interrupting it (Ctrl-C) cancels the run: completed steps are saved before the interruption completes,
 * and a last line says so.
 */
export const run = <R>(
  events: Stream.Stream<RunEvent, never, R>,
  options: { readonly json: boolean; readonly threadId: string; readonly runId: string }
): Effect.Effect<RunEndEvent, never, R> => {
  const color = useColor()
  const render = human({ color })
  let end: RunEndEvent | undefined
  return Stream.runForEach(events, (event) =>
    Effect.suspend(() => {
      if (event.type === "run_end") end = event
      return write(options.json ? jsonLine(event, options.threadId, options.runId) : render(event))
    })).pipe(
      Effect.map(() => end ?? noEnd),
      Effect.onInterrupt(() =>
        write(
          options.json
            ? jsonLine(cancelledEnd, options.threadId, options.runId)
            : `\n${endLine(cancelledEnd, options.threadId, style(color))}\n`
        )
      )
    )
}
