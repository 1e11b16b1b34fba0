/**
 * The server-sent events of a streamed completion, read from the response body as the `openai` SDK reads them
 * (its `Stream.fromSSEResponse`): lines split at `\n`, `\r\n` or `\r`; `event:` and `data:` fields (one space
 * after the colon dropped, data lines joined by `\n`), comments and other fields ignored, an event dispatched at
 * an empty line (an event the body ends in the middle of is dropped). The adapter reads every event of a body
 * chunk at once (one wake-up of its fiber per read, not one per event and generator). Pure; no size bound of its
 * own (the adapter's idle timeout ends a server that never finishes a line).
 */

/** One event: its `event` field (null when absent) and its data. */
export interface SseEvent {
  readonly event: string | null
  readonly data: string
}

/** A parser of one body: `push` the body's text as it comes, `end` at its end; each returns the events completed. */
export const makeParser = () => {
  let rest = ""
  let event: string | null = null
  let data: Array<string> = []
  const line = (text: string, out: Array<SseEvent>) => {
    if (text === "") {
      if (!event && data.length === 0) return
      out.push({ event, data: data.join("\n") })
      event = null
      data = []
      return
    }
    if (text.startsWith(":")) return
    const colon = text.indexOf(":")
    const field = colon < 0 ? text : text.slice(0, colon)
    let value = colon < 0 ? "" : text.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "event") event = value
    else if (field === "data") data.push(value)
  }
  const lines = (text: string, out: Array<SseEvent>) => {
    let start = 0
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c !== 10 && c !== 13) continue
      line(text.slice(start, i), out)
      // (`\r\n` is one break)
      if (c === 13 && text.charCodeAt(i + 1) === 10) i++
      start = i + 1
    }
    return text.slice(start)
  }
  return {
    push: (text: string): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      let all = rest + text
      // a `\r` at the end may be the start of a `\r\n` split across reads
      const held = all.endsWith("\r")
      if (held) all = all.slice(0, -1)
      rest = lines(all, out) + (held ? "\r" : "")
      return out
    },
    end: (): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      // (a last line without its break only sets a field of an event that is never dispatched)
      if (rest.endsWith("\r")) lines(rest.slice(0, -1) + "\n", out)
      rest = ""
      return out
    }
  }
}
