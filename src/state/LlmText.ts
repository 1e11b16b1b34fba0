/**
 * A model's answer made ready to be read as data, as DeerFlow's `utils/llm_text` does for its one-shot calls
 * (follow-up questions, a polished draft): the `<think>` blocks reasoning models write into their text removed,
 * and one markdown code fence around the whole answer unwrapped. Pure.
 */

// an opening `<think>` tag, attributes allowed (`<think class="a">`), in any case (no `<` inside: each attempt
// stops at the next tag, so a text of tags left open is read in linear time)
const OPEN_THINK = /<think\b[^<>]*>/i

/**
 * The text without each block from a match of `open` to the first match of `close` after it, and what each block
 * held (the patterns are regular expressions' sources, of `flags`). Linear in the text, where a lazy
 * `open[\s\S]*?close` expression looks for a close after every opening: a hostile answer of 50,000 unclosed
 * `<think>` tags (350 KB) held the event loop for ten seconds. A block left open (no close after it: none after a
 * later opening either) stays in the text.
 */
export const splitBlocks = (
  text: string,
  open: string,
  close: string,
  flags = ""
): { readonly text: string; readonly blocks: Array<string> } => {
  const opening = new RegExp(open, `g${flags}`)
  const closing = new RegExp(close, `g${flags}`)
  const blocks: Array<string> = []
  let out = ""
  let cursor = 0
  for (;;) {
    opening.lastIndex = cursor
    const start = opening.exec(text)
    if (start === null) break
    closing.lastIndex = start.index + start[0].length
    const end = closing.exec(text)
    if (end === null) break
    out += text.slice(cursor, start.index)
    blocks.push(text.slice(start.index + start[0].length, end.index))
    cursor = end.index + end[0].length
  }
  return cursor === 0 ? { text, blocks } : { text: out + text.slice(cursor), blocks }
}

// Python's str.splitlines, as DeerFlow splits the answer into lines
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/

/**
 * The text without its complete `<think>…</think>` blocks (any case, attributes on the opening tag, blanks before
 * the closing `>`), trimmed. With `truncateUnclosed` (the default), an opening tag left without its close is a
 * model cut off mid-thought: the text ends there. Without it (a rewritten draft may mention the tag), it stays.
 */
export const withoutThinkBlocks = (text: string, truncateUnclosed = true): string => {
  let out = splitBlocks(text, "<think\\b[^<>]*>", "<\\/think\\s*>", "i").text
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
