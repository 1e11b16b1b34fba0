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
 * A run cancelled while the model streams its answer keeps what was streamed of it (`PartialAnswer`).
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
import { describeFailure, truncateDetail } from "../middleware/ToolErrorHandling.js"
import { AgentHooks } from "../services/AgentHooks.js"
import { ModelService } from "../services/ModelService.js"
import type { RunOptions, RunServices } from "../services/RunContext.js"
import { RecursionLimitReached, RunContext, RunState, StoreError } from "../services/RunContext.js"
import type { RunEndEvent, RunEvent, RunUsage, StopReason } from "../services/RunEvents.js"
import { RunEvents } from "../services/RunEvents.js"
import { RunHandover } from "../services/RunHandover.js"
import type { Lost } from "../services/RunSettlement.js"
import { LAPSED, RunSettlement } from "../services/RunSettlement.js"
import type { LeaseHolder } from "../services/ThreadStore.js"
import { ThreadStore } from "../services/ThreadStore.js"
import * as Tool from "../services/Tool.js"
import * as Tracing from "../services/Tracing.js"
import type { Interrupt, ToolResult } from "../services/ToolService.js"
import { ToolService } from "../services/ToolService.js"
import type { AIMessage, Message, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import type { ReducerError } from "../state/Reducers.js"
import type { BackgroundTask, StateUpdate, ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"
import { extend } from "../state/internal/Objects.js"
import * as PartialAnswer from "./PartialAnswer.js"
import * as RunStateHolder from "./RunStateHolder.js"
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

/** The content of the synthetic result written for a tool call that started and never returned. */
export const INTERRUPTED_TOOL_RESULT =
  "[Tool call was interrupted before it returned a result (the run was cancelled or its process stopped). " +
  "It may have partly run: check its effects before repeating it.]"

/** Tool calls of the last AI message that have no result after it. */
export const danglingCalls = (messages: ReadonlyArray<Message>): ReadonlyArray<ToolCall> => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.type !== "ai") continue
    const calls = M.toolCalls(message)
    if (calls.length === 0) return []
    const answered = new Set<string>()
    for (let j = i + 1; j < messages.length; j++) {
      const later = messages[j]!
      if (later.type === "tool") answered.add(later.tool_call_id)
    }
    return calls.filter((call) => !answered.has(call.id))
  }
  return []
}

// ---------------------------------------------------------------------------------------------------------
// The loop

const invalidCallResult = (call: M.InvalidToolCall, index: number, message: AIMessage): ToolResult => ({
  message: M.tool(
    call.error
      ? `Error: The arguments of this tool call are not valid JSON (${call.error.slice(0, 500)}). Nothing was run. ` +
        `Send the call again with a JSON object as arguments.`
      : `Error: The arguments of this tool call are not valid JSON. Nothing was run. ` +
        `Send the call again with a JSON object as arguments.`,
    M.invalidCallId(message, call, index),
    { name: call.name || "unknown_tool", status: "error" }
  )
})

// The last resort when no ToolErrorHandling is in the chain: the same description, without its metadata.
const failedCallResult = (call: ToolCall, cause: Cause.Cause<unknown>): ToolResult => {
  const failure = Cause.failureOption(cause)
  const { type, detail } = describeFailure(Option.isSome(failure) ? failure.value : Cause.squash(cause))
  return Tool.errorResult(call, `Error: Tool '${call.name}' failed with ${type}: ${truncateDetail(detail)}`)
}

interface Step {
  readonly model: ModelService["Type"]
  readonly tools: ToolService["Type"]
  /** The names of the run's tools (fixed for the run). */
  readonly known: ReadonlySet<string>
  readonly unknownTool: ((name: string) => string | undefined) | undefined
  /** The names of the run's read-only tools (their calls need no durable record before they run). */
  readonly readOnly: ReadonlySet<string>
  readonly holder: RunStateHolder.Holder
  readonly context: RunContext["Type"]
  readonly checkpoint: Effect.Effect<void, StoreError>
  /** Fails as `checkpoint` does when the run no longer owns its thread (its lease lost, or lapsed): writes nothing. */
  readonly owned: Effect.Effect<void, StoreError>
  readonly systemPrompt: string | undefined
  readonly options: RunOptions
  /** The tool-call ids of the thread so far (every new call gets an id of its own). */
  readonly callIds: Set<string>
}

