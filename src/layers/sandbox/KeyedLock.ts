/**
 * A keyed lock: one permit per key (the file tools key it by a file's real path, so writes to one file never
 * interleave, whichever run makes them).
 */
import * as Effect from "effect/Effect"

/** A keyed, process-wide lock (one permit per key; entries are dropped when unused). */
export const makeKeyedLock = () => {
  const locks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  return <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let entry = locks.get(key)
      if (entry === undefined) {
        entry = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
        locks.set(key, entry)
      }
      const held = entry
      held.users++
      return held.semaphore.withPermits(1)(effect).pipe(
        Effect.ensuring(Effect.sync(() => {
          held.users--
          if (held.users === 0 && locks.get(key) === held) locks.delete(key)
        }))
      )
    })
}

/** Runs an effect holding the lock of one key. */
export type KeyedLock = ReturnType<typeof makeKeyedLock>
