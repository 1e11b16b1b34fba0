/**
 * Summarization (SPEC §5.18, lead chain slot #19): when the thread grows past a trigger, the older messages
 * are replaced by a summary written by a model. The summary is kept in `summary_text` and reaches every
 * later request through DurableContext (§5.17); the messages it replaces are removed from state.
 *
 * - Triggers (any one fires): `messages` — message count (plus one for an existing summary) ≥ value;
 *   `tokens` — o200k-counted tokens of the messages and the summary ≥ value, or the last AI message's
 *   reported `usage_metadata.total_tokens` ≥ value; `fraction` — the same against `context_window × value`.
 * - Keep: the last N messages, or the longest suffix within a token budget (binary search over cached prefix
 *   sums), moved back so no AI message with tool calls is separated from its results.
 * - Rescue: dynamic-context reminders, the latest real user message, and the most recent SKILL.md reads (as
 *   complete AI + tool groups, bounded in number and tokens) are kept, placed before the kept tail.
 * - The summary comes from an internal model call (`internal: "summarization"`, no tools, never streamed as
 *   the answer), tried with `summarization.model_name` then the run model. If every attempt fails or is
 *   empty, nothing is compacted this turn and the run goes on.
 * - Before-summarisation hooks (memory's flush, an app's own) run in registration order once the summary is
 *   made, before the summarised messages leave the state; none runs when no summary could be made.
 *
 * The compaction itself is `summarization/Compact.ts`, which the manual path (`Compaction.ts`) runs too; the
 * pure planning is `summarization/Plan.ts` and the summary request `summarization/Request.ts` (re-exported here).
 *
 * DeerFlow runs this as `before_model`; here it runs in the model wrapper before `next`, reading and updating
 * `RunState`, then sending the request rebuilt from the compacted state.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type { SummarizationConfig } from "../services/AppConfig.js"
import { AppConfigService } from "../services/AppConfig.js"
import type * as Authz from "../services/Authorization.js"
import type { ModelRequest } from "../services/ModelService.js"
import * as ProcessSecrets from "../services/ProcessSecrets.js"
import { RunContext, RunState } from "../services/RunContext.js"
import { emitCustom } from "../services/RunEvents.js"
import type { Message } from "../state/Message.js"
import type { ThreadState } from "../state/ThreadState.js"
import * as Tokens from "../state/Tokens.js"
import * as AuthorizationMW from "./Authorization.js"
import * as Chain from "./Chain.js"
import type { Middleware, ModelNext } from "./Middleware.js"
import * as MW from "./Middleware.js"
import * as Compact from "./summarization/Compact.js"
import type * as Hooks from "./summarization/Hooks.js"
import type { Plan, SkillRescue, TriggerHit } from "./summarization/Plan.js"
import { firstHit, rebuildRequest } from "./summarization/Plan.js"
import { atOnce } from "./internal/StateRead.js"

export * from "./summarization/Plan.js"
export * from "./summarization/Request.js"
export type { Hook, SummarizationEvent } from "./summarization/Hooks.js"

// ---------------------------------------------------------------------------------------------------------
// The layer

/** Options of `layer`. */
export interface Options {
  /** Overrides of the `summarization` section of the app config. */
  readonly config?: Partial<SummarizationConfig> | undefined
  /** The run model's context window in tokens; default: `context_window` of that entry of `models`. */
  readonly contextWindow?: number | undefined
  /** Bounds of the skill rescue (default `defaultSkillRescue`). */
  readonly skillRescue?: Partial<SkillRescue> | undefined
  /** Token counter (default: an o200k counter of the middleware's own, kept for its agent's life). */
  readonly counter?: Tokens.Counter | undefined
  /**
   * Before-summarisation hooks (DeerFlow's `before_summarization`: memory's flush is one), run in this order
   * once a summary is made, before the summarised messages leave the state; none when no summary was made. A
   * hook's failure is logged and does not stop the compaction.
   */
  readonly hooks?: ReadonlyArray<Hooks.Hook> | undefined
  /** The custom agent of the runs (what the hooks are told). */
  readonly agentName?: string | undefined
  /** With `authorization.enabled`: `summarization.model_name` the run's role may not use is passed over. */
  readonly authorization?: Authz.Authorization | undefined
}

/**
 * The Summarization middleware. Requires `AppConfigService` (the `summarization`, `models` and `skills`
 * sections); reads the run's model from `RunContext`. A run fails with `SummarizationConfigError`
 * when a `fraction` trigger or keep has no known context window. A disabled config makes it a pass-through.
 * Place it right inside DurableContext, so every request after a compaction carries the new summary.
 */
export const layer = (options: Options = {}): Middleware<AppConfigService> =>
  Layer.unwrapEffect(Effect.sync(() =>
    perRun(options, options.counter ?? Tokens.makeCounter(), Tokens.makeUpperBoundCounter())
  ))

