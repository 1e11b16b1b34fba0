/**
 * A thread's stream (LangGraph's `GET /threads/{thread_id}/stream`, the SDK's `threads.joinStream`): the events
 * of the thread's runs, one run after the other as this process (or, in a cluster, the thread's runner) runs them,
 * open until the client goes. Each
 * event's id is `<run id>:<event id>`, which a client rejoins with as `Last-Event-ID`: the stream goes on after
 * that event (the run's `gap` when it is no longer kept, and then the thread's next runs). Without one it starts
 * with what the thread's active run does next; `-` starts with the first kept event of the thread's latest run.
 * Idle, it waits for the thread's next run to start in this process, reading nothing meanwhile; in a cluster, where
 * another runner may start it, also for the cluster's notice that a run of the thread started or ended on any runner
 * (`cluster/RunNotices`), then reads the thread's run records; and it reads them every 30 seconds whatever happens
 * (every 3 without notices).
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { RunRecord } from "../../services/ThreadStore.js"
import * as EventIds from "./EventIds.js"
import * as Protocol from "./Protocol.js"
import * as RunRecords from "./RunRecords.js"
import type { Reader } from "./RunBuffer.js"

/** What a thread stream carries: its runs' events (`run_modes`), their starts and ends, or their states. */
export const MODES = ["run_modes", "lifecycle", "state_update"] as const

/** One of `MODES`. */
export type ThreadStreamMode = (typeof MODES)[number]

/** Where a thread stream starts. */
export type Cursor =
  /** With what the thread's active run does next. */
  | { readonly _tag: "now" }
  /** With the first kept event of the thread's latest run (`Last-Event-ID: -`). */
  | { readonly _tag: "start" }
  /** After event `id` of run `runId`. */
  | { readonly _tag: "after"; readonly runId: string; readonly id: number }

/** The cursor a `Last-Event-ID` names (none: `now`); undefined when it names no event. */
export const parseCursor = (header: string | undefined): Cursor | undefined => {
  const text = header?.trim() ?? ""
  if (text === "") return { _tag: "now" }
  if (text === "-") return { _tag: "start" }
  const at = text.lastIndexOf(":")
  const id = EventIds.parse(text.slice(at + 1))
  if (at <= 0 || id === undefined) return undefined
  return { _tag: "after", runId: text.slice(0, at), id }
}

/** A run this process knows, as the thread stream reads it. */
export interface FollowedRun extends Reader {
  readonly runId: string
}

/** Where the thread stream finds the thread's runs. */
export interface Source {
  /** The thread's active run in this process. */
  readonly active: () => FollowedRun | undefined
  /**
   * A run whose events are still kept, as the stream follows it from `cursor`: one of this process, or, in a
   * cluster, one of the runner of its thread.
   */
  readonly get: (runId: string, cursor: number) => Effect.Effect<FollowedRun | undefined>
  /** The thread's run records. */
  readonly records: Effect.Effect<ReadonlyArray<RunRecord>>
  /** Calls `listener` with each run that starts on the thread in this process from now on; returns how to stop. */
  readonly onStart: (listener: (run: FollowedRun) => void) => () => void
  /**
   * Whether another process may start the thread's runs (a cluster, where the thread's runner may be another): an
   * idle stream then also reads the thread's run records, when `onNotice` says to and every `NOTICED_EVERY` (every
   * `RECORDS_EVERY` without notices).
   */
  readonly elsewhere: boolean
  /**
   * Calls `listener` when a run of the thread may have started or ended in another process (a cluster's notice);
   * returns how to stop.
   */
  readonly onNotice?: ((listener: () => void) => () => void) | undefined
}

const LIFECYCLE: ReadonlySet<string> = new Set(["metadata", "end", "error"])

/** Whether a run's event goes out in `modes` (a `gap` always does). */
const keepOf = (modes: ReadonlyArray<ThreadStreamMode>) => (event: string) =>
  event === "gap" || modes.includes("run_modes") ||
  (modes.includes("lifecycle") && LIFECYCLE.has(event)) ||
  (modes.includes("state_update") && event === "values")

