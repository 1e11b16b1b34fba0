/**
 * The run: DeerFlow's ReAct loop over the ports.
 *
 *   run(input) = AgentHooks.around(loop)
 *   loop: request ← project(state) ; response ← ModelService.generate(request) ; apply(response)
 *         if no tool calls → done
 *         results ← ToolService.call for each call (concurrently, bounded) ; apply(results) ; checkpoint
 *
 * Every step is written to the ThreadStore as append-only checkpoints: the model's message (with its tool
 * calls) before any tool runs, the results after. A crash therefore never makes Antler run a call twice: on
 * the next run, a call that started and has no result is answered "interrupted, may have partly run" and the
 * model decides. A thread has one active run at a time, across processes (a lease in the store). A run never
 * fails: how it ended (completed, capped, interrupted for a question, cancelled, failed) is its last event.
 * A run cancelled while the model streams its answer keeps what was streamed of it (`PartialAnswer`). This module
 * takes a turn from its start to its end; the loop itself is `RunLoop`, a step's tool calls `RunToolCalls`.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Clock from "effect/Clock"
import type { Ports } from "../middleware/Middleware.js"
import * as RunFrame from "../middleware/internal/RunFrame.js"
import { AgentHooks } from "../services/AgentHooks.js"
import { ModelService } from "../services/ModelService.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import type { RunOptions, RunServices } from "../services/RunContext.js"
import { RunContext, RunState } from "../services/RunContext.js"
import type { RunEndEvent, RunEvent, RunUsage, StopReason } from "../services/RunEvents.js"
import { RunEvents } from "../services/RunEvents.js"
import { RunHandover } from "../services/RunHandover.js"
import type { Lost } from "../services/RunSettlement.js"
import { LAPSED, RunSettlement } from "../services/RunSettlement.js"
import * as SkillSecrets from "../services/SkillSecrets.js"
import type { LeaseHolder } from "../services/ThreadStore.js"
import { ThreadStore } from "../services/ThreadStore.js"
import { ToolService } from "../services/ToolService.js"
import type { Message } from "../state/Message.js"
import * as M from "../state/Message.js"
import * as Redact from "../state/Redact.js"
import type { BackgroundTask, ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"
import * as PartialAnswer from "./PartialAnswer.js"
import * as RunLoop from "./RunLoop.js"
import * as RunStateHolder from "./RunStateHolder.js"
import { interruptedResults } from "./RunToolCalls.js"
import { appendLeased, busyMessage, LeaseTtl, lostMessage, notOwnedError, takeLease } from "./ThreadLease.js"

/** What to run. */
export interface RunInput {
  readonly threadId: string
  /** Defaults to a fresh id. */
  readonly runId?: string | undefined
  readonly userId?: string | undefined
  /**
   * The new messages of this run, usually one human message; or a function of the thread as loaded (e.g. to
   * answer a pending clarification question), so a turn reads the thread once.
   */
  readonly input: ReadonlyArray<Message> | ((state: ThreadState) => ReadonlyArray<Message>)
  /** The thread's title to set with the input (a client's input values). */
  readonly title?: string | undefined
  /** The thread's background tasks to set with the input (DeerFlow's worker projects them into its input). */
  readonly backgroundTasks?: ReadonlyArray<BackgroundTask> | undefined
  /** The static system prompt. */
  readonly systemPrompt?: string | undefined
  readonly options?: Partial<RunOptions> | undefined
  /** Why a tool the model called is not among the run's (appended to the error result), when known. */
  readonly unknownTool?: ((name: string) => string | undefined) | undefined
}

/**
 * What a run goes through: the agent's ports, built once (a stack built from layers, see `Middleware.stack`),
 * or a layer of them, built for this run only (tests; costs a layer build per run).
 */
export type Agent<E = never, R = never> = Context.Context<Ports> | Layer.Layer<Ports, E, R>

/** Default options of a run. */
export const defaultOptions: RunOptions = { recursionLimit: 100, toolConcurrency: 8 }

// (a run's lease on its thread: its life, its taking, what a run is told busy, lost or lapsed)
export { busyMessage, LAPSED_REASON, LEASE_TTL_MS, LeaseTtl, lostMessage, takeLease } from "./ThreadLease.js"

