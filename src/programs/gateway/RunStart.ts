/**
 * How a gateway run starts (see `Runs`): a thread has one active run at a time. The manager takes the thread's
 * lease in the store when it accepts a run (so a second gateway process sharing the store refuses too), and
 * `multitask_strategy` decides what a new run does to an active one (reject, interrupt, roll back, or wait behind
 * it: `Queue`). An accepted run is recorded, forked from an older checkpoint when asked (`Fork`), and executed in a
 * fiber of the server (`RunExecution`), never in the fiber of the request that started it; whatever ends that
 * fiber, the thread is freed and the run's waiters learn its end. A run a dead runner left is resumed under its id.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as SkillSecrets from "../../services/SkillSecrets.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import * as TS from "../../state/ThreadState.js"
import * as Run from "../Run.js"
import { GatewayError } from "./api/Problem.js"
import * as EventIds from "./EventIds.js"
import * as Fork from "./Fork.js"
import * as InputBounds from "./InputBounds.js"
import * as Protocol from "./Protocol.js"
import * as Queue from "./Queue.js"
import * as QuotaReservations from "./QuotaReservations.js"
import { QuotaExceeded } from "./Quotas.js"
import * as RunExecution from "./RunExecution.js"
import type { ActiveRun, RunRequest } from "./RunModel.js"
import { internal, now } from "./RunModel.js"
import * as RunRecords from "./RunRecords.js"
import * as StorageQuota from "./StorageQuota.js"

/** What starting runs needs of the manager, besides what a run needs. */
export interface Deps extends RunExecution.Deps {
  /** The server's fibers of the runs (and of the queued runs' waits), by run id. */
  readonly fibers: FiberMap.FiberMap<string>
  /** Runs start one at a time (the thread's active run, its lease). */
  readonly lock: Effect.Semaphore
  /** The model a run uses when its settings name none, as the configuration is when it starts. */
  readonly defaultModel: Effect.Effect<string | undefined>
  /** What the runs admitted and not ended are to add, against which a new run is admitted (its own reserved). */
  readonly reservations: QuotaReservations.Service
}

/** How runs start: now (`start`), under the id of a run a dead runner left (`resume`), or queued. */
export interface Starter {
  /** Accepts a run and starts it (refused, 409, when the thread is busy and the strategy is "reject"). */
  readonly start: (request: RunRequest) => Effect.Effect<ActiveRun, GatewayError>
  /** Starts again, under its id, a run that a runner which died was running (see `Runs.Service.resume`). */
  readonly resume: (request: RunRequest, runId: string) => Effect.Effect<ActiveRun, GatewayError>
  /** The runs waiting behind each thread's active run. */
  readonly queues: ReturnType<typeof Queue.makeQueues<RunRequest>>
}