/** The ids of every tool call in a history. */
const callIdsOf = (messages: ReadonlyArray<Message>): Set<string> => {
  const ids = new Set<string>()
  for (const message of messages) if (message.type === "ai") recordCallIds(message, ids)
  return ids
}

/** Records the ids of a message's tool calls (valid and invalid) in `seen`. */
const recordCallIds = (message: AIMessage, seen: Set<string>): AIMessage => {
  for (const call of M.toolCalls(message)) seen.add(call.id)
  message.invalid_tool_calls?.forEach((call, i) => seen.add(M.invalidCallId(message, call, i)))
  return message
}

const finish = (step: Step, interrupt?: Interrupt): Effect.Effect<RunEndEvent> =>
  Effect.gen(function*() {
    if (interrupt !== undefined) {
      const payload = interrupt.payload
      return { type: "run_end", status: "interrupted", stop_reason: "interrupted", interrupt: payload } as const
    }
    const reason: StopReason = (yield* step.context.stopReason) ?? "completed"
    return { type: "run_end", status: "success", stop_reason: reason } as const
  })

// (no stack trace: capturing one for every tool call costs more than the rest of the span)
const toolSpan = (call: ToolCall) => ({
  attributes: { "tool.name": call.name, "tool.call_id": call.id },
  captureStackTrace: false
})

/** A tool call in its `Tool.call` span (when the app traces). */
const traced = <A, E, R>(call: ToolCall, effect: Effect.Effect<A, E, R>) =>
  Effect.withSpan(effect, "Tool.call", toolSpan(call))

const callTools = (
  step: Step,
  ports: RunFrame.Resolved,
  message: AIMessage,
  tracing: boolean
): Effect.Effect<Interrupt | undefined, ReducerError, RunServices> =>
  Effect.suspend(() => {
    const calls = M.toolCalls(message)
    const known = step.known
    const results: Array<ToolResult | undefined> = new Array(calls.length)
    let interrupt: Interrupt | undefined
    // (the result kept in the handler that takes the call's end: one effect step, not a catch and a map)
    const one = (call: ToolCall, index: number): Effect.Effect<void, never, RunServices> => {
      if (!known.has(call.name)) {
        return Effect.sync(() => {
          const why = step.unknownTool?.(call.name)
          results[index] = Tool.errorResult(
            call,
            `Error: Tool '${call.name}' does not exist. Available tools: ${[...known].join(", ") || "(none)"}.` +
              (why === undefined ? "" : ` (${why}.)`)
          )
        })
      }
      return Effect.matchCauseEffect(tracing ? traced(call, ports.call(call)) : ports.call(call), {
        onFailure: (cause) => {
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure) && failure.value._tag === "Interrupt") {
            interrupt ??= failure.value
            results[index] = failure.value.result
            return Effect.void
          }
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
          results[index] = failedCallResult(call, cause)
          return Effect.void
        },
        onSuccess: (result) => {
          results[index] = result
          return Effect.void
        }
      })
    }
    // The results, in the calls' order, applied now (the run's own writes); the first failure, if one fails.
    const applyAll = (synthesizeMissing: boolean): ReducerError | undefined => {
      const writes: Array<Message> = []
      let updates: Array<readonly [StateUpdate, string]> | undefined
      for (let i = 0; i < calls.length; i++) {
        const result = results[i]
        if (result === undefined) {
          if (synthesizeMissing) {
            writes.push(M.tool(INTERRUPTED_TOOL_RESULT, calls[i]!.id, { name: calls[i]!.name, status: "error" }))
          }
          continue
        }
        writes.push(result.message)
        if (result.update !== undefined) (updates ??= []).push([result.update, calls[i]!.id])
      }
      message.invalid_tool_calls?.forEach((call, i) => writes.push(invalidCallResult(call, i, message).message))
      const apply = step.holder.apply
      if (writes.length > 0) {
        const failed = apply({ messages: writes })
        if (failed !== undefined) return failed
      }
      if (updates !== undefined) {
        for (const [update, callId] of updates) {
          const failed = apply(update, callId)
          if (failed !== undefined) return failed
        }
      }
      return undefined
    }
    const running = calls.length === 1
      ? one(calls[0]!, 0)
      : Effect.forEach(calls, one, { concurrency: step.options.toolConcurrency, discard: true })
    // (one handler for both endings: `onInterrupt` then `zipRight` cost ten effect steps more, on every step)
    return Effect.uninterruptibleMask((restore) =>
      Effect.matchCauseEffect(restore(running), {
        // cancelled: what completed is saved, the rest answered "interrupted"
        onFailure: (cause) => {
          if (Cause.isInterruptedOnly(cause)) applyAll(true)
          return Effect.failCause(cause)
        },
        onSuccess: () => {
          const failed = applyAll(false)
          return failed === undefined ? Effect.succeed(interrupt) : Effect.fail(failed)
        }
      })
    )
  })

