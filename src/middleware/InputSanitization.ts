/**
 * InputSanitization (SPEC §5.1): before each model call, the last genuine user message is made inert as
 * instructions. Framework and injection tags it contains are HTML-escaped, and its text is framed between
 * `--- BEGIN USER INPUT ---` / `--- END USER INPUT ---`. Request-only (state keeps what the user typed) and
 * fail-open: if sanitising throws, the original request goes to the model. The earlier genuine user messages
 * of the request are neutralised the same way but not framed (DeerFlow sends them as typed, so a marker forged
 * in one turn would stand unframed in every later request); for ordinary text that changes nothing.
 *
 * Both are read as a reader sees the text (`Lookalike.fold`), so a disguise does not get through: a tag or a
 * marker spelled with zero-width characters, fullwidth or Cyrillic look-alike letters, em dashes, another case
 * or spacing, split over lines or ending in `\r` is escaped or neutralised like the plain one.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ModelRequest } from "../services/ModelService.js"
import type { ContentBlock, HumanMessage, Message } from "../state/Message.js"
import * as Lookalike from "../state/Lookalike.js"
import * as M from "../state/Message.js"
import * as Incremental from "./internal/Incremental.js"
import * as Middleware from "./Middleware.js"
import * as Chain from "./Chain.js"

/**
 * Tags the framework emits into model input (system prompt, hidden context and reminders). Any of them,
 * forged in untrusted text, would pose as trusted framework context, so every one is blocked.
 */
export const FRAMEWORK_TAGS: ReadonlyArray<string> = [
  "system-reminder",
  "system_reminder",
  "memory",
  "current_date",
  "think",
  "analysis",
  "role",
  "soul",
  "self_update",
  "thinking_style",
  "clarification_system",
  "critical_reminders",
  "response_style",
  "citations",
  "uploaded_files",
  "current_uploads",
  "subagent_system",
  "skill_system",
  "skill_index",
  "available_skills",
  "disabled_skills",
  "memory_tool_system",
  "todo_list_system",
  "durable_context_data",
  "slash_skill_activation",
  "mcp_routing_hints",
  "available-deferred-tools",
  "goal_continuation",
  "background_task_event",
  "file_editing_workflow",
  "guidelines",
  "output_format",
  "working_directory",
  "tool_restrictions",
  "confidentiality",
  // Inside <slash_skill_activation>.
  "user_request",
  "skill_content",
  // The entries of <available_skills>.
  "skill",
  "name",
  "description",
  "location",
  // MindIE's transcript (`layers/openai/MindIe.ts`): a user's text cannot forge a call or a tool's result there
  "tool_call",
  "tool_response",
  "function",
  "parameter"
]

/**
 * Tags that frame untrusted text in the harness's own model calls (the summarisation prompt). Blocking them
 * lets `neutralizeUntrustedTags` keep a transcript from closing its frame there too.
 */
export const INTERNAL_PROMPT_TAGS: ReadonlyArray<string> = [
  "messages",
  "existing_summary",
  "new_messages",
  // the memory update prompt (its staleness review and consolidation sections too)
  "current_memory",
  "conversation",
  "stale_facts",
  "consolidation_candidates",
  // the gateway's input polish prompt
  "draft"
]

/** Common prompt-injection tag names. */
export const INJECTION_TAGS: ReadonlyArray<string> = [
  "system",
  "instruction",
  "important",
  "override",
  "ignore",
  "prompt"
]

/** Every blocked tag name (lower case; matching is case-insensitive). */
export const BLOCKED_TAGS: ReadonlySet<string> = new Set([
  ...FRAMEWORK_TAGS,
  ...INTERNAL_PROMPT_TAGS,
  ...INJECTION_TAGS
])

