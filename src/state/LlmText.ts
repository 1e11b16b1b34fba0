/**
 * A model's answer made ready to be read as data, as DeerFlow's `utils/llm_text` does for its one-shot calls
 * (follow-up questions, a polished draft): the `<think>` blocks reasoning models write into their text removed,
 * and one markdown code fence around the whole answer unwrapped. Pure.
 */

// an opening `<think>` tag, attributes allowed (`<think class="a">`), in any case
const OPEN_THINK = /<think\b[^>]*>/i

// Python's str.splitlines, as DeerFlow splits the answer into lines
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/

/**
 * The text without its complete `<think>…</think>` blocks (any case, attributes on the opening tag, blanks before
 * the closing `>`), trimmed. With `truncateUnclosed` (the default), an opening tag left without its close is a
 * model cut off mid-thought: the text ends there. Without it (a rewritten draft may mention the tag), it stays.
 */
export const withoutThinkBlocks = (text: string, truncateUnclosed = true): string => {
  // (a new regex per call: a module-level global one would keep its lastIndex)
  let out = text.replace(/<think\b[^>]*>[\s\S]*?<\/think\s*>/gi, "")
  if (truncateUnclosed) {
    const open = OPEN_THINK.exec(out)
    if (open !== null) out = out.slice(0, open.index)
  }
  return out.trim()
}

/**
 * The trimmed text, or its body when the whole of it is one markdown code fence: a first line and a last line
 * that start with three backticks (a language after them allowed), with at least one line between them.
 */
export const withoutCodeFence = (text: string): string => {
  const trimmed = text.trim()
  if (!trimmed.startsWith("```")) return trimmed
  const lines = trimmed.split(LINE_BREAK)
  if (lines.length >= 3 && lines[0]!.startsWith("```") && lines.at(-1)!.startsWith("```")) {
    return lines.slice(1, -1).join("\n").trim()
  }
  return trimmed
}
