/**
 * A run's event buffer (SPEC §12.3): every event of a run gets an id (1, 2, ...) and is kept as a frame (its data
 * as JSON text) in a buffer bounded in events and in characters, the oldest going first; a reader asks for the
 * frames after a cursor (`Last-Event-ID`) and gets them, or the `gap` event when the cursor fell out of the
 * buffer (or is one the run never reached), and waits for the next append with a listener (no fiber, no
 * `Deferred` per event). A streamed chunk's frame and a `values` snapshot's keep their text in parts
 * (`Projection.Spliced`: what the frames of a run share, and each one's own), joined when the frame is read; the
 * chunks of one message after its first are kept as their own part only (a string per token, no object).
 */
import * as EventIds from "./EventIds.js"
import * as Projection from "./Projection.js"
import * as Protocol from "./Protocol.js"

/** What readers of a run's buffer see (the streams of `RunStream` follow a run through it). */
export interface Reader {
  /** Whether the run's last event (`end`) is in the buffer. */
  readonly finished: () => boolean
  /**
   * The buffered frames with an id greater than `cursor`, or the gap when `cursor` is older than the buffer (0: from
   * the first kept frame). With `requested`, the last event a subscriber got (0: none), `cursor` is a place it
   * holds: one before the kept frames is a gap naming `requested`, at 0 too (it fell behind, as DeerFlow's).
   */
  readonly after: (
    cursor: number,
    requested?: number
  ) => { readonly frames: ReadonlyArray<Protocol.Frame>; readonly gap?: Protocol.Frame }
  /** The place a subscriber without a cursor takes now: just before the first kept frame. */
  readonly origin: () => number
  /** How many times frames were appended so far (compare before and after a wait). */
  readonly changes: () => number
  /** Calls `listener` once, at the next append; returns what takes it back. */
  readonly onChange: (listener: () => void) => () => void
}

/** A run's buffer: its readers' side, and where the run appends its events. */
export interface RunBuffer extends Reader {
  /** Appends the events as frames under the next ids (trimming the oldest), and wakes the waiting readers. */
  readonly append: (outs: ReadonlyArray<Projection.Out>) => void
  /** Ends the buffer without `end` (the run was handed over and goes on elsewhere), waking the waiting readers. */
  readonly close: () => void
}

/** The bounds of a run's buffer. */
export interface Options {
  /** Events kept. */
  readonly bufferSize: number
  /** Characters of event data kept (the oldest events go first; the newest always stays). */
  readonly bufferBytes: number
}

/** A frame kept in parts (`Projection.Spliced`); its text is made each time it is read. */
class SplicedFrame implements Protocol.Frame {
  constructor(
    readonly id: number,
    readonly event: string,
    readonly head: string,
    readonly body: string,
    readonly tail: string
  ) {}
  get data(): string {
    return this.head + this.body + this.tail
  }
}

/**
 * What the buffer keeps of a frame: the frame, or only its body (a string) when it is kept in parts with the same
 * event, head and tail as the frame before it (a streamed message's chunks: one string per token, not an object).
 */
type Kept = Protocol.Frame | string

/** The characters of a frame's data (what `Options.bufferBytes` counts), without joining a spliced one. */
const sizeOf = (frame: Protocol.Frame): number =>
  frame instanceof SplicedFrame ? frame.head.length + frame.body.length + frame.tail.length : frame.data.length

/**
 * An empty buffer of run `runId`; `json` writes an event's data (redacted) as text; its first event has id
 * `firstId` (after an earlier attempt's ids, see `EventIds`). An event in parts (`Out.spliced`, checked for
 * secrets by whoever made them) is kept in parts.
 */
