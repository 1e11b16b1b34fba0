/**
 * The run: DeerFlow's ReAct loop over the ports.
 *
 *   run(input) = AgentHooks.around(loop)
 *   loop: request ← project(state) ; response ← ModelService.generate(request) ; apply(response)
 *         if no tool calls → done
 *         results ← ToolService.call for each call (concurrently, bounded) ; apply(results) ; checkpoint
 *
 * Every completed step is written to the ThreadStore as one append-only checkpoint. A run never fails: how
 * it ended (completed, capped, interrupted for a question, cancelled, failed) is its last event.
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { Ports } from "../middleware/Middleware.js"
import { buildPorts } from "../middleware/Middleware.js"
import { describeFailure, truncateDetail } from "../middleware/ToolErrorHandling.js"
import { AgentHooks } from "../services/AgentHooks.js"
import { ModelService } from "../services/ModelService.js"
import type { RunOptions } from "../services/RunContext.js"
import type { StoreError } from "../services/RunContext.js"
import { RecursionLimitReached, RunContext, RunState } from "../services/RunContext.js"
import type { RunEndEvent, RunEvent, StopReason } from "../services/RunEvents.js"
import { currentSink, RunEvents } from "../services/RunEvents.js"
import { ThreadStore } from "../services/ThreadStore.js"
import * as Tool from "../services/Tool.js"
import type { Interrupt, ToolResult } from "../services/ToolService.js"
import { ToolService } from "../services/ToolService.js"
import type { AIMessage, Message, ToolCall } from "../state/Message.js"
import * as M from "../state/Message.js"
import { applyUpdate } from "../state/Reducers.js"
import type { StateUpdate, ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"

/** What to run. */
export interface RunInput {
  readonly threadId: string
  /** Defaults to a fresh id. */
  readonly runId?: string | undefined
  readonly userId?: string | undefined
  /** The new messages of this run, usually one human message. */
  readonly input: ReadonlyArray<Message>
  /** The static system prompt. */
  readonly systemPrompt?: string | undefined
  readonly options?: Partial<RunOptions> | undefined
}

/** Builds the per-run stack of ports. Called once per run, so it must return fresh layers each time. */
export type StackFactory<E, R> = () => Layer.Layer<Ports, E, R | RunContext | RunState | RunEvents>

/** Default options of a run. */
export const defaultOptions: RunOptions = { recursionLimit: 100, toolConcurrency: 8 }

/** The content of the synthetic result written for a tool call that never finished. */
export const INTERRUPTED_TOOL_RESULT = "[Tool call was interrupted and did not return a result.]"

// ---------------------------------------------------------------------------------------------------------
// The state holder

interface Holder {
  readonly service: RunState["Type"]
  /** The updates applied since the last checkpoint, cleared. */
  readonly drain: () => ReadonlyArray<StateUpdate>
  readonly current: () => ThreadState
}

const eventsOf = (update: StateUpdate, emit: (event: RunEvent) => void) => {
  let rest: StateUpdate | undefined
  if (update.messages !== undefined) {
    let removals: Array<M.MessageWrite> | undefined
    for (const item of update.messages) {
      if (item.type === "remove") (removals ??= []).push(item)
      else emit({ type: "message", message: item })
    }
    const { messages: _, ...others } = update
    rest = removals === undefined ? others : { ...others, messages: removals }
  } else rest = update
  if (Object.keys(rest).length > 0) emit({ type: "state", update: rest })
}

const makeHolder = (initial: ThreadState, emit: (event: RunEvent) => void): Holder => {
  let state = initial
  let journal: Array<StateUpdate> = []
  return {
    service: {
      get: Effect.sync(() => state),
      update: (update) =>
        Effect.suspend(() => {
          const next = applyUpdate(state, update)
          if (Either.isLeft(next)) return Effect.fail(next.left)
          state = next.right
          journal.push(update)
          eventsOf(update, emit)
          return Effect.void
        })
    },
    drain: () => {
      const out = journal
      journal = []
      return out
    },
    current: () => state
  }
}

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
  readonly holder: Holder
  readonly context: RunContext["Type"]
  readonly checkpoint: Effect.Effect<void, StoreError>
  readonly systemPrompt: string | undefined
  readonly options: RunOptions
}

