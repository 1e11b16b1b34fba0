/**
 * Terminal rendering of runs and threads. Pure string building: a renderer turns each run event into the
 * text to write (tokens as they arrive, each tool call as one compact line (`toolLine`), a running command's
 * output as it comes, a clipped result, custom events as one sentence each (`EVENT_SENTENCES`), an error once
 * with its cause, the end with its stop reason); `thread` and `threadList` render saved threads. Colour is a
 * flag: callers set it only for a TTY. `run` writes a run's events to stdout as they arrive, with a status
 * line (`Terminal`) on a terminal.
 *
 * Everything shown comes from a model, a server or a tool, so nothing is shown raw: control characters are
 * made visible (`Redact.controls`: no escape sequence from a model reaches the terminal), secrets and URL
 * credentials are replaced (`Redact`, with the secrets the caller knows), and tool arguments are previewed
 * to a bounded depth and length.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { TOOL_OUTPUT_EVENT } from "../../layers/SandboxTools.js"
import * as Clarification from "../../middleware/Clarification.js"
import { FALLBACK_MARKER } from "../../middleware/LLMErrorHandling.js"
import type { RunEndEvent } from "../../services/RunEvents.js"
import { RunEvent as RunEventSchema } from "../../services/RunEvents.js"
type RunEvent = typeof RunEventSchema.Type
import type { LoadedThread, ThreadStatus, ThreadSummary } from "../../services/ThreadStore.js"
import type { Message, ToolCall, ToolMessage } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import * as Redact from "../../state/Redact.js"
import type { ThreadState, Todo } from "../../state/ThreadState.js"
import * as TaskRender from "./TaskRender.js"
import * as Terminal from "./Terminal.js"

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

// ---------------------------------------------------------------------------------------------------------
// Compact tool calls

/** The arguments that say most about a call, in order of preference (the first one present is shown). */
export const KEY_ARGUMENTS = ["command", "pattern", "path", "query", "url", "filepaths", "image_path"] as const

const oneLine = (text: string, chars: number): string => {
  const lines = text.trim().split("\n")
  const first = lines[0]!.replace(/\s+/g, " ")
  const more = lines.length > 1 ? " …" : ""
  return first.length > chars ? `${first.slice(0, chars - 1)}…` : `${first}${more}`
}

/**
 * A call's key argument as one short line (a command's first line, a path, a pattern...); undefined when it
 * has none of `KEY_ARGUMENTS`.
 */
export const keyArgument = (args: Readonly<Record<string, unknown>>, chars = 100): string | undefined => {
  for (const name of KEY_ARGUMENTS) {
    const value = args[name]
    if (typeof value === "string" && value.trim() !== "") {
      // A search says where: `TODO in /mnt/user-data/workspace`.
      const where = name === "pattern" && typeof args.path === "string" && args.path !== "" ? ` in ${args.path}` : ""
      return oneLine(`${value}${where}`, chars)
    }
    if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === "string")) {
      return oneLine(value.join(" "), chars)
    }
  }
  return undefined
}

/**
 * A tool call in one compact line: the model's `description` of it as the label, then the tool and its key
 * argument (`Save the greeting · write_file /mnt/user-data/workspace/hello.txt`); a call without a key
 * argument shows its other arguments as clipped JSON. Not made safe: callers pass it through `safeText`.
 */
export const toolLine = (call: Pick<ToolCall, "name" | "args">): string => {
  const { detail, label } = toolLineParts(call)
  return label === undefined ? detail : `${label} · ${detail}`
}

/** The two parts of `toolLine`: the description (if any) and the tool with its key argument. */
export const toolLineParts = (
  call: Pick<ToolCall, "name" | "args">
): { readonly label: string | undefined; readonly detail: string } => {
  const { description, ...rest } = call.args as Record<string, unknown>
  const label = typeof description === "string" && description.trim() !== "" ? oneLine(description, 80) : undefined
  const key = keyArgument(rest)
  const detail = key !== undefined
    ? `${call.name} ${key}`
    : Object.keys(rest).length > 0
    ? `${call.name} ${preview(rest, 80)}`
    : call.name
  return { label, detail }
}