// (what a call a crash or a cancellation left open is answered, and which calls are open)
export { danglingCalls, INTERRUPTED_TOOL_RESULT } from "./RunToolCalls.js"

/**
 * The token usage of a run: what its model calls (the lead agent's, its subagents' and the middlewares' own) added
 * to the thread's totals, named as the gateway's `GET /api/threads/{id}/token-usage` names it.
 */
const usageBetween = (before: TS.ThreadState, after: TS.ThreadState): RunUsage => {
  const added = (key: "input_tokens" | "output_tokens" | "total_tokens") =>
    (after.token_usage?.total[key] ?? 0) - (before.token_usage?.total[key] ?? 0)
  return {
    total_input_tokens: added("input_tokens"),
    total_output_tokens: added("output_tokens"),
    total_tokens: added("total_tokens")
  }
}

const errorEnd = (cause: Cause.Cause<unknown>, reason: StopReason = "error"): RunEndEvent => {
  const failure = Cause.failureOption(cause)
  const error: any = Option.isSome(failure) ? failure.value : Cause.squash(cause)
  return {
    type: "run_end",
    status: "error",
    stop_reason: reason,
    error: { name: String(error?._tag ?? error?.name ?? "Error"), message: String(error?.message ?? error) }
  }
}

/**
 * Runs one turn of a thread to its end, sending every event to `emit`. Never fails: failures end the run
 * with status `error`. Interrupting the fiber saves what completed (unfinished tool calls get a result
 * saying so) and ends the run as `cancelled`, or, handed over (`RunHandover`), leaves it `running` for another
 * process to resume. A second run on a thread whose run is active (in this process
 * or another sharing the store) is refused: it ends at once with status `error` (`ThreadBusy`).
 */
