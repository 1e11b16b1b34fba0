/**
 * `gateway.max_active_runs` (LangGraph's `N_JOBS_PER_WORKER`): past that many runs executing in the process, a
 * run's turn waits for a place. Places go in the order the runs asked for them: a place that frees is handed to
 * the run that has waited longest, never taken by one that arrives as it frees. The run stays `pending` while it
 * waits, and its lease on the thread is renewed every third of the lease's life, so no other writer takes the
 * thread from a run that was accepted. Once the turn has its place the renewing stops: the turn renews its own
 * lease as it runs (`Run`). A run cancelled while it waits leaves the line; one cancelled as its place came
 * passes the place on.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import type { ThreadStore } from "../../services/ThreadStore.js"
import * as Run from "../Run.js"

/** Wraps a run's turn so that it runs only when it has a place. */
export type Admit = (threadId: string, runId: string) => <A, E, R>(turn: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** At most `size` holders at once, handed out first come, first served. */
const places = (size: number) => {
  let free = size
  const line: Array<Deferred.Deferred<void>> = []
  const release = () => {
    const next = line.shift()
    if (next === undefined) free++
    else Deferred.unsafeDone(next, Exit.void)
  }
  const take = (restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>) =>
    Effect.suspend(() => {
      if (free > 0 && line.length === 0) {
        free--
        return Effect.void
      }
      const ticket = Deferred.unsafeMake<void>(FiberId.none)
      line.push(ticket)
      return Effect.onInterrupt(restore(Deferred.await(ticket)), () =>
        Effect.sync(() => {
          const at = line.indexOf(ticket)
          // still in line: it leaves; else its place had come, and it goes to the next in line
          if (at >= 0) line.splice(at, 1)
          else release()
        }))
    })
  return <A, E, R>(turn: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(take(restore), Effect.ensuring(restore(turn), Effect.sync(release)))
    )
}

/** Admission to at most `maxActiveRuns` turns at once; absent: every turn runs at once. */
export const make = (
  store: ThreadStore["Type"],
  maxActiveRuns: number | undefined
): Effect.Effect<Admit> =>
  Effect.sync(() => {
    if (maxActiveRuns === undefined) return () => (turn) => turn
    const withPlace = places(maxActiveRuns)
    return (threadId, runId) => (turn) => {
      const renewing = Run.takeLease(store, threadId, runId).pipe(
        Effect.ignore,
        Effect.delay(Run.LEASE_TTL_MS / 3),
        Effect.forever
      )
      return Effect.scoped(Effect.gen(function*() {
        const renewer = yield* Effect.forkScoped(renewing)
        return yield* withPlace(Effect.zipRight(Fiber.interrupt(renewer), turn))
      }))
    }
  })