// ---------------------------------------------------------------------------------------------------------
// Custom events as sentences

/** How a custom event reads to a person: one short sentence, or undefined when it is not worth a line. */
export type EventSentence = (
  data: Record<string, unknown>,
  options: { readonly verbose: boolean }
) => string | undefined

const str = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)
const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined
const quoted = (command: unknown) => `\`${oneLine(str(command) ?? "", 80)}\``

/**
 * The sentence of each custom event Antler emits (add one line here for a new event). An event without an
 * entry shows its `message` when it has one, else nothing (its raw form shows with `--verbose` and in `--json`).
 */
export const EVENT_SENTENCES: Readonly<Record<string, EventSentence>> = {
  llm_retry: (data) => `↻ ${str(data.message) ?? "The model call failed; trying again."}`,
  llm_waiting: (data) => `… ${str(data.message) ?? "Still waiting for the model."}`,
  sandbox_audit: (data, { verbose }) => {
    const reason = str(data.reason)
    switch (data.verdict) {
      case "block":
        return `⛔ Blocked ${quoted(data.command)}: ${reason ?? "a dangerous command"}.`
      case "warn":
        return `⚠ Ran ${quoted(data.command)} with a warning: ${reason ?? "a risky command"}.`
      default:
        return verbose ? `✓ Audit passed ${quoted(data.command)}.` : undefined
    }
  },
  guardrail: (data, { verbose }) => {
    const tool = str(data.tool_name) ?? "a tool"
    const strings = (value: unknown): ReadonlyArray<string> =>
      Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : []
    const messages = strings(data.reason_messages)
    const codes = strings(data.reason_codes)
    const why = oneLine(messages[0] ?? codes.join(", ") ?? "", 160)
    switch (data.action) {
      case "deny_tool_call":
        return `⛔ The guardrail refused ${tool}${why === "" ? "" : `: ${why}`}.`
      case "allow_tool_call_after_provider_error":
        return `⚠ The guardrail provider failed, so ${tool} was allowed${why === "" ? "" : ` (${why})`}.`
      default:
        return verbose ? `✓ The guardrail allowed ${tool}.` : undefined
    }
  },
  summarization: (data) => {
    if (data.status === "completed") {
      const count = num(data.summarized_messages)
      const before = num(data.tokens_before)
      const after = num(data.tokens_after)
      const tokens = before !== undefined && after !== undefined ? ` (${before} → ${after} tokens)` : ""
      return `Summarised ${count ?? "some"} earlier messages to keep the context small${tokens}.`
    }
    const errors = Array.isArray(data.errors) ? data.errors.filter((e) => typeof e === "string") : []
    return `⚠ Could not summarise earlier messages${errors[0] === undefined ? "" : `: ${oneLine(errors[0], 160)}`}.`
  },
  safety_termination: (data) => {
    const field = str(data.reason_field)
    const value = str(data.reason_value)
    const count = num(data.suppressed_tool_call_count) ?? 0
    const why = field !== undefined && value !== undefined ? ` (${field}: ${value})` : ""
    const calls = count > 0 ? `; ${count} tool call${count === 1 ? " was" : "s were"} not run` : ""
    return `⛔ The model provider stopped the answer for safety${why}${calls}.`
  }
}

/** A custom event's sentence (see `EVENT_SENTENCES`), or undefined when it is not shown by default. */
export const eventSentence = (name: string, data: unknown, options: { readonly verbose?: boolean } = {}) => {
  const record = typeof data === "object" && data !== null && !Array.isArray(data)
    ? data as Record<string, unknown>
    : {}
  const sentence = Object.hasOwn(EVENT_SENTENCES, name) ? EVENT_SENTENCES[name] : undefined
  if (sentence !== undefined) return sentence(record, { verbose: options.verbose === true })
  const message = str(record.message)
  return message === undefined ? undefined : `· ${clip(message, { lines: 2, chars: 400 })}`
}

/** The raw form of a custom event (`--verbose`): its name and data as clipped JSON. */
export const eventRaw = (name: string, data: unknown): string => `[${name}] ${preview(data, 400)}`

