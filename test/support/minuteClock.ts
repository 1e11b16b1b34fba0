/**
 * A clock for in-process gateways whose cron tests would otherwise wait for the wall clock's next minute: it reads
 * the real time plus an offset that only grows, and sleeps for real. `nearMinuteEnd(s)` moves it to `s` seconds
 * before its next minute, so a cron on `* * * * *` made now ticks `s` seconds later instead of up to a minute.
 * Given to a gateway with `Support.start({ references: Layer.setClock(clock.clock) })`: everything in the gateway
 * reads time through Effect's Clock (the scheduler's polls and ticks, the crons' next runs, the runs' times).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export interface MinuteClock {
  readonly clock: Clock.Clock
  /** The clock's time, in milliseconds. */
  readonly now: () => number
  /** Moves the clock forward to `seconds` before its next minute (never back: a minute on if already past it). */
  readonly nearMinuteEnd: (seconds: number) => void
  /** Moves the clock forward by `ms` milliseconds (a task due hours from now made due at once). */
  readonly advance: (ms: number) => void
}

export const make = (): MinuteClock => {
  const real = Clock.make()
  let offset = 0
  const now = () => real.unsafeCurrentTimeMillis() + offset
  const nanos = () => real.unsafeCurrentTimeNanos() + BigInt(offset) * 1_000_000n
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: now,
    currentTimeMillis: Effect.sync(now),
    unsafeCurrentTimeNanos: nanos,
    currentTimeNanos: Effect.sync(nanos),
    sleep: (duration) => real.sleep(duration)
  }
  const nearMinuteEnd = (seconds: number) => {
    const current = now()
    let target = Math.ceil(current / 60_000) * 60_000 - seconds * 1000
    if (target < current) target += 60_000
    offset += target - current
  }
  const advance = (ms: number) => {
    offset += Math.max(0, ms)
  }
  return { clock, now, nearMinuteEnd, advance }
}