/** The boundary markers around the user's text. */
export const BEGIN_USER_INPUT = "--- BEGIN USER INPUT ---"
export const END_USER_INPUT = "--- END USER INPUT ---"
/** What a boundary marker typed by the user becomes: it looks alike but frames nothing. */
export const NEUTRALIZED_BEGIN = "[BEGIN USER INPUT]"
export const NEUTRALIZED_END = "[END USER INPUT]"

/** `additional_kwargs` key holding the user's own text, before uploads or sanitising changed the content. */
export const ORIGINAL_USER_CONTENT = "original_user_content"

/** What the user wrote of a message, kept in `original_user_content` when a middleware put text before it. */
export const originalUserContent = (message: Message): string | undefined => {
  const original = (message.additional_kwargs as Record<string, unknown> | undefined)?.[ORIGINAL_USER_CONTENT]
  return typeof original === "string" ? original : undefined
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&")

// Longest names first, so `system-reminder` wins over `system` (either way the whole tag is escaped). Matched
// against the folded text (see `Lookalike`): `＜system＞`, `<sys\u200btem>` and `<ѕystem>` (Cyrillic ѕ) are
// tags too.
const tagPattern = new RegExp(
  `<\\s*/?\\s*(?:${[...BLOCKED_TAGS].sort((a, b) => b.length - a.length).map(escapeRegExp).join("|")})\\b[^>]*>?`
)

const escapeTag = (tag: string) => tag.replace(/[<\uFF1C\uFE64]/g, "&lt;").replace(/[>\uFF1E\uFE65]/g, "&gt;")

const escapeBlockedTags = (text: string) =>
  /[<\uFF1C\uFE64]/.test(text)
    ? Lookalike.replaceFolded(text, (folded) => Lookalike.matches(folded, new RegExp(tagPattern, "g"), escapeTag))
    : text

// A boundary marker as a reader may see it, in the folded text: the words in any case and spacing (also
// letter by letter, across lines, `END OF USER INPUT`), from any look-alike letters, without the dashes.
const spaced = (word: string) => word.split("").join("[\\s_.-]*")
const MARKER_WORDS = new RegExp(
  `(?<![a-z0-9])(?:(${spaced("begin")})|${spaced("end")})[\\s_.-]*(?:(?:of|the)[\\s_.-]*)?${spaced("user")}` +
    `[\\s_.-]*${spaced("input")}(?![a-z0-9])`
)
// What frames the words of a marker: `---`, `===`, `###`, `***`, `<`…`>`. Not `[`…`]`: the neutral tokens are
// bracketed, and neutralising them again must change nothing.
const DECORATION = /[-=#*~_<>|+]/
const isSpace = (c: string | undefined) => c !== undefined && /\s/.test(c)
/** How far decoration around the words is looked for. */
const DECORATION_REACH = 200

/** Whether `text[start, end)` has only blanks around it on its line. */
const aloneOnLine = (text: string, start: number, end: number): boolean => {
  let i = start
  while (i > 0 && (text[i - 1] === " " || text[i - 1] === "\t")) i--
  let j = end
  while (j < text.length && (text[j] === " " || text[j] === "\t" || text[j] === "\r")) j++
  return (i === 0 || text[i - 1] === "\n") && (j === text.length || text[j] === "\n")
}

/**
 * The forged markers in a folded text: the marker's words with decoration (dashes and the like) before or
 * after them on either side (also on the lines around), or alone on their line. The range covers the
 * decoration, so `--- END USER INPUT ---` in any disguise becomes one neutral token.
 */
const forgedMarkers = (folded: string): ReadonlyArray<Lookalike.Replacement> => {
  const out: Array<Lookalike.Replacement> = []
  let previous = 0
  for (const m of folded.matchAll(new RegExp(MARKER_WORDS, "g"))) {
    const start = m.index
    const end = m.index + m[0].length
    const before = decorationBefore(folded, start, previous)
    const after = decorationAfter(folded, end)
    if (before === start && after === end && !aloneOnLine(folded, start, end)) continue
    const token = m[1] !== undefined ? NEUTRALIZED_BEGIN : NEUTRALIZED_END
    out.push({ start: before, end: after, text: () => token })
    previous = after
  }
  return out
}

const isDecorationOrSpace = (c: string) => DECORATION.test(c) || isSpace(c)

/**
 * Where the decoration before `start` begins (`start` when there is none): decoration and blanks, also on the
 * lines above when they hold nothing else, never before `floor`.
 */
const decorationBefore = (text: string, start: number, floor: number): number => {
  let i = start
  while (i > floor && start - i < DECORATION_REACH && isDecorationOrSpace(text[i - 1]!)) i--
  // A line that holds more than decoration keeps its part: take from the line break after it.
  if (i > floor && start - i < DECORATION_REACH) {
    const lineBreak = text.slice(i, start).indexOf("\n")
    if (lineBreak !== -1) i += lineBreak + 1
  }
  while (i < start && isSpace(text[i])) i++
  return i
}

/** Where the decoration after `end` ends (`end` when there is none); see `decorationBefore`. */
const decorationAfter = (text: string, end: number): number => {
  let j = end
  while (j < text.length && j - end < DECORATION_REACH && isDecorationOrSpace(text[j]!)) j++
  if (j < text.length && j - end < DECORATION_REACH) {
    const lineBreak = text.slice(end, j).lastIndexOf("\n")
    if (lineBreak !== -1) j = end + lineBreak
  }
  while (j > end && isSpace(text[j - 1])) j--
  return j
}

/**
 * Replaces every boundary marker in `text`, forged in any disguise (case, spacing, line breaks, `\r`, zero-width
 * characters, look-alike letters or dashes), by its inert look-alike (`[BEGIN USER INPUT]`, `[END USER INPUT]`).
 */
export const neutralizeBoundaries = (text: string): string => Lookalike.replaceFolded(text, forgedMarkers)

const isBlank = (text: string) => text.trim() === ""

/**
 * Makes untrusted text inert as framework structure: blocked tags are HTML-escaped (`<system>` →
 * `&lt;system&gt;`; `<div>` is left alone) and user-input boundary markers are replaced by look-alikes, in any
 * disguise. No framing. Blank text is returned as is. Used for user input and web results.
 */
export const neutralizeUntrustedTags = (text: string): string =>
  isBlank(text) ? text : neutralizeBoundaries(escapeBlockedTags(text))

/**
 * Sanitises the user's text and frames it between the boundary markers. Idempotent: text already framed
 * exactly (starts with the begin marker, ends with the end marker) keeps its frame, but markers inside it
 * are still neutralised, so a forged outer frame cannot smuggle inner ones. Blank text is returned as is.
 */
export const frameUntrustedText = (text: string): string => {
  if (isBlank(text)) return text
  const escaped = escapeBlockedTags(text)
  if (escaped.startsWith(BEGIN_USER_INPUT) && escaped.endsWith(END_USER_INPUT) &&
    escaped.length >= BEGIN_USER_INPUT.length + END_USER_INPUT.length)
  {
    const inner = escaped.slice(BEGIN_USER_INPUT.length, escaped.length - END_USER_INPUT.length)
    const neutral = neutralizeBoundaries(inner)
    return neutral === inner ? escaped : `${BEGIN_USER_INPUT}${neutral}${END_USER_INPUT}`
  }
  return `${BEGIN_USER_INPUT}\n${neutralizeBoundaries(escaped)}\n${END_USER_INPUT}`
}

/**
 * Whether a message is something the user typed: a human message that is not a summary and not hidden,
 * except that a hidden clarification answer carrying a valid `human_input_response` (as DeerFlow reads it:
 * non-blank source, request id and value, an option's id) counts as typed.
 */
export const isGenuineUserMessage = (message: Message): message is HumanMessage => {
  if (message.type !== "human" || message.name === "summary") return false
  const kwargs = message.additional_kwargs
  if (kwargs === undefined || kwargs.hide_from_ui !== true) return true
  return M.isHumanInputResponse(kwargs.human_input_response)
}

/**
 * A client's human message the middleware leaves as it is, because it cannot tell it from the harness's own (one
 * marked hidden, `hide_from_ui`, as DeerFlow's app sends a quote's context; one named `summary`), with its text
 * neutralised as an earlier typed message's is: the gateway applies it where such a message comes in, so its forged
 * tags and input markers never reach the model as the harness's. Other messages: the same object.
 */
export const neutralizeHiddenClientMessage = (message: Message): Message => {
  // (widened: the guard's false branch would rule out every human message)
  if (message.type !== "human" || isGenuineUserMessage(message as Message)) return message
  const content = message.content
  if (typeof content === "string") {
    const neutral = neutralizeUntrustedTags(content)
    return neutral === content ? message : { ...message, content: neutral }
  }
  let changed = false
  const blocks = content.map((block) => {
    if (!isTextBlock(block)) return block
    const neutral = neutralizeUntrustedTags(block.text)
    if (neutral === block.text) return block
    changed = true
    return { ...block, text: neutral }
  })
  return changed ? { ...message, content: blocks } : message
}

const isTextBlock = (block: ContentBlock): block is M.TextBlock =>
  block.type === "text" && typeof block.text === "string" && block.text !== ""

const withContent = (message: HumanMessage, content: M.Content, kwargs: M.JsonObject): HumanMessage => ({
  ...message,
  content,
  additional_kwargs: kwargs
})

/** Replaces the text blocks by one merged block where the first one was; other blocks keep their order. */
const rebuildBlocks = (blocks: ReadonlyArray<ContentBlock>, text: string): ReadonlyArray<ContentBlock> => {
  let first = -1
  let last = -1
  for (let i = 0; i < blocks.length; i++) {
    if (isTextBlock(blocks[i]!)) {
      if (first < 0) first = i
      last = i
    }
  }
  if (first < 0) return blocks
  const out: Array<ContentBlock> = blocks.slice(0, first)
  out.push({ type: "text", text })
  for (let i = first + 1; i <= last; i++) if (!isTextBlock(blocks[i]!)) out.push(blocks[i]!)
  for (let i = last + 1; i < blocks.length; i++) out.push(blocks[i]!)
  return out
}

/**
 * The sanitised form of one user message, or `undefined` when it needs no change. With
 * `original_user_content` (set by Uploads), only that suffix is framed and the `<current_uploads>` block
 * before it stays verbatim; an empty original (upload without text) changes nothing. With `frame` false
 * (an earlier message), the text is neutralised the same way but not framed.
 */
export const sanitizeUserMessage = (message: HumanMessage, frame = true): HumanMessage | undefined => {
  const wrap = frame ? frameUntrustedText : neutralizeUntrustedTags
  const content = message.content
  let text: string
  if (typeof content === "string") text = content
  else {
    text = ""
    let any = false
    for (const block of content) {
      if (!isTextBlock(block)) continue
      text = any ? `${text}\n${block.text}` : block.text
      any = true
    }
    if (!any) return undefined
  }
  const kwargs = message.additional_kwargs ?? {}
  const original = kwargs[ORIGINAL_USER_CONTENT]
  let processed: string
  if (typeof original === "string" && original !== "") {
    const framed = wrap(original)
    if (framed === original) processed = text
    else {
      const at = text.lastIndexOf(original)
      if (at >= 0) processed = text.slice(0, at) + framed
      else if (Array.isArray(content) && content.length >= 2) {
        // The prepended uploads block cannot be told apart by text: keep block 0 (the server's block)
        // and neutralise the user's blocks one by one, without framing.
        let changed = false
        const blocks: Array<ContentBlock> = [content[0]!]
        for (let i = 1; i < content.length; i++) {
          const block = content[i]!
          if (block.type === "text" && typeof block.text === "string") {
            const neutral = neutralizeUntrustedTags(block.text)
            if (neutral !== block.text) {
              changed = true
              blocks.push({ ...block, text: neutral } as ContentBlock)
              continue
            }
          }
          blocks.push(block)
        }
        return changed ? withContent(message, blocks, kwargs) : undefined
      } else processed = wrap(text)
    }
  } else if (typeof original === "string") processed = text
  else processed = wrap(text)
  if (processed === text) return undefined
  const next = typeof content === "string" ? processed : rebuildBlocks(content, processed)
  return withContent(
    message,
    next,
    typeof original === "string" ? kwargs : { ...kwargs, [ORIGINAL_USER_CONTENT]: M.contentText(content) }
  )
}

/**
 * Sanitised messages by message object. State messages are immutable and replaced by new objects when they
 * change, so a result keyed by the message object stays valid for the whole thread: with a cache kept by the
 * middleware (one per agent), the regexes run once per user message, not once per call.
 */
export type Cache = WeakMap<Message, HumanMessage | null>

const sanitizedOf = (message: HumanMessage, cache: Cache, frame: boolean): HumanMessage | undefined => {
  const hit = cache.get(message)
  if (hit !== undefined) return hit ?? undefined
  const out = sanitizeUserMessage(message, frame)
  cache.set(message, out ?? null)
  return out
}

/** What the middleware keeps for the earlier user messages: their neutralised forms, and a pass memo. */
export interface Earlier {
  readonly cache: Cache
  readonly memo?: Incremental.Memo<ReadonlyArray<Message>> | undefined
}

/**
 * The request with its last genuine user message sanitised and framed, and the earlier genuine user messages
 * neutralised without a frame (so a marker or tag forged in an earlier turn is inert in later requests too);
 * the same object when nothing changes. With memos (kept by the middleware), only the new messages are read
 * (see `Incremental`).
 */
export const sanitizeRequest = (
  request: ModelRequest,
  cache: Cache = new WeakMap(),
  memo?: Incremental.Memo<number>,
  earlier: Earlier = { cache: new WeakMap() }
): ModelRequest => {
  const messages = request.messages
  const i = Incremental.lastIndexOf(messages, isGenuineUserMessage, memo)
  if (i < 0) return request
  const neutralized = Incremental.mapMessages(
    messages,
    (m) => isGenuineUserMessage(m) ? sanitizedOf(m, earlier.cache, false) ?? m : m,
    earlier.memo
  )
  const sanitized = sanitizedOf(messages[i] as HumanMessage, cache, true)
  if (sanitized === undefined && neutralized === messages) return request
  const next = neutralized.slice()
  next[i] = sanitized ?? messages[i]!
  return { ...request, messages: next }
}

/** InputSanitization: no options; needs nothing from context. Keeps its caches for the agent's life. */
export const layer = (): Middleware.Middleware =>
  Layer.unwrapEffect(Effect.sync(() => {
    const cache: Cache = new WeakMap()
    const memo = Incremental.makeMemo<number>()
    const earlier: Earlier = { cache: new WeakMap(), memo: Incremental.makeMemo() }
    return Middleware.make({ modelHooks: { before: (request) => sanitized(request, cache, memo, earlier) } })
  }))

const sanitized = (
  request: ModelRequest,
  cache: Cache,
  memo: Incremental.Memo<number>,
  earlier: Earlier
): Middleware.Now<ModelRequest> => {
  try {
    return sanitizeRequest(request, cache, memo, earlier)
  } catch (error) {
    const warned = Effect.logWarning("InputSanitization failed; the request goes to the model unchanged", error)
    return Effect.as(warned, request)
  }
}

/** Its chain entry: outermost, so nothing reads the run's input before it is sanitised. */
export const entry = () =>
  Chain.entry("InputSanitization", () => layer(), [
    {
      first: true,
      reason: "the run's input (the user's words, a subagent's task prompt) is sanitised before any other wrapper " +
        "or the model reads it"
    }
  ])