const finish = (step: Step, interrupt?: Interrupt): Effect.Effect<RunEndEvent> =>
  Effect.gen(function*() {
    if (interrupt !== undefined) {
      const payload = interrupt.payload
      return { type: "run_end", status: "interrupted", stop_reason: "interrupted", interrupt: payload } as const
    }
    const messages = step.holder.current().messages
    const last = messages[messages.length - 1]
    if (last?.type === "ai" && last.additional_kwargs?.deerflow_error_fallback === true) {
      return {
        type: "run_end",
        status: "error",
        stop_reason: "error",
        error: { name: String(last.additional_kwargs.error_type ?? "ModelError"), message: M.text(last) }
      } as const
    }
    const reason: StopReason = (yield* step.context.stopReason) ?? "completed"
    return { type: "run_end", status: "success", stop_reason: reason } as const
  })

const callTools = (step: Step, message: AIMessage) =>
  Effect.gen(function*() {
    const calls = M.toolCalls(message)
    const known = step.known
    const results: Array<ToolResult | undefined> = new Array(calls.length)
    let interrupt: Interrupt | undefined
    const one = (call: ToolCall, index: number) => {
      const run: Effect.Effect<ToolResult> = known.has(call.name)
        ? step.tools.call(call).pipe(
          Effect.catchTag("Interrupt", (i) => {
            interrupt ??= i
            return Effect.succeed(i.result)
          }),
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause)
              ? Effect.failCause(cause as Cause.Cause<never>)
              : Effect.succeed(failedCallResult(call, cause))
          )
        )
        : Effect.succeed(Tool.errorResult(
          call,
          `Error: Tool '${call.name}' does not exist. Available tools: ${[...known].join(", ") || "(none)"}.`
        ))
      return Effect.map(run, (result) => {
        results[index] = result
      })
    }
    const applyAll = (synthesizeMissing: boolean) =>
      Effect.gen(function*() {
        const writes: Array<Message> = []
        const updates: Array<StateUpdate> = []
        for (let i = 0; i < calls.length; i++) {
          const result = results[i]
          if (result === undefined) {
            if (synthesizeMissing) {
              writes.push(M.tool(INTERRUPTED_TOOL_RESULT, calls[i]!.id, { name: calls[i]!.name, status: "error" }))
            }
            continue
          }
          writes.push(result.message)
          if (result.update !== undefined) updates.push(result.update)
        }
        message.invalid_tool_calls?.forEach((call, i) => writes.push(invalidCallResult(call, i, message).message))
        if (writes.length > 0) yield* step.holder.service.update({ messages: writes })
        for (const update of updates) yield* step.holder.service.update(update)
      })
    if (calls.length === 1) yield* one(calls[0]!, 0).pipe(Effect.onInterrupt(() => Effect.ignore(applyAll(true))))
    else {
      yield* Effect.forEach(calls, one, { concurrency: step.options.toolConcurrency, discard: true }).pipe(
        Effect.onInterrupt(() => Effect.ignore(applyAll(true)))
      )
    }
    yield* applyAll(false)
    return interrupt
  })

const loop = (step: Step) =>
  Effect.gen(function*() {
    const settings = {
      modelName: step.options.modelName,
      thinkingEnabled: step.options.thinkingEnabled,
      reasoningEffort: step.options.reasoningEffort
    }
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
      const response = yield* step.model.generate({
        systemPrompt: step.systemPrompt,
        messages: state.messages,
        tools: step.tools.definitions,
        settings
      })
      const message = response.message
      const extra = response.update
      yield* step.holder.service.update(
        extra === undefined ? { messages: [message] } : { ...extra, messages: [...(extra.messages ?? []), message] }
      )
      if (!M.hasToolCalls(message)) {
        yield* step.checkpoint
        return yield* finish(step)
      }
      const interrupt = yield* callTools(step, message)
      if (interrupt !== undefined) {
        yield* step.checkpoint
        return yield* finish(step, interrupt)
      }
    }
  })

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
 * saying so) and ends the run as `cancelled`.
 */