/** Why a run stopped early, in words (absent for a run that completed). */
export const STOP_REASONS: Readonly<Record<string, string>> = {
  recursion_limit: "stopped: the run took too many steps",
  loop_capped: "stopped: the model kept repeating the same tool calls",
  token_capped: "stopped: the token budget is spent",
  safety_capped: "stopped by the provider's safety filter",
  model_length_capped: "stopped: the answer reached the model's length limit",
  subagent_limit_capped: "stopped: too many subagent tasks"
}

const indent = (text: string, prefix: string) => text.split("\n").map((line) => prefix + line).join("\n")

/** The last line of a run: how it ended and the thread to continue. */
export const endLine = (end: RunEndEvent, threadId: string, s: Style): string => {
  const where = `thread ${threadId}`
  switch (end.status) {
    case "success": {
      const why = Object.hasOwn(STOP_REASONS, end.stop_reason) ? STOP_REASONS[end.stop_reason] : undefined
      return s.dim(`— ${why === undefined ? end.stop_reason : `${why} (${end.stop_reason})`} · ${where}`)
    }
    case "interrupted":
      return s.yellow(`— waiting for your answer (${end.stop_reason}) · ${where}`)
    case "cancelled":
      return s.yellow(`— cancelled; completed steps are saved · ${where}`)
    case "error":
      // a run refused because another one holds the thread did nothing: its message says all, once
      if (end.error?.name === "ThreadBusy") return s.red(`error: ${end.error.message}`)
      return `${s.red(`error: ${errorText(end.error)}`)}\n${s.dim(`— failed · ${where}`)}`
  }
}

const errorText = (error: RunEndEvent["error"]): string =>
  error === undefined ? "the run failed" : `${error.name}: ${error.message}`

/** What an interrupt asks, when it carries a question. */
const isQuestion = (payload: unknown): payload is Clarification.HumanInputRequest =>
  typeof payload === "object" && payload !== null &&
  (payload as { kind?: unknown }).kind === "human_input_request" &&
  typeof (payload as { question?: unknown }).question === "string"

/** What an interrupt asks, when it is a clarification question (its full text, with options or fields). */
export const interruptText = (payload: unknown): string | undefined =>
  isQuestion(payload) ? Clarification.display(payload) : typeof payload === "string" ? payload : undefined

/** Whether a message is the fallback LLMErrorHandling writes when the model could not be reached. */
export const isErrorFallback = (message: Message): boolean =>
  message.type === "ai" && message.additional_kwargs?.[FALLBACK_MARKER] === true

/** Whether a message is a reply of the model (not the fallback written when it could not be reached). */
export const isReply = (message: Message): boolean => message.type === "ai" && !isErrorFallback(message)

/**
 * Whether a run leaves nothing worth keeping: it failed before the model replied, on a thread it created.
 * The CLI deletes such a thread (an `(untitled)` thread holding only the question would be left otherwise).
 * A run refused because another run holds the thread never created it: that thread (and its files, which the
 * other run's sandbox is using) is the other run's.
 */
export const discardable = (end: RunEndEvent, replied: boolean, newThread: boolean): boolean =>
  newThread && end.status === "error" && !replied && end.error?.name !== "ThreadBusy"

/** Text from outside made safe to print: secrets replaced, control characters made visible. */
export const safeText = (text: string, redactor: Redact.Redactor = Redact.none): string =>
  Redact.controls(redactor.text(text))

/** Options of the renderers. */
export interface RenderOptions {
  readonly color: boolean
  /** Secrets to hide (the configured keys); URL credentials and bearer tokens are hidden in any case. */
  readonly redact?: Redact.Redactor | undefined
  /** Also show every custom event's raw form, passing audits, and tool calls' full arguments. */
  readonly verbose?: boolean | undefined
  /** The model's name, for "waiting for …". */
  readonly model?: string | undefined
  /** How the user runs Antler here (`antler`, `npx antler`), for the hints printed. Default `antler`. */
  readonly invocation?: string | undefined
  /** The run started this thread: if it fails before the model replies, the thread is not kept. */
  readonly newThread?: boolean | undefined
}

// How the result of a command the sandbox audit blocked starts, and the warning a risky one's ends with
// (SandboxAudit.blockedText, SandboxAudit.warningText).
const BLOCKED_PREFIX = "Command blocked: "
const WARNING_PREFIX = "⚠️ Warning: `"

