/**
 * The server-sent events of a streamed completion, read from the response body as the `openai` SDK reads them
 * (its `Stream.fromSSEResponse`): lines split at `\n`, `\r\n` or `\r`; `event:` and `data:` fields (one space
 * after the colon dropped, data lines joined by `\n`), comments and other fields ignored, an event dispatched at
 * an empty line (an event the body ends in the middle of is dropped). The adapter reads every event of a body
 * chunk at once (one wake-up of its fiber per read, not one per event and generator). Pure. A line or an event
 * longer than `MAX_EVENT_CHARS` stops the parser (`tooLong`): a server that never ends a line while it keeps sending
 * (so the adapter's idle timeout never comes) had the whole body held, and scanned again with every read.
 */

/** The longest event (a line, or an event's data lines together) a parser reads: twice a whole answer's bound. */
export const MAX_EVENT_CHARS = 8 * 1024 * 1024

/** One event: its `event` field (null when absent) and its data. */
export interface SseEvent {
  readonly event: string | null
  readonly data: string
}

/**
 * A parser of one body: `push` the body's text as it comes, `end` at its end; each returns the events completed. A
 * line, or an event's data lines together, longer than `maxEventChars` stops it: `tooLong` says so, and it reads
 * nothing more. Each piece is scanned once (a line split across reads is joined when its break arrives).
 */
export const makeParser = (maxEventChars: number = MAX_EVENT_CHARS) => {
  // the start of a line whose break has not arrived yet, in pieces
  let pending: Array<string> = []
  let pendingChars = 0
  let event: string | null = null
  let data: Array<string> = []
  let dataChars = 0
  let over = false
  const line = (text: string, out: Array<SseEvent>) => {
    if (text === "") {
      if (!event && data.length === 0) return
      out.push({ event, data: data.join("\n") })
      event = null
      data = []
      dataChars = 0
      return
    }
    if (text.startsWith(":")) return
    const colon = text.indexOf(":")
    const field = colon < 0 ? text : text.slice(0, colon)
    let value = colon < 0 ? "" : text.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "event") event = value
    else if (field === "data") {
      dataChars += value.length + 1
      if (dataChars > maxEventChars) over = true
      data.push(value)
    }
  }
  /** The lines of `text` completed (the pending start joined to the first), the rest kept pending. */
  const lines = (text: string, out: Array<SseEvent>) => {
    let start = 0
    for (let i = 0; i < text.length && !over; i++) {
      const c = text.charCodeAt(i)
      if (c !== 10 && c !== 13) continue
      const piece = text.slice(start, i)
      if (pending.length === 0) line(piece, out)
      else {
        pending.push(piece)
        line(pending.join(""), out)
        pending = []
        pendingChars = 0
      }
      // (`\r\n` is one break)
      if (c === 13 && text.charCodeAt(i + 1) === 10) i++
      start = i + 1
    }
    if (over || start >= text.length) return
    const rest = text.slice(start)
    pendingChars += rest.length
    if (pendingChars > maxEventChars) over = true
    else pending.push(rest)
  }
  // a `\r` at the end of a piece may be the start of a `\r\n` split across reads
  let heldCr = false
  return {
    push: (text: string): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      if (over) return out
      let all = heldCr ? "\r" + text : text
      heldCr = all.endsWith("\r")
      if (heldCr) all = all.slice(0, -1)
      lines(all, out)
      return over ? [] : out
    },
    end: (): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      // (a last line without its break only sets a field of an event that is never dispatched)
      if (heldCr && !over) lines("\n", out)
      pending = []
      pendingChars = 0
      heldCr = false
      return over ? [] : out
    },
    /** Whether a line or an event passed the bound (the body is then not to be read further). */
    tooLong: (): boolean => over
  }
}