export const execute = <E, R>(
  input: RunInput,
  makeStack: StackFactory<E, R>,
  emit: (event: RunEvent) => void = () => {}
): Effect.Effect<RunEndEvent, never, ThreadStore | Exclude<R, RunContext | RunState | RunEvents>> =>
  Effect.uninterruptibleMask((restore) => Effect.gen(function*() {
    const store = yield* ThreadStore
    const threadId = input.threadId
    const runId = input.runId ?? M.newId()
    const options: RunOptions = { ...defaultOptions, ...input.options }
    const sink: RunEvents["Type"] = { emit: (event) => Effect.sync(() => emit(event)) }
    emit({ type: "run_start", thread_id: threadId, run_id: runId })
    const startedAt = new Date().toISOString()

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
      // A run still marked running belongs to a process that died mid-run (runs of a thread do not overlap):
      // its completed steps are in the checkpoints; record that it did not finish.
      if (Option.isSome(loaded)) {
        for (const stale of loaded.value.runs) {
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
      const end = errorEnd(Cause.fail(prepared.left))
      emit(end)
      return end
    }
    const holder = makeHolder(prepared.right, emit)
    const checkpoint = Effect.suspend(() => {
      const journal = holder.drain()
      return journal.length === 0 ? Effect.void : store.append(threadId, runId, journal)
    })

    const body = Effect.scoped(Effect.gen(function*() {
      const ports = yield* buildPorts(makeStack()).pipe(
        Effect.provide(
          Context.make(RunContext, context).pipe(Context.add(RunState, holder.service), Context.add(RunEvents, sink))
        )
      )
      const tools = Context.get(ports, ToolService)
      const step: Step = {
        model: Context.get(ports, ModelService),
        tools,
        known: new Set(tools.definitions.map((d) => d.name)),
        holder,
        context,
        checkpoint,
        systemPrompt: input.systemPrompt,
        options
      }
      if (input.input.length > 0) yield* holder.service.update({ messages: input.input })
      return yield* Context.get(ports, AgentHooks).around(loop(step))
    }))

    const closeDangling = Effect.suspend(() => {
      const open = danglingCalls(holder.current().messages)
      if (open.length === 0) return Effect.void
      return Effect.ignore(holder.service.update({
        messages: open.map((call) => M.tool(INTERRUPTED_TOOL_RESULT, call.id, { name: call.name, status: "error" }))
      }))
    })

    const exit = yield* Effect.exit(restore(body.pipe(Effect.locally(currentSink, sink))))
    let end: RunEndEvent = Exit.isSuccess(exit)
      ? exit.value
      : Exit.isInterrupted(exit)
      ? { type: "run_end", status: "cancelled", stop_reason: "cancelled" }
      : errorEnd(exit.cause)
    yield* closeDangling
    const saved = yield* Effect.exit(checkpoint)
    if (Exit.isFailure(saved) && end.status !== "error") end = errorEnd(saved.cause)
    yield* Effect.ignore(store.saveRun({
      run_id: runId,
      thread_id: threadId,
      status: end.status,
      stop_reason: end.stop_reason,
      started_at: startedAt,
      ended_at: new Date().toISOString()
    }))
    emit(end)
    return end
  }))

/**
 * Runs one turn of a thread as a stream of events, ending with `run_end`. Stopping the stream early
 * cancels the run (completed steps stay saved).
 */
export const stream = <E, R>(
  input: RunInput,
  makeStack: StackFactory<E, R>
): Stream.Stream<RunEvent, never, ThreadStore | Exclude<R, RunContext | RunState | RunEvents>> =>
  Stream.unwrapScoped(
    Effect.gen(function*() {
      const mailbox = yield* Mailbox.make<RunEvent>()
      yield* execute(input, makeStack, (event) => {
        mailbox.unsafeOffer(event)
      }).pipe(Effect.ensuring(mailbox.end), Effect.forkScoped)
      return Mailbox.toStream(mailbox)
    })
  )
