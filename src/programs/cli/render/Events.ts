/**
 * How a run's events read to a person: custom events as one sentence each (`EVENT_SENTENCES`), a clarification
 * question, and the run's end with its stop reason; and what a run's messages say about how it went (a reply,
 * the error fallback, a run worth discarding).
 */
import * as Clarification from "../../../middleware/Clarification.js"
import { FALLBACK_MARKER } from "../../../middleware/LLMErrorHandling.js"
import type { RunEndEvent } from "../../../services/RunEvents.js"
import type { Message } from "../../../state/Message.js"
import type { Style } from "./Style.js"
import { clip, oneLine, preview } from "./Text.js"

/** How a custom event reads to a person: one short sentence, or undefined when it is not worth a line. */
export type EventSentence = (
  data: Record<string, unknown>,
  options: { readonly verbose: boolean; readonly antler: string }
) => string | undefined

const str = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)
/** A finite number, else undefined. */
export const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined
const quoted = (command: unknown) => `\`${oneLine(str(command) ?? "", 80)}\``

/**
 * The sentence of each custom event Antler emits (add one line here for a new event). An event without an
 * entry shows its `message` when it has one, else nothing (its raw form shows with `--verbose` and in `--json`).
 */
export const EVENT_SENTENCES: Readonly<Record<string, EventSentence>> = {
  // (setup_agent's: the command running the new agent, as typed where the user is)
  agent_created: (data, { antler }) => {
    const name = str(data.name)
    return name === undefined
      ? str(data.message)
      : `✦ Agent '${oneLine(name, 80)}' created. Run it with: ${antler} run --agent ${oneLine(name, 80)} "..."`
  },
  skill_activation: (data) => `✦ Skill ${oneLine(str(data.name) ?? "", 80)} activated for this run.`,
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
export const eventSentence = (
  name: string,
  data: unknown,
  options: { readonly verbose?: boolean; readonly antler?: string | undefined } = {}
) => {
  const record = typeof data === "object" && data !== null && !Array.isArray(data)
    ? data as Record<string, unknown>
    : {}
  const sentence = Object.hasOwn(EVENT_SENTENCES, name) ? EVENT_SENTENCES[name] : undefined
  if (sentence !== undefined) {
    return sentence(record, { verbose: options.verbose === true, antler: options.antler ?? "antler" })
  }
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

/** A run's error in words: `name: message`. */
export const errorText = (error: RunEndEvent["error"]): string =>
  error === undefined ? "the run failed" : `${error.name}: ${error.message}`

/** What an interrupt asks, when it carries a question. */
export const isQuestion = (payload: unknown): payload is Clarification.HumanInputRequest =>
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