// Styling codes after a line's end (`s.dim("...\n")`): the line has ended all the same.
const TRAILING_STYLE = /(?:\x1b\[[0-9;]*m)+$/

interface LiveOutput {
  /** Everything that came, as sent (to compare with the result). */
  text: string
  lines: number
  cut: boolean
  readonly stream: Redact.TextStream
}

/** The most lines of one call's live output shown; the rest is left out (its result shows start and end). */
export const LIVE_OUTPUT_LINES = 100

/** A renderer of one run's events: the text to write for each, and what the run is busy with now. */
export interface HumanRenderer {
  (event: RunEvent): string
  /** What the run is waiting for now (`waiting for gpt-4o`, `running bash`), for a status line; else undefined. */
  readonly activity: () => string | undefined
  /** Whether the model has replied in this run (a message other than an error fallback). */
  readonly replied: () => boolean
}

/**
 * A renderer for one run's events (stateful: it remembers what it has printed, so a message re-written
 * with the same id only adds its new text). Returns the text to write for each event.
 */
export const human = (options: RenderOptions): HumanRenderer => {
  const s = style(options.color)
  const verbose = options.verbose === true
  const redactor = options.redact ?? Redact.none
  const invocation = options.invocation ?? "antler"
  const waiting = `waiting for ${options.model ?? "the model"}`
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
  // Live output of running calls: what came (for comparing with the result), lines shown, its redactor.
  const live = new Map<string, LiveOutput>()
  const pending = new Map<string, string>()
  let activity: string | undefined
  let replied = false
  let blocked = 0
  let warned = 0
  let fallback: { readonly text: string; readonly detail: string | undefined } | undefined
  let threadId = ""
  let atLineStart = true
  let outputOpen: string | undefined
  let reasoning = false
  const out = (text: string): string => {
    if (text !== "") atLineStart = text.replace(TRAILING_STYLE, "").endsWith("\n")
    return text
  }
  const newline = () => {
    outputOpen = undefined
    return atLineStart ? "" : out("\n")
  }
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
  const running = () => (pending.size === 0 ? waiting : `running ${[...new Set(pending.values())].join(", ")}`)
  /** A running call's output, a line at a time under its call: `  │ line`. */
  const liveOutput = (data: Record<string, unknown>): string => {
    const id = typeof data.tool_call_id === "string" ? data.tool_call_id : ""
    let entry = live.get(id)
    if (entry === undefined) live.set(id, entry = { text: "", lines: 0, cut: false, stream: redactor.stream() })
    if (data.truncated === true || typeof data.text !== "string") return ""
    entry.text += data.text
    // Carriage returns (progress bars) start a new line here; the terminal never sees a raw one.
    return showLive(id, entry, entry.stream.push(data.text.replace(/\r(?!\n)/g, "\n")))
  }
  const showLive = (id: string, entry: LiveOutput, redacted: string): string => {
    if (entry.cut) return ""
    let text = ""
    for (const piece of Redact.controls(redacted).split(/(?<=\n)/)) {
      if (piece === "") continue
      if (outputOpen !== id) {
        text += newline()
        if (entry.lines >= LIVE_OUTPUT_LINES) {
          entry.cut = true
          return text + out(s.dim(`  │ … (more output; the result keeps its start and end)\n`))
        }
        text += out(s.dim("  │ "))
        entry.lines++
      }
      text += out(piece.endsWith("\n") ? `${s.dim(piece.slice(0, -1))}\n` : s.dim(piece))
      outputOpen = piece.endsWith("\n") ? undefined : id
    }
    return text
  }
  /** A tool's result: clipped; after live output, only what the output did not already show. */
  const resultText = (message: ToolMessage): string => {
    let body = M.text(message)
    // The warning a risky command's result ends with is what its audit line said.
    const warning = body.lastIndexOf(WARNING_PREFIX)
    if (warned > 0 && warning >= 0) {
      warned--
      body = body.slice(0, warning).replace(/\n+$/, "\n")
    }
    const streamed = live.get(message.tool_call_id)
    let before = ""
    if (streamed !== undefined) {
      live.delete(message.tool_call_id)
      before = showLive(message.tool_call_id, streamed, streamed.stream.end())
      if (streamed.text !== "" && body.startsWith(streamed.text)) {
        body = body.slice(streamed.text.length).trim()
        if (body === "") return before + newline() + out(`${s.green("←")} ${s.dim("done")}\n`)
      }
    }
    const shown = safe(clip(body))
    const mark = message.status === "error" ? s.red("✗") : s.green("←")
    const paint = message.status === "error" ? s.red : s.dim
    const body_ = indent(shown === "" ? "(empty result)" : shown, "  ").slice(2)
    return before + newline() + out(`${mark} ${paint(body_)}\n`)
  }
  const custom = (name: string, data: unknown): string => {
    if (name === TOOL_OUTPUT_EVENT && typeof data === "object" && data !== null) {
      return liveOutput(data as Record<string, unknown>)
    }
    const verdict = name === "sandbox_audit" ? (data as { verdict?: unknown } | null)?.verdict : undefined
    if (verdict === "block") blocked++
    if (verdict === "warn") warned++
    if (name === "llm_retry") {
      const attempt = num((data as { attempt?: unknown } | null)?.attempt)
      const max = num((data as { max_attempts?: unknown } | null)?.max_attempts)
      activity = attempt !== undefined && max !== undefined ? `${waiting} (attempt ${attempt + 1} of ${max})` : waiting
    }
    let text = ""
    // Subagent progress: nested, compact lines under the task call.
    if (TaskRender.isTaskEvent(name)) {
      const line = TaskRender.line(name, data, s, safe)
      if (line !== "") text += newline() + out(line)
      if (verbose) text += newline() + out(`${s.dim(safe(eventRaw(name, data)))}\n`)
      return text
    }
    const sentence = eventSentence(name, data, { verbose })
    if (sentence !== undefined) {
      const paint = sentence.startsWith("⛔") ? s.red : s.yellow
      text += newline() + out(`${paint(safe(sentence))}\n`)
    }
    if (verbose) text += newline() + out(`${s.dim(safe(eventRaw(name, data)))}\n`)
    return text
  }
  const render = (event: RunEvent): string => {
    switch (event.type) {
      case "run_start":
        threadId = event.thread_id
        activity = waiting
        return ""
      case "token": {
        activity = undefined
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
          if (isErrorFallback(message)) {
            // The error is shown once, with its cause, when the run ends.
            const detail = message.additional_kwargs?.error_detail
            fallback = { text: M.text(message), detail: typeof detail === "string" ? detail : undefined }
            return flush(message.id)
          }
          replied = true
          let text = flush(message.id)
          text += endReasoning() + writeText(message.id, redactor.text(M.text(message)))
          for (const call of M.toolCalls(message)) {
            if (shownCalls.has(call.id)) continue
            shownCalls.add(call.id)
            pending.set(call.id, call.name)
            const { detail, label } = toolLineParts(call)
            const line = label === undefined
              ? s.bold(safe(detail))
              : `${s.bold(safe(label))} ${s.dim(`· ${safe(detail)}`)}`
            text += newline() + out(`${s.cyan("→")} ${line}\n`)
            if (verbose) text += out(`${s.dim(indent(safe(preview(call.args, 2000)), "  "))}\n`)
          }
          message.invalid_tool_calls?.forEach((call, i) => {
            const id = M.invalidCallId(message, call, i)
            if (shownCalls.has(id)) return
            shownCalls.add(id)
            const why = clip(call.error ?? "the arguments are not valid JSON", { lines: 1, chars: 160 })
            text += newline() + out(`${s.red("→")} ${safe(call.name ?? "?")}(${s.red(safe(why))})\n`)
          })
          activity = pending.size > 0 ? running() : undefined
          return text
        }
        if (message.type === "tool") {
          pending.delete(message.tool_call_id)
          activity = running()
          if (shownResults.has(message.id)) return ""
          shownResults.add(message.id)
          // A clarification question is shown whole when the run ends waiting for its answer.
          if (isQuestion((message.artifact as { human_input?: unknown } | undefined)?.human_input)) return ""
          // A blocked command's result says what its audit line said.
          if (blocked > 0 && message.status === "error" && M.text(message).startsWith(BLOCKED_PREFIX)) {
            blocked--
            return ""
          }
          return resultText(message)
        }
        return ""
      }
      case "state": {
        // The todo list (plan mode) is shown each time it changes; titles, token counts, sandbox and file
        // bookkeeping are for `threads show`.
        const todos = event.update.todos
        if (todos == null) return ""
        return endReasoning() + newline() + out(`${s.bold("todos")}\n${todoLines(todos, s).join("\n")}\n`)
      }
      case "custom":
        return custom(event.name, event.data)
      case "run_end": {
        activity = undefined
        let text = ""
        for (const key of [...streams.keys()]) text += flush(key.slice(2))
        text += endReasoning() + newline()
        if (event.status === "interrupted") {
          const question = interruptText(event.interrupt)
          if (question !== undefined) {
            text += out(`${s.yellow(safe(question))}\n`)
            text += out(s.dim(`Answer with: ${invocation} run --thread ${threadId} "<your answer>"\n`))
          }
        }
        if (event.status === "error") {
          const error = event.error
          // a run refused because another one holds the thread did nothing: its message says all, once
          if (error?.name === "ThreadBusy") return text + out(`${s.red(`error: ${safe(error.message)}`)}\n`)
          const known = fallback
          const message = known === undefined || error?.message !== known.text
            ? errorText(error)
            : known.detail === undefined || known.text.includes(known.detail)
            ? known.text
            : `${known.text} Cause: ${known.detail}`
          text += out(`${s.red(`error: ${safe(message)}`)}\n`)
          const end = discardable(event, replied, options.newThread === true)
            ? "— failed before the model replied; nothing was saved"
            : `— failed · thread ${threadId}`
          return text + out(`${s.dim(end)}\n`)
        }
        return text + out(`${endLine(event, threadId, s)}\n`)
      }
    }
  }
  return Object.assign(render, { activity: () => activity, replied: () => replied })
}