const perRun = (options: Options, counter: Tokens.Counter, upperBounds: Tokens.Counter) =>
  MW.make(Effect.gen(function*() {
    const app = (yield* AppConfigService).config
    const context = yield* RunContext
    const state = yield* RunState
    // (a summary model the run's role may not use: the summary is asked of the run's model only)
    const summaryModel = yield* AuthorizationMW.configuredModel(
      options.authorization,
      options.config?.model_name !== undefined ? options.config.model_name : app.summarization.model_name,
      "Summarization"
    )
    const settings = yield* Compact.settingsOf(app, {
      config: summaryModel === null ? { ...options.config, model_name: null } : options.config,
      modelName: context.options.modelName,
      contextWindow: options.contextWindow,
      skillRescue: options.skillRescue,
      counter
    })
    if (!settings.config.enabled) return {}
    const { triggers, window } = settings
    if (triggers.length === 0) return {}
    // (what the new summary is masked with before DurableContext's clip of it, in the request after a compaction)
    const hide = yield* ProcessSecrets.ofRun(yield* ProcessSecrets.current)

    const totals = Tokens.makeTotals(counter)
    let summaryText: string | null = null
    let summaryTokens = 0
    const tokensOfSummary = (summary: string | null): number => {
      if (summary !== summaryText) {
        summaryText = summary
        summaryTokens = summary === null || summary === "" ? 0 : counter.text(summary) + Tokens.MESSAGE_OVERHEAD
      }
      return summaryTokens
    }
    // Most checks are far below the limit: an upper bound (bytes) settles them without running the tokenizer.
    const bounds = Tokens.makeTotals(upperBounds)
    const tokenLimits = triggers.flatMap((t) =>
      t.type === "tokens"
        ? [t.value]
        : t.type === "fraction" && window !== undefined
        ? [Math.floor(window * t.value)]
        : []
    )
    const lowestLimit = tokenLimits.length > 0 ? Math.min(...tokenLimits) : Infinity
    const counted = (current: ThreadState) => {
      const summary = current.summary_text
      const bound = bounds.of(current.messages).total +
        (summary === null || summary === "" ? 0 : Tokens.countBytes(summary) + Tokens.MESSAGE_OVERHEAD)
      if (bound < lowestLimit) return bound
      return totals.of(current.messages).total + tokensOfSummary(summary)
    }

    // A messages array for which a compaction was found empty or failed: not retried until the thread changes
    // (a retry of the same model call would otherwise ask for the summary again).
    let settled: ReadonlyArray<Message> | undefined
    // The last compaction, while the state is still the one it produced: an outer retry (LLMErrorHandling)
    // re-sends the request built before the compaction, which must lose the summarised messages again.
    let compacted: { readonly messages: ReadonlyArray<Message>; readonly plan: Plan } | undefined

    const compact = (current: ThreadState, hit: TriggerHit, request: ModelRequest, next: ModelNext) =>
      Effect.gen(function*() {
        const outcome = yield* Compact.compactState(current, settings, {
          force: false,
          hit,
          hooks: options.hooks ?? [],
          threadId: context.threadId,
          userId: context.userId,
          agentName: options.agentName,
          manual: false,
          call: next,
          counted
        })
        if (!outcome.compacted) {
          settled = current.messages
          if (outcome.reason === "summary_failed") yield* emitCustom("summarization", Compact.eventData(outcome))
          return request
        }
        const applied = yield* Effect.either(state.update(outcome.update))
        if (Either.isLeft(applied)) {
          settled = current.messages
          yield* emitCustom("summarization", { status: "failed", ...outcome.report, errors: [applied.left.message] })
          return request
        }
        const after = yield* state.get
        compacted = { messages: after.messages, plan: outcome.plan }
        yield* emitCustom("summarization", Compact.eventData(outcome, counted(after)))
        return rebuildRequest(request, outcome.plan, after, hide)
      }).pipe(
        Effect.withSpan("Summarization.auto", {
          attributes: { messages: current.messages.length, trigger: hit.trigger.type }
        }),
        // Summarising is best effort: a defect in it must not fail the run (interruption still propagates).
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
          settled = current.messages
          const error = Cause.squash(cause)
          const errors = [error instanceof Error ? error.message : String(error)]
          return Effect.as(emitCustom("summarization", { status: "failed", errors }), request)
        })
      )

    return {
      modelHooks: {
        before: (request, next) =>
          request.internal !== undefined ? request : atOnce(state, (current) => {
            let outgoing = request
            if (compacted !== undefined) {
              if (current.messages === compacted.messages) {
                outgoing = rebuildRequest(request, compacted.plan, current, hide)
              } else compacted = undefined
            }
            if (current.messages === settled) return outgoing
            const hit = firstHit(current.messages, current.summary_text, triggers, window, () => counted(current))
            return hit === undefined ? outgoing : compact(current, hit, outgoing, next)
          })
      }
    }
  }))

/** Its chain entry: right inside DurableContext, so a request after a compaction carries the summary. */
export const entry = (options: Options = {}) =>
  Chain.entry("Summarization", () => layer(options), [
    { inside: "DurableContext", reason: "a request made after a compaction must carry the new summary" }
  ])
