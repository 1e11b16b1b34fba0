/**
 * An event of a run's stream as the projection makes it and a run's buffer keeps it (see `Projection.ts`): its
 * SSE event name and data, the data perhaps kept as JSON text in parts.
 */

/** An event to frame (its id is given when it is buffered). */
export interface Out {
  readonly event: string
  readonly data: unknown
  /**
   * The data as JSON text in parts (a streamed chunk's, a `values` snapshot's), already redacted: a run's buffer
   * keeps the parts and joins them when the frame is read (see `Spliced`).
   */
  readonly spliced?: Spliced | undefined
}

/**
 * JSON text in three parts, `head + body + tail`, made so that a run's buffer holds what its frames share once:
 * the chunks of a streamed message share their head (the chunk's fields up to its content) and their tail (the
 * stream metadata), and each has its own body (its content); the `values` snapshots of a run share the text of
 * each message (the body, joined from the messages' texts without copying them). The buffer joins the parts when
 * a frame is read, so it holds a chunk's content instead of a whole frame of about 400 characters per token, and
 * a message's text once instead of once per snapshot. Made only of text the projector checked for secrets.
 */
export interface Spliced {
  readonly head: string
  readonly body: string
  readonly tail: string
}

/** An event kept in parts: its data is read back from its text only when asked for (the buffer reads the parts). */
export class SplicedOut implements Out {
  constructor(readonly event: string, readonly spliced: Spliced) {}
  get data(): unknown {
    return JSON.parse(this.spliced.head + this.spliced.body + this.spliced.tail)
  }
}
