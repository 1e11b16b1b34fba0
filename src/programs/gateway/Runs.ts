/**
 * The gateway's runs (SPEC §12.3): each run executes in a fiber of the server (a `FiberMap` keyed by run id,
 * living as long as the server), never in the fiber of the request that started it, so a client that goes
 * away and comes back loses nothing. Every event of a run gets an id and is kept in a bounded buffer of its
 * run; a subscriber streams from any cursor (`Last-Event-ID`) without loss or repetition, and one whose
 * cursor fell out of the buffer gets the `gap` event. A thread has one active run at a time: the manager
 * takes the thread's lease in the store when it accepts a run (so a second gateway process sharing the store
 * refuses too), and `multitask_strategy` decides what a new run does to an active one (reject, interrupt, roll
 * back). On start, runs a previous process left `running` are recorded as `error` ("server restarted").
 */
import type { Readable } from "node:stream"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { AppConfigService } from "../../services/AppConfig.js"
import { LiveConfig } from "../../services/LiveConfig.js"
import type { RunEvent } from "../../services/RunEvents.js"
import { RunHandover } from "../../services/RunHandover.js"
import type { RunRecord, StoredRunEvent } from "../../services/ThreadStore.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import type { Message } from "../../state/Message.js"
import * as M from "../../state/Message.js"
import * as Redact from "../../state/Redact.js"
import type { ThreadState } from "../../state/ThreadState.js"
import * as TS from "../../state/ThreadState.js"
import * as App from "../App.js"
import * as Factory from "../Factory.js"
import * as Run from "../Run.js"
import * as Admission from "./Admission.js"
import { GatewayError } from "./api/Problem.js"
import * as EventIds from "./EventIds.js"
import * as Fork from "./Fork.js"
import * as Projection from "./Projection.js"
import * as Protocol from "./Protocol.js"
import * as Queue from "./Queue.js"
import * as RunBuffer from "./RunBuffer.js"
import * as RunJournal from "./RunJournal.js"
import * as RunListener from "./RunListener.js"
import * as RunRecords from "./RunRecords.js"
import * as RunStream from "./RunStream.js"
import * as WorkspaceChanges from "./WorkspaceChanges.js"

export { GatewayError, statusOf } from "./api/Problem.js"
export { ROLLED_BACK, SERVER_RESTARTED } from "./RunRecords.js"
/** (Re-exported: the cluster follows runs of other processes with them.) */
export { framesOf, sseOf } from "./RunStream.js"

const internal = (error: { readonly message: string }) =>
  new GatewayError({ reason: "internal", message: error.message, cause: error })

/** What a new run is. */
export interface RunRequest {
  /** The thread as stored (see `ThreadIds`). */
  readonly threadId: string
  /** The thread as its user's client names it (what the run's stream and messages say); default `threadId`. */
  readonly publicThreadId?: string | undefined
  readonly userId: string
  /** Whether the run is an admin's (`RunOptions.admin`, from the request's token). */
  readonly admin?: boolean | undefined
  readonly assistantId: string
  /** The run's new messages (already decoded). */
  readonly messages: ReadonlyArray<Message>
  /** The thread's title the run's input sets. */
  readonly title?: string | undefined
  /** `command.resume`, when given. */
  readonly resume?: unknown
  /** Merged run settings (configurable + context, recursion limit). */
  readonly settings: Record<string, unknown>
  readonly modes: ReadonlyArray<Protocol.StreamMode>
  readonly multitaskStrategy: "reject" | "interrupt" | "rollback" | "enqueue"
  /** The run's metadata, as its Run object shows it. */
  readonly metadata: Readonly<Record<string, unknown>>
  /** What the run was asked with, as its Run object shows it (LangGraph's `kwargs`; already redacted). */
  readonly kwargs?: Readonly<Record<string, unknown>> | undefined
  /** Delete the thread once the run ends (a stateless run's `on_completion: delete`). */
  readonly deleteThread?: boolean | undefined
  /** The checkpoint the run starts from (the head: as usual; an older one: a fork, see `Fork`). */
  readonly checkpointId?: string | undefined
  /**
   * The run's id, when the caller chose it (a scheduled tick's, so that a tick started again after its process
   * died is the same run, never a second one); else a new one. A run of that id already recorded is refused.
   */
  readonly runId?: string | undefined
  /** How many times the run was resumed after its runner died (its event ids: `EventIds`); set by `resume`. */
  readonly resumes?: number | undefined
}

