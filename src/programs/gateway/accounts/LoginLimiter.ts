/**
 * How many wrong passwords a client may try: after `MAX_FAILURES` failed sign-ins in a row from one address,
 * every sign-in from it is refused (429) for `LOCKOUT_MS`, the right password included; a success clears the
 * count. As DeerFlow's, by the connection's address (no forwarded header is trusted: behind a proxy, every client
 * is the proxy's). At most `MAX_TRACKED` addresses are remembered; past that the oldest entries go first. The
 * state is the gateway's (made with its layer), not the process's.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export const MAX_FAILURES = 5
export const LOCKOUT_MS = 5 * 60 * 1000
const MAX_TRACKED = 10_000

interface Entry {
  readonly failures: number
  readonly lockedUntil: number
}

/** A limiter of its own. */
export const make = () => {
  const entries = new Map<string, Entry>()

  /** The seconds `client` must still wait, when it is locked out. */
  const lockedFor = (client: string) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const entry = entries.get(client)
      if (entry === undefined || entry.failures < MAX_FAILURES) return undefined
      if (now < entry.lockedUntil) return Math.ceil((entry.lockedUntil - now) / 1000)
      entries.delete(client)
      return undefined
    })

  const failed = (client: string) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const before = entries.get(client)
      entries.delete(client)
      if (entries.size >= MAX_TRACKED) {
        // (a Map keeps insertion order: the first entries are the least recently touched)
        for (const key of [...entries.keys()].slice(0, MAX_TRACKED / 2)) entries.delete(key)
      }
      const failures = (before?.failures ?? 0) + 1
      entries.set(client, { failures, lockedUntil: failures >= MAX_FAILURES ? now + LOCKOUT_MS : 0 })
    })

  const succeeded = (client: string) => Effect.sync(() => void entries.delete(client))

  return { lockedFor, failed, succeeded }
}

export type LoginLimiter = ReturnType<typeof make>
