/**
 * The bound on one message from an MCP server, applied as its bytes arrive, before anything is buffered whole or
 * parsed: a stdio line (`LineBuffer`, in place of the SDK's read buffer, which holds a line until its end), an HTTP
 * response body and one event of an event stream (`boundedFetch`, under the SDK's streamable HTTP and SSE
 * transports). Past the bound the message is dropped as it streams (a stdio line's later bytes are skipped, an HTTP
 * body is cancelled, which closes its connection) and `Limit.onOversize` is told once, naming the server and the
 * limit; the transport then ends the connection (see `Transport.makeTransport`).
 */
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js"

/** The default bound on one message: 16 MiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

/** A bound on what one server sends, and who is told when a message goes past it. */
export interface Limit {
  readonly server: string
  readonly bytes: number
  readonly onOversize: (message: string) => void
}

/** A byte count as people read it: `16 MiB`, `512 KiB`, `900 bytes`. */
export const sizeText = (bytes: number): string =>
  bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0
    ? `${bytes / (1024 * 1024)} MiB`
    : bytes >= 1024 && bytes % 1024 === 0
    ? `${bytes / 1024} KiB`
    : `${bytes} bytes`

/** What a call failed by a message over the bound is told. */
export const oversizeMessage = (limit: Limit, what: string): string =>
  `MCP server '${limit.server}' sent ${what} over the ${sizeText(limit.bytes)} limit on one message; it was ` +
  "dropped unread and the connection closed (the server is started again on the next call)"

/**
 * The SDK's stdio read buffer (`append`, `readMessage`, `clear`), bounded: a line longer than `limit.bytes` is not
 * accumulated; its bytes are skipped up to its end, and `limit.onOversize` is told when it crosses the bound.
 */
export class LineBuffer {
  private pending: Array<Buffer> = []
  private size = 0
  private dropping = false
  private readonly lines: Array<Buffer> = []

  constructor(private readonly limit: Limit, private readonly parse: (line: string) => unknown) {}

  append(chunk: Buffer): void {
    let start = 0
    while (start < chunk.length) {
      const end = chunk.indexOf(10, start)
      const piece = end === -1 ? chunk.subarray(start) : chunk.subarray(start, end)
      if (!this.dropping) {
        if (this.size + piece.length > this.limit.bytes) {
          this.dropping = true
          this.pending = []
          this.size = 0
          this.limit.onOversize(oversizeMessage(this.limit, "a line"))
        } else {
          this.pending.push(piece)
          this.size += piece.length
        }
      }
      if (end === -1) return
      if (!this.dropping) this.lines.push(Buffer.concat(this.pending))
      this.pending = []
      this.size = 0
      this.dropping = false
      start = end + 1
    }
  }

  readMessage(): unknown {
    const line = this.lines.shift()
    return line === undefined ? null : this.parse(line.toString("utf8").replace(/\r$/, ""))
  }

  clear(): void {
    this.pending = []
    this.size = 0
    this.dropping = false
    this.lines.length = 0
  }
}

/** A stream of bytes that errors once more than `bytes` have passed (a response body). */
const bodyCounter = (bytes: number, over: () => Error) => {
  let seen = 0
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      seen += chunk.length
      if (seen > bytes) controller.error(over())
      else controller.enqueue(chunk)
    }
  })
}

/**
 * A stream of event-stream bytes that errors once one event (the bytes between two blank lines) is longer than
 * `bytes`: the stream itself may go on for ever.
 */
const eventCounter = (bytes: number, over: () => Error) => {
  let event = 0
  let line = 0
  let afterCr = false
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      for (let i = 0; i < chunk.length; i++) {
        const byte = chunk[i]!
        if (byte === 10 && afterCr) {
          afterCr = false
          continue
        }
        afterCr = byte === 13
        if (byte === 10 || byte === 13) {
          if (line === 0) event = 0
          line = 0
          continue
        }
        line++
        if (++event > bytes) {
          controller.error(over())
          return
        }
      }
      controller.enqueue(chunk)
    }
  })
}

// statuses whose response has no body (a Response made with one throws)
const NULL_BODY: ReadonlySet<number> = new Set([101, 103, 204, 205, 304])

/**
 * `fetch` whose responses' bodies are bounded as they are read: a body (or, for `text/event-stream`, one event)
 * over `limit.bytes` errors the body, cancelling the rest (its connection closes), and `limit.onOversize` is told.
 * A body declaring a larger `Content-Length` fails at once, unread.
 */
export const boundedFetch = (inner: FetchLike, limit: Limit): FetchLike => async (input, init) => {
  const response = await inner(input, init)
  if (response.body === null || NULL_BODY.has(response.status)) return response
  const type = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase()
  const events = type === "text/event-stream"
  let told = false
  const over = () => {
    const message = oversizeMessage(limit, events ? "an event" : "a response body")
    if (!told) limit.onOversize(message)
    told = true
    return new Error(message)
  }
  const declared = Number(response.headers.get("content-length") ?? "")
  if (!events && Number.isFinite(declared) && declared > limit.bytes) {
    await response.body.cancel().catch(() => undefined)
    throw over()
  }
  const bounded = new Response(
    response.body.pipeThrough(events ? eventCounter(limit.bytes, over) : bodyCounter(limit.bytes, over)),
    { status: response.status, statusText: response.statusText, headers: response.headers }
  )
  // (the SDK reads where a response came from: a redirect is refused)
  Object.defineProperty(bounded, "url", { value: response.url })
  Object.defineProperty(bounded, "redirected", { value: response.redirected })
  return bounded
}
