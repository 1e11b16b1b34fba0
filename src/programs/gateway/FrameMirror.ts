/**
 * A run's frames as another process streams them, kept here so that a reader of this process can follow the run as
 * it follows a run of its own (`RunBuffer.Reader`): a cluster's thread stream (`ThreadStream`) following a run whose
 * thread's runner is another process. The frames arrive already encoded (and redacted) by the run's runner, under
 * its ids, from the cursor the mirror was started at (the runner maps a cursor of an earlier attempt, and answers
 * one it no longer keeps with the run's `gap`). The mirror keeps the newest frames within the same bounds as a run's
 * buffer, and answers a cursor that fell out of them with a `gap` of its own.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Protocol from "./Protocol.js"
import type { Options, Reader } from "./RunBuffer.js"

/** A mirror's readers' side, and where the frames of the run's stream are put. */
export interface FrameMirror extends Reader {
  /** Keeps a frame of the run (ids in the order the runner gave them), and wakes the waiting readers. */
  readonly put: (frame: Protocol.Frame) => void
  /** The run's stream ended here (after its `end`, or broken for good): its readers see it finished. */
  readonly close: () => void
}

/** The index of the first of `frames` (ids ascending) with an id above `cursor`. */
const firstAfter = (frames: ReadonlyArray<Protocol.Frame>, cursor: number) => {
  let low = 0
  let high = frames.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (frames[middle]!.id > cursor) high = middle
    else low = middle + 1
  }
  return low
}

/** An empty mirror of run `runId`, within `options`' bounds. */
export const make = (runId: string, options: Options): FrameMirror => {
  const frames: Array<Protocol.Frame> = []
  let trimmed = false
  // the runner's answer to a cursor it no longer keeps: the run's stream ends there
  let gapFrame: Protocol.Frame | undefined
  let bytes = 0
  let finished = false
  let changes = 0
  const listeners = new Set<() => void>()
  const changed = () => {
    changes++
    const woken = [...listeners]
    listeners.clear()
    for (const listener of woken) listener()
  }
  return {
    put: (frame) => {
      if (frame.event === "gap") {
        gapFrame = frame
        finished = true
        return changed()
      }
      const last = frames[frames.length - 1]
      // (a stream joined again after a change of runner gives ids above the last: nothing is kept twice)
      if (last !== undefined && frame.id <= last.id) return
      frames.push(frame)
      bytes += frame.data.length
      if (frame.event === "end") finished = true
      // (trimmed in batches, as a run's buffer is, always keeping the newest frame)
      if (frames.length > options.bufferSize + Math.ceil(options.bufferSize / 4) || bytes > options.bufferBytes) {
        let drop = 0
        while (
          drop < frames.length - 1 && (frames.length - drop > options.bufferSize || bytes > options.bufferBytes * 0.75)
        ) bytes -= frames[drop++]!.data.length
        frames.splice(0, drop)
        trimmed = trimmed || drop > 0
      }
      changed()
    },
    close: () => {
      finished = true
      changed()
    },
    finished: () => finished,
    origin: () => (frames[0]?.id ?? 1) - 1,
    after: (cursor, requested) => {
      const first = frames[0]
      const last = frames[frames.length - 1]
      if (first === undefined || last === undefined || (gapFrame !== undefined && last.id <= cursor)) {
        return gapFrame === undefined ? { frames: [] } : { frames: [], gap: gapFrame }
      }
      if (trimmed && cursor < first.id - 1) {
        const gap = Protocol.gapPayload(runId, requested ?? cursor, first.id, last.id)
        return { frames: [], gap: { id: last.id, event: "gap", data: JSON.stringify(gap) } }
      }
      return { frames: cursor < first.id ? frames : frames.slice(firstAfter(frames, cursor)) }
    },
    changes: () => changes,
    onChange: (listener) => {
      listeners.add(listener)
      return () => listeners.delete(listener)
    }
  }
}

/** A run followed through a mirror: its reader, and its id. */
export interface Followed extends Reader {
  readonly runId: string
}

/** The mirrors one stream keeps open. */
export interface Mirrors {
  /** Run `runId` through the reader `made` (made once, in a scope of its own); the oldest beyond `max` closed. */
  readonly follow: (runId: string, made: Effect.Effect<Reader, never, Scope.Scope>) => Effect.Effect<Followed>
  /** Closes every mirror (the stream ended). */
  readonly close: Effect.Effect<void>
}

/** The mirrors of one stream: at most `max` open at a time (the run it follows and the one it looks at next). */
export const mirrors = (max = 2): Mirrors => {
  const open = new Map<string, { readonly run: Followed; readonly scope: Scope.CloseableScope }>()
  const closeOne = (runId: string) =>
    Effect.suspend(() => {
      const kept = open.get(runId)
      open.delete(runId)
      return kept === undefined ? Effect.void : Scope.close(kept.scope, Exit.void)
    })
  return {
    follow: (runId, made) =>
      Effect.gen(function*() {
        const kept = open.get(runId)
        if (kept !== undefined) return kept.run
        for (const id of [...open.keys()].slice(0, Math.max(0, open.size - max + 1))) yield* closeOne(id)
        const scope = yield* Scope.make()
        const reader = yield* Scope.extend(made, scope)
        const run: Followed = { ...reader, runId }
        open.set(runId, { run, scope })
        return run
      }),
    close: Effect.suspend(() => Effect.forEach([...open.keys()], closeOne, { discard: true }))
  }
}
