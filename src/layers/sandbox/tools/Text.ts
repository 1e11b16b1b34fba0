/** Pure text helpers of the file tools: truncation, line ranges, literal replacement, result caps, paths. */
import { charsOf, joinChars } from "../../../state/Chars.js"

/**
 * Head-truncates to `max` characters (code points, as DeerFlow counts them; 0 = unlimited) with SPEC's marker;
 * the result never exceeds `max` and never ends in half an emoji.
 */
export const headTruncate = (text: string, max: number, hint: string): string => {
  if (max <= 0 || text.length <= max) return text
  const chars = charsOf(text)
  const total = chars.length
  if (total <= max) return text
  const marker = (kept: number) => `\n... [truncated: showing first ${kept} of ${total} chars. ${hint}] ...`
  const kept = Math.max(0, max - marker(total).length)
  if (kept === 0) return joinChars(chars, 0, max)
  return joinChars(chars, 0, kept) + marker(kept)
}

/** The effective result cap: the requested one (≤0 or absent → default), clamped to [1, upper]. */
export const clampMax = (requested: number | undefined, fallback: number, upper: number): number => {
  const value = requested === undefined || requested <= 0 ? fallback : Math.floor(requested)
  return Math.min(Math.max(value, 1), upper)
}

// A line ends at `\n`, `\r\n` or a lone `\r`, as in Python's universal newlines, which DeerFlow's read_file uses.
const LINE_END = /\r\n|\r|\n/

/**
 * A text with its line ends as `\n` (a CRLF file reads as DeerFlow's read_file shows it: Python's universal
 * newlines), so what the model reads is what it can quote back to `str_replace`.
 */
export const universalNewlines = (text: string): string => text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text

/** Why a line range is wrong whatever the file holds (DeerFlow checks it before reading), if it is. */
export const rangeError = (start: number | undefined, end: number | undefined): string | undefined => {
  if (start !== undefined && start < 1) return "start_line must be >= 1"
  if (end !== undefined && end < 1) return "end_line must be >= 1"
  if (end !== undefined && (start ?? 1) > end) return "start_line > end_line — no lines in range"
  return undefined
}

/**
 * Lines `start..end` (1-based, inclusive) of a text, or why that range is wrong, in DeerFlow's words
 * (`read_file_tool`: `start_line must be >= 1`, `end_line must be >= 1`, `start_line > end_line — no lines in
 * range`, `start_line exceeds file length`), which `read_file` answers in parentheses, as DeerFlow's does.
 */
export const selectLines = (
  content: string,
  start: number | undefined,
  end: number | undefined
): { readonly text: string } | { readonly error: string } => {
  const wrong = rangeError(start, end)
  if (wrong !== undefined) return { error: wrong }
  const lines = content.split(LINE_END)
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  const first = start ?? 1
  if (first > lines.length) {
    return lines.length === 0 && first === 1 ? { text: "" } : { error: "start_line exceeds file length" }
  }
  return { text: lines.slice(first - 1, Math.min(end ?? lines.length, lines.length)).join("\n") }
}

/** How many times `needle` occurs in `text` (non-overlapping). */
export const countOccurrences = (text: string, needle: string): number => {
  if (needle === "") return 0
  let count = 0
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count++
  return count
}

/**
 * The `old_str` / `new_str` of an edit as the file spells its line ends: a file with CRLF line ends, which
 * `read_file` shows with `\n` (`universalNewlines`), is edited with the text's `\n` read as `\r\n` when the text as
 * given is not found, so the edit matches what the model read and the file keeps its line ends.
 */
export const asFileLineEnds = (
  content: string,
  oldStr: string,
  newStr: string
): { readonly oldStr: string; readonly newStr: string } => {
  if (content.includes(oldStr) || !content.includes("\r\n") || !oldStr.includes("\n") || oldStr.includes("\r")) {
    return { oldStr, newStr }
  }
  const crlf = (text: string) => text.replace(/\r?\n/g, "\r\n")
  return { oldStr: crlf(oldStr), newStr: crlf(newStr) }
}

/** Replaces literally (no `$` patterns): the first occurrence, or all of them. */
export const replaceLiteral = (text: string, needle: string, replacement: string, all: boolean): string => {
  if (all) return text.split(needle).join(replacement)
  const at = text.indexOf(needle)
  return at === -1 ? text : text.slice(0, at) + replacement + text.slice(at + needle.length)
}

/** A virtual path with duplicate slashes and `.` segments removed (call after the sandbox has accepted it). */
export const normalizeVirtual = (path: string): string =>
  `/${path.split("/").filter((segment) => segment !== "" && segment !== ".").join("/")}`

/** Whether a virtual path is `root` or below it. */
export const under = (path: string, root: string) => path === root || path.startsWith(`${root}/`)
