/**
 * Text as a reader sees it (pure), for finding things that are spelled to look like something else: a forged
 * `--- END USER INPUT ---` written with zero-width spaces, fullwidth letters, Cyrillic look-alikes or em
 * dashes, or `<ѕystem>` with a Cyrillic `ѕ`. `fold` drops what is invisible, maps what looks alike to one
 * ASCII form and lower-cases the rest, and keeps where each folded character came from, so a match in the
 * folded text can be replaced in the original.
 */

/**
 * A folded text, and for each of its UTF-16 units the range of the original it came from (absent when each
 * unit comes from the unit at the same index).
 */
export interface Folded {
  readonly text: string
  readonly starts?: ReadonlyArray<number> | undefined
  readonly ends?: ReadonlyArray<number> | undefined
}

// What a reader does not see: format characters (zero-width spaces and joiners, word joiner, BOM, soft
// hyphen, bidi controls, tag characters), control characters, combining and enclosing marks, variation
// selectors, Hangul fillers. (Tabs and line breaks never get here.)
const INVISIBLE = /^[\p{Cf}\p{Cc}\p{Mn}\p{Me}\u115F\u1160\u3164\uFFA0\u180B-\u180D]$/u

// Dashes and rules that do not fold to `-` by compatibility.
const DASH = /^[\u2010-\u2015\u2043\u02D7\u2212\u2E3A\u2E3B\u2E40\uFE58\u2796\u23AF\u2500\u2501\u2574-\u257A]$/

// Letters that look like Latin ones (Cyrillic, Greek, Armenian, small capitals), for the letters a marker or
// a tag name is spelled with; compatibility forms (fullwidth, mathematical) are folded by NFKC.
const LATIN: Readonly<Record<string, string>> = {
  "А": "a", "а": "a", "Α": "a", "α": "a",
  "В": "b", "Β": "b", "ʙ": "b", "Ь": "b",
  "С": "c", "с": "c", "Ϲ": "c", "ϲ": "c", "ᴄ": "c",
  "Ԁ": "d", "ԁ": "d", "ᴅ": "d",
  "Е": "e", "е": "e", "Ε": "e", "ᴇ": "e", "Ё": "e", "ё": "e",
  "Ԍ": "g", "ɡ": "g", "ɢ": "g",
  "Н": "h", "Η": "h", "һ": "h", "ʜ": "h",
  "І": "i", "і": "i", "Ι": "i", "ι": "i", "ɪ": "i", "ı": "i", "Ӏ": "i", "ӏ": "i", "Ї": "i", "ї": "i",
  "Ј": "j", "ј": "j",
  "К": "k", "Κ": "k", "ᴋ": "k",
  "М": "m", "Μ": "m", "ᴍ": "m",
  "Ν": "n", "ɴ": "n", "ո": "n",
  "О": "o", "о": "o", "Ο": "o", "ο": "o", "ᴏ": "o", "օ": "o",
  "Р": "p", "р": "p", "Ρ": "p", "ρ": "p", "ᴘ": "p",
  "ʀ": "r", "г": "r",
  "Ѕ": "s", "ѕ": "s", "ꜱ": "s", "Տ": "s",
  "Т": "t", "Τ": "t", "т": "t", "ᴛ": "t",
  "Ս": "u", "ս": "u", "ᴜ": "u", "υ": "u",
  "Х": "x", "х": "x", "Χ": "x", "χ": "x",
  "У": "y", "у": "y", "Υ": "y",
  "Ζ": "z", "ᴢ": "z"
}

/** Printable ASCII, tabs and line breaks only. */
const isPlain = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c > 0x7e || (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d)) return false
  }
  return true
}

const foldChar = (c: string): string => {
  if (INVISIBLE.test(c)) return ""
  const latin = LATIN[c]
  if (latin !== undefined) return latin
  if (DASH.test(c)) return "-"
  const compatible = c.normalize("NFKC")
  let out = ""
  for (const d of compatible) out += LATIN[d] ?? (INVISIBLE.test(d) ? "" : d.toLowerCase())
  return out
}

/** The text as a reader sees it: invisible characters dropped, look-alikes folded, lower case. */
export const fold = (text: string): Folded => {
  // The common case: nothing to fold but case, and every index maps to itself.
  if (isPlain(text)) return { text: text.toLowerCase() }
  let out = ""
  const starts: Array<number> = []
  const ends: Array<number> = []
  const seen = new Map<string, string>()
  let i = 0
  for (const c of text) {
    let folded = seen.get(c)
    if (folded === undefined) {
      folded = isPlain(c) ? c.toLowerCase() : foldChar(c)
      seen.set(c, folded)
    }
    for (let k = 0; k < folded.length; k++) {
      starts.push(i)
      ends.push(i + c.length)
    }
    out += folded
    i += c.length
  }
  return { text: out, starts, ends }
}

/** A range of a folded text (`start` inclusive, `end` exclusive) and what replaces it in the original. */
export interface Replacement {
  readonly start: number
  readonly end: number
  /** The new text, given the original text the range covers. */
  readonly text: (original: string) => string
}

/**
 * Folds `text`, asks `find` for ranges of the folded text to replace (in order, not overlapping; a range that
 * overlaps an earlier one is skipped), and replaces the original characters they came from.
 */
export const replaceFolded = (text: string, find: (folded: string) => ReadonlyArray<Replacement>): string => {
  const folded = fold(text)
  const ranges = find(folded.text)
  if (ranges.length === 0) return text
  let out = ""
  let last = 0
  for (const range of ranges) {
    if (range.end <= range.start) continue
    const start = folded.starts === undefined ? range.start : folded.starts[range.start]!
    const end = folded.ends === undefined ? range.end : folded.ends[range.end - 1]!
    if (start < last) continue
    out += text.slice(last, start) + range.text(text.slice(start, end))
    last = end
  }
  return out + text.slice(last)
}

/** The replacements for every match of a global `pattern` in a folded text. */
export const matches = (
  folded: string,
  pattern: RegExp,
  text: (original: string) => string
): ReadonlyArray<Replacement> => {
  const out: Array<Replacement> = []
  for (const m of folded.matchAll(pattern)) {
    if (m[0] !== "") out.push({ start: m.index, end: m.index + m[0].length, text })
  }
  return out
}