/** How a run is being stopped by a client. */
export type CancelAction = "interrupt" | "rollback"

/** A run this process executes, or executed recently: its event buffer and its end. */
export interface ActiveRun extends RunBuffer.Reader {
  readonly runId: string
  /** The thread as stored. */
  readonly threadId: string
  /** The thread as its user's client names it. */
  readonly publicThreadId: string
  readonly userId: string
  readonly modes: ReadonlyArray<Protocol.StreamMode>
  /** Ends with the run's final record once everything (rollback, deletion) is done. */
  readonly done: Deferred.Deferred<RunRecord>
  /** The state as the run's events left it. */
  readonly state: () => ThreadState
  /**
   * The run's events (`.../runs/{run_id}/events`) recorded so far, secrets redacted: read while this process runs it
   * (the store holds them as last kept); absent for a run of another process.
   */
  readonly events?: (() => ReadonlyArray<StoredRunEvent>) | undefined
}

/** The run manager of a gateway. */
export interface Service {
  /** Accepts a run and starts it in the server's fiber; refuses (409) when the thread is busy. */
  readonly start: (request: RunRequest) => Effect.Effect<ActiveRun, GatewayError>
  /** The run this process knows (running, or finished and still buffered). */
  readonly get: (runId: string) => ActiveRun | undefined
  /**
   * The run as this process can follow it: its own (as `get`), or, in a cluster, the one the thread's runner
   * runs or ran recently (see `cluster/ClusterRuns`).
   */
  readonly lookup: (threadId: string, runId: string) => Effect.Effect<ActiveRun | undefined, GatewayError>
  /**
   * Starts again, here and under its id, a run that a runner which died was running (or never started): from the
   * thread's last checkpoint (a tool call left open is answered "interrupted" by the run, never run again); of
   * its messages, those the thread already has are not added again.
   */
  readonly resume: (request: RunRequest, runId: string) => Effect.Effect<ActiveRun, GatewayError>
  /**
   * In a cluster: makes sure run `runId`, started with `request` by a process that may have died before making it
   * durable, goes on (its durable message sent again: harmless when it exists, the thread's runner answers both
   * once the run ended, and resumes it if no live process runs it); its end followed. None without a cluster (a
   * process starting records what a dead one left as ended).
   */
  readonly adopt?: ((request: RunRequest, runId: string) => Effect.Effect<ActiveRun, GatewayError>) | undefined
  /** The active run of a thread in this process. */
  readonly activeOf: (threadId: string) => ActiveRun | undefined
  /** Stops a run; with `wait`, returns once it ended (and was rolled back). */
  readonly cancel: (runId: string, action: CancelAction, wait: boolean) => Effect.Effect<void, GatewayError>
  /**
   * A run's stream as SSE text from `cursor` (0: from its first event), filtered to `modes` (all of the run's
   * when absent), with heartbeats; ends after `end`, or after `gap`. `onDisconnect` runs when the client is
   * gone before that (the stream destroyed). A Node `Readable`, which the response pipes to the socket.
   */
  readonly subscribe: (
    run: ActiveRun,
    cursor: number,
    modes?: ReadonlyArray<Protocol.StreamMode> | undefined,
    onDisconnect?: Effect.Effect<void> | undefined
  ) => Readable
  /**
   * In a cluster: run `run` as a reader of this process can follow it, its events after `cursor` (a run of
   * another runner: its frames kept here, as they come from its runner, while `Scope` lasts; a run of this
   * process: itself). None without a cluster (every run a process follows is its own).
   */
  readonly mirror?: ((run: ActiveRun, cursor: number) => Effect.Effect<RunBuffer.Reader, never, Scope.Scope>) | undefined
  /** Records runs a previous process left `running` or `pending` as `error` ("server restarted"). */
  readonly recover: Effect.Effect<ReadonlyArray<RunRecord>, GatewayError>
  /**
   * Stops a run of this process to hand it over to another (a cluster's runner draining, see `RunHandover`): it
   * stops at its last completed step, stays `running` in the store with its thread's lease released, and its
   * followers here see their streams end without `end` (they join again where it resumes). Returns once it
   * stopped; false when the run is not running here.
   */
  readonly handOver?: (runId: string) => Effect.Effect<boolean>
}

