/**
 * Test harness: runs a middleware chain over a SCRIPTED model and real tools, and records what a user and
 * the model would see: every request the model received, every event, the end, and the saved state.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as MemoryThreadStore from "../../src/layers/MemoryThreadStore.js"
import * as ScriptedModel from "../../src/layers/ScriptedModel.js"
import * as Toolkit from "../../src/layers/Toolkit.js"
import type { Middleware } from "../../src/middleware/Middleware.js"
import * as MW from "../../src/middleware/Middleware.js"
import type { RunInput } from "../../src/programs/Run.js"
import * as Run from "../../src/programs/Run.js"
import type { ModelRequest } from "../../src/services/ModelService.js"
import type { RunContext, RunState } from "../../src/services/RunContext.js"
import type { RunEndEvent, RunEvent, RunEvents } from "../../src/services/RunEvents.js"
import type * as Tool from "../../src/services/Tool.js"
import { ThreadStore } from "../../src/services/ThreadStore.js"
import type { Message } from "../../src/state/Message.js"
import * as M from "../../src/state/Message.js"
import type { ThreadState } from "../../src/state/ThreadState.js"

/** What one run did. */
export interface Outcome {
  readonly end: RunEndEvent
  readonly events: ReadonlyArray<RunEvent>
  /** Every request the model received, in order (after every middleware). */
  readonly requests: ReadonlyArray<ModelRequest>
  /** The thread as saved by the store after the run. */
  readonly state: ThreadState
}

/** Options of `run`. */
export interface RunSpec<R> {
  readonly script: ScriptedModel.Script
  readonly tools?: ReadonlyArray<Tool.Tool>
  /** Outermost first, as in LeadAgent. A function, because layers must be fresh for every run. */
  readonly middlewares?: () => ReadonlyArray<Middleware<R, any>>
  readonly threadId?: string
  /** The run's user (default: `default`). */
  readonly userId?: string
  readonly input?: ReadonlyArray<Message> | string
  readonly systemPrompt?: string
  readonly options?: RunInput["options"]
}

/** Runs one turn. Needs a ThreadStore (see `withStore`) and whatever the middlewares need. */
export const run = <R = never>(spec: RunSpec<R>) =>
  Effect.gen(function*() {
    const requests: Array<ModelRequest> = []
    const scripted = ScriptedModel.make(spec.script)
    const model = { generate: (request: ModelRequest) => Effect.suspend(() => (requests.push(request), scripted.generate(request))) }
    const events: Array<RunEvent> = []
    const threadId = spec.threadId ?? "test-thread"
    const input = typeof spec.input === "string" ? [M.human(spec.input)] : spec.input ?? [M.human("hello")]
    const end = yield* Run.execute(
      { threadId, userId: spec.userId, input, systemPrompt: spec.systemPrompt, options: spec.options },
      MW.stack(spec.middlewares?.() ?? [], MW.base(model, Toolkit.make(spec.tools ?? []))),
      (event) => events.push(event)
    )
    const store = yield* ThreadStore
    const loaded = yield* store.load(threadId)
    const state = Option.getOrThrow(loaded).state
    return { end, events, requests, state } satisfies Outcome
  })

/** Provides a fresh in-memory thread store. */
export const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provide(effect, MemoryThreadStore.layer())

/** Types a middleware list may require from the run. */
export type RunServices = RunContext | RunState | RunEvents

/**
 * A middleware that makes an internal call (as Summarization does) before every agent call, so tests can check
 * how the middlewares inside it treat calls the harness makes for itself.
 */
export const internalCaller = (purpose = "summarization") =>
  MW.make({ model: (request, next) => Effect.zipRight(next({ ...request, internal: purpose }), next(request)) })