/** A run's event as the thread stream's SSE text: its id prefixed with the run's. */
const sseOf = (runId: string, frame: Protocol.Frame) =>
  `event: ${frame.event}\ndata: ${frame.data}\nid: ${runId}:${frame.id}\n\n`

/**
 * In a cluster without notices, how long an idle stream waits for a run of this process before it reads the
 * thread's run records (a run another runner started). Without a cluster it reads none while idle: a run starting
 * here wakes it.
 */
const RECORDS_EVERY = "3 seconds"

/** With notices, how long an idle stream waits for one before it reads the records anyway (a notice lost). */
const NOTICED_EVERY = "30 seconds"

/** The ids of the runs followed last, newest last (a few: the runs a stream may still meet again). */
const REMEMBERED = 32

interface Following {
  readonly run: FollowedRun
  readonly position: number
}

interface State {
  readonly following: Following | undefined
  /** The runs followed so far (the last `REMEMBERED`). */
  readonly followed: ReadonlyArray<string>
  /**
   * The thread's run records as the stream read them when it began, while they may still name a run to follow
   * after the one it starts with (rejoined with a `Last-Event-ID`: the thread's runs after it); runs that start
   * later reach the stream as they start.
   */
  readonly recorded?: ReadonlyArray<RunRecord> | undefined
  /**
   * A run of this process the stream followed until it was handed over (in a cluster, its thread's shard given to
   * another runner: its buffer ended without `end`), and where: followed again, on the thread's next runner, once
   * that runner resumed it (its event ids go on above these), as a run of another runner is carried over.
   */
  readonly carried?: Following | undefined
}

/**
 * The runs started on a thread in this process since a stream began, as they start (the last `REMEMBERED`), and
 * whether a notice came meanwhile.
 */
interface Started {
  /** The oldest run not taken yet. */
  readonly take: () => FollowedRun | undefined
  /** Whether a notice came since the last call (and forgets it). */
  readonly noticed: () => boolean
  /** Until a run started that was not taken yet, or a notice came (one listener, no fiber). */
  readonly wait: Effect.Effect<void>
  readonly close: () => void
}

const started = (source: Source): Started => {
  const runs: Array<FollowedRun> = []
  let notice = false
  let wake: (() => void) | undefined
  const closeStarts = source.onStart((run) => {
    runs.push(run)
    if (runs.length > REMEMBERED) runs.shift()
    wake?.()
  })
  const closeNotices = source.onNotice?.(() => {
    notice = true
    wake?.()
  })
  const close = () => {
    closeStarts()
    closeNotices?.()
  }
  return {
    take: () => runs.shift(),
    noticed: () => {
      const was = notice
      notice = false
      return was
    },
    wait: Effect.async<void>((resume) => {
      if (runs.length > 0 || notice) return resume(Effect.void)
      wake = () => {
        wake = undefined
        resume(Effect.void)
      }
      return Effect.sync(() => {
        wake = undefined
      })
    }),
    close
  }
}

/** Until `run` appends after `seen` (one listener, no fiber). */
const appended = (run: Reader, seen: number): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (run.changes() !== seen) return resume(Effect.void)
    return Effect.sync(run.onChange(() => resume(Effect.void)))
  })

const remember = (followed: ReadonlyArray<string>, runId: string) =>
  followed.includes(runId) ? followed : [...followed, runId].slice(-REMEMBERED)

const ordered = (records: ReadonlyArray<RunRecord>) =>
  [...records].sort((a, b) => a.started_at.localeCompare(b.started_at))

/**
 * The first run of `records` after the last one followed whose events are kept and no one followed yet; first the
 * run `carried` over to another runner, once that runner resumed it (`pending` while it has not and the run's
 * record says it goes on).
 */