/**
 * One run event as a JSON line (encoded with the event Schema), carrying the thread id and run id. Its strings
 * are redacted (`redact`), and the control characters JSON leaves raw (DEL, C1, bidirectional overrides) are
 * escaped.
 */
export const jsonLine = (event: RunEvent, threadId: string, runId: string, redact = Redact.none): string => {
  const encoded = Either.getOrElse(encodeEvent(event), () => event)
  const { type, ...rest } = redact.value(encoded) as { type: string } & Record<string, unknown>
  return `${Redact.jsonControls(JSON.stringify({ type, ...rest, thread_id: threadId, run_id: runId }))}\n`
}

/**
 * A filter of a run's events (stateful) that sends the user's message once: the run writes it, then stamps
 * it (same id, with its name and the run's id and time) at once; only the stamped write is passed on. It holds a
 * human message until the next event; `end` returns what it still holds.
 */
export const latestWrites = () => {
  let held: RunEvent | undefined
  const pass = (event: RunEvent): ReadonlyArray<RunEvent> => {
    const before = held
    held = undefined
    const rewrites = before !== undefined && before.type === "message" && event.type === "message" &&
      event.message.id === before.message.id
    const out = before === undefined || rewrites ? [] : [before]
    if (event.type === "message" && event.message.type === "human") held = event
    else out.push(event)
    return out
  }
  return Object.assign(pass, {
    end: (): ReadonlyArray<RunEvent> => {
      const rest = held === undefined ? [] : [held]
      held = undefined
      return rest
    }
  })
}

