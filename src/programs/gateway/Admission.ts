/**
 * `gateway.max_active_runs` (LangGraph's `N_JOBS_PER_WORKER`): past that many runs executing in the process, a
 * run's turn waits for a place. The run stays `pending` while it waits, and its lease on the thread is renewed
 * every third of the lease's life, so no other writer takes the thread from a run that was accepted. Once the
 * turn has its place the renewing stops: the turn renews its own lease as it runs (`Run`).
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { ThreadStore } from "../../services/ThreadStore.js"
import * as Run from "../Run.js"

/** Wraps a run's turn so that it runs only when it has a place. */
export type Admit = (threadId: string, runId: string) => <A, E, R>(turn: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** Admission to at most `maxActiveRuns` turns at once; absent: every turn runs at once. */
export const make = (
  store: ThreadStore["Type"],
  maxActiveRuns: number | undefined
): Effect.Effect<Admit> => {
  if (maxActiveRuns === undefined) return Effect.succeed(() => (turn) => turn)
  return Effect.map(Effect.makeSemaphore(maxActiveRuns), (places) => (threadId, runId) => (turn) => {
    const renewing = Run.takeLease(store, threadId, runId).pipe(
      Effect.ignore,
      Effect.delay(Run.LEASE_TTL_MS / 3),
      Effect.forever
    )
    return Effect.scoped(Effect.gen(function*() {
      const renewer = yield* Effect.forkScoped(renewing)
      return yield* places.withPermits(1)(Effect.zipRight(Fiber.interrupt(renewer), turn))
    }))
  })
}
