/**
 * Clarification: the `ask_clarification` tool. The run stops right after the question, waiting for the user:
 * the question is written as the tool's result (with the structured request in `artifact.human_input`), the
 * run ends `interrupted` carrying the same request, and the next run on the thread takes the user's answer.
 *
 * Decided explicitly where DeerFlow is ambiguous (SPEC §1.1, §14 items 9 and 15): other tool calls of the same
 * response still run, then the run ends; non-interactive runs are not offered the tool, and a call made anyway is
 * answered, in DeerFlow's words, that clarification is disabled, while the run goes on.
 *
 * Lenient at the model boundary, as DeerFlow is: `null` for optional arguments, options and fields encoded as
 * JSON strings, options as objects or as a dictionary parsed from XML-ish output, and any kind of question (or
 * none) are all asked as meant; only a call without a question is refused (DeerFlow asks an empty one).
 */
import { createHash } from "node:crypto"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as PythonRepr from "../internal/PythonRepr.js"
import type { Middleware } from "./Middleware.js"
import * as MW from "./Middleware.js"
import { RunContext } from "../services/RunContext.js"
import * as Tool from "../services/Tool.js"
import { Interrupt } from "../services/ToolService.js"
import type { HumanMessage, Message, ToolCall, ToolMessage } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Json from "../state/Json.js"
import { charLength } from "../state/Chars.js"
import * as Chain from "./Chain.js"
import * as Text from "./ClarificationText.js"

export const TOOL_NAME = "ask_clarification"

/** The kinds of question the tool describes. A call with another kind is still asked, with its kind kept as given. */
export const CLARIFICATION_TYPES = [
  "missing_info",
  "ambiguous_requirement",
  "approach_choice",
  "risk_confirmation",
  "suggestion"
] as const
export const ClarificationType = Schema.Literal(...CLARIFICATION_TYPES)
export type ClarificationType = typeof ClarificationType.Type

/** The types a form field may have; any other type is shown as `text`. */
export const FIELD_TYPES = ["text", "textarea", "number", "select", "multi_select", "checkbox", "date"] as const
export type FieldType = typeof FIELD_TYPES[number]

const MAX_FIELDS = 16
const MAX_FIELD_OPTIONS = 24
const MAX_TEXT = 200
const MAX_FORM_BYTES = 16384

const stringList = (description: string) => ({ type: "array", items: { type: "string" }, description })

/**
 * The tool's arguments. Only `question` is checked strictly (`clarification_type` may be any value, read as
 * text); `context`, `options` and `fields` take whatever models send (null, JSON-encoded strings, objects) and are
 * normalised afterwards, while the JSON Schema the model sees describes their intended shape.
 */
export const Arguments = Schema.Struct({
  question: Schema.String.annotations({ description: Text.ARGUMENTS.question }),
  // Any value is taken and read as DeerFlow's str() reads it (missing: missing_info); the model sees the five kinds.
  clarification_type: Schema.Unknown.annotations({
    jsonSchema: { type: "string", enum: CLARIFICATION_TYPES, description: Text.ARGUMENTS.clarification_type }
  }),
  context: Schema.optional(Schema.Unknown.annotations({
    jsonSchema: { type: "string", description: Text.ARGUMENTS.context }
  })),
  options: Schema.optional(Schema.Unknown.annotations({
    jsonSchema: stringList(Text.ARGUMENTS.options)
  })),
  fields: Schema.optional(Schema.Unknown.annotations({
    jsonSchema: {
      type: "array",
      maxItems: MAX_FIELDS,
      description: Text.ARGUMENTS.fields,
      // (DeerFlow's field type describes none of its keys: `fields`' description says what each is for)
      items: {
        type: "object",
        description: Text.FIELD_DESCRIPTION,
        properties: {
          name: { type: "string" },
          label: { type: "string" },
          type: { type: "string", enum: FIELD_TYPES },
          required: { type: "boolean" },
          options: { type: "array", items: { type: "string" }, maxItems: MAX_FIELD_OPTIONS },
          placeholder: { type: "string" }
        },
        required: ["name"],
        additionalProperties: false
      }
    }
  }))
})
export type Arguments = typeof Arguments.Type

