/**
 * Terminal rendering of runs and threads. Pure string building: a renderer turns each run event into the
 * text to write (tokens as they arrive, each tool call and a clipped result, the end with its stop reason);
 * `thread` and `threadList` render saved threads. Colour is a flag: callers set it only for a TTY.
 * `run` writes a run's events to stdout as they arrive.
 *
 * Everything shown comes from a model, a server or a tool, so nothing is shown raw: control characters are
 * made visible (`Redact.controls`: no escape sequence from a model reaches the terminal), secrets and URL
 * credentials are replaced (`Redact`, with the secrets the caller knows), and tool arguments are previewed
 * to a bounded depth and length.
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
import * as Redact from "../state/Redact.js"
import type { ThreadState } from "../state/ThreadState.js"
import * as TaskRender from "./TaskRender.js"

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

/**
 * Compact JSON of a value, cut at `chars` characters and at `depth` levels of nesting (deeper objects show as
 * `{…}` / `[…]`): bounded work whatever the value, where `JSON.stringify` would walk all of it (and overflow
 * the stack on a deeply nested one).
 */
export const preview = (value: unknown, chars = 120, depth = 8): string => {
  let out = ""
  const full = () => out.length >= chars
  const walk = (node: unknown, level: number): void => {
    if (full()) return
    if (node === null || typeof node !== "object") {
      out += node === undefined ? "null" : JSON.stringify(node) ?? "null"
      return
    }
    const array = Array.isArray(node)
    if (level >= depth) {
      out += array ? "[…]" : "{…}"
      return
    }
    out += array ? "[" : "{"
    let first = true
    for (const key of Object.keys(node)) {
      if (full()) return
      if (!first) out += ","
      first = false
      if (!array) out += `${JSON.stringify(key)}:`
      walk((node as Record<string, unknown>)[key], level + 1)
    }
    out += array ? "]" : "}"
  }
  walk(value, 0)
  return out.length > chars ? `${out.slice(0, chars - 1)}…` : out
}

/** One line for a tool call: `name(args)`, the arguments as compact JSON clipped to `chars`. */
export const toolCallLine = (call: Pick<ToolCall, "name" | "args">, chars = 120): string =>
  `${call.name}(${preview(call.args, chars)})`

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

/** Options of the renderers. */
export interface RenderOptions {
  readonly color: boolean
  /** Secrets to hide (the configured keys); URL credentials and bearer tokens are hidden in any case. */
  readonly redact?: Redact.Redactor | undefined
}

/** Text from outside made safe to print: secrets replaced, control characters made visible. */
export const safeText = (text: string, redactor: Redact.Redactor = Redact.none): string =>
  Redact.controls(redactor.text(text))

/** The text of a custom event: its `message` when it has one (`llm_retry`, `llm_waiting`...), else its data. */
const customText = (data: unknown): string => {
  const message = (data as { message?: unknown } | null | undefined)?.message
  if (typeof message === "string") return ` ${clip(message, { lines: 2, chars: 400 })}`
  return data === undefined ? "" : ` ${preview(data, 160)}`
}

/**
 * A renderer for one run's events (stateful: it remembers what it has printed, so a message re-written
 * with the same id only adds its new text). Returns the text to write for each event.
 */