/** The starter of a run manager. */
export const make = (deps: Deps): Starter => {
  const { store, options, fibers, lock, defaultModel, reservations } = deps
  const { known, active } = deps.registry

  const queues = Queue.makeQueues<RunRequest>({
    saveRun: (record) => Effect.mapError(store.saveRun(record), internal),
    baseRecord: RunRecords.base,
    now,
    run: (id, effect) => FiberMap.run(fibers, id, effect),
    known,
    active: (threadId) => active.get(threadId),
    start: (request: RunRequest, runId: string) => startWith(request, runId)
  })

  const startWith = (request: RunRequest, queuedId?: string, resumed = false): Effect.Effect<ActiveRun, GatewayError> =>
    // (from the lease on, the start runs to its end even when the request's fiber is interrupted, a client gone: the
    // lease and the reservation are handed to the run's fiber, freed at its end, or freed here; the waits before it,
    // and the run itself, stay interruptible)
    lock.withPermits(1)(Effect.uninterruptibleMask((restore) => Effect.gen(function*() {
      const runId = queuedId ?? request.runId ?? M.newId()
      // a run resumed ends once: one that ended since it was found unfinished (resumed here by another delivery of
      // its durable message, which has ended it) is not run again (its record read here, under the thread's lease
      // its resumer holds, is its last)
      if (resumed) {
        const last = yield* restore(Effect.mapError(store.runs({ runId }), internal))
        if (last[0] !== undefined && !RunRecords.unfinished(last[0])) {
          return yield* new GatewayError({ reason: "conflict", message: `Run ${runId} already ended.` })
        }
      }
      if (queuedId === undefined && request.runId !== undefined && request.resumes === undefined) {
        const recorded = yield* restore(Effect.mapError(store.runs({ runId }), internal))
        if (recorded.length > 0) {
          return yield* new GatewayError({ reason: "conflict", message: `Run ${runId} was already started.` })
        }
      }
      // (what the run adds at once, its first step (its messages about three times over) and its record's input,
      // within the thread's and the user's quotas before any run is stopped for it, besides what the runs and writes
      // admitted before it and not ended are to add; a run resumed after its runner died was admitted once. Admitted,
      // its first step is reserved until its checkpoints kept it (they drain it): `QuotaReservations`, shared by the
      // processes of one PostgreSQL database; the rest of its input is in its record, kept at its launch. The
      // admission is not interrupted: what it reserves is freed.)
      const limits = request.resumes === undefined ? options.storageLimits : undefined
      // (measured only under quotas: a run without them pays nothing)
      const firstStep = limits === undefined ? 0 : StorageQuota.firstStepBytes(request.messages)
      const reserved = limits === undefined ? QuotaReservations.NONE : yield* reservations.admit(store, limits, {
        userId: request.userId,
        threadId: request.threadId,
        runId,
        adding: firstStep + InputBounds.jsonBytes(request.kwargs) + InputBounds.jsonBytes(request.resume),
        pending: firstStep
      }).pipe(
        Effect.mapError((error) =>
          error instanceof QuotaExceeded
            ? new GatewayError({ reason: "forbidden", message: error.message })
            : internal(error)
        )
      )
      // (however it does not start now, queued, refused or failed, what it reserved is freed)
      return yield* Effect.onError(accept(request, runId, reserved, restore), () => reserved.free)
    })))

  /** Run `runId` of `request`, admitted (what it reserved: `reserved`), queued, refused or launched. */
  const accept = (
    request: RunRequest,
    runId: string,
    reserved: QuotaReservations.Reservation,
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  ): Effect.Effect<ActiveRun, GatewayError> =>
    Effect.gen(function*() {
      const shown = request.publicThreadId ?? request.threadId
      const current = active.get(request.threadId)
      if (request.multitaskStrategy === "enqueue" && (current !== undefined || queues.has(request.threadId))) {
        // (a queued run holds no reservation: it is admitted again when its turn comes)
        return yield* Effect.ensuring(restore(queues.enqueue(request)), reserved.free)
      }
      if (current !== undefined) {
        if (request.multitaskStrategy === "interrupt" || request.multitaskStrategy === "rollback") {
          yield* restore(Effect.zipRight(current.stop(request.multitaskStrategy), Deferred.await(current.done)))
        } else {
          return yield* new GatewayError({
            reason: "conflict",
            message: `Thread ${shown} already has a run in progress (run ${current.runId}). Wait for ` +
              `it to end, cancel it, or start this run with multitask_strategy "interrupt" or "rollback".`
          })
        }
      }
      // the lease, taken now under this run's id: a gateway process sharing the store refuses the thread too
      const holder = yield* Run.takeLease(store, request.threadId, runId, deps.leases.ttlMs).pipe(
        Effect.mapError(internal)
      )
      if (holder !== undefined) {
        return yield* new GatewayError({ reason: "conflict", message: Run.busyMessage(shown, holder) })
      }
      // every exit of the launch but its run's fiber started (a typed failure, a defect) gives back, once, what it
      // took: the lease, the reservation, the thread here; from that fiber's start on, the run does (`RunExecution`)
      return yield* Effect.onExit(
        launch(request, runId, runDepsOf(request), reserved),
        (exit) => Exit.isSuccess(exit) ? Effect.void : unlaunched(request.threadId, runId, reserved.free)
      )
    })

  /** What a launch that did not start its run's fiber took, given back: the thread here, its lease, `free`. */
  const unlaunched = (threadId: string, runId: string, free: Effect.Effect<void>) =>
    Effect.sync(() => {
      if (active.get(threadId)?.runId === runId) active.delete(threadId)
      known.delete(runId)
    }).pipe(
      Effect.zipRight(Effect.ignoreLogged(store.releaseLease(threadId, runId))),
      Effect.ensuring(free)
    )

  const runDepsOf = (request: RunRequest): RunExecution.Deps =>
    // (the request's secrets for skills are hidden from everything the run emits or keeps: a workspace diff of a
    // file a command wrote with one, too; each line of one of several lines, as a tool's result masks them)
    request.secrets === undefined ? deps : { ...deps, redact: SkillSecrets.runRedactor(deps.redact, request.secrets) }

  /**
   * The run `runId` of `request`, its thread's lease taken and its input reserved (`reserved`), recorded and started
   * (its fiber, from then on, gives both back; until then, `unlaunched` does).
   */
  const launch = (
    request: RunRequest,
    runId: string,
    runDeps: RunExecution.Deps,
    reserved: QuotaReservations.Reservation
  ) =>
    Effect.gen(function*() {
      const forkedFrom = request.checkpointId === undefined
        ? undefined
        : yield* Fork.fromCheckpoint(request.threadId, runId, request.checkpointId, request.publicThreadId).pipe(
          Effect.provideService(ThreadStore, store)
        )
      const loaded = yield* Effect.mapError(store.load(request.threadId), internal)
      const state = Option.match(loaded, { onNone: () => TS.empty, onSome: (t) => t.state })
      const messages = Protocol.withClarificationAnswer(state, request.messages, request.resume)
      const at = yield* now
      // (what it was asked with, without its request's secrets: the handler hid them, a starter that did not is
      // covered here)
      yield* store.saveRun({
        ...RunRecords.base(request.threadId, runId, at),
        metadata: runDeps.redact.value({
          assistant_id: request.assistantId,
          multitask_strategy: request.multitaskStrategy,
          metadata: request.metadata,
          ...(request.kwargs !== undefined ? { kwargs: request.kwargs } : {}),
          user_id: request.userId,
          ...(forkedFrom !== undefined ? { [Fork.FORKED_FROM]: forkedFrom } : {}),
          ...(request.resumes !== undefined ? { [EventIds.RESUMES_KEY]: request.resumes } : {})
        })
      }).pipe(Effect.mapError(internal))
      // (its input in its record now, only its first step stays reserved, until its checkpoints keep it)
      yield* reserved.recorded
      const clock = yield* Effect.clock
      // (the model the run will use: the one its role may use, not the one it asked for; a run whose settings do not
      // resolve fails in its turn, saying why)
      const used = yield* deps.factory.resolve(request.settings, request.userId, request.admin === true, request.role)
        .pipe(Effect.map((resolved) => resolved.modelName), Effect.orElseSucceed(() => undefined))
      const made = RunExecution.makeRun(
        runDeps,
        { ...request, messages },
        runId,
        state,
        () => new Date(clock.unsafeCurrentTimeMillis()).toISOString(),
        used,
        yield* defaultModel
      )
      const entry = { ...made.run, stop: made.stop }
      known.set(runId, made.run)
      deps.registry.begin(request.threadId, entry)
      // whatever happens to the run's fiber (a defect, the server stopping), the thread is freed and
      // waiters and subscribers learn the run ended
      const settle = (exit: Exit.Exit<unknown, unknown>) => Effect.gen(function*() {
        if (active.get(request.threadId)?.runId === runId) active.delete(request.threadId)
        let record = yield* RunRecords.latest(store, runId)
        // its turns left its record `running` for the run to settle (`RunSettlement`): stopped with the server, it
        // ends cancelled; ended by a defect, failed
        if (record?.status === "running") {
          const action = Exit.isInterrupted(exit) ? "interrupt" : undefined
          const ended = RunRecords.ending(action, undefined)
          record = yield* RunRecords.settle(store, request.threadId, runId, action, ended)
        }
        // an edit's run stopped with the server (or ended by a defect) is undone as a failed one is
        if (record !== undefined) record = (yield* RunRecords.undoFailedEdit(store, record, request.metadata)).record
        yield* Effect.ignore(store.releaseLease(request.threadId, runId))
        if (!made.run.finished()) made.append([{ event: "end", data: null }])
        const fallback = RunRecords.base(request.threadId, runId, new Date().toISOString())
        yield* Deferred.succeed(made.run.done, record ?? fallback)
      })
      const body = RunExecution.execute(runDeps, { ...request, messages }, runId, made).pipe(
        Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : settle(exit))),
        Effect.catchAllDefect((defect) => Effect.logError(`run ${runId} failed`, defect)),
        Effect.ensuring(reserved.free)
      )
      yield* FiberMap.run(
        fibers,
        runId,
        Effect.interruptible(options.traced === undefined ? body : options.traced(body, { ...request, runId }))
      )
      return made.run
    })

  const resume = (request: RunRequest, runId: string): Effect.Effect<ActiveRun, GatewayError> =>
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
      return yield* startWith({ ...rest, messages, multitaskStrategy: "reject", resumes }, runId, true)
    })

  return { start: (request) => startWith(request), resume, queues }
}
