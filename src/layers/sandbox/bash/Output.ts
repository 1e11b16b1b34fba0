/**
 * The output of a sandboxed command: collected with a bounded memory (its first and last parts), middle-truncated
 * for the model with SPEC's marker, and cut into lines for showing it as it comes.
 */
import { charLength, charsOf, joinChars } from "../../../state/Chars.js"

/** The marker put where the middle of a long output was cut (SPEC §7.2). */
export const middleMarker = (skipped: number): string => `\n... [middle truncated: ${skipped} chars skipped] ...\n`

/**
 * Middle-truncates from the first and last parts of a text of `total` characters (code points, as DeerFlow
 * counts them; `head` holds at least the first `max` code units, `tail` at least the last `max`): half head, half
 * tail, marker between, at most `max` characters in all, never half an emoji. `max = 0` means unlimited.
 */
export const middleTruncateParts = (head: string, tail: string, total: number, max: number): string => {
  if (max <= 0 || total <= max) return head
  // The marker is sized for the worst case (every char skipped) so the result never exceeds `max`.
  const kept = Math.max(0, max - middleMarker(total).length)
  const first = charsOf(head)
  if (kept === 0) return joinChars(first, 0, max)
  const headLength = Math.floor(kept / 2)
  const tailLength = kept - headLength
  const last = tail === head ? first : charsOf(tail)
  const end = tailLength > 0 ? joinChars(last, Math.max(0, last.length - tailLength)) : ""
  return joinChars(first, 0, headLength) + middleMarker(total - kept) + end
}

/** Middle-truncates a text to `max` characters (0 = unlimited) with `middleMarker`. */
export const middleTruncate = (text: string, max: number): string =>
  max <= 0 || text.length <= max ? text : middleTruncateParts(text, text, charLength(text), max)

/** What the runner keeps of an unlimited output, in characters (0 = unlimited still needs a bound on memory). */
export const UNLIMITED_OUTPUT_CHARS = 16 * 1024 * 1024

/**
 * Keeps the first and the last `2 * cap` code units of a stream of text (at least `cap` characters each, however
 * many emoji it holds), and counts the rest.
 */
export class OutputCollector {
  head = ""
  tail = ""
  /** Code units pushed. */
  total = 0
  /** Characters (code points) pushed: a chunk never ends in half a character (the decoders keep it back). */
  chars = 0
  private readonly keep: number
  constructor(readonly cap: number) {
    this.keep = 2 * cap
  }
  push(chunk: string): void {
    if (chunk.length === 0) return
    this.total += chunk.length
    this.chars += charLength(chunk)
    if (this.head.length < this.keep) this.head += chunk.slice(0, this.keep - this.head.length)
    this.tail = (this.tail + chunk).slice(-this.keep)
  }
  /** The collected text, masked, then middle-truncated to `max` (0 = unlimited, bounded by the cap). */
  render(max: number, mask: (text: string) => string = (text) => text): string {
    if (this.total <= this.keep) {
      const text = mask(this.head)
      return middleTruncate(text, max)
    }
    // Masking shortens host paths, so the parts are masked first and the total adjusted by what it removed.
    const head = mask(this.head)
    const tail = mask(this.tail)
    const total = this.chars - (charLength(this.head) - charLength(head)) - (charLength(this.tail) - charLength(tail))
    return middleTruncateParts(head, tail, total, max > 0 ? max : this.cap)
  }
}

/**
 * Cuts a stream of text into lines for showing it as it comes: `push` returns the complete lines (each with
 * its `\n` or `\r`) and, past `max` chars without a line end, the pending text; `end` returns what is left.
 * Lines are what masking needs: a host path is never split between two pieces, unless a line is that long.
 */
export class LineBuffer {
  private pending = ""
  constructor(readonly max = 4096) {}
  push(chunk: string): string {
    const text = this.pending + chunk
    const cut = Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r")) + 1
    if (text.length - cut > this.max) {
      this.pending = ""
      return text
    }
    this.pending = text.slice(cut)
    return text.slice(0, cut)
  }
  end(): string {
    const rest = this.pending
    this.pending = ""
    return rest
  }
}