export const human = (options: RenderOptions) => {
  const s = style(options.color)
  const redactor = options.redact ?? Redact.none
  const safe = (text: string) => safeText(text, redactor)
  const printed = new Map<string, string>()
  const shownCalls = new Set<string>()
  // A result re-written under its id (TokenUsage marks a subagent's usage as counted) is shown once.
  const shownResults = new Set<string>()
  // Token deltas go through a streaming redactor per message (text and reasoning apart): a secret split
  // across two deltas is held back until it can be hidden.
  const streams = new Map<string, Redact.TextStream>()
  const streamOf = (key: string) => {
    let stream = streams.get(key)
    if (stream === undefined) streams.set(key, stream = redactor.stream())
    return stream
  }
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
  const reasoningText = (shown: string) => {
    if (shown === "") return ""
    let text = ""
    if (!reasoning) {
      text += newline()
      reasoning = true
    }
    return text + out(s.dim(Redact.controls(shown)))
  }
  const answerText = (messageId: string, shown: string) => {
    if (shown === "") return ""
    printed.set(messageId, (printed.get(messageId) ?? "") + shown)
    return endReasoning() + out(Redact.controls(shown))
  }
  /** What is still held back for a message (its reasoning, then its text). */
  const flush = (messageId: string) => {
    let text = ""
    const thought = streams.get(`r:${messageId}`)
    if (thought !== undefined) {
      text += reasoningText(thought.end())
      streams.delete(`r:${messageId}`)
    }
    const answer = streams.get(`t:${messageId}`)
    if (answer !== undefined) {
      text += answerText(messageId, answer.end())
      streams.delete(`t:${messageId}`)
    }
    return text
  }
  const writeText = (messageId: string, full: string): string => {
    const before = printed.get(messageId) ?? ""
    if (full === before) return ""
    printed.set(messageId, full)
    return out(Redact.controls(full.startsWith(before) ? full.slice(before.length) : `${newline()}${full}`))
  }
  return (event: RunEvent): string => {
    switch (event.type) {
      case "run_start":
        threadId = event.thread_id
        return ""
      case "token": {
        let text = ""
        if (event.reasoning !== undefined && event.reasoning !== "") {
          text += reasoningText(streamOf(`r:${event.message_id}`).push(event.reasoning))
        }
        if (event.text !== undefined && event.text !== "") {
          text += answerText(event.message_id, streamOf(`t:${event.message_id}`).push(event.text))
        }
        return text
      }
      case "message": {
        const message = event.message
        if (message.type === "ai") {
          let text = flush(message.id)
          text += endReasoning() + writeText(message.id, redactor.text(M.text(message)))
          for (const call of M.toolCalls(message)) {
            if (shownCalls.has(call.id)) continue
            shownCalls.add(call.id)
            text += newline() + out(`${s.cyan("→")} ${s.bold(safe(toolCallLine(call)))}\n`)
          }
          message.invalid_tool_calls?.forEach((call, i) => {
            const id = M.invalidCallId(message, call, i)
            if (shownCalls.has(id)) return
            shownCalls.add(id)
            const why = clip(call.error ?? "the arguments are not valid JSON", { lines: 1, chars: 160 })
            text += newline() + out(`${s.red("→")} ${safe(call.name ?? "?")}(${s.red(safe(why))})\n`)
          })
          return text
        }
        if (message.type === "tool") {
          if (shownResults.has(message.id)) return ""
          shownResults.add(message.id)
          // A clarification question is shown whole when the run ends waiting for its answer.
          if (isQuestion((message.artifact as { human_input?: unknown } | undefined)?.human_input)) return ""
          const body = safe(clip(M.text(message)))
          const mark = message.status === "error" ? s.red("✗") : s.green("←")
          const paint = message.status === "error" ? s.red : s.dim
          return newline() + out(`${mark} ${paint(indent(body === "" ? "(empty result)" : body, "  ").slice(2))}\n`)
        }
        return ""
      }
      case "state":
        // Titles, token counts, sandbox and file bookkeeping: `threads show` presents them.
        return ""
      case "custom":
        if (TaskRender.isTaskEvent(event.name)) {
          const line = TaskRender.line(event.name, event.data, s, safe)
          return line === "" ? "" : newline() + out(line)
        }
        return newline() + out(s.yellow(`[${safe(event.name)}]${safe(customText(event.data))}\n`))
      case "run_end": {
        let text = ""
        for (const key of [...streams.keys()]) text += flush(key.slice(2))
        text += endReasoning() + newline()
        if (event.status === "interrupted") {
          const question = interruptText(event.interrupt)
          if (question !== undefined) {
            text += out(`${s.yellow(safe(question))}\n`)
            text += out(s.dim(`Answer with: antler run --thread ${threadId} "<your answer>"\n`))
          }
        }
        const end = event.error === undefined
          ? event
          : { ...event, error: { name: safe(event.error.name), message: safe(event.error.message) } }
        return text + out(`${endLine(end, threadId, s)}\n`)
      }
    }
  }
}

