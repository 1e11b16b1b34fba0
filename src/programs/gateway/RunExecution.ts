/**
 * A gateway run from its start to its end (see `Runs`): its parts (journal, projector, event buffer), and its body
 * in its fiber of the server. The body runs the turn through the factory (and, on a thread with a goal, the hidden
 * continuation turns of DeerFlow's goal loop: `GoalLoop`), relays each event to the run's buffer
 * (what its subscribers stream) and journal (`.../runs/{run_id}/events`, kept in the store as it grows), stops it
 * when a client or a handover asks, and settles it: its record, its lease, the thread's last values and `end` for
 * its subscribers. A run that changed outputs and presented none of them fails as DeerFlow's does (`Delivery`).
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import type { AppConfigService } from "../../services/AppConfig.js"
import type { ModelService } from "../../services/ModelService.js"
import type { RunEndEvent, RunEvent } from "../../services/RunEvents.js"
import { RunHandover } from "../../services/RunHandover.js"
import { LAPSED } from "../../services/RunSettlement.js"
import { RunSettlement } from "../../services/RunSettlement.js"
import type { RunRecord, StoredRunEvent } from "../../services/ThreadStore.js"
import { ThreadStore } from "../../services/ThreadStore.js"
import type * as Redact from "../../state/Redact.js"
import type { ThreadState } from "../../state/ThreadState.js"
import * as App from "../App.js"
import type * as Factory from "../Factory.js"
import * as Run from "../Run.js"
import type * as Admission from "./Admission.js"
import * as Delivery from "./Delivery.js"
import * as EventIds from "./EventIds.js"
import * as RunSecretsStore from "../RunSecretsStore.js"
import * as GoalLoop from "./GoalLoop.js"
import * as InputBounds from "./InputBounds.js"
import * as Projection from "./Projection.js"
import * as Protocol from "./Protocol.js"
import * as RunBuffer from "./RunBuffer.js"
import * as RunJournal from "./RunJournal.js"
import * as RunLease from "./RunLease.js"
import * as RunListener from "./RunListener.js"
import type { ActiveRun, CancelAction, Options, RunRequest, Stop } from "./RunModel.js"
import { HANDOVER, LEASE_LOST, now } from "./RunModel.js"
import * as RunRecords from "./RunRecords.js"
import type { Registry } from "./RunRegistry.js"
import * as RunSettling from "./RunSettling.js"
import * as StorageQuota from "./StorageQuota.js"
import * as WorkspaceChanges from "./WorkspaceChanges.js"

/** The name of the error a run ends with when another run took its thread (`Run.lostMessage` says which). */
export const LOST_ERROR = "LeaseLost"

/** A running run's events are kept in the store each time they grew by this many (or by half, if more). */
export const SAVE_EVERY = 20

/** How an ended run's events (its `run.delivery` receipt) are saved again when the store refused them: DeerFlow's. */
const RECEIPT_RETRIES = Schedule.fromDelays(Duration.millis(100), Duration.millis(500))

/** What a run needs of its manager. */
export interface Deps {
  readonly factory: Factory.Service
  readonly store: ThreadStore["Type"]
  readonly app: AppConfigService["Type"]
  readonly options: Options
  /** What never leaves the server (`Options.redact`, or nothing). */
  readonly redact: Redact.Redactor
  readonly registry: Registry
  /** A run's turn waits for its place among the runs executing at once (see `Admission`). */
  readonly admitted: Admission.Admit
  /** The renewer of the runs' leases on their threads (one for the manager's runs: `RunLease`). */
  readonly leases: RunLease.Leases
  /** The goal evaluator's model clients as the configuration is now (none: no goal loop, see `GoalLoop`). */
  readonly goalModel: Effect.Effect<ModelService["Type"] | undefined>
}

/** A run's parts (`makeRun`). */
export interface Made {
  readonly run: ActiveRun
  readonly append: RunBuffer.RunBuffer["append"]
  readonly close: RunBuffer.RunBuffer["close"]
  readonly projector: ReturnType<typeof Projection.makeProjector>
  readonly journal: RunJournal.RunJournal
  /** Stops the run (the first stop asked wins; later ones change nothing): `ActiveRun.stop`. */
  readonly stop: (how: Stop) => Effect.Effect<void>
  /** How the run was stopped (`undefined`: not stopped). */
  readonly stopped: () => Stop | undefined
  /** Tells `handler` the run's stop, when it is asked (at once if it was): one handler, the run's body's. */
  readonly onStop: (handler: ((how: Stop) => void) | undefined) => void
}