/**
 * A JSON-lines renderer for one run (stateful): like `jsonLine`, but token deltas go through a streaming
 * redactor per message, so a secret split across deltas never appears; what it held back comes as one more
 * token event just before the message (or the end of the run). The user's message is sent once (see
 * `latestWrites`).
 */
export const json = (threadId: string, runId: string, redact = Redact.none) => {
  const streams = new Map<string, Redact.TextStream>()
  const writes = latestWrites()
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
  const one = (event: RunEvent): string => {
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
  return (event: RunEvent): string => writes(event).map(one).join("")
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

const TODO_MARK = { pending: "[ ]", in_progress: "[~]", completed: "[x]" } as const

/** A todo list, one indented line per item: `[ ]` pending, `[~]` in progress, `[x]` completed. */
export const todoLines = (todos: ReadonlyArray<Todo>, s: Style = style(false)): ReadonlyArray<string> =>
  todos.map((t) => {
    const line = `  ${TODO_MARK[t.status]} ${Redact.controls(t.content)}`
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

// ---------------------------------------------------------------------------------------------------------
// Writing to the terminal

/** Writes to stdout. */
export const write = (text: string): Effect.Effect<void> =>
  text === "" ? Effect.void : Effect.sync(() => void process.stdout.write(text))

/** Writes to stderr. */
export const writeError = (text: string): Effect.Effect<void> => Effect.sync(() => void process.stderr.write(text))

/** Whether stdout is a terminal (a status line is drawn only there). */
export const isTerminal = (): boolean => process.stdout.isTTY === true

/** Whether stdout gets colour: only a TTY, and never with `NO_COLOR`. */
export const useColor = (): boolean => isTerminal() && (process.env.NO_COLOR ?? "") === ""

const noEnd: RunEndEvent = {
  type: "run_end",
  status: "error",
  stop_reason: "error",
  error: { name: "Error", message: "the run ended without an end event" }
}

const cancelledEnd: RunEndEvent = { type: "run_end", status: "cancelled", stop_reason: "cancelled" }

/** Options of `run`. */
export interface RunOptions extends Omit<RenderOptions, "color"> {
  /** One JSON object per line instead of text. */
  readonly json: boolean
  readonly threadId: string
  readonly runId: string
  /** Draw a status line (spinner and elapsed time) while the run waits. Default: when stdout is a terminal. */
  readonly status?: boolean | undefined
}

/** How a run went: its end, and whether the model replied (see `discardable`). */
export interface Outcome {
  readonly end: RunEndEvent
  readonly replied: boolean
}

/**
 * Streams a run to stdout (human text, or one JSON object per line with `json`) and returns how it went.
 * On a terminal (not with `json`), a status line shows what the run waits for and for how long.
 * Interrupting it (Ctrl-C) cancels the run: completed steps are saved before the interruption completes,
 * and a last line says so. `redact` hides the caller's secrets from everything written.
 */
export const run = <R>(
  events: Stream.Stream<RunEvent, never, R>,
  options: RunOptions
): Effect.Effect<Outcome, never, R> =>
  Effect.scoped(Effect.gen(function*() {
    const color = useColor()
    const s = style(color)
    const writeOut = (text: string) => void (text === "" || process.stdout.write(text))
    const status = !options.json && (options.status ?? isTerminal())
      ? yield* Terminal.statusLine({ write: writeOut, dim: s.dim })
      : undefined
    const human_ = options.json ? undefined : human({ ...options, color })
    const jsonRender = options.json ? json(options.threadId, options.runId, options.redact) : undefined
    let end: RunEndEvent | undefined
    let replied = false
    const show = (text: string, ended = false) =>
      Effect.sync(() => {
        if (status === undefined) writeOut(text)
        else status.write(text, ended ? undefined : human_?.activity())
      })
    // A log line (stderr, the same terminal) goes on a line of its own: the status line is cleared first.
    const logging = <A, E, R2>(effect: Effect.Effect<A, E, R2>) =>
      status === undefined ? effect : Effect.locallyWith(effect, FiberRef.currentLoggers, HashSet.map((logger) =>
        Logger.make((input) => {
          status.clear()
          return logger.log(input)
        })))
    return yield* Stream.runForEach(events, (event) =>
      Effect.suspend(() => {
        if (event.type === "run_end") end = event
        if (event.type === "message" && isReply(event.message)) replied = true
        return show(human_ !== undefined ? human_(event) : jsonRender!(event))
      })).pipe(
        Effect.map((): Outcome => ({ end: end ?? noEnd, replied })),
        Effect.onInterrupt(() =>
          show(
            options.json
              ? jsonLine(cancelledEnd, options.threadId, options.runId)
              : `\n${endLine(cancelledEnd, options.threadId, s)}\n`,
            true
          )
        ),
        logging
      )
  }))
