/**
 * A hold for a store a test wraps: the store's call waits at `wait` until the test lets it go (`release`); `entered`
 * resolves once it waits.
 */
import * as Effect from "effect/Effect"

export const gate = () => {
  let enter!: () => void
  let release!: () => void
  const entered = new Promise<void>((resolve) => (enter = resolve))
  const released = new Promise<void>((resolve) => (release = resolve))
  return {
    entered,
    release,
    wait: Effect.promise(() => {
      enter()
      return released
    })
  }
}