// an event's data as JSON, without the secrets of `redact`
const jsonOf = (redact: Redact.Redactor) => (data: unknown): string => {
  const text = JSON.stringify(data)
  return redact.test(text) ? JSON.stringify(redact.value(data)) : text
}

/**
 * A run's parts before it starts: its journal, its projector (the LangGraph stream of its events), its event buffer
 * and the run as this process follows it. `modelName`: the model the run uses as the factory resolves it (a role's
 * substitute for the one it asked for), named by its stream's `ls_model_name`; none: the one its settings name,
 * else `fallback` (the default).
 */
export const makeRun = (
  deps: Deps,
  request: RunRequest,
  runId: string,
  initial: ThreadState,
  stamp: () => string,
  modelName: string | undefined,
  fallback?: string | undefined
): Made => {
  // (the run's redactor: the gateway's secrets and the run's, masked before the journal cuts a text)
  const journal = RunJournal.make(stamp, deps.redact)
  const projector = Projection.makeProjector({
    runId,
    threadId: request.publicThreadId ?? request.threadId,
    modes: request.modes,
    initial,
    // (the model the run uses, a role's substitute included; else the one it asked for, else the default)
    modelName: modelName ??
      (typeof request.settings.model_name === "string" && request.settings.model_name !== ""
        ? request.settings.model_name
        : fallback),
    redact: deps.redact,
    attempt: (request.resumes ?? 0) + 1,
    input: request.messages.length > 0 ? { messages: request.messages } : null,
    assistantId: request.assistantId
  })
  const buffer = RunBuffer.make(runId, deps.options, jsonOf(deps.redact), EventIds.firstId(request.resumes ?? 0))
  const run: ActiveRun = {
    runId,
    threadId: request.threadId,
    publicThreadId: request.publicThreadId ?? request.threadId,
    userId: request.userId,
    modes: request.modes,
    done: Deferred.unsafeMake<RunRecord>(FiberId.none),
    finished: buffer.finished,
    after: buffer.after,
    origin: buffer.origin,
    changes: buffer.changes,
    onChange: buffer.onChange,
    state: () => deps.redact.value(projector.state()),
    events: () => deps.redact.value(journal.events())
  }
  return { run, append: buffer.append, close: buffer.close, projector, journal, ...makeStopper() }
}

/**
 * A run's stop, told to the run's body as it is asked, in the fiber asking it: no fiber of the run waits for it.
 * (Its own closure: what the run's finished record keeps does not keep the body's handler.)
 */
const makeStopper = (): Pick<Made, "stop" | "stopped" | "onStop"> => {
  let stopped: Stop | undefined
  let handler: ((how: Stop) => void) | undefined
  return {
    stop: (how) =>
      Effect.sync(() => {
        if (stopped !== undefined) return
        stopped = how
        handler?.(how)
      }),
    stopped: () => stopped,
    onStop: (f) => {
      handler = f
      if (stopped !== undefined) f?.(stopped)
    }
  }
}

/**
 * A run's body, in its fiber of the server: its turn through the factory (once it has its place), its events to
 * its buffer and journal, stopped by a client or a handover, then settled: its record, its lease released, the
 * thread deleted if asked, and its end told to waiters and subscribers.
 */
