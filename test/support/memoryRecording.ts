/**
 * A `Memory` service for tests of the memory middleware: it records the conversations a run queues for the memory
 * update (`enqueue`) and has no memory to give; reading or changing the stored memory is not its to do.
 */
import * as Effect from "effect/Effect"
import type { Memory, Pending } from "../../src/services/Memory.js"

/** The recording service, and what it was given to queue. */
export const recording = () => {
  const queued: Array<Pending> = []
  const service = {
    enabled: true,
    mode: "middleware",
    context: () => Effect.succeed(""),
    enqueue: (p: Pending) => Effect.sync(() => void queued.push(p)),
    flush: Effect.void,
    pending: Effect.sync(() => queued.length),
    load: () => Effect.die("unused"),
    clear: () => Effect.die("unused"),
    modify: () => Effect.die("unused")
  } as unknown as Memory["Type"]
  return { service, queued }
}
