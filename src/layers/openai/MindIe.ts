/**
 * Huawei MindIE's dialect of Chat Completions (DeerFlow's `MindIEChatModel`), pure: its chat templates read neither
 * the protocol's tool calls nor its tool messages, nor content parts, so the messages go as text — an answer's calls
 * as `<tool_call>` XML blocks, a tool's result as a user message framed in `<tool_response>` — and the model answers
 * with such blocks in its text, read back here as tool calls. A request with tools is not streamed (MindIE drops the
 * choices of such a stream), and a literal `\n` the server over-escaped outside a code fence is a new line.
 */
import type OpenAI from "openai"

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam

/** Escapes `&`, `<` and `>` (Python's `html.escape(quote=False)`), so a value cannot close the framing it is in. */
export const escapeXml = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

const ENTITIES: Readonly<Record<string, string>> = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'" }

/** Undoes HTML escaping (named entities of `escapeXml` and quotes, numeric ones). */
export const unescapeXml = (text: string): string =>
  text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, entity: string) => {
    if (entity.startsWith("#")) {
      const code = entity[1] === "x" || entity[1] === "X"
        ? Number.parseInt(entity.slice(2), 16)
        : Number.parseInt(entity.slice(1), 10)
      return Number.isInteger(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole
    }
    return ENTITIES[entity.toLowerCase()] ?? whole
  })

/** A message content as one text: a string as it is, the text parts of a list joined (images are left out). */
const flatText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((part) =>
    typeof part === "string"
      ? part
      : typeof part === "object" && part !== null && part.type === "text" && typeof part.text === "string"
      ? part.text
      : ""
  ).join("")
}

const argumentsOf = (raw: string): Record<string, unknown> => {
  try {
    const parsed: unknown = JSON.parse(raw)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? parsed as Record<string, unknown>
      : {}
  } catch {
    return {}
  }
}

/** One call as MindIE's template writes it. */
const callXml = (name: string, args: Record<string, unknown>): string => {
  const params = Object.entries(args).map(([key, value]) =>
    `<parameter=${escapeXml(key)}>${escapeXml(typeof value === "string" ? value : JSON.stringify(value))}</parameter>`
  ).join(" ")
  return `<tool_call> <function=${escapeXml(name)}> ${params} </function> </tool_call>`
}

/** The messages of a request as MindIE reads them (see the module's comment); a blank content is one space. */
export const messages = (chat: ReadonlyArray<ChatMessage>): Array<ChatMessage> =>
  chat.map((message): ChatMessage => {
    const text = flatText(message.content)
    if (message.role === "assistant" && message.tool_calls !== undefined && message.tool_calls.length > 0) {
      const calls = message.tool_calls.flatMap((call) =>
        call.type === "function" ? [callXml(call.function.name, argumentsOf(call.function.arguments))] : []
      ).join("\n")
      return { role: "assistant", content: (text === "" ? calls : `${text}\n${calls}`).trim() || " " }
    }
    if (message.role === "tool") {
      return { role: "user", content: `<tool_response>\n${escapeXml(text)}\n</tool_response>` }
    }
    const content = text.trim() === "" ? " " : text
    switch (message.role) {
      case "assistant":
        return { role: "assistant", content }
      case "user":
        return { role: "user", content }
      case "system":
        return { role: "system", content }
      case "developer":
        return { role: "developer", content }
      default:
        return message
    }
  })

/** The `<tool_call>…</tool_call>` blocks of a text, outermost only (a block inside one is part of it). */
const blocks = function*(text: string): Generator<{ start: number; end: number; inner: string }> {
  let depth = 0
  let start = -1
  for (const match of text.matchAll(/<\/?tool_call>/g)) {
    if (match[0] === "<tool_call>") {
      if (depth === 0) start = match.index
      depth++
      continue
    }
    if (depth === 0) continue
    depth--
    if (depth === 0 && start !== -1) {
      yield { start, end: match.index + match[0].length, inner: text.slice(start + "<tool_call>".length, match.index) }
      start = -1
    }
  }
}

