/**
 * A run's stream as its subscribers read it (SPEC §12.3): the encoded form of the run's events, its frames from a
 * cursor as they are appended to its buffer (`RunBuffer`), and those frames as SSE text filtered to the client's
 * stream modes, with heartbeats. A waiting subscriber holds one listener (no fiber per wait), and the frames
 * found at once go out as one piece of text.
 */
import { Readable } from "node:stream"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { RunEvent } from "../../services/RunEvents.js"
import { RunEvent as RunEventSchema } from "../../services/RunEvents.js"
import * as Protocol from "./Protocol.js"
import type { Reader } from "./RunBuffer.js"

const encodeSchema = Schema.encodeEither(RunEventSchema)

/**
 * An event's encoded form (RunEvents' Schema). A token delta, one per streamed token, is checked and copied
 * here, as the Schema would (its four fields, the strings checked); anything else, or a token that fails the
 * check, goes through the Schema, which says what is wrong.
 */
export const encodeEvent = (event: RunEvent): Either.Either<unknown, { readonly message: string }> => {
  if (
    event.type === "token" && typeof event.message_id === "string" &&
    (event.text === undefined || typeof event.text === "string") &&
    (event.reasoning === undefined || typeof event.reasoning === "string")
  ) {
    const encoded: { type: "token"; message_id: string; text?: string; reasoning?: string } = {
      type: "token",
      message_id: event.message_id
    }
    if (event.text !== undefined) encoded.text = event.text
    if (event.reasoning !== undefined) encoded.reasoning = event.reasoning
    return Either.right(encoded)
  }
  return encodeSchema(event)
}

/** What a reader at a cursor finds in a run's buffer now. */
type Found =
  /** The cursor fell out of the buffer (or is one the run never reached): the stream's last frame. */
  | { readonly _tag: "gap"; readonly gap: Protocol.Frame }
  /** Frames after the cursor; `end` among them when `ended` (the last). */
  | { readonly _tag: "frames"; readonly frames: ReadonlyArray<Protocol.Frame>; readonly ended: boolean }
  /** Nothing after the cursor, and nothing more to come. */
  | { readonly _tag: "finished" }
  /** Nothing after the cursor yet. */
  | { readonly _tag: "wait" }

const find = (run: Reader, position: number, requested?: number): Found => {
  const available = run.after(position, requested)
  if (available.gap !== undefined) return { _tag: "gap", gap: available.gap }
  if (available.frames.length > 0) {
    const ended = available.frames[available.frames.length - 1]!.event === "end"
    return { _tag: "frames", frames: available.frames, ended }
  }
  return run.finished() ? { _tag: "finished" } : { _tag: "wait" }
}

/**
 * A run's stream as SSE text from `cursor` (0: from its first event), filtered to `modes` (all when absent), with
 * a heartbeat every `heartbeatSeconds`; ends after `end`, or after `gap`. `onDisconnect` runs when the reader is
 * gone before that (the stream destroyed: the client disconnected, or the response was interrupted).
 *
 * A Node `Readable` that reads the run's buffer itself: a token's frame is one `push`, with no stream stage,
 * fiber or effect per event (the response pipes it to the socket). When its first read finds nothing to send, it
 * sends a heartbeat then, so that the response starts at once.
 */
