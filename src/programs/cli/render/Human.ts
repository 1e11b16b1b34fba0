/**
 * The human renderer of one run: each run event as the text to write on a terminal (tokens as they arrive,
 * each tool call as one compact line, a running command's output as it comes, a clipped result, custom events
 * as sentences, subagent progress nested under its task, an error once with its cause, the end with its stop
 * reason), and what the run is busy with now for a status line.
 */
import { TOOL_OUTPUT_EVENT } from "../../../layers/SandboxTools.js"
import type { RunEvent as RunEventSchema } from "../../../services/RunEvents.js"
type RunEvent = typeof RunEventSchema.Type
import type { ToolMessage } from "../../../state/Message.js"
import * as M from "../../../state/Message.js"
import * as Redact from "../../../state/Redact.js"
import * as TaskRender from "../TaskRender.js"
import {
  discardable,
  endLine,
  errorText,
  eventRaw,
  eventSentence,
  interruptText,
  isErrorFallback,
  isQuestion,
  num
} from "./Events.js"
import { style } from "./Style.js"
import { clip, indent, preview, safeText } from "./Text.js"
import { todoLines } from "./Threads.js"
import { toolLineParts } from "./ToolCalls.js"

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
  const safe = (text: string) => safeText(text, redactor)
  const waiting = `waiting for ${safe(options.model ?? "the model")}`
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
    const sentence = eventSentence(name, data, { verbose, antler: invocation })
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
            // (the status line names it: the model chose the name)
            pending.set(call.id, safe(call.name))
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
        return endReasoning() + newline() + out(`${s.bold("todos")}\n${todoLines(todos, s, redactor).join("\n")}\n`)
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
          // (the run's error is the provider's detail: DeerFlow's run error; the fallback's words come first)
          const message = known === undefined || (error?.message !== known.text && error?.message !== known.detail)
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