/** The run manager service. */
export class Runs extends Context.Tag("antler/gateway/Runs")<Runs, Service>() {}

/** Wraps a run's fiber (e.g. in the root span of its trace). */
export type Traced = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  run: RunRequest & { readonly runId: string }
) => Effect.Effect<A, E, R>

/** Options of the run manager. */
export interface Options {
  /** Events kept per run for replay. */
  readonly bufferSize: number
  /** Characters of event data kept per run for replay (the oldest events go first). */
  readonly bufferBytes: number
  /** Finished runs whose buffers are kept (and, up to GRACE_CAP times as many, those that ended recently). */
  readonly keepFinished: number
  /** Seconds between heartbeats. */
  readonly heartbeatSeconds: number
  /** The name of the model a run uses when its settings name none (what its stream metadata says). */
  readonly defaultModel?: string | undefined
  /** Runs executing at once; the others wait (`pending`) for a place. Absent: no limit. */
  readonly maxActiveRuns?: number | undefined
  /** What never leaves the server (secrets in streamed events). */
  readonly redact?: Redact.Redactor | undefined
  /** Runs its fibers with this wrapper (a trace root span). */
  readonly traced?: Traced | undefined
}

/** How long a finished run stays joinable past `keepFinished` (the newest ones), at least. */
export const FINISHED_GRACE_MS = 60_000

/** At most this many times `keepFinished` finished runs are kept for the grace period. */
export const GRACE_CAP = 50

/** A running run's events are kept in the store each time they grew by this many (or by half, if more). */
export const SAVE_EVERY = 20

/** How a run is stopped: by a client, or to hand it over to another process (see `Service.handOver`). */
type Stop = CancelAction | typeof HANDOVER
const HANDOVER = "handover"

