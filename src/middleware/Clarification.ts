/**
 * Clarification: the `ask_clarification` tool. The run stops right after the question, waiting for the user:
 * the question is written as the tool's result (with the structured request in `artifact.human_input`), the
 * run ends `interrupted` carrying the same request, and the next run on the thread takes the user's answer.
 *
 * Decided explicitly where DeerFlow is ambiguous (SPEC §1.1, §14 items 9 and 15): other tool calls of the same
 * response still run, then the run ends; in non-interactive runs the tool answers that nobody is there and the
 * run goes on.
 */
import { createHash } from "node:crypto"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import { RunContext } from "../services/RunContext.js"
import * as Tool from "../services/Tool.js"
import { Interrupt } from "../services/ToolService.js"
import type { HumanMessage, Message, ToolCall, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"

export const TOOL_NAME = "ask_clarification"

/** The kinds of question. */
export const ClarificationType = Schema.Literal(
  "missing_info",
  "ambiguous_requirement",
  "approach_choice",
  "risk_confirmation",
  "suggestion"
)
export type ClarificationType = typeof ClarificationType.Type

/** The tool's arguments, as the model sees them. `options` and `fields` are normalised leniently after decoding. */
export const Arguments = Schema.Struct({
  question: Schema.String.annotations({ description: "The question to ask the user, one clear sentence." }),
  clarification_type: ClarificationType.annotations({ description: "What kind of clarification this is." }),
  context: Schema.optional(Schema.String.annotations({ description: "Why you are asking: what you know so far." })),
  options: Schema.optional(
    Schema.Union(Schema.Array(Schema.Unknown), Schema.String).annotations({
      description: "Choices to offer, as a list of short strings (the user may still answer freely)."
    })
  ),
  fields: Schema.optional(
    Schema.Array(Schema.Unknown).annotations({
      description: "A small form instead of options: a list of {name, label?, type?: text|textarea|number|select|" +
        "multi_select|checkbox|date, required?, options?, placeholder?}."
    })
  )
})
export type Arguments = typeof Arguments.Type

/** One field of a clarification form, after normalisation. */
export interface FormField {
  readonly name: string
  readonly label: string
  readonly type: "text" | "textarea" | "number" | "select" | "multi_select" | "checkbox" | "date"
  readonly required: boolean
  readonly options?: ReadonlyArray<{ readonly id: string; readonly label: string; readonly value: string }>
  readonly placeholder?: string
}

/** The structured request (`artifact.human_input` of the ToolMessage and the run's interrupt payload). */
export interface HumanInputRequest {
  readonly version: 1 | 2
  readonly kind: "human_input_request"
  readonly source: "ask_clarification"
  readonly request_id: string
  readonly clarification_type: ClarificationType
  readonly question: string
  readonly input_mode: "form" | "choice_with_other" | "free_text"
  readonly tool_call_id?: string
  readonly context?: string
  readonly fields?: ReadonlyArray<FormField>
  readonly options?: ReadonlyArray<{ readonly id: string; readonly label: string; readonly value: string }>
}

/** The user's answer, carried in `additional_kwargs.human_input_response` of the next human message. */
export const HumanInputResponse = Schema.Struct({
  version: Schema.Literal(1),
  kind: Schema.Literal("human_input_response"),
  source: Schema.String,
  request_id: Schema.String,
  response_kind: Schema.Literal("text", "option"),
  value: Schema.String,
  option_id: Schema.optional(Schema.String)
})
export type HumanInputResponse = typeof HumanInputResponse.Type

// ---------------------------------------------------------------------------------------------------------
// Normalisation (pure)

const stripTags = (text: string) => text.replace(/<[^>]*>/g, "").replace(/\s+/g, " ").trim()

const scalarLeaves = (value: unknown, out: Array<string>) => {
  if (value === null || value === undefined) return
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") out.push(String(value))
  else if (Array.isArray(value)) value.forEach((v) => scalarLeaves(v, out))
  else if (typeof value === "object") Object.values(value).forEach((v) => scalarLeaves(v, out))
}

/** Options as clean, unique, non-blank strings: JSON-string arrays parsed, objects flattened to their values. */
export const normalizeOptions = (raw: unknown): ReadonlyArray<string> => {
  let value = raw
  if (typeof value === "string") {
    const trimmed = value.trim()
    if (trimmed.startsWith("[")) {
      try {
        value = JSON.parse(trimmed)
      } catch {
        value = [trimmed]
      }
    } else value = trimmed === "" ? [] : [trimmed]
  }
  const leaves: Array<string> = []
  scalarLeaves(value, leaves)
  return Array.from(new Set(leaves.map(stripTags).filter((o) => o !== "")))
}

const FORBIDDEN_NAMES = new Set([
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "isPrototypeOf",
  "propertyIsEnumerable",
  "toLocaleString",
  "__defineGetter__",
  "__defineSetter__",
  "__lookupGetter__",
  "__lookupSetter__"
])
const FIELD_TYPES = new Set(["text", "textarea", "number", "select", "multi_select", "checkbox", "date"])
const MAX_FIELDS = 16
const MAX_FIELD_OPTIONS = 24
const MAX_TEXT = 200
const MAX_FORM_BYTES = 16384

const coerceRequired = (value: unknown): boolean =>
  value === true || (typeof value === "number" && value !== 0) ||
  (typeof value === "string" && value.trim().toLowerCase() === "true")

/**
 * A form from the model's `fields`, or undefined when anything about it is structurally wrong (the whole form
 * is dropped, never half of it).
 */
export const normalizeFields = (raw: ReadonlyArray<unknown> | undefined): ReadonlyArray<FormField> | undefined => {
  if (raw === undefined || raw.length === 0 || raw.length > MAX_FIELDS) return undefined
  const names = new Set<string>()
  const fields: Array<FormField> = []
  for (const item of raw) {
    if (typeof item !== "object" || item === null || Array.isArray(item)) return undefined
    const f = item as Record<string, unknown>
    const name = typeof f.name === "string" ? f.name.trim() : ""
    if (name === "" || name.length > MAX_TEXT || FORBIDDEN_NAMES.has(name) || names.has(name)) return undefined
    names.add(name)
    const label = typeof f.label === "string" && f.label.trim() !== "" ? f.label.trim() : name
    if (label.length > MAX_TEXT) return undefined
    let type = (typeof f.type === "string" && FIELD_TYPES.has(f.type) ? f.type : "text") as FormField["type"]
    const options = f.options === undefined ? [] : normalizeOptions(f.options)
    if (options.length > MAX_FIELD_OPTIONS || options.some((o) => o.length > MAX_TEXT)) return undefined
    if ((type === "select" || type === "multi_select") && options.length === 0) type = "text"
    const placeholder = typeof f.placeholder === "string" ? f.placeholder : undefined
    if (placeholder !== undefined && placeholder.length > MAX_TEXT) return undefined
    fields.push({
      name,
      label,
      type,
      required: coerceRequired(f.required),
      ...(type === "select" || type === "multi_select"
        ? { options: options.map((o, i) => ({ id: `${name}-option-${i + 1}`, label: o, value: o })) }
        : {}),
      ...(placeholder !== undefined ? { placeholder } : {})
    })
  }
  if (Buffer.byteLength(JSON.stringify(fields), "utf8") > MAX_FORM_BYTES) return undefined
  return fields
}

const ICONS: Record<ClarificationType, string> = {
  missing_info: "❓",
  ambiguous_requirement: "🤔",
  approach_choice: "🔀",
  risk_confirmation: "⚠️",
  suggestion: "💡"
}

/** The structured request for a call. */
export const request = (args: Arguments, toolCallId: string | undefined): HumanInputRequest => {
  const fields = normalizeFields(args.fields)
  const options = fields === undefined && args.options !== undefined ? normalizeOptions(args.options) : []
  const id = toolCallId && toolCallId.trim() !== ""
    ? `clarification:${toolCallId}`
    : `clarification:${createHash("sha256").update(args.question).digest("hex").slice(0, 16)}`
  return {
    version: fields !== undefined ? 2 : 1,
    kind: "human_input_request",
    source: "ask_clarification",
    request_id: id,
    clarification_type: args.clarification_type,
    question: args.question.trim(),
    input_mode: fields !== undefined ? "form" : options.length > 0 ? "choice_with_other" : "free_text",
    ...(toolCallId ? { tool_call_id: toolCallId } : {}),
    ...(args.context !== undefined ? { context: args.context } : {}),
    ...(fields !== undefined ? { fields } : {}),
    ...(options.length > 0 ? { options: options.map((o, i) => ({ id: `option-${i + 1}`, label: o, value: o })) } : {})
  }
}

/** The text shown to the user (and kept as the ToolMessage content the model reads later). */
export const display = (req: HumanInputRequest): string => {
  const icon = ICONS[req.clarification_type]
  const lines = req.context !== undefined && req.context.trim() !== ""
    ? [`${icon} ${req.context.trim()}`, req.question]
    : [`${icon} ${req.question}`]
  if (req.fields !== undefined) {
    req.fields.forEach((f, i) => {
      const options = f.options ? ` — choose from: ${f.options.map((o) => o.label).join(" / ")}` : ""
      const many = f.type === "multi_select" ? " (several allowed)" : ""
      lines.push(`  ${i + 1}. ${f.label}${f.required ? " (required)" : ""}${options}${many}`)
    })
    lines.push("Please answer each field.")
  } else if (req.options !== undefined) {
    req.options.forEach((o, i) => lines.push(`  ${i + 1}. ${o.label}`))
  }
  return lines.join("\n")
}

/** The ToolMessage that records the question. Its id derives from the request, so a retry replaces it. */
export const questionMessage = (req: HumanInputRequest, call: ToolCall): ToolMessage =>
  M.tool(display(req), call.id, {
    id: req.request_id,
    name: TOOL_NAME,
    status: "success",
    artifact: { human_input: req }
  })

/** The pending request of a thread: the last message is a clarification question that has no answer yet. */
export const pending = (messages: ReadonlyArray<Message>): HumanInputRequest | undefined => {
  const last = messages[messages.length - 1]
  if (last?.type !== "tool" || last.name !== TOOL_NAME) return undefined
  const artifact = last.artifact as { human_input?: HumanInputRequest } | undefined
  return artifact?.human_input?.kind === "human_input_request" ? artifact.human_input : undefined
}

/**
 * The human message that answers a request. An answer that is an option's number or label selects that
 * option; anything else is a free-text answer.
 */
export const answer = (req: HumanInputRequest, text: string): HumanMessage => {
  const trimmed = text.trim()
  const byNumber = /^\d+$/.test(trimmed) ? req.options?.[Number(trimmed) - 1] : undefined
  const option = byNumber ?? req.options?.find((o) => o.label.toLowerCase() === trimmed.toLowerCase())
  const response: HumanInputResponse = {
    version: 1,
    kind: "human_input_response",
    source: req.source,
    request_id: req.request_id,
    response_kind: option ? "option" : "text",
    value: option ? option.value : trimmed,
    ...(option ? { option_id: option.id } : {})
  }
  return M.human(option ? option.value : trimmed, {
    additional_kwargs: { hide_from_ui: true, human_input_response: response }
  })
}

/** Whether a human message carries a well-formed clarification answer. */
export const isAnswer = Schema.is(Schema.Struct({ human_input_response: HumanInputResponse }))

// ---------------------------------------------------------------------------------------------------------
// The middleware

const NOBODY_THERE = "Nobody can answer questions in this run (it is not interactive). Do not wait for a reply: " +
  "make the most reasonable assumption, say clearly which assumption you made, and continue the task."

/**
 * The `ask_clarification` tool. In a run whose options say it is not interactive (nobody can answer), the call
 * answers at once and the run goes on; otherwise the run stops and waits for the user.
 */
export const tool: Tool.Tool<Arguments> = Tool.make({
  name: TOOL_NAME,
  description: "Ask the user a question and wait for the answer. Use it when the request is missing information " +
    "you cannot find yourself, is ambiguous, needs a choice between approaches, or before a risky action. " +
    "The run stops after this call until the user answers.",
  parameters: Arguments,
  handler: (args, call) =>
    Effect.flatMap(RunContext, (context) => {
      if (context.options.nonInteractive === true) {
        return Effect.succeed({
          message: M.tool(NOBODY_THERE, call.id, { id: `clarification:${call.id}`, name: TOOL_NAME, status: "success" })
        })
      }
      const req = request(args, call.id)
      return Effect.fail(
        new Interrupt({ reason: "clarification", payload: req, result: { message: questionMessage(req, call) } })
      )
    })
})

/**
 * The Clarification middleware: contributes `ask_clarification`. Last in the lead agent's chain, so every tool
 * wrapper sees the call.
 */
export const layer = (): Middleware => MW.make({ tools: [tool] })