/** One choice: what the user sees, and the answer it stands for. */
export interface Choice {
  readonly label: string
  readonly value: string
}

/** A choice as carried in a request: with its id (`option-{i}`, or `{field}-option-{i}` in a form). */
export interface RequestOption extends Choice {
  readonly id: string
}

/** One field of a clarification form, after normalisation. */
export interface FormField {
  readonly name: string
  readonly label: string
  readonly type: FieldType
  readonly required: boolean
  readonly options?: ReadonlyArray<RequestOption>
  readonly placeholder?: string
}

/** The structured request (`artifact.human_input` of the ToolMessage and the run's interrupt payload). */
export interface HumanInputRequest {
  readonly version: 1 | 2
  readonly kind: "human_input_request"
  readonly source: "ask_clarification"
  readonly request_id: string
  /** One of `CLARIFICATION_TYPES`, or whatever other kind the model gave. */
  readonly clarification_type: string
  readonly question: string
  readonly input_mode: "form" | "choice_with_other" | "free_text"
  readonly tool_call_id?: string
  readonly context?: string
  readonly fields?: ReadonlyArray<FormField>
  readonly options?: ReadonlyArray<RequestOption>
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

// DeerFlow's pattern: only real tags (opening, closing, self-closing), so text such as `a < b` is kept.
const clean = (text: string) => text.replace(/<\/?[A-Za-z_][\p{L}\p{N}\p{M}_:.-]*(?:\s[^<>]*?)?\s*\/?>/gu, "").trim()

const isScalar = (value: unknown): value is string | number | boolean =>
  typeof value === "string" || (typeof value === "number" && Number.isFinite(value)) || typeof value === "boolean"

/** A string the model JSON-encoded (`"[\"a\"]"`, `"\"dev\""`, `"null"`), decoded; any other string as is. */
const decodeJsonText = (text: string): unknown => {
  try {
    return Json.parse(text)
  } catch {
    return text
  }
}

/** How deep options are looked into: a model's arguments nested deeper give nothing more (never a stack overflow). */
const MAX_OPTION_DEPTH = 16

/** The scalar leaves of a nested value, in source order (DeerFlow's flattening of XML-to-dict payloads). */
const scalarLeaves = (value: unknown, out: Array<string | number | boolean>, depth = 0): void => {
  if (isScalar(value)) out.push(value)
  else if (depth >= MAX_OPTION_DEPTH) return
  else if (Array.isArray(value)) for (const item of value) scalarLeaves(item, out, depth + 1)
  else if (Json.isRecord(value)) for (const item of Object.values(value)) scalarLeaves(item, out, depth + 1)
}

const LABEL_KEYS = ["label", "text", "title", "name", "value", "option"] as const

const pythonStringRepr = PythonRepr.stringRepr

/**
 * A JSON value as Python's `str` prints it once `json.loads` read it (DeerFlow's `str(option)`): `True`, `False`,
 * `None`, lists and dictionaries as their `repr` (`['a', 1]`, `{'k': True}`); a string as it is. Undefined past
 * `MAX_OPTION_DEPTH` levels (Python itself gives up on deep nesting). A number is printed as JavaScript prints it
 * (JSON text `1.0` has become `1` here, where Python prints `1.0`).
 */
export const pythonStr = (value: unknown, depth = 0): string | undefined => {
  if (typeof value === "string") return value
  return pythonRepr(value, depth)
}

const pythonRepr = (value: unknown, depth: number): string | undefined => {
  if (value === null || value === undefined) return "None"
  if (value === true) return "True"
  if (value === false) return "False"
  if (typeof value === "number") {
    return Number.isFinite(value) ? String(value) : value > 0 ? "inf" : value < 0 ? "-inf" : "nan"
  }
  if (typeof value === "string") return pythonStringRepr(value)
  if (depth >= MAX_OPTION_DEPTH) return undefined
  const parts: Array<string> = []
  if (Array.isArray(value)) {
    for (const item of value) {
      const part = pythonRepr(item, depth + 1)
      if (part === undefined) return undefined
      parts.push(part)
    }
    return `[${parts.join(", ")}]`
  }
  if (typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const part = pythonRepr(item, depth + 1)
      if (part === undefined) return undefined
      parts.push(`${pythonStringRepr(key)}: ${part}`)
    }
    return `{${parts.join(", ")}}`
  }
  return String(value)
}