/** The run manager over the app's factory, store and configuration; its runs end with its scope. */
export const layer = (
  options: Options
): Layer.Layer<Runs, never, Factory.AgentFactory | ThreadStore | AppConfigService> =>
  Layer.scoped(
    Runs,
    Effect.gen(function*() {
      const factory = yield* Factory.AgentFactory
      const store = yield* ThreadStore
      const app = yield* AppConfigService
      const redact = options.redact ?? Redact.none
      const fibers = yield* FiberMap.make<string>()
      const known = new Map<string, ActiveRun>()
      const finishedOrder: Array<{ readonly runId: string; readonly at: number }> = []
      const active = new Map<string, ActiveRun & { readonly stop: (action: Stop) => Effect.Effect<void> }>()
      const lock = yield* Effect.makeSemaphore(1)
      const admitted = yield* Admission.make(store, options.maxActiveRuns)
      // what a subscriber's stream runs when its client goes away (outside any request's fiber)
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())

      // the newest `keepFinished` finished runs stay joinable, and so does any that ended less than a grace
      // period ago (clients that dropped mid-run rejoin late under load), up to GRACE_CAP times as many
      const forget = (runId: string, now: number) => {
        finishedOrder.push({ runId, at: now })
        const cap = options.keepFinished * GRACE_CAP
        while (
          finishedOrder.length > options.keepFinished &&
          (finishedOrder.length > cap || finishedOrder[0]!.at + FINISHED_GRACE_MS <= now)
        ) known.delete(finishedOrder.shift()!.runId)
      }

      const json = (data: unknown): string => {
        const text = JSON.stringify(data)
        return redact.test(text) ? JSON.stringify(redact.value(data)) : text
      }

      // the default model of a run: the first of `config.yaml`'s models as it is when the run starts (`LiveConfig`)
      const live = yield* Effect.serviceOption(LiveConfig)
      const defaultModel = Option.isNone(live)
        ? Effect.succeed(options.defaultModel)
        : Effect.map(live.value.current, (snap) => snap.models[0]?.name ?? options.defaultModel)

      const makeRun = (
        request: RunRequest,
        runId: string,
        initial: ThreadState,
        stamp: () => string,
        modelName: string | undefined
      ) => {
        const journal = RunJournal.make(stamp)
        const projector = Projection.makeProjector({
          runId,
          threadId: request.publicThreadId ?? request.threadId,
          modes: request.modes,
          initial,
          modelName: typeof request.settings.model_name === "string" && request.settings.model_name !== ""
            ? request.settings.model_name
            : modelName,
          redact,
          attempt: (request.resumes ?? 0) + 1,
          input: request.messages.length > 0 ? { messages: request.messages } : null,
          assistantId: request.assistantId
        })
        const buffer = RunBuffer.make(runId, options, json, EventIds.firstId(request.resumes ?? 0))
        const run: ActiveRun = {
          runId,
          threadId: request.threadId,
          publicThreadId: request.publicThreadId ?? request.threadId,
          userId: request.userId,
          modes: request.modes,
          done: Deferred.unsafeMake<RunRecord>(FiberId.none),
          finished: buffer.finished,
          after: buffer.after,
          changes: buffer.changes,
          onChange: buffer.onChange,
          state: projector.state,
          events: () => redact.value(journal.events())
        }
        return { run, append: buffer.append, close: buffer.close, projector, journal }
      }

      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

      const execute = (
        request: RunRequest,
        runId: string,
        made: ReturnType<typeof makeRun>,
        stop: Deferred.Deferred<Stop>
      ) =>
        Effect.gen(function*() {
          const { run, append, journal } = made
          const owner = request.userId
          // (the folder ToolOutputBudget saves long tool results in is the harness's, not a change of the run's)
          const savedOutputs = [app.config.tool_output.storage_subdir]
          const filesBefore = yield* WorkspaceChanges.snapshot(app.home, owner, request.threadId, savedOutputs)
          // a custom event naming the thread (a safety stop's) names it as the client does
          const publicEvent = (event: RunEvent): RunEvent => {
            if (event.type !== "custom" || run.publicThreadId === request.threadId) return event
            const data = event.data as { readonly thread_id?: unknown } | null | undefined
            return typeof data === "object" && data !== null && data.thread_id === request.threadId
              ? { ...event, data: { ...data, thread_id: run.publicThreadId } }
              : event
          }
          // The journal is kept when a subagent ends (its steps can be read while the run goes on), as it grows
          // (by SAVE_EVERY events or by half, whichever is more: a few saves a run, what another process reads)
          // and when the run ends; the run's end is kept last, and no earlier save overwrites it. (This process
          // reads a running run's journal itself, `ActiveRun.events`.)
          let settled = false
          const saving = yield* Effect.makeSemaphore(1)
          const saveJournal = (last: boolean) =>
            saving.withPermits(1)(Effect.suspend(() => {
              if (settled) return Effect.void
              settled = last
              return store.saveRunEvents(request.threadId, runId, redact.value(journal.events())).pipe(
                Effect.catchAll((error) =>
                  Effect.logWarning(`run ${runId}: its events were not kept: ${error.message}`)
                )
              )
            }))
          const keep = yield* Effect.makeLatch(false)
          let nextSave = SAVE_EVERY
          const grown = () => {
            const count = journal.count()
            if (count < nextSave) return false
            nextSave = count + Math.max(SAVE_EVERY, Math.floor(count / 2))
            return true
          }
          yield* keep.await.pipe(
            Effect.zipRight(keep.close),
            Effect.zipRight(saveJournal(false)),
            Effect.forever,
            Effect.fork
          )
          const listener = RunListener.make(publicEvent, (encoded) => {
            journal.push(encoded)
            if (request.deleteThread !== true && (grown() || RunJournal.endsSubagent(encoded))) keep.unsafeOpen()
            append(made.projector.push(encoded))
          })
          let handingOver = false
          const turn = factory.turn({
            threadId: request.threadId,
            runId,
            userId: request.userId,
            messages: request.messages,
            title: request.title,
            settings: request.settings,
            admin: request.admin === true
          }, listener.onEvent).pipe(
            Effect.provideService(RunHandover, { requested: () => handingOver }),
            admitted(request.threadId, runId)
          )
          // stopped by a client: the run is interrupted (one race for the run, not one per event; a run still
          // waiting for its place never starts). Whatever stops it (a client, the server stopping), the run is
          // waited for until it has ended and said so in the store.
          const turnFiber = yield* Effect.fork(turn)
          yield* Effect.raceFirst(
            Deferred.await(stop).pipe(Effect.andThen((how) => Effect.sync(() => {
              handingOver = how === HANDOVER
              listener.stop()
            }))),
            Fiber.join(turnFiber)
          ).pipe(Effect.ensuring(Fiber.interrupt(turnFiber)), Effect.ensuring(Effect.sync(listener.stop)))
          const broken = listener.broken()
          if (broken !== undefined) return yield* Effect.die(broken.defect)
          if (listener.invalid.length > 0) {
            yield* Effect.logWarning(`run ${runId}: events left out of its stream: ${listener.invalid.join("; ")}`)
          }
          const end = listener.end()
          const how: Stop | undefined = yield* Deferred.poll(stop).pipe(
            Effect.flatMap(Option.match({ onNone: () => Effect.succeed(undefined), onSome: (stopped) => stopped }))
          )
          if (how === HANDOVER) {
            // handed over: the run stays `running` in the store for the thread's next runner; here it is gone
            yield* Effect.ignore(store.releaseLease(request.threadId, runId))
            if (active.get(request.threadId)?.runId === runId) active.delete(request.threadId)
            known.delete(runId)
            made.close()
            const left = yield* RunRecords.latest(store, runId)
            yield* Deferred.succeed(run.done, left ?? RunRecords.base(request.threadId, runId, yield* now))
            return
          }
          const action: CancelAction | undefined = how
          const record = yield* RunRecords.settle(store, request.threadId, runId, action, end)
          const undone = action !== "rollback" && (yield* RunRecords.undoFailedEdit(store, record, request.metadata))
          yield* Effect.ignore(store.releaseLease(request.threadId, runId))
          const outs: Array<Projection.Out> = []
          if (action !== undefined || undone) {
            // what the cancelled run left (or the rollback, or a failed edit's undoing, restored): the client
            // reloads nothing
            const loaded = yield* Effect.orElseSucceed(store.load(request.threadId), () => Option.none())
            if (Option.isSome(loaded) && request.modes.includes("values")) {
              outs.push({ event: "values", data: Protocol.publicValues(loaded.value.state) })
            }
          }
          outs.push({ event: "end", data: null })
          if (request.deleteThread !== true) {
            const changes = WorkspaceChanges.compare(
              filesBefore,
              yield* WorkspaceChanges.snapshot(app.home, owner, request.threadId, savedOutputs)
            )
            if (WorkspaceChanges.changed(changes)) journal.workspace(changes)
            // (in LangGraph's terms, as the run object says it: a cancelled run is `interrupted`)
            journal.end({
              status: Protocol.runStatus(record),
              stop_reason: record.stop_reason,
              error: record.error,
              error_type: end?.error?.name
            })
            yield* saveJournal(true)
          }
          active.delete(request.threadId)
          if (request.deleteThread === true) {
            yield* App.deleteThread(app.home, request.threadId, request.userId).pipe(
              Effect.provideService(ThreadStore, store),
              Effect.ignoreLogged
            )
          }
          append(outs)
          forget(runId, yield* Clock.currentTimeMillis)
          yield* Deferred.succeed(run.done, record)
        })

      /** The run `runId`, if it is a thread's active run here. */
      const activeRun = (runId: string) => {
        for (const entry of active.values()) if (entry.runId === runId) return entry
        return undefined
      }

      const queues = Queue.makeQueues<RunRequest>({
        saveRun: (record) => Effect.mapError(store.saveRun(record), internal),
        baseRecord: RunRecords.base,
        now,
        run: (id, effect) => FiberMap.run(fibers, id, effect),
        known,
        active: (threadId) => active.get(threadId),
        start: (request: RunRequest, runId: string) => startWith(request, runId)
      })

      const start: Service["start"] = (request) => startWith(request)

      const resume: Service["resume"] = (request, runId) =>
        Effect.gen(function*() {
          const loaded = yield* Effect.mapError(store.load(request.threadId), internal)
          const stored = Option.match(loaded, { onNone: () => [], onSome: (thread) => thread.state.messages })
          // (a message the run was given is kept under its id, or an id made from it)
          const had = (id: string) => stored.some((m) => m.id === id || m.id?.startsWith(`${id}__`) === true)
          const messages = request.messages.filter((m) => m.id === undefined || !had(m.id))
          const { checkpointId: _, resume: __, ...rest } = request
          // its events are numbered after every id an earlier attempt gave (`EventIds`)
          const record = (yield* Effect.mapError(store.runs({ runId }), internal))[0]
          const resumes = EventIds.resumesOf(record) + 1
          return yield* startWith({ ...rest, messages, multitaskStrategy: "reject", resumes }, runId)
        })

      const startWith = (request: RunRequest, queuedId?: string): Effect.Effect<ActiveRun, GatewayError> =>
        lock.withPermits(1)(Effect.gen(function*() {
          const runId = queuedId ?? request.runId ?? M.newId()
          const shown = request.publicThreadId ?? request.threadId
          if (queuedId === undefined && request.runId !== undefined && request.resumes === undefined) {
            const recorded = yield* Effect.mapError(store.runs({ runId }), internal)
            if (recorded.length > 0) {
              return yield* new GatewayError({ reason: "conflict", message: `Run ${runId} was already started.` })
            }
          }
          const current = active.get(request.threadId)
          if (request.multitaskStrategy === "enqueue" && (current !== undefined || queues.has(request.threadId))) {
            return yield* queues.enqueue(request)
          }
          if (current !== undefined) {
            if (request.multitaskStrategy === "interrupt" || request.multitaskStrategy === "rollback") {
              yield* current.stop(request.multitaskStrategy)
              yield* Deferred.await(current.done)
            } else {
              return yield* new GatewayError({
                reason: "conflict",
                message: `Thread ${shown} already has a run in progress (run ${current.runId}). Wait for ` +
                  `it to end, cancel it, or start this run with multitask_strategy "interrupt" or "rollback".`
              })
            }
          }
          // the lease, taken now under this run's id: a gateway process sharing the store refuses the thread too
          const holder = yield* Run.takeLease(store, request.threadId, runId).pipe(Effect.mapError(internal))
          if (holder !== undefined) {
            return yield* new GatewayError({ reason: "conflict", message: Run.busyMessage(shown, holder) })
          }
          const forkedFrom = request.checkpointId === undefined
            ? undefined
            : yield* Fork.fromCheckpoint(request.threadId, runId, request.checkpointId).pipe(
              Effect.provideService(ThreadStore, store),
              Effect.tapError(() => Effect.ignore(store.releaseLease(request.threadId, runId)))
            )
          const loaded = yield* store.load(request.threadId).pipe(
            Effect.tapError(() => Effect.ignore(store.releaseLease(request.threadId, runId))),
            Effect.mapError(internal)
          )
          const state = Option.match(loaded, { onNone: () => TS.empty, onSome: (t) => t.state })
          const messages = Protocol.withClarificationAnswer(state, request.messages, request.resume)
          const at = yield* now
          yield* store.saveRun({
            ...RunRecords.base(request.threadId, runId, at),
            metadata: {
              assistant_id: request.assistantId,
              multitask_strategy: request.multitaskStrategy,
              metadata: request.metadata,
              ...(request.kwargs !== undefined ? { kwargs: request.kwargs } : {}),
              user_id: request.userId,
              ...(forkedFrom !== undefined ? { [Fork.FORKED_FROM]: forkedFrom } : {}),
              ...(request.resumes !== undefined ? { [EventIds.RESUMES_KEY]: request.resumes } : {})
            }
          }).pipe(
            Effect.tapError(() => Effect.ignore(store.releaseLease(request.threadId, runId))),
            Effect.mapError(internal)
          )
          const clock = yield* Effect.clock
          const made = makeRun(
            { ...request, messages },
            runId,
            state,
            () => new Date(clock.unsafeCurrentTimeMillis()).toISOString(),
            yield* defaultModel
          )
          const stop = Deferred.unsafeMake<Stop>(FiberId.none)
          const entry = {
            ...made.run,
            stop: (action: Stop) => Effect.asVoid(Deferred.succeed(stop, action))
          }
          known.set(runId, made.run)
          active.set(request.threadId, entry)
          // whatever happens to the run's fiber (a defect, the server stopping), the thread is freed and
          // waiters and subscribers learn the run ended
          const settle = Effect.gen(function*() {
            if (active.get(request.threadId)?.runId === runId) active.delete(request.threadId)
            const record = yield* RunRecords.latest(store, runId)
            // an edit's run stopped with the server (or ended by a defect) is undone as a failed one is
            if (record !== undefined) yield* RunRecords.undoFailedEdit(store, record, request.metadata)
            yield* Effect.ignore(store.releaseLease(request.threadId, runId))
            if (!made.run.finished()) made.append([{ event: "end", data: null }])
            const fallback = RunRecords.base(request.threadId, runId, new Date().toISOString())
            yield* Deferred.succeed(made.run.done, record ?? fallback)
          })
          const body = execute({ ...request, messages }, runId, made, stop).pipe(
            Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : settle)),
            Effect.catchAllDefect((defect) => Effect.logError(`run ${runId} failed`, defect))
          )
          yield* FiberMap.run(
            fibers,
            runId,
            options.traced === undefined ? body : options.traced(body, { ...request, runId })
          )
          return made.run
        }))

      const cancel: Service["cancel"] = (runId, action, wait) =>
        Effect.gen(function*() {
          const run = known.get(runId)
          // a queued run, not started: it ends now
          if (run !== undefined && (yield* queues.cancel(run.threadId, runId))) return
          if (run === undefined || run.finished() || active.get(run.threadId)?.runId !== runId) {
            const record = (yield* store.runs({ runId }).pipe(Effect.mapError(internal)))[0]
            if (record !== undefined && RunRecords.unfinished(record)) {
              return yield* new GatewayError({
                reason: "conflict",
                message: `Run ${runId} runs in another gateway process; cancel it there.`
              })
            }
            // cancelling a cancelled run again is done already (DeerFlow's cancel is idempotent: 202, not 409)
            if (record?.status === "cancelled") return
            return yield* new GatewayError({
              reason: "conflict",
              message: record === undefined
                ? `Run ${runId} is not running.`
                : `Run ${runId} is not cancellable (status: ${Protocol.runStatus(record)}).`
            })
          }
          yield* activeRun(runId)?.stop(action) ?? Effect.void
          if (wait) yield* Deferred.await(run.done)
        })

      const subscribe: Service["subscribe"] = (run, cursor, modes, onDisconnect) =>
        RunStream.subscribe(
          run,
          cursor,
          modes,
          onDisconnect === undefined ? undefined : () => runFork(onDisconnect),
          options.heartbeatSeconds
        )

      const recover: Service["recover"] = Effect.mapError(RunRecords.recover(store), internal)

      const handOver: NonNullable<Service["handOver"]> = (runId) =>
        Effect.gen(function*() {
          const entry = activeRun(runId)
          if (entry === undefined) return false
          yield* entry.stop(HANDOVER)
          yield* Deferred.await(entry.done)
          return true
        })

      return Runs.of({
        handOver,
        start,
        get: (runId) => known.get(runId),
        lookup: (_threadId, runId) => Effect.sync(() => known.get(runId)),
        resume,
        activeOf: (threadId) => active.get(threadId),
        cancel,
        subscribe,
        recover
      })
    })
  )