const nextRecorded = (
  source: Source,
  records: ReadonlyArray<RunRecord>,
  followed: ReadonlyArray<string>,
  carried?: Following
): Effect.Effect<FollowedRun | "pending" | undefined> =>
  Effect.gen(function*() {
    if (carried !== undefined) {
      const resumed = yield* source.get(carried.run.runId, carried.position)
      if (resumed !== undefined && resumed !== carried.run) return resumed
      const record = records.find((r) => r.run_id === carried.run.runId)
      if (record !== undefined && RunRecords.unfinished(record)) return "pending"
    }
    const runs = ordered(records)
    // (none followed yet: the thread had no run when the stream began)
    const last = followed.length === 0 ? -1 : runs.findIndex((r) => r.run_id === followed[followed.length - 1])
    if (last < 0 && followed.length > 0) return undefined
    for (const record of runs.slice(last + 1)) {
      const run = followed.includes(record.run_id) ? undefined : yield* source.get(record.run_id, 0)
      if (run !== undefined) return run
    }
    return undefined
  })

/**
 * The run and position the stream starts at (`cursor`), and the runs it is not to follow again; and, for a cursor
 * naming a run whose events are no longer kept, that run's `gap` to send first (the client reloads the thread's
 * state).
 */
const startOf = (source: Source, cursor: Cursor): Effect.Effect<readonly [State, string | undefined]> =>
  Effect.gen(function*() {
    // (with no run to follow, the thread's latest is the one after which the next is looked for)
    const recorded = yield* source.records
    const latest = ordered(recorded).at(-1)
    const none: State = { following: undefined, followed: latest === undefined ? [] : [latest.run_id] }
    switch (cursor._tag) {
      case "now": {
        const own = source.active()
        if (own !== undefined) {
          const last = own.after(0).frames.at(-1)?.id ?? 0
          return [{ following: { run: own, position: last }, followed: [own.runId] }, undefined] as const
        }
        // (in a cluster, an active run of another runner: followed from its first kept event)
        const active = latest !== undefined && RunRecords.unfinished(latest) ? latest : undefined
        const run = active === undefined ? undefined : yield* source.get(active.run_id, 0)
        if (run === undefined && active !== undefined) {
          // an active run no runner answers for now (its thread's shard moving, or its runner gone): not taken for
          // followed, so the stream follows it when it goes on (its start here, or a notice, says when)
          const before = ordered(recorded).at(-2)
          return [{ following: undefined, followed: before === undefined ? [] : [before.run_id] }, undefined] as const
        }
        if (run === undefined) return [none, undefined] as const
        return [{ following: { run, position: 0 }, followed: [run.runId] }, undefined] as const
      }
      case "start": {
        const run = source.active() ?? (latest === undefined ? undefined : yield* source.get(latest.run_id, 0))
        if (run === undefined) return [none, undefined] as const
        return [{ following: { run, position: 0 }, followed: [run.runId] }, undefined] as const
      }
      case "after": {
        const run = yield* source.get(cursor.runId, cursor.id)
        if (run === undefined) {
          const gap = Protocol.gapPayload(cursor.runId, cursor.id, cursor.id + 1, cursor.id)
          return [
            { ...none, followed: [cursor.runId], recorded },
            sseOf(cursor.runId, { id: cursor.id, event: "gap", data: JSON.stringify(gap) })
          ] as const
        }
        return [{ following: { run, position: cursor.id }, followed: [run.runId], recorded }, undefined] as const
      }
    }
  })

/**
 * The thread's stream from `cursor` as SSE text, each event in `modes`, with a heartbeat at once (the response
 * starts before the first event) and every `heartbeatSeconds`; it does not end (the client closes it). A cursor
 * naming a run this process no longer keeps starts with that run's `gap` (the client reloads the thread's
 * state), then follows the thread's next runs.
 */