/**
 * The choice one list item stands for. A string is its text (a JSON-quoted string loses its quotes); any other
 * value is what DeerFlow's `str(option)` prints (`pythonStr`: `True`, `None`, `['a', 'b']`, `{'k': 1}`), except
 * an object with a label (`label`, `text`, `title`, `name`, `value` or `option`), which is one choice whose answer
 * is its `value` (Antler's: models send such objects, and a Python dictionary's text is no label).
 */
const choicesOf = (item: unknown, out: Array<Choice>, depth = 0): void => {
  if (typeof item === "string") {
    const trimmed = item.trim()
    const decoded = trimmed.length >= 2 && trimmed.startsWith("\"") ? decodeJsonText(trimmed) : trimmed
    const text = typeof decoded === "string" ? decoded : trimmed
    out.push({ label: text, value: text })
    return
  }
  if (Json.isRecord(item)) {
    const key = LABEL_KEYS.find((k) => isScalar(item[k]) && String(item[k]).trim() !== "")
    if (key !== undefined) {
      const label = pythonStr(item[key])!
      const value = isScalar(item.value) && String(item.value).trim() !== "" ? pythonStr(item.value)! : label
      out.push({ label, value })
      return
    }
  }
  const text = pythonStr(item, depth)
  if (text !== undefined) out.push({ label: text, value: text })
}

/**
 * Options as the user sees them, following DeerFlow: a string is JSON-decoded when it is JSON (a list, a
 * quoted string, `null`), else taken as one option; `null` means none; a dictionary (options parsed from
 * XML-ish output) gives its scalar leaves in source order; a list gives one choice per item (see `choicesOf`).
 * Tags are stripped, text trimmed, blanks dropped, and repeated labels kept once.
 */
export const normalizeOptions = (raw: unknown): ReadonlyArray<Choice> => {
  const value = typeof raw === "string" ? decodeJsonText(raw) : raw
  const items: Array<unknown> = []
  if (Json.isRecord(value)) scalarLeaves(value, items as Array<string | number | boolean>)
  else if (Array.isArray(value)) items.push(...value)
  else if (value !== null && value !== undefined) items.push(value)
  const choices: Array<Choice> = []
  for (const item of items) choicesOf(item, choices)
  const seen = new Set<string>()
  const out: Array<Choice> = []
  for (const choice of choices) {
    const label = clean(choice.label)
    if (label === "" || seen.has(label)) continue
    seen.add(label)
    const value = clean(choice.value)
    out.push({ label, value: value === "" ? label : value })
  }
  return out
}

