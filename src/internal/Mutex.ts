/**
 * A mutual-exclusion lock for fibers, for the hot paths where `Effect.Semaphore.withPermits` costs too much
 * (about thirty effect steps and an asynchronous registration to take even a free permit): a free lock is taken
 * and given back in a few steps. Waiters queue in order and wait interruptibly.
 */
import * as Effect from "effect/Effect"

/** A lock. */
export interface Mutex {
  /**
   * Runs `body` uninterruptibly while no other fiber runs a body of this lock; waits (interruptibly) while one
   * does. Taking a free lock costs a few effect steps (`Semaphore.withPermits` costs about thirty).
   */
  readonly exclusively: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Runs `body` holding the lock, as `exclusively`, but `body` stays interruptible (the lock is given back). */
  readonly locked: <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Runs synchronous code holding the lock when it is free now: `f`'s result, or `undefined` (without running
   * `f`) while a body holds it. Nothing can come in between synchronous code, so no effect step is spent.
   */
  readonly ifFree: <A>(f: () => A) => A | undefined
}

/** A fresh, free lock. */
export const make = (): Mutex => {
  let held = false
  const waiting: Array<() => void> = []
  // A waiter is woken and tries again (it takes the lock only if still free when it runs): a waiter interrupted
  // after being woken never holds the lock it was woken for.
  const release = () => {
    held = false
    waiting.shift()?.()
  }
  // (a waiter woken and beaten to the lock waits again first in line)
  const wait = (first: boolean) =>
    Effect.async<void>((resume) => {
      const wake = () => resume(Effect.void)
      if (first) waiting.unshift(wake)
      else waiting.push(wake)
      return Effect.sync(() => {
        const at = waiting.indexOf(wake)
        if (at >= 0) waiting.splice(at, 1)
        else if (!held) release()
      })
    })
  const run = <A, E, R>(body: Effect.Effect<A, E, R>, interruptible: boolean, woken = false): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        if (held) return Effect.zipRight(restore(wait(woken)), run(body, interruptible, true))
        held = true
        return Effect.flatMap(Effect.exit(interruptible ? restore(body) : body), (exit) => {
          release()
          return exit
        })
      })
    )
  const ifFree = <A>(f: () => A): A | undefined => {
    if (held) return undefined
    held = true
    try {
      return f()
    } finally {
      release()
    }
  }
  return { exclusively: (body) => run(body, false), locked: (body) => run(body, true), ifFree }
}
