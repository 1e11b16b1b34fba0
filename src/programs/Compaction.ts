/**
 * Manual compaction of a saved thread (DeerFlow's `compact_thread_context`): what the Summarization middleware
 * does when a trigger fires, asked for by a user — the thread's older messages summarised by a model and
 * replaced by the summary (`summarization/Compact.ts`, the same cut, rescue, prompt and hooks), written as one
 * checkpoint of its own, and the same `summarization` event. It runs outside any run: it holds the thread's lease
 * while it works, so it is refused while a run holds the thread, and no run starts on it meanwhile.
 *
 * It follows the `summarization` section, not the chain: with `summarization.enabled: false` compaction is off,
 * manual included (as DeerFlow answers "Context compaction is disabled."); a section with `trigger: null` turns
 * the automatic compaction off and leaves the manual one. Used by the gateway's `POST /api/threads/{id}/compact`
 * and by `antler threads compact`; an app calls `compactThread` with its own hooks.
 */
import * as Context from "effect/Context"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as Compact from "../middleware/summarization/Compact.js"
import type * as Hooks from "../middleware/summarization/Hooks.js"
import type { ContextSize } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import type { ModelService } from "../services/ModelService.js"
import { RunContext, RunState } from "../services/RunContext.js"
import { RunEvents } from "../services/RunEvents.js"
import { ThreadStore } from "../services/ThreadStore.js"
import { applyUpdate } from "../state/Reducers.js"
import type { ThreadState } from "../state/ThreadState.js"
import * as TS from "../state/ThreadState.js"

export { CompactionError } from "../middleware/summarization/Compact.js"
export type { NotCompactedReason } from "../middleware/summarization/Compact.js"

/** The thread to compact does not exist. */
export class CompactionThreadNotFound extends Schema.TaggedError<CompactionThreadNotFound>()(
  "CompactionThreadNotFound",
  { threadId: Schema.String, message: Schema.String }
) {}

/** A run holds the thread: compact it after the run. */
export class CompactionThreadBusy extends Schema.TaggedError<CompactionThreadBusy>()(
  "CompactionThreadBusy",
  { threadId: Schema.String, message: Schema.String }
) {}

/** What `compactThread` is asked with. */
export interface Options {
  /** The model service the summary is asked of. */
  readonly model: ModelService["Type"]
  /** Compact even when no summarization trigger fires (default true, as DeerFlow's endpoint). */
  readonly force?: boolean | undefined
  /**
   * A compaction that does not happen fails with `CompactionError` (default), or answers `compacted: false`
   * with its reason.
   */
  readonly raise?: boolean | undefined
  /** A retention policy for this compaction only (default: `summarization.keep`). */
  readonly keep?: ContextSize | undefined
  /** The thread's model (the summary falls back to it; default: the first configured model). */
  readonly modelName?: string | undefined
  /**
   * The summary model in place of `summarization.model_name` (null: none, the thread's model only: the user's role
   * may not use the configured one).
   */
  readonly summaryModel?: string | null | undefined
  /** The thread's custom agent (memory's flush files the messages under it). */
  readonly agentName?: string | undefined
  /** Whose thread (what the hooks are told; default `default`). */
  readonly userId?: string | undefined
  /** Before-summarisation hooks, run in this order once the summary is made (memory's flush is one). */
  readonly hooks?: ReadonlyArray<Hooks.Hook> | undefined
  /** Where the `summarization` event goes (default: dropped). */
  readonly events?: RunEvents["Type"] | undefined
}

/** What a compaction did (DeerFlow's `ThreadCompactResponse`, with the summary). */
export interface Result {
  readonly thread_id: string
  readonly compacted: boolean
  /** Why not, when not compacted. */
  readonly reason: Compact.NotCompactedReason | null
  readonly removed_message_count: number
  readonly preserved_message_count: number
  readonly summary_updated: boolean
  /** The checkpoint the compaction wrote. */
  readonly checkpoint_id: string | null
  /** The tokens of the thread's context (messages and summary) before the compaction. */
  readonly total_tokens: number
  /** The new summary. */
  readonly summary: string | null
}

/** The services of the summary call: the thread's identity, a scratch state, the events given. */
const callContext = (
  threadId: string,
  runId: string,
  userId: string,
  modelName: string | undefined,
  events: RunEvents["Type"]
) => {
  let scratch: ThreadState | undefined
  return Context.make(RunContext, {
    threadId,
    runId,
    userId,
    options: { recursionLimit: 1, toolConcurrency: 1, modelName },
    stopReason: Effect.succeed(undefined),
    setStopReason: () => Effect.void
  }).pipe(
    Context.add(RunState, {
      get: Effect.sync(() => scratch ?? TS.empty),
      update: (update) =>
        Effect.suspend(() => {
          const next = applyUpdate(scratch ?? TS.empty, update)
          if (Either.isLeft(next)) return Effect.fail(next.left)
          scratch = next.right
          return Effect.void
        })
    }),
    Context.add(RunEvents, events)
  )
}