export const make = (
  runId: string,
  options: Options,
  json: (data: unknown) => string,
  firstId = 1
): RunBuffer => {
  // the frames, oldest first: the first one's id is `firstKept`, each next one's one more (ids are consecutive).
  // The first is never a bare body; a bare body's shape is the nearest spliced frame before it, with nothing else
  // between them but bodies of that shape.
  const kept: Array<Kept> = []
  let firstKept = firstId
  // the index of the newest spliced frame kept whole (-1: none), and whether the newest frame is it or one of its
  // bodies (then a next frame of its shape is kept as a bare body)
  let shapeAt = -1
  let shaping = false
  let nextId = firstId
  let finished = false
  let changes = 0
  let bytes = 0
  const listeners = new Set<() => void>()
  const changed = () => {
    changes++
    if (listeners.size > 0) {
      const woken = [...listeners]
      listeners.clear()
      for (const listener of woken) listener()
    }
  }
  // the shape of a bare body at index `i`
  const shapeOf = (i: number): SplicedFrame => {
    if (shapeAt >= 0 && i > shapeAt) return kept[shapeAt] as SplicedFrame
    for (let j = i - 1; j >= 0; j--) {
      const frame = kept[j]!
      if (typeof frame !== "string") return frame as SplicedFrame
    }
    throw new Error("RunBuffer: a body kept without its shape")
  }
  // the frames from index `from` on, as frames
  const framesFrom = (from: number): Array<Protocol.Frame> => {
    const out: Array<Protocol.Frame> = []
    let shape: SplicedFrame | undefined
    for (let i = from; i < kept.length; i++) {
      const frame = kept[i]!
      if (typeof frame !== "string") {
        if (frame instanceof SplicedFrame) shape = frame
        out.push(frame)
      } else {
        shape ??= shapeOf(i)
        out.push(new SplicedFrame(firstKept + i, shape.event, shape.head, frame, shape.tail))
      }
    }
    return out
  }
  return {
    append: (outs) => {
      if (outs.length === 0) return
      for (const out of outs) {
        const parts = out.spliced
        const id = nextId++
        if (parts !== undefined) {
          const shape = shaping ? kept[shapeAt] as SplicedFrame : undefined
          const same = shape !== undefined && shape.event === out.event && shape.head === parts.head &&
            shape.tail === parts.tail
          if (same) {
            kept.push(parts.body)
          } else {
            shapeAt = kept.length
            shaping = true
            kept.push(new SplicedFrame(id, out.event, parts.head, parts.body, parts.tail))
          }
          bytes += parts.head.length + parts.body.length + parts.tail.length
        } else {
          const frame = { id, event: out.event, data: json(out.data) }
          shaping = false
          kept.push(frame)
          bytes += frame.data.length
        }
        if (out.event === "end") finished = true
      }
      // trimmed in batches (a quarter of the buffer), so a long run does not move the array per event
      if (kept.length > options.bufferSize + Math.ceil(options.bufferSize / 4) || bytes > options.bufferBytes) {
        let drop = Math.max(0, kept.length - options.bufferSize)
        let left = bytes
        // the shape of the bodies met so far (the first frame is never a bare body)
        let shape: SplicedFrame | undefined
        const size = (i: number) => {
          const frame = kept[i]!
          if (typeof frame !== "string") {
            if (frame instanceof SplicedFrame) shape = frame
            return sizeOf(frame)
          }
          return shape!.head.length + frame.length + shape!.tail.length
        }
        for (let i = 0; i < drop; i++) left -= size(i)
        // by size too (values snapshots of a long thread are large), always keeping the newest frame
        while (left > options.bufferBytes * 0.75 && drop < kept.length - 1) left -= size(drop++)
        // a bare body left first is kept whole, in the shape of the frames dropped before it
        const first = kept[drop]!
        const whole = typeof first === "string"
        if (whole) kept[drop] = new SplicedFrame(firstKept + drop, shape!.event, shape!.head, first, shape!.tail)
        kept.splice(0, drop)
        firstKept += drop
        bytes = left
        // (a body made whole is the newest spliced frame kept whole when the one before it went)
        shapeAt = shapeAt >= drop ? shapeAt - drop : whole ? 0 : -1
      }
      changed()
    },
    close: () => {
      finished = true
      changed()
    },
    finished: () => finished,
    origin: () => firstKept - 1,
    after: (given, requested) => {
      const held = requested !== undefined
      // (a place held from before this attempt's first event is just before it)
      const cursor = held ? Math.max(EventIds.cursorIn(given, firstId), firstId - 1) : EventIds.cursorIn(given, firstId)
      const last = nextId - 1
      // a cursor older than the buffer, or one the run never reached (an id of something else)
      if (kept.length > 0 && (cursor > 0 || held) && (cursor < firstKept - 1 || cursor >= nextId)) {
        const gap = Protocol.gapPayload(runId, requested ?? cursor, firstKept, last)
        return { frames: [], gap: { id: last, event: "gap", data: json(gap) } }
      }
      if (kept.length === 0 || cursor < firstKept) return { frames: framesFrom(0) }
      return { frames: framesFrom(cursor - firstKept + 1) }
    },
    changes: () => changes,
    onChange: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    }
  }
}