export const stream = (
  source: Source,
  cursor: Cursor,
  modes: ReadonlyArray<ThreadStreamMode>,
  heartbeatSeconds: number
): Stream.Stream<string> => {
  const keep = keepOf(modes)
  type Step = Effect.Effect<readonly [Chunk.Chunk<string>, Option.Option<State>]>
  const step = (starts: Started) => (state: State): Step =>
    Effect.gen(function*() {
      const { following, followed } = state
      if (following !== undefined) {
        const { run, position } = following
        for (;;) {
          const seen = run.changes()
          const found = run.after(position)
          const done: State = { ...state, following: undefined }
          if (found.gap !== undefined) return [Chunk.of(sseOf(run.runId, found.gap)), Option.some(done)] as const
          if (found.frames.length > 0) {
            let text = ""
            for (const frame of found.frames) if (keep(frame.event)) text += sseOf(run.runId, frame)
            const last = found.frames[found.frames.length - 1]!
            const next: State = last.event === "end" ? done : { ...state, following: { run, position: last.id } }
            return [text === "" ? Chunk.empty<string>() : Chunk.of(text), Option.some(next)] as const
          }
          // (its buffer ended without `end`: handed over to the thread's next runner, where it goes on)
          if (run.finished()) {
            const handed: State = source.elsewhere ? { ...done, carried: { run, position } } : done
            return [Chunk.empty<string>(), Option.some(handed)] as const
          }
          yield* appended(run, seen)
        }
      }
      // idle: the next run started here (in their order), or, in a cluster, the next the thread's records name
      const follow = (run: FollowedRun, recorded?: ReadonlyArray<RunRecord>) => {
        const next: State = { following: { run, position: 0 }, followed: remember(followed, run.runId), recorded }
        return [Chunk.empty<string>(), Option.some(next)] as const
      }
      let carried = state.carried
      if (carried !== undefined) {
        // (the next runner may have resumed it already: its notice then came before this stream listened again)
        const resumed = yield* nextRecorded(source, yield* source.records, followed, carried)
        if (resumed !== undefined && resumed !== "pending") return follow(resumed)
        if (resumed === undefined) carried = undefined
      }
      if (state.recorded !== undefined) {
        const next = yield* nextRecorded(source, state.recorded, followed)
        if (next !== undefined && next !== "pending") return follow(next, state.recorded)
      }
      for (;;) {
        let own = starts.take()
        while (own !== undefined && followed.includes(own.runId) && own.runId !== carried?.run.runId) {
          own = starts.take()
        }
        if (own !== undefined) return follow(own)
        if (!source.elsewhere) {
          yield* starts.wait
          continue
        }
        const every = source.onNotice === undefined ? RECORDS_EVERY : NOTICED_EVERY
        const woke = Option.isSome(yield* Effect.timeoutOption(starts.wait, every))
        // (a run started here: taken above; a notice, or none for a while: the records say what happened)
        if (!starts.noticed() && woke) continue
        const recorded = yield* nextRecorded(source, yield* source.records, followed, carried)
        if (recorded === "pending") continue
        if (recorded !== undefined) return follow(recorded)
        carried = undefined
      }
    })
  const events = Stream.unwrapScoped(Effect.gen(function*() {
    // (listening before the stream looks at the thread: a run starting meanwhile is not missed)
    const starts = yield* Effect.acquireRelease(Effect.sync(() => started(source)), (s) => Effect.sync(s.close))
    const [start, gap] = yield* startOf(source, cursor)
    const runs = Stream.paginateChunkEffect(start, step(starts))
    return gap === undefined ? runs : Stream.concat(Stream.make(gap), runs)
  }))
  const heartbeats = Stream.fromSchedule(Schedule.spaced(`${heartbeatSeconds} seconds`)).pipe(
    Stream.map(() => Protocol.HEARTBEAT)
  )
  return Stream.concat(
    Stream.make(Protocol.HEARTBEAT),
    Stream.merge(events, heartbeats, { haltStrategy: "left" })
  )
}