export const execute = (
  deps: Deps,
  request: RunRequest,
  runId: string,
  made: Made
) =>
  Effect.gen(function*() {
    const { factory, store, app, redact, admitted } = deps
    const { active, known, forget } = deps.registry
    const { run, append, journal } = made
    const owner = request.userId
    // the thread's lease, taken when the run was accepted, is held (renewed by the manager's renewer, and only by it)
    // until the run's end is recorded: its turns take and renew none (`RunSettlement`), so no other process takes the
    // thread, or resumes the run, meanwhile. Found taken (this process stalled past the lease's life), the run is
    // stopped at once, before it runs another tool beside the thread's new owner: as a handed-over run when another
    // process resumed it, else to end as an error (see below). So is a run whose lease's life ran out with no
    // renewal that succeeded (the store did not answer: who holds the thread now is not known), as DeerFlow's worker
    // fences its run
    const { confirm, lost, reclaim, recordLate, release } = yield* deps.leases.hold(
      request.threadId,
      runId,
      (gone) => made.stop(gone !== LAPSED && gone.run_id === runId ? HANDOVER : LEASE_LOST)
    )
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
    // Within the storage quotas (`gateway.quotas`), the events are kept as they grow only while what they add fits;
    // past a quota the last save keeps the events always kept (the run's end, its receipt, its workspace changes:
    // `RunJournal.ALWAYS_KEPT`), a few KB, so that the run ends readable.
    let settled = false
    let savedBytes = 0
    const saving = yield* Effect.makeSemaphore(1)
    const limits = deps.options.storageLimits
    const withinQuota = (events: ReadonlyArray<StoredRunEvent>, last: boolean) =>
      Effect.gen(function*() {
        if (limits === undefined) return events
        const fits = (kept: ReadonlyArray<StoredRunEvent>) =>
          StorageQuota.fits(store, limits, owner, request.threadId, InputBounds.jsonBytes(kept) - savedBytes)
        if (yield* Effect.orElseSucceed(fits(events), () => true)) return events
        if (!last) return undefined
        yield* Effect.logWarning(`run ${runId}: past a storage quota, only its end and receipt are kept of its events`)
        return RunJournal.alwaysKept(events)
      })
    const saveJournal = (last: boolean) =>
      saving.withPermits(1)(Effect.suspend(() => {
        if (settled) return Effect.succeed(true)
        settled = last
        return Effect.flatMap(withinQuota(redact.value(journal.events()), last), (events) => {
          // (not kept as it grows past a quota: this process serves them until the run ends)
          if (events === undefined) return Effect.succeed(true)
          const save = Effect.tap(
            store.saveRunEvents(request.threadId, runId, events),
            () => Effect.sync(() => (savedBytes = limits === undefined ? 0 : InputBounds.jsonBytes(events)))
          )
          // (the last save holds the run's receipt: retried briefly, as DeerFlow's worker retries it)
          return (last ? Effect.retry(save, RECEIPT_RETRIES) : save).pipe(
            Effect.as(true),
            Effect.catchAll((error) =>
              Effect.as(Effect.logWarning(`run ${runId}: its events were not kept: ${error.message}`), false)
            )
          )
        })
      }))
    let nextSave = SAVE_EVERY
    const grown = () => {
      const count = journal.count()
      if (count < nextSave) return false
      nextSave = count + Math.max(SAVE_EVERY, Math.floor(count / 2))
      return true
    }
    // a save as the events grow runs in a fiber of its own while it lasts (none waits between saves): asked again
    // meanwhile, it saves once more when done; stopped with the run (whose last save waits for it: `saving`)
    const fork = Runtime.runFork(yield* Effect.runtime<never>())
    let saver: Fiber.RuntimeFiber<void> | undefined
    let again = false
    const saves: Effect.Effect<void> = Effect.suspend(() => {
      again = false
      return saveJournal(false)
    }).pipe(Effect.zipRight(Effect.suspend(() => {
      if (again) return saves
      saver = undefined
      return Effect.void
    })))
    const keep = () => {
      if (saver !== undefined) again = true
      // (started later by the scheduler, as the latch it replaces woke its fiber: not in the event's callback)
      else saver = fork(saves, { immediate: false })
    }
    yield* Effect.addFinalizer(() => Effect.suspend(() => (saver === undefined ? Effect.void : Fiber.interrupt(saver))))
    const listener = RunListener.make(publicEvent, (encoded) => {
      journal.push(encoded)
      if (request.deleteThread !== true && (grown() || RunJournal.endsSubagent(encoded))) keep()
      append(made.projector.push(encoded))
    })
    let handingOver = false
    let stopping = false
    // the run's end as its last turn said it, held until the delivery check has judged the run (see below)
    let last: RunEndEvent | undefined
    // the end of the turn that ended last, while only the run's settling remains (recorded: `RunSettling`)
    let settling: RunEndEvent | undefined
    // the run's turns: the user's, then the hidden continuations of the thread's goal, if it has one (`GoalLoop`)
    const turnOf: GoalLoop.Turn = (messages, onEvent, continuing) => {
      let end: RunEndEvent | undefined
      const turn = factory.turn({
        threadId: request.threadId,
        runId,
        userId: request.userId,
        messages,
        title: continuing ? undefined : request.title,
        settings: request.settings,
        admin: request.admin === true,
        ...(request.role === undefined ? {} : { role: request.role }),
        ...(request.secrets === undefined ? {} : { secrets: request.secrets })
      }, (event) => {
        if (event.type === "run_end") end = event
        onEvent(event)
      })
      // (a turn ended and not stopped: what follows is the run's settling, or a goal's continuation)
      const ended = Effect.suspend(() => {
        if (end === undefined || stopping) return Effect.void
        settling = end
        return deps.options.resumable === true ? RunSettling.mark(store, runId, redact.value(end)) : Effect.void
      })
      const again = !continuing ? Effect.void : Effect.suspend(() => {
        settling = undefined
        return deps.options.resumable === true ? RunSettling.clear(store, runId) : Effect.void
      })
      return again.pipe(Effect.zipRight(turn), Effect.zipRight(ended))
    }
    const turn = GoalLoop.drive({
      // (the evaluator's verdict, on the thread's goal, written as the turns' checkpoints are: without the request's
      // secrets, and logged without them)
      store: RunSecretsStore.hiding(store, request.secrets),
      redact: (text) => redact.text(text),
      model: deps.goalModel,
      threadId: request.threadId,
      runId,
      userId: request.userId,
      // (the run's model as its turns resolve it: one its role may use, never the raw `model_name`)
      modelName: Effect.map(
        factory.resolve(request.settings, request.userId, request.admin === true, request.role),
        (resolved) => resolved.modelName
      ),
      hasGoal: () => made.projector.state().goal !== null
    }, turnOf, request.messages, (event) => {
      if (event.type !== "run_end") listener.onEvent(event)
      else if (!stopping) last = event
    }).pipe(
      Effect.provideService(RunHandover, { requested: () => handingOver }),
      // (the record stays `running` through the turns and the checks after them: settled once, below)
      Effect.provideService(RunSettlement, { settles: (id) => id === runId, lost, confirm }),
      admitted(request.threadId, runId, request.userId)
    )
    // stopped by a client: the run's turn is interrupted (told by the stop itself, in the fiber asking it: no race
    // and no fiber waiting for a stop; a run still waiting for its place never starts). Whatever stops it (a client,
    // the server stopping), the run is waited for until it has ended and said so in the store.
    const turnFiber = yield* Effect.fork(turn)
    const self = yield* Effect.fiberId
    let interrupted = false
    made.onStop((how) => {
      // (stopped once the turn ended: the run settles as stopped, see below)
      if (turnFiber.unsafePoll() !== null) return
      handingOver = how === HANDOVER
      interrupted = true
      // (a run whose last turn ended is not handed over: it settles here, as its turn ended, see below; one whose
      // thread another run took relays its turn's end: its tool calls answered "interrupted", its error)
      if (how !== LEASE_LOST && (!handingOver || settling === undefined)) {
        stopping = true
        listener.stop()
      }
      turnFiber.unsafeInterruptAsFork(self)
    })
    yield* Fiber.await(turnFiber).pipe(
      // (as the turn ended, unless the stop interrupted it: its failure is the run's)
      Effect.zipRight(Effect.suspend(() => (interrupted ? Effect.void : Fiber.join(turnFiber)))),
      Effect.ensuring(Effect.zipRight(Effect.sync(() => made.onStop(undefined)), Fiber.interrupt(turnFiber))),
      Effect.onInterrupt(() => Effect.sync(listener.stop))
    )
    const broken = listener.broken()
    if (broken !== undefined) return yield* Effect.die(broken.defect)
    const stopped = made.stopped()
    // the thread's lease another process took: the run is that process's (resumed there: nothing more is written
    // here, as for a handover), or the thread is another run's (the run ends an error, writing to its thread nothing)
    // (its lease's life ran out unrenewed: the stopped run takes it back once, to record its end as the thread's owner;
    // taken meanwhile, as above; still no answer from the store, it writes nothing that lasts: `unconfirmed`)
    const fenced = lost() === LAPSED
    const gone = fenced ? yield* reclaim : lost()
    const unconfirmed = gone === LAPSED
    const taken = gone === LAPSED ? undefined : gone
    // (the thread is not the run's to write: lost, or its lease's life ran out)
    const notOwner = fenced || taken !== undefined
    const resumedElsewhere = taken?.run_id === runId
    // handed over (its runner drains) once its last turn ended, while the goal evaluator judged it: the run settles
    // here as that turn ended it, as when the evaluator fails (the thread's next runner would run no turn of it)
    const how = stopped === HANDOVER && !stopping ? undefined : stopped
    if (stopped === HANDOVER && !stopping && !resumedElsewhere) {
      last ??= settling
      yield* Effect.logWarning(`run ${runId}: settled here as its last turn ended, not handed over`)
    }
    if (how === HANDOVER || resumedElsewhere) {
      if (resumedElsewhere) {
        yield* Effect.logWarning(`run ${runId}: resumed by process ${taken.owner}, which now records it`)
      }
      listener.stop()
      // handed over: the run stays `running` in the store for the thread's next runner; here it is gone
      yield* release
      if (active.get(request.threadId)?.runId === runId) active.delete(request.threadId)
      known.delete(runId)
      made.close()
      const left = yield* RunRecords.latest(store, runId)
      yield* Deferred.succeed(run.done, left ?? RunRecords.base(request.threadId, runId, yield* now))
      return
    }
    // (a run whose thread another run took ends as that loss, whatever stopped it: no rollback nor undoing of its
    // thread, which is the other run's)
    // (a client's stop that came before the loss is the run's end, as without it: stopped, its stream ending with the
    // thread's values; not rolled back, which would write to a thread another may own now)
    const stoppedFirst = how === "interrupt" || how === "rollback"
    const action: CancelAction | undefined = how === LEASE_LOST
      ? undefined
      : !notOwner
      ? how
      : stoppedFirst
      ? "interrupt"
      : undefined
    if (notOwner && !stoppedFirst) {
      last = {
        type: "run_end",
        status: "error",
        stop_reason: "error",
        error: { name: LOST_ERROR, message: Run.lostMessage(runId, taken ?? LAPSED, deps.leases.ttlMs) },
        ...(last?.usage === undefined ? {} : { usage: last.usage })
      }
    }
    // DeerFlow's delivery check: a run that succeeded having created or modified files under outputs, none of which
    // it presented, fails (a cancelled, failed or clarification-waiting run keeps its status)
    const filesAfter = yield* WorkspaceChanges.snapshot(app.home, owner, request.threadId, savedOutputs)
    const delivery = Delivery.verdict(journal.delivery(), WorkspaceChanges.changedOutputs(filesBefore, filesAfter))
    let ended = RunRecords.ending(action, last)
    let failure = ended.status === "success" && action !== "rollback" ? Delivery.failure(delivery) : undefined
    // (a guard's cap stays the reason it stopped, as DeerFlow keeps it)
    const failed = (error: string): RunRecords.Ending => ({
      status: "error",
      stop_reason: ended.stop_reason !== "completed" && ended.stop_reason !== null ? ended.stop_reason : "error",
      error
    })
    if (failure !== undefined) ended = failed(failure)
    // a failed or stopped edit is undone before its end is told: refused by the lease fence (another run took the
    // thread), its end says so, its stream's `error` as its record and its waiters' answers
    const editUndo = action !== "rollback" && !notOwner
      ? yield* RunRecords.undoEdit(store, request.threadId, runId, ended.status, request.metadata)
      : { tried: false, undone: false, note: undefined }
    if (editUndo.note !== undefined) ended = { ...ended, error: RunRecords.withNote(ended.error, editUndo.note) }
    // DeerFlow's order: the receipt is kept before the run's end is, and a run that produced outputs, whose
    // receipt could not be kept, fails (nothing says what it delivered)
    if (request.deleteThread !== true && action !== "rollback") {
      const changes = WorkspaceChanges.compare(filesBefore, filesAfter)
      if (WorkspaceChanges.changed(changes)) journal.workspace(changes)
      // (in LangGraph's terms, as the run object says it: a cancelled run is `interrupted`)
      journal.end({
        status: Protocol.runStatus(ended),
        stop_reason: ended.stop_reason,
        error: ended.error,
        error_type: failure !== undefined ? Delivery.ERROR_NAME : last?.error?.name
      }, delivery)
      // (a run that could not take its lapsed lease back keeps its events here only: nothing it writes lasts)
      const kept = unconfirmed || (yield* saveJournal(true))
      if (!kept && ended.status === "success" && "satisfied" in delivery) {
        failure = Delivery.RECEIPT_FAILED
        ended = failed(failure)
      }
    }
    // the run's end, as it ended after the checks, streamed (a failed check ends the stream as a failed run's does)
    if (last !== undefined && !stopping) {
      const told = failure === undefined ? last : {
        ...last,
        status: "error" as const,
        stop_reason: last.stop_reason !== "completed" ? last.stop_reason : "error",
        error: { name: Delivery.ERROR_NAME, message: failure }
      }
      // (an error's message with the note of an edit not undone)
      listener.onEvent(
        editUndo.note === undefined || told.error === undefined
          ? told
          : { ...told, error: { ...told.error, message: RunRecords.withNote(told.error.message, editUndo.note) } }
      )
    }
    listener.stop()
    // (its error as its events say it: without the secrets the run hides, its request's included)
    const endedShown = { ...ended, error: ended.error === null ? null : redact.text(ended.error) }
    // (fenced, its lease not taken back: its end is told to its followers here, and recorded once the store answers
    // again, below; DeerFlow's fenced worker leaves it to the thread's next owner)
    const settledRecord = unconfirmed
      ? yield* Effect.as(
        Effect.logWarning(
          `run ${runId}: its end is not recorded yet (its thread's lease could not be confirmed); it will be once ` +
            "the store answers again"
        ),
        { ...RunRecords.base(request.threadId, runId, yield* now), ...endedShown, ended_at: yield* now }
      )
      : yield* RunRecords.settle(store, request.threadId, runId, action, endedShown)
    if (listener.invalid.length > 0) {
      yield* Effect.logWarning(`run ${runId}: events left out of its stream: ${listener.invalid.join("; ")}`)
    }
    // (an edit whose run failed only now, its receipt not kept, is undone now)
    const { record, undone } = action !== "rollback" && !notOwner && !editUndo.tried
      ? yield* RunRecords.undoFailedEdit(store, settledRecord, request.metadata)
      : { record: settledRecord, undone: editUndo.undone }
    yield* release
    const outs: Array<Projection.Out> = []
    // (not read from a store whose lease calls went unanswered)
    if ((action !== undefined || undone) && !unconfirmed) {
      // what the cancelled run left (or the rollback, or a failed edit's undoing, restored): the client
      // reloads nothing
      const loaded = yield* Effect.orElseSucceed(store.load(request.threadId), () => Option.none())
      if (Option.isSome(loaded) && request.modes.includes("values")) {
        outs.push({ event: "values", data: Protocol.publicValues(loaded.value.state) })
      }
    }
    outs.push({ event: "end", data: null })
    if (request.deleteThread !== true && action === "rollback") {
      const { stop_reason, error } = record
      journal.end({ status: Protocol.runStatus(record), stop_reason, error }, delivery)
      yield* saveJournal(true)
    }
    if (active.get(request.threadId)?.runId === runId) active.delete(request.threadId)
    if (request.deleteThread === true && !notOwner) {
      yield* App.deleteThread(app.home, request.threadId, request.userId).pipe(
        Effect.provideService(ThreadStore, store),
        Effect.ignoreLogged
      )
    }
    append(outs)
    forget(runId, yield* Clock.currentTimeMillis)
    yield* Deferred.succeed(run.done, record)
    // its end as told, with its events' end, recorded once the store answers again (unless recorded meanwhile: by a
    // process starting up, or one that resumed the run), so that its record does not stay `running`
    if (unconfirmed) {
      yield* recordLate(Effect.gen(function*() {
        const [stored] = yield* store.runs({ runId })
        if (stored !== undefined && !RunRecords.unfinished(stored)) return
        if (request.deleteThread !== true) yield* saveJournal(true)
        yield* store.saveRun({
          ...(stored === undefined ? record : RunRecords.unmarked(stored)),
          ...endedShown,
          ended_at: record.ended_at
        })
      }))
    }
  }).pipe(
    // (the renewing stops with the run, whatever ended it, before its manager settles what it left: `RunStart`)
    Effect.scoped
  )