/** A parameter's value: JSON where it looks like JSON (an object, a list, a boolean, null, digits), else the text. */
const parameterValue = (raw: string): unknown => {
  if (/^[[{]/.test(raw) || raw === "true" || raw === "false" || raw === "null" || /^[0-9]+$/.test(raw)) {
    try {
      return JSON.parse(raw)
    } catch {
      return raw
    }
  }
  return raw
}

/**
 * The value of the first `<prefix…>` tag from `from` (what is between the prefix and the next `>`, which must come
 * before any `<`) and where the tag ends. Read with `indexOf`, so a hostile answer costs linear time.
 */
const tagValue = (
  text: string,
  prefix: string,
  from: number
): { readonly value: string; readonly end: number } | undefined => {
  for (let at = text.indexOf(prefix, from); at !== -1; at = text.indexOf(prefix, at + 1)) {
    const start = at + prefix.length
    // up to the `>`, or a `<` that starts another tag (each character is looked at once)
    let close = start
    while (close < text.length && text[close] !== ">" && text[close] !== "<") close++
    if (close === text.length) return undefined
    if (text[close] === ">" && close > start) return { value: text.slice(start, close).trim(), end: close + 1 }
  }
  return undefined
}

/** A tool call read from MindIE's text, in the protocol's shape (its arguments as a JSON text). */
export interface XmlToolCall {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

/**
 * The text without its `<tool_call>` blocks (trimmed), and the calls they held, each with a fresh id. A block
 * without a `<function=…>` is removed and gives no call; a block nested in another is not a call of its own.
 */
export const parseToolCalls = (text: string): { readonly text: string; readonly calls: Array<XmlToolCall> } => {
  if (!text.includes("<tool_call>")) return { text, calls: [] }
  const calls: Array<XmlToolCall> = []
  const kept: Array<string> = []
  let cursor = 0
  for (const block of blocks(text)) {
    kept.push(text.slice(cursor, block.start))
    cursor = block.end
    const name = tagValue(block.inner, "<function=", 0)?.value
    if (name === undefined || name === "") continue
    let own = ""
    let at = 0
    for (const nested of blocks(block.inner)) {
      own += block.inner.slice(at, nested.start)
      at = nested.end
    }
    own += block.inner.slice(at)
    const args: Record<string, unknown> = {}
    for (let at = 0;;) {
      const tag = tagValue(own, "<parameter=", at)
      const close = tag === undefined ? -1 : own.indexOf("</parameter>", tag.end)
      if (tag === undefined || close === -1) break
      at = close + "</parameter>".length
      const key = unescapeXml(tag.value.trim())
      if (key === "" || key === "__proto__") continue
      args[key] = parameterValue(unescapeXml(own.slice(tag.end, close).trim()))
    }
    const id = `call_${crypto.randomUUID().replace(/-/g, "").slice(0, 10)}`
    calls.push({ id, type: "function", function: { name: unescapeXml(name.trim()), arguments: JSON.stringify(args) } })
  }
  kept.push(text.slice(cursor))
  return { text: kept.join("").trim(), calls }
}

/** A literal `\n` as a new line, except inside fenced code blocks (where it is the code's own). */
export const decodeEscapedNewlines = (text: string): string => {
  if (!text.includes("\\n")) return text
  return text.split(/(```[\s\S]*?```)/).map((part) => part.startsWith("```") ? part : part.replace(/\\n/g, "\n"))
    .join("")
}

/**
 * A chunk as MindIE meant it: its text's escaped new lines decoded and, in a whole (non-streamed) answer, its
 * `<tool_call>` blocks taken out of the text as tool calls after those the server gave. Anything else as it is.
 */
export const readChunk = (chunk: unknown, whole: boolean): unknown => {
  if (typeof chunk !== "object" || chunk === null) return chunk
  const choices = (chunk as { readonly choices?: unknown }).choices
  if (!Array.isArray(choices)) return chunk
  return {
    ...chunk,
    choices: choices.map((entry: unknown) => {
      if (typeof entry !== "object" || entry === null) return entry
      const choice = entry as { readonly delta?: unknown }
      const delta = choice.delta
      if (typeof delta !== "object" || delta === null) return choice
      const content = (delta as { content?: unknown }).content
      if (typeof content !== "string") return choice
      const decoded = decodeEscapedNewlines(content)
      if (!whole) return { ...choice, delta: { ...delta, content: decoded } }
      const { calls, text } = parseToolCalls(decoded)
      if (calls.length === 0) return { ...choice, delta: { ...delta, content: decoded } }
      const given = (delta as { tool_calls?: unknown }).tool_calls
      const existing = Array.isArray(given) ? given : []
      const added = calls.map((call, i) => ({ index: existing.length + i, ...call }))
      return { ...choice, delta: { ...delta, content: text, tool_calls: [...existing, ...added] } }
    })
  }
}