const loop = (step: Step) =>
  Effect.gen(function*() {
    const settings = {
      modelName: step.options.modelName,
      thinkingEnabled: step.options.thinkingEnabled,
      reasoningEffort: step.options.reasoningEffort,
      ...(step.options.temperature !== undefined ? { temperature: step.options.temperature } : {}),
      ...(step.options.maxTokens !== undefined ? { maxTokens: step.options.maxTokens } : {})
    }
    // the run's wrappers, resolved once: every call of the loop goes straight through them
    const ports = yield* RunFrame.resolve(step.model, step.tools)
    // whether the app traces, read once: the tool calls' spans are made only then
    const tracing = yield* Tracing.traced
    for (let calls = 0;; calls++) {
      yield* step.checkpoint
      if (calls >= step.options.recursionLimit) {
        const error = new RecursionLimitReached({ limit: step.options.recursionLimit })
        return {
          type: "run_end",
          status: "error",
          stop_reason: "recursion_limit",
          error: { name: error._tag, message: error.message }
        } as RunEndEvent
      }
      const state = step.holder.current()
      const response = yield* ports.generate({
        systemPrompt: step.systemPrompt,
        messages: state.messages,
        tools: step.tools.definitions,
        settings
      })
      // every call under an id of its own in the thread, so each runs once and is answered once
      const message = recordCallIds(M.uniqueToolCallIds(response.message, step.callIds), step.callIds)
      const extra = response.update
      const failed = step.holder.apply(
        extra === undefined
          ? { messages: [message] }
          : extend(extra, { messages: [...(extra.messages ?? []), message] })
      )
      if (failed !== undefined) return yield* Effect.fail(failed)
      if (response.failure !== undefined) {
        yield* step.checkpoint
        return { type: "run_end", status: "error", stop_reason: "error", error: response.failure } as RunEndEvent
      }
      if (!M.hasToolCalls(message)) {
        yield* step.checkpoint
        return yield* finish(step)
      }
      // The model's message, with its tool calls, is durable before a tool that may change something runs:
      // a crash then never makes the run execute a call twice. Calls of read-only tools need no such record.
      // (and no tool starts once the run no longer owns its thread: its lease taken, or its life ran out)
      if (!M.toolCalls(message).every((call) => step.readOnly.has(call.name))) yield* step.checkpoint
      else yield* step.owned
      const interrupt = yield* callTools(step, ports, message, tracing)
      if (interrupt !== undefined) {
        yield* step.checkpoint
        return yield* finish(step, interrupt)
      }
    }
  })

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

/** The tool results that close calls left open (by a crash, or a cancellation), marked interrupted. */
const interruptedResults = (messages: ReadonlyArray<Message>): ReadonlyArray<Message> =>
  danglingCalls(messages).map((call) => M.tool(INTERRUPTED_TOOL_RESULT, call.id, { name: call.name, status: "error" }))

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
      const step: Step = {
        model: Context.get(ports, ModelService),
        tools,
        known: new Set(tools.definitions.map((d) => d.name)),
        unknownTool: input.unknownTool,
        readOnly: new Set(tools.definitions.flatMap((d) => (d.readOnly === true ? [d.name] : []))),
        holder,
        context,
        checkpoint,
        owned,
        systemPrompt: input.systemPrompt,
        options,
        callIds: callIdsOf(holder.current().messages)
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
      return yield* Context.get(ports, AgentHooks).around(loop(step)).pipe(
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
      const stopped = partial.message(holder.current().messages)
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
