/**
 * The output of a sandboxed command: collected with a bounded memory (its first and last parts), middle-truncated
 * for the model with SPEC's marker, and cut into lines for showing it as it comes.
 */
/** The marker put where the middle of a long output was cut (SPEC §7.2). */
export const middleMarker = (skipped: number): string => `\n... [middle truncated: ${skipped} chars skipped] ...\n`

/**
 * Middle-truncates from the first and last parts of a text of `total` chars (`head` holds at least the
 * first `max` chars, `tail` at least the last `max`): half head, half tail, marker between, at most `max`
 * chars in all. `max = 0` means unlimited.
 */
export const middleTruncateParts = (head: string, tail: string, total: number, max: number): string => {
  if (max <= 0 || total <= max) return head
  // The marker is sized for the worst case (every char skipped) so the result never exceeds `max`.
  const kept = Math.max(0, max - middleMarker(total).length)
  if (kept === 0) return head.slice(0, max)
  const headLength = Math.floor(kept / 2)
  const tailLength = kept - headLength
  return head.slice(0, headLength) + middleMarker(total - kept) + (tailLength > 0 ? tail.slice(-tailLength) : "")
}

/** Middle-truncates a text to `max` chars (0 = unlimited) with `middleMarker`. */
export const middleTruncate = (text: string, max: number): string =>
  middleTruncateParts(text, text, text.length, max)

/** What the runner keeps of an unlimited output (0 = unlimited still needs a bound on memory). */
export const UNLIMITED_OUTPUT_CHARS = 32 * 1024 * 1024

/** Keeps the first and the last `cap` chars of a stream of text, and counts the rest. */
export class OutputCollector {
  head = ""
  tail = ""
  total = 0
  constructor(readonly cap: number) {}
  push(chunk: string): void {
    if (chunk.length === 0) return
    this.total += chunk.length
    if (this.head.length < this.cap) this.head += chunk.slice(0, this.cap - this.head.length)
    this.tail = (this.tail + chunk).slice(-this.cap)
  }
  /** The collected text, masked, then middle-truncated to `max` (0 = unlimited, bounded by the cap). */
  render(max: number, mask: (text: string) => string = (text) => text): string {
    if (this.total <= this.cap) {
      const text = mask(this.head)
      return middleTruncate(text, max)
    }
    // Masking shortens host paths, so the parts are masked first and the total adjusted by what it removed.
    const head = mask(this.head)
    const tail = mask(this.tail)
    const total = this.total - (this.head.length - head.length) - (this.tail.length - tail.length)
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