export const execute = <E = never, R = never>(
  input: RunInput,
  agent: Agent<E, R>,
  listener?: ((event: RunEvent) => void) | undefined
): Effect.Effect<RunEndEvent, never, ThreadStore | Exclude<R, RunServices>> =>
  Effect.uninterruptibleMask((restore) => Effect.gen(function*() {
    // (without a listener, the state's changes are not turned into events at all)
    const emit = listener ?? (() => {})
    const store = yield* ThreadStore
    const threadId = input.threadId
    const runId = input.runId ?? M.newId()
    const options: RunOptions = { ...defaultOptions, ...input.options }
    // what the model has streamed of the answer being generated, kept in the thread if the run is stopped
    const partial = PartialAnswer.make()
    const events: RunEvents["Type"] = { emit: (event) => Effect.sync(() => (partial.see(event), emit(event))) }
    emit({ type: "run_start", thread_id: threadId, run_id: runId })
    const ended = (end: RunEndEvent) => Effect.sync(() => (emit(end), end))

    // (a caller that settles the run's record itself, `RunSettlement`, holds the thread's lease and renews it from
    // the run's acceptance until it did: a turn takes, renews and releases none, and asks the caller whether it lost
    // it)
    const settlement = Option.filter(yield* Effect.serviceOption(RunSettlement), (s) => s.settles(runId))
    const settled = Option.isSome(settlement)
    // One active run per thread: take the lease before reading anything (for its life where it is held, which the
    // messages of its loss name)
    const ttlMs = yield* LeaseTtl
    const lease = takeLease(store, threadId, runId, ttlMs)
    const leased = settled ? Either.right(settlement.value.lost()) : yield* Effect.either(restore(lease))
    if (Either.isLeft(leased)) return yield* ended(errorEnd(Cause.fail(leased.left)))
    if (leased.right !== undefined) {
      return yield* ended({
        type: "run_end",
        status: "error",
        stop_reason: "error",
        error: leased.right === LAPSED
          ? { name: "LeaseLost", message: lostMessage(runId, LAPSED, ttlMs) }
          : { name: "ThreadBusy", message: busyMessage(threadId, leased.right) }
      })
    }
    const release = settled ? Effect.void : Effect.ignore(store.releaseLease(threadId, runId))
    let startedAt = new Date(yield* Clock.currentTimeMillis).toISOString()

    let stopReason: StopReason | undefined
    const context = RunContext.of({
      threadId,
      runId,
      userId: input.userId ?? "default",
      options,
      stopReason: Effect.sync(() => stopReason),
      setStopReason: (reason, ifEmpty) =>
        Effect.sync(() => {
          if (!ifEmpty || stopReason === undefined) stopReason = reason
        })
    })

    const prepared = yield* Effect.either(restore(Effect.gen(function*() {
      yield* store.ensure(threadId)
      const loaded = yield* store.load(threadId)
      // A run still marked running belongs to a process that died mid-run (we hold the lease, so it is not
      // running): its completed steps are in the checkpoints; record that it did not finish.
      if (Option.isSome(loaded)) {
        for (const stale of loaded.value.runs) {
          // (this run already running: a later turn of it, a goal's continuation, keeps its start)
          if (stale.status === "running" && stale.run_id === runId) startedAt = stale.started_at
          if (stale.status !== "running" || stale.run_id === runId) continue
          yield* store.saveRun({ ...stale, status: "cancelled", stop_reason: "cancelled", ended_at: startedAt })
        }
      }
      yield* store.saveRun({
        run_id: runId,
        thread_id: threadId,
        status: "running",
        stop_reason: null,
        started_at: startedAt,
        ended_at: null
      })
      return Option.match(loaded, { onNone: () => TS.empty, onSome: (thread) => thread.state })
    })))
    if (Either.isLeft(prepared)) {
      yield* release
      return yield* ended(errorEnd(Cause.fail(prepared.left)))
    }
    const holder = RunStateHolder.make(prepared.right, listener)
    // The lease is renewed while the run goes (by the turn, or by the caller that holds it). Losing it (another
    // process took the thread over after this one stalled for longer than the lease lasts) fails the next
    // checkpoint: two runs never both write. (A gateway run is also stopped at once by its caller, `RunExecution`.)
    let lostHere: LeaseHolder | undefined
    const lostTo = settled ? settlement.value.lost : () => lostHere
    const renew = lease.pipe(
      Effect.tap((holder) => Effect.sync(() => (lostHere ??= holder))),
      Effect.catchAll((error) => Effect.logWarning(`cannot renew the thread's lease: ${error.message}`)),
      Effect.repeat(Schedule.spaced(ttlMs / 3)),
      Effect.delay(ttlMs / 3)
    )
    const notOwned = (lost: Lost) => notOwnedError(runId, lost, ttlMs)
    const owned = Effect.suspend(() => {
      const lost = lostTo()
      return lost === undefined ? Effect.void : notOwned(lost)
    })
    // (who holds the lease, asked again once the store refused a checkpoint fenced by it)
    const confirm = settled
      ? settlement.value.confirm
      : Effect.map(Effect.either(lease), (taken) => lostHere ??= Either.getOrUndefined(taken))
    const checkpoint = Effect.suspend(() => {
      const lost = lostTo()
      if (lost !== undefined) return notOwned(lost)
      const journal = holder.drain()
      return journal.length === 0 ? Effect.void : appendLeased(store, threadId, runId, journal, ttlMs, confirm)
    })
    // The frame of the run's per-run middlewares, with the run's scope (their per-run effects' finalizers), ends
    // with the run: see `middleware/internal/RunFrame.ts`.
    const runScope = yield* Scope.make()
    const frame = RunFrame.makeRunFrame(runScope)
    const runServices: Context.Context<RunServices> = Context.make(RunContext, context).pipe(
      Context.add(RunState, holder.service),
      Context.add(RunEvents, events),
      Context.add(RunFrame.RunFrame, frame)
    )
    // the run's hooks and loop also see the run's scope (typed as the run's services: not something the run
    // requires)
    const inRun = Context.add(runServices, Scope.Scope, runScope) as Context.Context<RunServices>

    const withPorts = (ports: Context.Context<Ports>) => Effect.gen(function*() {
      const tools = Context.get(ports, ToolService)
      const step: RunLoop.Step = {
        model: Context.get(ports, ModelService),
        tools,
        known: new Set(tools.definitions.map((d) => d.name)),
        unknownTool: input.unknownTool,
        process: yield* ProcessSecrets.current,
        readOnly: new Set(tools.definitions.flatMap((d) => (d.readOnly === true ? [d.name] : []))),
        holder,
        context,
        checkpoint,
        owned,
        systemPrompt: input.systemPrompt,
        options,
        callIds: RunLoop.callIdsOf(holder.current().messages)
      }
      // calls a crash left open are answered before anything else, so the model sees what may have partly run
      const state = holder.current()
      const open = interruptedResults(state.messages)
      const messages = typeof input.input === "function" ? input.input(state) : input.input
      const title = input.title !== undefined && input.title !== state.title ? { title: input.title } : {}
      const tasks = input.backgroundTasks === undefined ? {} : { background_tasks: input.backgroundTasks }
      if (open.length > 0 || messages.length > 0 || "title" in title || "background_tasks" in tasks) {
        yield* holder.service.update({ messages: [...open, ...messages], ...title, ...tasks })
      }
      return yield* Context.get(ports, AgentHooks).around(RunLoop.loop(step)).pipe(
        Effect.provide(inRun),
        Effect.onExit((exit) => RunFrame.closeRunFrame(frame, exit))
      )
    })
    // an agent given as a layer is built for this run, in a scope of the run's; built ports need no scope
    const body = Layer.isLayer(agent)
      ? Effect.scoped(
        Effect.flatMap(Layer.build(agent as Layer.Layer<Ports, E, R>).pipe(Effect.provide(runServices)), withPorts)
      )
      : withPorts(agent as Context.Context<Ports>)

    const closeDangling = Effect.suspend(() => {
      const open = interruptedResults(holder.current().messages)
      return open.length === 0 ? Effect.void : Effect.ignore(holder.service.update({ messages: open }))
    })

    const renewing = settled ? undefined : yield* Effect.forkDaemon(Effect.interruptible(renew))
    const exit = yield* Effect.exit(restore(body))
    if (renewing !== undefined) yield* Fiber.interrupt(renewing)
    let end: RunEndEvent = Exit.isSuccess(exit)
      ? exit.value
      : Exit.isInterrupted(exit)
      ? { type: "run_end", status: "cancelled", stop_reason: "cancelled" }
      : errorEnd(exit.cause)
    // stopped to be handed over to another process (see `RunHandover`): from its last completed step
    const handover = Exit.isInterrupted(exit) &&
      Option.match(yield* Effect.serviceOption(RunHandover), { onNone: () => false, onSome: (h) => h.requested() })
    if (Exit.isInterrupted(exit) && !handover) {
      // (what was kept of it masked with the process's secrets and the run's: a cut at the bound may fall in one)
      const hide = SkillSecrets.runRedactor((yield* ProcessSecrets.current) ?? Redact.none, options.secrets)
      const stopped = partial.message(holder.current().messages, hide)
      if (stopped !== undefined) yield* Effect.ignore(holder.service.update({ messages: [stopped] }))
    }
    yield* closeDangling
    const saved = yield* Effect.exit(checkpoint)
    if (Exit.isFailure(saved) && end.status !== "error") end = errorEnd(saved.cause)
    end = { ...end, usage: usageBetween(prepared.right, holder.current()) }
    if (handover && Exit.isSuccess(saved)) {
      // left `running`, for the thread's next runner to resume
      yield* release
      return yield* ended(end)
    }
    // (a caller that settles the record itself, `RunSettlement`, writes the run's end once its last phase ended)
    if (!settled) {
      yield* Effect.ignore(Effect.flatMap(Clock.currentTimeMillis, (now) =>
        store.saveRun({
          run_id: runId,
          thread_id: threadId,
          status: end.status,
          stop_reason: end.stop_reason,
          started_at: startedAt,
          ended_at: new Date(now).toISOString(),
          ...(end.error !== undefined ? { error: end.error.message } : {})
        })))
    }
    yield* release
    return yield* ended(end)
  }))

/**
 * Runs one turn of a thread as a stream of events, ending with `run_end`. Stopping the stream early
 * cancels the run (completed steps stay saved).
 */
export const stream = <E = never, R = never>(
  input: RunInput,
  agent: Agent<E, R>
): Stream.Stream<RunEvent, never, ThreadStore | Exclude<R, RunServices>> =>
  Stream.unwrapScoped(
    Effect.gen(function*() {
      const mailbox = yield* Mailbox.make<RunEvent>()
      yield* execute(input, agent, (event) => {
        mailbox.unsafeOffer(event)
      }).pipe(Effect.ensuring(mailbox.end), Effect.forkScoped)
      return Mailbox.toStream(mailbox)
    })
  )