export const subscribe = (
  run: Reader,
  cursor: number,
  modes: ReadonlyArray<Protocol.StreamMode> | undefined,
  onDisconnect: (() => void) | undefined,
  heartbeatSeconds: number
): Readable => {
  const keep = keepOf(modes)
  // the place the subscriber holds (without a cursor, just before the first frame kept now, as DeerFlow's
  // subscriber starts), and the last event it got (0: none), which a gap names when the frames after that place
  // were let go before it read them
  let position = cursor > 0 ? cursor : run.origin()
  let requested = cursor
  let complete = false
  // whether anything went out yet: a stream with nothing to send at its first read sends a heartbeat, so that its
  // response's headers (the run's `Content-Location`) leave at once, not with the run's first event (a run
  // waiting for its turn has none)
  let opened = false
  // the listener waiting for the next append, when one is
  let off: (() => void) | undefined
  // heartbeats from the first read (a stream never read, e.g. a response never sent, holds no timer)
  let heartbeat: ReturnType<typeof setInterval> | undefined
  const stop = () => {
    clearInterval(heartbeat)
    off?.()
    off = undefined
  }
  const finish = (text: string) => {
    complete = true
    stop()
    if (text !== "") stream.push(text)
    stream.push(null)
  }
  // pushes what is buffered after the position, then waits for the next append (unless the reader is full)
  const pump = () => {
    if (complete || stream.destroyed) return
    const found = find(run, position, requested)
    switch (found._tag) {
      case "gap":
        return finish(Protocol.sse(found.gap))
      case "finished":
        return finish("")
      case "frames": {
        let text = ""
        for (const frame of found.frames) if (keep(frame)) text += Protocol.sse(frame)
        position = found.frames[found.frames.length - 1]!.id
        requested = position
        if (found.ended) return finish(text)
        // the frames found at once go out as one piece; a full reader asks again (`read`)
        if (text !== "") {
          opened = true
          if (!stream.push(text)) return
        }
        break
      }
    }
    if (off === undefined) {
      off = run.onChange(() => {
        off = undefined
        pump()
      })
    }
  }
  const stream = new Readable({
    read: () => {
      if (heartbeat === undefined && !complete) {
        heartbeat = setInterval(() => {
          if (!complete && !stream.destroyed) stream.push(Protocol.HEARTBEAT)
        }, heartbeatSeconds * 1000)
      }
      pump()
      if (!opened && !complete) {
        opened = true
        stream.push(Protocol.HEARTBEAT)
      }
    },
    destroy: (error, callback) => {
      stop()
      if (!complete) {
        complete = true
        onDisconnect?.()
      }
      callback(error)
    }
  })
  return stream
}

/**
 * A run's frames from `cursor` (0: from its first buffered event) as they are appended; ends after `end` or
 * `gap` (calling `onComplete`), or once the run finished and nothing is left after the cursor.
 */
export const framesOf = (run: Reader, cursor: number, onComplete: () => void): Stream.Stream<Protocol.Frame> =>
  Stream.paginateChunkEffect(cursor, (position: number) =>
    Effect.gen(function*() {
      for (;;) {
        const seen = run.changes()
        const found = find(run, position)
        switch (found._tag) {
          case "gap":
            onComplete()
            return [Chunk.of(found.gap), Option.none<number>()] as const
          case "frames":
            if (found.ended) onComplete()
            return [
              Chunk.fromIterable(found.frames),
              found.ended ? Option.none<number>() : Option.some(found.frames.at(-1)!.id)
            ] as const
          case "finished":
            onComplete()
            return [Chunk.empty<Protocol.Frame>(), Option.none<number>()] as const
        }
        yield* appended(run, seen)
      }
    })
  )

/** Until `run` appends after `seen` (one listener, no fiber). */
const appended = (run: Reader, seen: number): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (run.changes() !== seen) return resume(Effect.void)
    return Effect.sync(run.onChange(() => resume(Effect.void)))
  })

/** Whether a frame is of `modes` (every frame when absent; frames of no mode always). */
const keepOf = (modes: ReadonlyArray<Protocol.StreamMode> | undefined) => {
  const wanted = modes === undefined ? undefined : new Set(modes)
  return (frame: Protocol.Frame) => {
    if (wanted === undefined) return true
    const mode = Protocol.modeOfEvent(frame.event)
    return mode === undefined || wanted.has(mode)
  }
}

/**
 * Frames as SSE text, filtered to `modes` (all when absent), with a heartbeat at once (the response starts before
 * the run's first event, as `subscribe`'s) and every `heartbeatSeconds`.
 */
export const sseOf = <E, R>(
  frames: Stream.Stream<Protocol.Frame, E, R>,
  modes: ReadonlyArray<Protocol.StreamMode> | undefined,
  heartbeatSeconds: number
): Stream.Stream<string, E, R> => {
  const keep = keepOf(modes)
  const heartbeats = Stream.fromSchedule(Schedule.spaced(`${heartbeatSeconds} seconds`)).pipe(
    Stream.map(() => Protocol.HEARTBEAT)
  )
  return Stream.concat(
    Stream.make(Protocol.HEARTBEAT),
    Stream.merge(Stream.map(Stream.filter(frames, keep), Protocol.sse), heartbeats, { haltStrategy: "left" })
  )
}
