/**
 * A cluster's notices that a thread's run started or ended, on whichever runner: PostgreSQL's LISTEN/NOTIFY on one
 * channel, whose payload is the thread's stored id and nothing else (no user data: no run, no input, no owner). A
 * thread's stream idle in any process (`ThreadStream`) waits on them for a run another runner starts, instead of
 * reading the thread's run records every few seconds.
 *
 * One LISTEN connection per process (@effect/sql-pg's `PgClient.listen`, whose listeners share one connection), not
 * one per stream: the process dispatches each notice to the streams of its thread. A notice is a hint: a stream
 * woken reads the thread's records, which say what happened. Notices are lost while the connection is down, and
 * `PgClient` does not say when it is (it ignores the connection's errors): every `CHECK_EVERY` the process notifies
 * itself on the channel (a random token after `:`, never a thread id), and when that does not come back within
 * `ANSWER_WITHIN` it listens again on a fresh connection and wakes every stream it holds (each reads its thread's
 * records once, for the notices it may have missed). Streams also read their records every 30 seconds whatever
 * happens (see `ThreadStream`).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Context from "effect/Context"
import * as Crypto from "node:crypto"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { isSafeId } from "../../../services/Sandbox.js"

/** The channel of the notices: a thread's run started or ended. */
export const CHANNEL = "antler_thread_runs"

/** The longest payload sent or taken: a stored thread id (`ThreadIds`: at most 128 characters). */
export const MAX_PAYLOAD = 128

/** How often a process checks that it still hears notices. */
const CHECK_EVERY = "30 seconds"

/** How long its own check may take to come back before the connection is taken for lost. */
const ANSWER_WITHIN = "10 seconds"

/** How long a notice may take to send before the run goes on without it. */
const SEND_WITHIN = "5 seconds"

/** The notices of a process. */
export interface Service {
  /** Tells every process that a run of thread `threadId` started or ended. Never fails (a lost notice is logged). */
  readonly notify: (threadId: string) => Effect.Effect<void>
  /**
   * Calls `listener` with each notice about thread `threadId` from now on, and with every notice when the process
   * may have missed some (its connection was lost); returns how to stop.
   */
  readonly on: (threadId: string, listener: () => void) => () => void
}

/** A process's notices. */
export class RunNotices extends Context.Tag("antler/gateway/cluster/RunNotices")<RunNotices, Service>() {}

/** Whether `payload` may be a notice's (a stored thread id, bounded). */
export const isNotice = (payload: string): boolean => payload.length <= MAX_PAYLOAD && isSafeId(payload)

/** The notices over `PgClient`, its listening fiber living as long as the scope. */
export const make = Effect.gen(function*() {
  const pg = yield* PgClient.PgClient
  const listeners = new Map<string, Set<() => void>>()
  const wake = (threadId: string) => {
    const waiting = listeners.get(threadId)
    if (waiting !== undefined) for (const listener of [...waiting]) listener()
  }
  // (not `pg.notify`: in @effect/sql-pg 0.53 it sends `NOTIFY channel, $1`, which PostgreSQL refuses, as NOTIFY
  // takes no parameters; `pg_notify` does)
  const send = (channel: string, payload: string) => Effect.asVoid(pg`SELECT pg_notify(${channel}, ${payload})`)
  const wakeAll = () => {
    for (const waiting of [...listeners.values()]) for (const listener of [...waiting]) listener()
  }

  // one session of listening, until its connection no longer hears (or fails): then a fresh one
  const session = Effect.gen(function*() {
    // (a thread id never has a `:`: the token is no thread's, and other processes' tokens wake nothing)
    const token = `:check:${Crypto.randomBytes(12).toString("hex")}`
    let answered = true
    const notices = Stream.runForEach(pg.listen(CHANNEL), (payload) =>
      Effect.sync(() => {
        if (payload === token) answered = true
        else if (isNotice(payload)) wake(payload)
      }))
    const check = Effect.gen(function*() {
      for (;;) {
        yield* Effect.sleep(CHECK_EVERY)
        answered = false
        yield* send(CHANNEL, token)
        yield* Effect.sleep(ANSWER_WITHIN)
        if (!answered) return yield* Effect.fail(new Error("its own check did not come back"))
      }
    })
    yield* Effect.raceFirst(notices, check)
  })
  const listening = Effect.forever(
    session.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("cluster run notices: listening again", cause)),
      Effect.zipRight(Effect.sync(wakeAll)),
      Effect.zipRight(Effect.sleep("5 seconds"))
    )
  )
  yield* Effect.forkScoped(listening)

  return RunNotices.of({
    notify: (threadId) =>
      !isNotice(threadId) ? Effect.void : send(CHANNEL, threadId).pipe(
        Effect.timeoutFail({ duration: SEND_WITHIN, onTimeout: () => new Error("timed out") }),
        Effect.catchAll((error) =>
          Effect.logWarning(`cluster run notices: thread ${threadId}'s not sent: ${error.message}`)
        )
      ),
    on: (threadId, listener) => {
      const waiting = listeners.get(threadId) ?? new Set()
      listeners.set(threadId, waiting.add(listener))
      return () => {
        waiting.delete(listener)
        if (waiting.size === 0 && listeners.get(threadId) === waiting) listeners.delete(threadId)
      }
    }
  })
})

/** `make` as a layer. */
export const layer = Layer.scoped(RunNotices, make)