/**
 * Compacts the saved thread `threadId` (its id in the store). Fails with `CompactionThreadNotFound`, with
 * `CompactionThreadBusy` while a run holds it, with `SummarizationConfigError` when a `fraction` size has no known
 * context window, and (unless `raise: false`) with `CompactionError` when nothing was compacted.
 */
export const compactThread = (threadId: string, options: Options) =>
  Effect.gen(function*() {
    const app = (yield* AppConfigService).config
    const store = yield* ThreadStore
    const settings = yield* Compact.settingsOf(app, {
      modelName: options.modelName,
      keep: options.keep,
      ...(options.summaryModel === undefined ? {} : { config: { model_name: options.summaryModel } })
    })
    const events = options.events ?? RunEvents.discard
    const userId = options.userId ?? "default"
    const notDone = (outcome: Compact.NotCompacted, tokens = 0) =>
      options.raise === false
        ? Effect.succeed<Result>({
          thread_id: threadId,
          compacted: false,
          reason: outcome.reason,
          removed_message_count: 0,
          preserved_message_count: 0,
          summary_updated: false,
          checkpoint_id: null,
          total_tokens: tokens,
          summary: null
        })
        : Effect.fail(Compact.toError(outcome))
    if (Option.isNone(yield* store.info(threadId))) {
      return yield* new CompactionThreadNotFound({ threadId, message: `Thread ${threadId} not found.` })
    }
    if (!settings.config.enabled) return yield* notDone(Compact.notCompacted("disabled"))

    const writer = `compact-${Crypto.randomUUID()}`
    const now = yield* Clock.currentTimeMillis
    const holder = yield* store.acquireLease({ threadId, runId: writer, ttlMs: 300_000, now })
    if (holder !== undefined) {
      return yield* new CompactionThreadBusy({
        threadId,
        message: `Thread ${threadId} has a run in progress; compact it after the run.`
      })
    }
    return yield* Effect.gen(function*() {
      const loaded = yield* store.load(threadId)
      if (Option.isNone(loaded)) {
        return yield* new CompactionThreadNotFound({ threadId, message: `Thread ${threadId} not found.` })
      }
      const state = loaded.value.state
      const outcome = yield* Compact.compactState(state, settings, {
        force: options.force ?? true,
        hooks: options.hooks ?? [],
        threadId,
        userId,
        agentName: options.agentName,
        manual: true,
        trackUsage: app.run_events.track_token_usage,
        call: (request) =>
          options.model.generate(request).pipe(
            Effect.provide(callContext(threadId, writer, userId, settings.runModel, events))
          )
      })
      const tokens = Compact.countState(settings.counter)(state)
      if (!outcome.compacted) {
        if (outcome.reason === "summary_failed") {
          const data = { ...Compact.eventData(outcome), manual: true }
          yield* events.emit({ type: "custom", name: "summarization", data })
        }
        return yield* notDone(outcome, tokens)
      }
      // (fenced by the compaction's lease: a run that took the thread while its summary was asked keeps its steps)
      yield* store.append(threadId, writer, [outcome.update], { leased: true })
      const after = yield* store.load(threadId)
      const tokensAfter = Option.isSome(after) ? Compact.countState(settings.counter)(after.value.state) : undefined
      yield* events.emit({
        type: "custom",
        name: "summarization",
        data: { ...Compact.eventData(outcome, tokensAfter), manual: true }
      })
      const checkpoints = yield* store.checkpoints(threadId)
      const last = checkpoints[checkpoints.length - 1]
      return {
        thread_id: threadId,
        compacted: true,
        reason: null,
        removed_message_count: outcome.plan.summarized.length,
        preserved_message_count: outcome.plan.rescued.length + outcome.plan.kept.length,
        summary_updated: true,
        checkpoint_id: last === undefined ? null : String(last.seq),
        total_tokens: tokens,
        summary: outcome.summary.text
      } satisfies Result
    }).pipe(Effect.ensuring(Effect.ignore(store.releaseLease(threadId, writer))))
  }).pipe(Effect.withSpan("Compaction.compactThread", { attributes: { thread: threadId } }))
