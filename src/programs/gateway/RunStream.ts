/**
 * A run's stream as its subscribers read it (SPEC §12.3): the encoded form of the run's events, its frames from a
 * cursor as they are appended to its buffer (`RunBuffer`), and those frames as SSE text filtered to the client's
 * stream modes, with heartbeats. A waiting subscriber holds one listener and at most one timer (no fiber per
 * wait), and the frames found at once go out as one piece of text.
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
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

const find = (run: Reader, position: number): Found => {
  const available = run.after(position)
  if (available.gap !== undefined) return { _tag: "gap", gap: available.gap }
  if (available.frames.length > 0) {
    const ended = available.frames[available.frames.length - 1]!.event === "end"
    return { _tag: "frames", frames: available.frames, ended }
  }
  return run.finished() ? { _tag: "finished" } : { _tag: "wait" }
}

/**
 * A run's stream as SSE text from `cursor` (0: from its first event), filtered to `modes` (all when absent), with
 * a heartbeat every `heartbeatSeconds`; ends after `end`, or after `gap`. `onDisconnect` runs when the client is
 * gone before that.
 */
export const subscribe = (
  run: Reader,
  cursor: number,
  modes: ReadonlyArray<Protocol.StreamMode> | undefined,
  onDisconnect: Effect.Effect<void> | undefined,
  heartbeatSeconds: number
): Stream.Stream<string> => {
  let complete = false
  // heartbeats every `heartbeatSeconds` from the subscription's start, between the frames; the frames
  // found at once are sent as one piece of text (a client behind gets what it missed in one write)
  const beat = heartbeatSeconds * 1000
  const keep = keepOf(modes)
  let nextBeat: number | undefined
  const page = (position: number) =>
    Effect.gen(function*() {
      let text = ""
      for (;;) {
        const now = yield* Clock.currentTimeMillis
        if (nextBeat === undefined) nextBeat = now + beat
        if (now >= nextBeat) {
          text += Protocol.HEARTBEAT
          nextBeat = now + beat
        }
        const seen = run.changes()
        const found = find(run, position)
        switch (found._tag) {
          case "gap":
            complete = true
            return [text + Protocol.sse(found.gap), Option.none<number>()] as const
          case "frames":
            if (found.ended) complete = true
            for (const frame of found.frames) if (keep(frame)) text += Protocol.sse(frame)
            return [text, found.ended ? Option.none<number>() : Option.some(found.frames.at(-1)!.id)] as const
          case "finished":
            complete = true
            return [text, Option.none<number>()] as const
        }
        if (text !== "") return [text, Option.some(position)] as const
        yield* appended(run, seen, Math.max(0, nextBeat - now))
      }
    })
  return Stream.paginateEffect(cursor, page).pipe(
    Stream.filter((text) => text !== ""),
    Stream.ensuring(Effect.suspend(() => (complete || onDisconnect === undefined ? Effect.void : onDisconnect)))
  )
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

/** Until `run` appends after `seen`, or `ms` pass when given (one listener and at most one timer, no fibers). */
const appended = (run: Reader, seen: number, ms?: number): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (run.changes() !== seen) return resume(Effect.void)
    let timer: ReturnType<typeof setTimeout> | undefined
    const off = run.onChange(() => {
      clearTimeout(timer)
      resume(Effect.void)
    })
    if (ms !== undefined) {
      timer = setTimeout(() => {
        off()
        resume(Effect.void)
      }, ms)
    }
    return Effect.sync(() => {
      clearTimeout(timer)
      off()
    })
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

/** Frames as SSE text, filtered to `modes` (all when absent), with a heartbeat every `heartbeatSeconds`. */
export const sseOf = <E, R>(
  frames: Stream.Stream<Protocol.Frame, E, R>,
  modes: ReadonlyArray<Protocol.StreamMode> | undefined,
  heartbeatSeconds: number
): Stream.Stream<string, E, R> => {
  const keep = keepOf(modes)
  const heartbeats = Stream.fromSchedule(Schedule.spaced(`${heartbeatSeconds} seconds`)).pipe(
    Stream.map(() => Protocol.HEARTBEAT)
  )
  return Stream.merge(Stream.map(Stream.filter(frames, keep), Protocol.sse), heartbeats, { haltStrategy: "left" })
}
