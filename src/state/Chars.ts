/**
 * Text counted in characters as DeerFlow's Python counts them: code points, so an emoji is one character and a
 * cut never leaves half of it (a lone surrogate, which a provider refuses). Strings without surrogate pairs, the
 * common case, are used as they are.
 */

/**
 * A text as a sequence of characters (code points, as DeerFlow's Python strings count them): the string itself
 * when it holds no surrogate pair (each code unit is a character then), else its code points.
 */
export type Chars = string | ReadonlyArray<string>

const SURROGATE_PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/

/** The characters of a text (see `Chars`). */
export const charsOf = (text: string): Chars => SURROGATE_PAIR.test(text) ? Array.from(text) : text

/** The number of characters (code points) of a text: an emoji counts once, as in DeerFlow's `len`. */
export const charLength = (text: string): number => charsOf(text).length

/** `chars[start, end)` as a string. */
export const joinChars = (chars: Chars, start: number, end?: number): string => {
  const part = chars.slice(start, end)
  return typeof part === "string" ? part : part.join("")
}

/** The first `max` characters (code points, as Python's slicing counts them: never half an emoji). */
export const headChars = (text: string, max: number): string => {
  if (text.length <= max) return text
  const chars = charsOf(text)
  return chars.length <= max ? text : joinChars(chars, 0, Math.max(0, max))
}

/**
 * A text of more than `max` characters cut to its first `max - 1` and "…" (never half an emoji); a text of at most
 * `max` characters is kept whole, however many code units its emoji take.
 */
export const clipChars = (text: string, max: number): string => {
  if (text.length <= max) return text
  const chars = charsOf(text)
  return chars.length <= max ? text : `${joinChars(chars, 0, Math.max(0, max - 1))}…`
}

/**
 * A name a caller sent, as an error repeats it: at most `max` characters (`clipChars`), so a made-up name of a
 * megabyte costs its sender a line, not a megabyte echoed back.
 */
export const echoed = (text: string, max: number = 200): string => clipChars(text, max)

const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff
const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff

/**
 * A cut at code unit `index` moved off the middle of a surrogate pair: to the pair's start (`"back"`, for the end
 * of a head) or past its end (`"forward"`, for the start of a tail), so neither side keeps half an emoji.
 */
export const cutAt = (text: string, index: number, direction: "back" | "forward"): number =>
  index > 0 && index < text.length && isHigh(text.charCodeAt(index - 1)) && isLow(text.charCodeAt(index))
    ? (direction === "back" ? index - 1 : index + 1)
    : index