/**
 * One run event as a JSON line (encoded with the event Schema), carrying the thread id and run id. Its strings are redacted (`redact`), and
 * the control characters JSON leaves raw (DEL, C1, bidirectional overrides) are escaped.
 */
export const jsonLine = (event: RunEvent, threadId: string, runId: string, redact = Redact.none): string => {
  const encoded = Either.getOrElse(encodeEvent(event), () => event)
  const { type, ...rest } = redact.value(encoded) as { type: string } & Record<string, unknown>
  return `${Redact.jsonControls(JSON.stringify({ type, ...rest, thread_id: threadId, run_id: runId }))}\n`
}

/**
 * A JSON-lines renderer for one run (stateful): like `jsonLine`, but token deltas go through a streaming
 * redactor per message, so a secret split across deltas never appears; what it held back comes as one more
 * token event just before the message (or the end of the run).
 */
export const json = (threadId: string, runId: string, redact = Redact.none) => {
  const streams = new Map<string, Redact.TextStream>()
  const line = (event: RunEvent) => jsonLine(event, threadId, runId, redact)
  const flush = (messageId: string) => {
    let text = ""
    for (const kind of ["reasoning", "text"] as const) {
      const stream = streams.get(`${kind}:${messageId}`)
      if (stream === undefined) continue
      streams.delete(`${kind}:${messageId}`)
      const rest = stream.end()
      if (rest !== "") text += line({ type: "token", message_id: messageId, [kind]: rest })
    }
    return text
  }
  return (event: RunEvent): string => {
    switch (event.type) {
      case "token": {
        let text = ""
        for (const kind of ["reasoning", "text"] as const) {
          const delta = event[kind]
          if (delta === undefined || delta === "") continue
          const key = `${kind}:${event.message_id}`
          let stream = streams.get(key)
          if (stream === undefined) streams.set(key, stream = redact.stream())
          const shown = stream.push(delta)
          if (shown !== "") text += line({ type: "token", message_id: event.message_id, [kind]: shown })
        }
        return text
      }
      case "message":
        return flush(event.message.id) + line(event)
      case "run_end": {
        let text = ""
        for (const key of [...streams.keys()]) text += flush(key.slice(key.indexOf(":") + 1))
        return text + line(event)
      }
      default:
        return line(event)
    }
  }
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
  if (state.summary_text !== null) {
    lines.push(section("summary", s), indent(Redact.controls(state.summary_text), "  "))
  }
  lines.push(section("artifacts", s), list(state.artifacts.map((a) => `  ${Redact.controls(a)}`), s))
  if (state.todos !== null) {
    const mark = { pending: "[ ]", in_progress: "[~]", completed: "[x]" } as const
    const todos = state.todos.map((t) => `  ${mark[t.status]} ${Redact.controls(t.content)}`)
    lines.push(section("todos", s), list(todos, s))
  }
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
      t.title === null ? s.dim("(untitled)") : Redact.controls(t.title)
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
 * and a last line says so. `redact` hides the caller's secrets from everything written.
 */
export const run = <R>(
  events: Stream.Stream<RunEvent, never, R>,
  options: {
    readonly json: boolean
    readonly threadId: string
    readonly runId: string
    readonly redact?: Redact.Redactor | undefined
  }
): Effect.Effect<RunEndEvent, never, R> => {
  const color = useColor()
  const render = options.json
    ? json(options.threadId, options.runId, options.redact)
    : human({ color, redact: options.redact })
  let end: RunEndEvent | undefined
  return Stream.runForEach(events, (event) =>
    Effect.suspend(() => {
      if (event.type === "run_end") end = event
      return write(render(event))
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