const FORBIDDEN_NAMES: ReadonlySet<string> = new Set([
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
const FIELD_TYPE_SET: ReadonlySet<string> = new Set(FIELD_TYPES)

const coerceRequired = (value: unknown): boolean =>
  value === true || (typeof value === "number" && value !== 0) ||
  (typeof value === "string" && value.trim().toLowerCase() === "true")

const isChoiceType = (type: FieldType) => type === "select" || type === "multi_select"

/**
 * A form from the model's `fields` (a list, or that list JSON-encoded in a string), or undefined when there is
 * none or anything about it is structurally wrong: the whole form is dropped, never half of it (DeerFlow).
 * Unknown field types become `text`, and so does a select without options; options count only for selects.
 */
export const normalizeFields = (raw: unknown): ReadonlyArray<FormField> | undefined => {
  const value = typeof raw === "string" ? decodeJsonText(raw) : raw
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_FIELDS) return undefined
  const names = new Set<string>()
  const fields: Array<FormField> = []
  for (const item of value) {
    if (!Json.isRecord(item)) return undefined
    const name = typeof item.name === "string" ? item.name.trim() : ""
    if (name === "" || charLength(name) > MAX_TEXT || FORBIDDEN_NAMES.has(name) || names.has(name)) return undefined
    names.add(name)
    const label = typeof item.label === "string" && item.label.trim() !== "" ? item.label.trim() : name
    if (charLength(label) > MAX_TEXT) return undefined
    let type = (typeof item.type === "string" && FIELD_TYPE_SET.has(item.type) ? item.type : "text") as FieldType
    const options = isChoiceType(type) ? normalizeOptions(item.options) : []
    if (options.length > MAX_FIELD_OPTIONS || options.some((o) => charLength(o.label) > MAX_TEXT)) return undefined
    if (isChoiceType(type) && options.length === 0) type = "text"
    const placeholder = typeof item.placeholder === "string" ? item.placeholder.trim() : ""
    if (charLength(placeholder) > MAX_TEXT) return undefined
    fields.push({
      name,
      label,
      type,
      required: coerceRequired(item.required),
      ...(isChoiceType(type) ? { options: options.map((o, i) => ({ id: `${name}-option-${i + 1}`, ...o })) } : {}),
      ...(placeholder !== "" ? { placeholder } : {})
    })
  }
  // the size of the form as DeerFlow measures it: `json.dumps(fields, ensure_ascii=False)` in UTF-8 (the order of
  // the keys does not change it)
  if (Buffer.byteLength(Json.pythonDumps(fields), "utf8") > MAX_FORM_BYTES) return undefined
  return fields
}

/** The context of a call as text: absent, `null` or blank means none; a number or boolean is shown as text. */
const contextText = (raw: unknown): string | undefined =>
  isScalar(raw) && String(raw).trim() !== "" ? String(raw) : undefined

const ICONS: Record<string, string> = {
  missing_info: "❓",
  ambiguous_requirement: "🤔",
  approach_choice: "🔀",
  risk_confirmation: "⚠️",
  suggestion: "💡"
}

/** The kind of a call as DeerFlow's `str(args.get("clarification_type", "missing_info"))` reads it. */
const clarificationType = (raw: unknown): string =>
  raw === undefined ? "missing_info" : pythonStr(raw) ?? "missing_info"

/**
 * The structured request for a call. Its id is `clarification:{tool call id}`, or without one, as DeerFlow's,
 * the first 16 hex digits of the SHA-256 of the question's text as shown (`display`).
 */
export const request = (args: Arguments, toolCallId: string | undefined): HumanInputRequest => {
  const fields = normalizeFields(args.fields)
  const options = fields === undefined ? normalizeOptions(args.options) : []
  const context = contextText(args.context)
  const id = toolCallId && toolCallId.trim() !== "" ? `clarification:${toolCallId}` : undefined
  const req: HumanInputRequest = {
    version: fields !== undefined ? 2 : 1,
    kind: "human_input_request",
    source: "ask_clarification",
    request_id: id ?? "",
    clarification_type: clarificationType(args.clarification_type),
    question: args.question.trim(),
    input_mode: fields !== undefined ? "form" : options.length > 0 ? "choice_with_other" : "free_text",
    ...(toolCallId ? { tool_call_id: toolCallId } : {}),
    ...(context !== undefined ? { context } : {}),
    ...(fields !== undefined ? { fields } : {}),
    ...(options.length > 0 ? { options: options.map((o, i) => ({ id: `option-${i + 1}`, ...o })) } : {})
  }
  if (id !== undefined) return req
  return { ...req, request_id: `clarification:${createHash("sha256").update(display(req)).digest("hex").slice(0, 16)}` }
}

/**
 * The text shown to the user (and kept as the ToolMessage content the model reads later), as DeerFlow writes it:
 * the context, the question and the numbered options or form fields, each a paragraph of its own.
 */
export const display = (req: HumanInputRequest): string => {
  const icon = Object.hasOwn(ICONS, req.clarification_type) ? ICONS[req.clarification_type] : "❓"
  const lines = req.context !== undefined && req.context.trim() !== ""
    ? [`${icon} ${req.context.trim()}`, "", req.question]
    : [`${icon} ${req.question}`]
  if (req.fields !== undefined) {
    lines.push("")
    req.fields.forEach((f, i) => {
      const many = f.type === "multi_select" ? " (multiple allowed)" : ""
      const options = f.options ? ` — options: ${f.options.map((o) => o.label).join(" / ")}${many}` : ""
      lines.push(`  ${i + 1}. ${f.label}${f.required ? " (required)" : ""}${options}`)
    })
    lines.push("", "Please reply with a value for each field.")
  } else if (req.options !== undefined) {
    lines.push("")
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
 * The human message that answers a request. An answer that is an option's number, label or value selects that
 * option (and answers with its value); anything else is a free-text answer.
 */
export const answer = (req: HumanInputRequest, text: string): HumanMessage => {
  const trimmed = text.trim()
  const byNumber = /^\d+$/.test(trimmed) ? req.options?.[Number(trimmed) - 1] : undefined
  const lower = trimmed.toLowerCase()
  const option = byNumber ??
    req.options?.find((o) => o.label.toLowerCase() === lower) ??
    req.options?.find((o) => o.value.toLowerCase() === lower)
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

/**
 * Whether a human message's `additional_kwargs` carry a well-formed clarification answer, as DeerFlow's
 * `read_human_input_response` reads one (a blank value, source or request id is none).
 */
export const isAnswer = (kwargs: Readonly<Record<string, unknown>> | undefined): boolean =>
  M.isHumanInputResponse(kwargs?.human_input_response)

// ---------------------------------------------------------------------------------------------------------
// The middleware

/** DeerFlow's words (its tests pin "disabled" and "proceed"). */
export const DISABLED = "Clarification is disabled in this context — the human is not present to answer " +
  "synchronously. Do not ask for confirmation. Proceed with your best judgment, carry out the requested action, " +
  "and state any assumptions you made in your final response."

/**
 * The `ask_clarification` tool. In a run whose options say it is not interactive (nobody can answer), the call
 * answers at once and the run goes on; otherwise the run stops and waits for the user.
 */
export const tool: Tool.Tool<Arguments> = Tool.make({
  name: TOOL_NAME,
  description: Text.DESCRIPTION,
  parameters: Arguments,
  handler: (args, call) =>
    Effect.flatMap(RunContext, (context) => {
      if (context.options.nonInteractive === true) {
        return Effect.succeed({
          message: M.tool(DISABLED, call.id, { id: `clarification:${call.id}`, name: TOOL_NAME, status: "success" })
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
 * wrapper sees the call. A run where nobody can answer (`nonInteractive`) is not offered the tool, as DeerFlow
 * removes it; a call made anyway is answered that nobody is there.
 */
export const layer = (): Middleware =>
  MW.make({
    tools: [tool],
    // (the run's context read off the calling fiber: one effect step per call, not a service lookup and a flatMap)
    model: (request, next) =>
      Effect.withFiberRuntime((fiber) =>
        Context.unsafeGet(fiber.currentContext, RunContext).options.nonInteractive === true &&
          request.tools.some((t) => t.name === TOOL_NAME)
          ? next({ ...request, tools: request.tools.filter((t) => t.name !== TOOL_NAME) })
          : next(request)
      )
  })

/** Its chain entry: last, so every tool wrapper sees ask_clarification; the run then waits. */
export const entry = () =>
  Chain.entry("ClarificationMiddleware", () => layer(), [
    { last: true, reason: "every tool wrapper must see ask_clarification before the run stops to wait" },
    { inside: "ToolErrorHandling", reason: "its question, an inner short-circuit, still gets tool metadata" },
    { inside: "DeferredToolFilter", reason: "a call to a hidden tool is refused before any tool runs" }
  ])
