/**
 * A run's event buffer (SPEC §12.3): every event of a run gets an id (1, 2, ...) and is kept as a frame (its data
 * as JSON text) in a buffer bounded in events and in characters, the oldest going first; a reader asks for the
 * frames after a cursor (`Last-Event-ID`) and gets them, or the `gap` event when the cursor fell out of the
 * buffer (or is one the run never reached), and waits for the next append with a listener (no fiber, no
 * `Deferred` per event). A streamed chunk's frame and a `values` snapshot's keep their text in parts
 * (`Projection.Spliced`: what the frames of a run share, and each one's own), joined when the frame is read.
 */
import * as EventIds from "./EventIds.js"
import * as Projection from "./Projection.js"
import * as Protocol from "./Protocol.js"

/** What readers of a run's buffer see (the streams of `RunStream` follow a run through it). */
export interface Reader {
  /** Whether the run's last event (`end`) is in the buffer. */
  readonly finished: () => boolean
  /** The buffered frames with an id greater than `cursor`, or the gap when `cursor` is older than the buffer. */
  readonly after: (cursor: number) => { readonly frames: ReadonlyArray<Protocol.Frame>; readonly gap?: Protocol.Frame }
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
  const frames: Array<Protocol.Frame> = []
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
  return {
    append: (outs) => {
      if (outs.length === 0) return
      for (const out of outs) {
        const parts = out.spliced
        const frame: Protocol.Frame = parts !== undefined
          ? new SplicedFrame(nextId++, out.event, parts.head, parts.body, parts.tail)
          : { id: nextId++, event: out.event, data: json(out.data) }
        frames.push(frame)
        bytes += sizeOf(frame)
        if (out.event === "end") finished = true
      }
      // trimmed in batches (a quarter of the buffer), so a long run does not move the array per event
      if (frames.length > options.bufferSize + Math.ceil(options.bufferSize / 4) || bytes > options.bufferBytes) {
        let drop = Math.max(0, frames.length - options.bufferSize)
        let kept = bytes
        for (let i = 0; i < drop; i++) kept -= sizeOf(frames[i]!)
        // by size too (values snapshots of a long thread are large), always keeping the newest frame
        while (kept > options.bufferBytes * 0.75 && drop < frames.length - 1) kept -= sizeOf(frames[drop++]!)
        frames.splice(0, drop)
        bytes = kept
      }
      changed()
    },
    close: () => {
      finished = true
      changed()
    },
    finished: () => finished,
    after: (given) => {
      const cursor = EventIds.cursorIn(given, firstId)
      const first = frames[0]
      // a cursor older than the buffer, or one the run never reached (an id of something else)
      if (first !== undefined && cursor > 0 && (cursor < first.id - 1 || cursor >= nextId)) {
        const gap = Protocol.gapPayload(runId, cursor, first.id, frames[frames.length - 1]!.id)
        return { frames: [], gap: { id: frames[frames.length - 1]!.id, event: "gap", data: json(gap) } }
      }
      if (first === undefined || cursor < first.id) return { frames }
      return { frames: frames.slice(cursor - first.id + 1) }
    },
    changes: () => changes,
    onChange: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    }
  }
}
