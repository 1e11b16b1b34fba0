/**
 * `gateway.max_active_runs` (LangGraph's `N_JOBS_PER_WORKER`): past that many runs executing in the process, a
 * run's turn waits for a place. Places go in the order the runs asked for them: a place that frees is handed to
 * the run that has waited longest, never taken by one that arrives as it frees. The run stays `pending` while it
 * waits, its lease on the thread held all the while by the process's lease renewer (`RunLease`, from its acceptance
 * to its end recorded). A run cancelled while it waits leaves the line; one cancelled as its place came passes the
 * place on.
 *
 * `gateway.max_active_runs_per_user` is the same rule for each user's own runs, before the process's: a user past
 * it waits in a line of their own, holding none of the process's places, so one user starting runs without end
 * delays only their own runs.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type { ModelService } from "../../services/ModelService.js"
import { RunContext } from "../../services/RunContext.js"

/** Wraps a run's turn (of the user's) so that it runs only when it has a place. */
export type Admit = (
  threadId: string,
  runId: string,
  userId: string
) => <A, E, R>(turn: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** Runs an effect when it has a place. */
export type Places = <A, E, R>(turn: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

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

/** At most `size` holders at once for each user, a user's line kept only while the user has runs in it. */
const placesByUser = (size: number) => {
  const users = new Map<string, { readonly places: Places; holders: number }>()
  return (userId: string): Places => (turn) =>
    Effect.suspend(() => {
      let entry = users.get(userId)
      if (entry === undefined) users.set(userId, entry = { places: places(size), holders: 0 })
      const held = entry
      held.holders++
      return Effect.ensuring(
        held.places(turn),
        Effect.sync(() => {
          if (--held.holders === 0) users.delete(userId)
        })
      )
    })
}

/**
 * Admission to at most `maxActiveRuns` turns at once, and `maxPerUser` of one user's; absent: no such limit (both
 * absent: every turn runs at once).
 */
export const make = (
  maxActiveRuns: number | undefined,
  maxPerUser?: number | undefined
): Effect.Effect<Admit> =>
  Effect.sync(() => {
    if (maxActiveRuns === undefined && maxPerUser === undefined) return () => (turn) => turn
    const process: Places = maxActiveRuns === undefined ? (turn) => turn : places(maxActiveRuns)
    const ofUser = maxPerUser === undefined ? undefined : placesByUser(maxPerUser)
    const withPlace = (userId: string): Places =>
      ofUser === undefined ? process : (turn) => ofUser(userId)(process(turn))
    return (_threadId, _runId, userId) => withPlace(userId)
  })

/**
 * The gateway's own model calls for a user outside runs (follow-up questions, a draft's polish, a manual
 * compaction's summary), at most `maxPerUser` of one user's at once (`gateway.max_active_runs_per_user`): in a line
 * of the user's own, apart from their runs, so that they neither wait behind the user's runs nor add to them.
 * Absent: no limit.
 */
export const userCalls = (maxPerUser: number | undefined): ((userId: string) => Places) => {
  if (maxPerUser === undefined) return () => (call) => call
  return placesByUser(maxPerUser)
}

/** `model` whose calls each wait for a place in the line of the user they are made for (`RunContext.userId`). */
export const lined = (model: ModelService["Type"], line: (userId: string) => Places): ModelService["Type"] => ({
  generate: (request) => Effect.flatMap(RunContext, (context) => line(context.userId)(model.generate(request)))
})
