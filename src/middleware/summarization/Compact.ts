/**
 * One compaction of a thread's state, as an operation (SPEC §5.18): the older messages are summarised by a
 * model and replaced by the summary, never splitting a tool call from its result. The automatic path (the
 * Summarization middleware, when a trigger fires) and the manual one (`compact`, the gateway's
 * `POST /api/threads/{id}/compact`, `antler threads compact`) both run it, so they cut, rescue, prompt, fire the
 * before-summarisation hooks and update the state the same way. It does not write anything: it answers the
 * state update, which the caller applies.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { AppConfig, ContextSize, SummarizationConfig } from "../../services/AppConfig.js"
import type { ModelRequest, ModelResponse } from "../../services/ModelService.js"
import * as M from "../../state/Message.js"
import type { StateUpdate, ThreadState, TokenUsageDelta } from "../../state/ThreadState.js"
import * as Tokens from "../../state/Tokens.js"
import * as Hooks from "./Hooks.js"
import type { Plan, PlanSettings, SkillRescue, SummarizationConfigError, TriggerHit } from "./Plan.js"
import { compactionUpdate, defaultSkillRescue, firstHit, plan, triggersOf, validate } from "./Plan.js"
import { candidates, DEFAULT_PROMPT, fillPrompt, summaryInput, summaryRequest } from "./Request.js"

/** Why a compaction did not happen. */
export const NotCompactedReason = Schema.Literal(
  /** `summarization.enabled` is false: compaction is off, manual included (as in DeerFlow). */
  "disabled",
  /** Nothing to summarise: the thread is empty, or everything before the cut must stay. */
  "not_enough_messages",
  /** Not forced, and no trigger fires yet. */
  "below_trigger",
  /** Every model tried failed or answered an empty summary. */
  "summary_failed"
)
export type NotCompactedReason = typeof NotCompactedReason.Type

/** A compaction that did not happen, when the caller asked for it to be raised. */
export class CompactionError extends Schema.TaggedError<CompactionError>()("CompactionError", {
  reason: NotCompactedReason,
  message: Schema.String,
  /** For `summary_failed`: each model tried and why it failed. */
  errors: Schema.Array(Schema.String)
}) {}

/** The settings of a compaction, resolved from the app's configuration. */
export interface Settings {
  readonly config: SummarizationConfig
  readonly triggers: ReadonlyArray<ContextSize>
  /** The run's model (the summary falls back to it). */
  readonly runModel: string | undefined
  readonly window: number | undefined
  readonly plan: PlanSettings
  readonly template: string
  readonly counter: Tokens.Counter
}

/** What `settingsOf` takes besides the app's configuration. */
export interface SettingsOptions {
  /** Overrides of the `summarization` section. */
  readonly config?: Partial<SummarizationConfig> | undefined
  /** The run's model; default: the first configured model. */
  readonly modelName?: string | undefined
  /** The run model's context window; default: its `context_window` in `models`. */
  readonly contextWindow?: number | undefined
  /** A retention policy for this compaction only (DeerFlow's `keep` of the compact request). */
  readonly keep?: ContextSize | undefined
  readonly skillRescue?: Partial<SkillRescue> | undefined
  readonly counter?: Tokens.Counter | undefined
}

/** The settings for `app`, or the readable error of a `fraction` size without a known context window. */
export const settingsOf = (
  app: AppConfig,
  options: SettingsOptions = {}
): Either.Either<Settings, SummarizationConfigError> => {
  const config: SummarizationConfig = { ...app.summarization, ...options.config }
  const runModel = options.modelName ?? app.models[0]?.name
  const window = options.contextWindow ?? app.models.find((m) => m.name === runModel)?.context_window
  const triggers = triggersOf(config.trigger)
  const keep = options.keep ?? config.keep
  // a disabled section is not checked: nothing of it is used
  const checked = config.enabled ? validate(triggers, keep, window, runModel) : Either.void
  return Either.map(checked, (): Settings => ({
    config,
    triggers,
    runModel,
    window,
    plan: {
      keep,
      window,
      skillReadTools: new Set(config.skill_file_read_tool_names),
      skillsRoot: app.skills.container_path,
      skillRescue: { ...defaultSkillRescue, ...options.skillRescue }
    },
    template: config.summary_prompt ?? DEFAULT_PROMPT,
    counter: options.counter ?? Tokens.makeCounter()
  }))
}

/** A summary made. */
export interface Summary {
  readonly text: string
  readonly model: string | undefined
  readonly usage: ModelResponse["message"]["usage_metadata"]
}

/**
 * Asks for the summary of `input`: the configured summary model, then the run model; the first non-empty answer
 * wins. Answers the summary, or the failures (`model: why`) when there is none.
 */
export const generate = <E extends { readonly message: string }, R>(
  settings: Settings,
  input: string,
  call: (request: ModelRequest) => Effect.Effect<ModelResponse, E, R>
): Effect.Effect<Either.Either<Summary, ReadonlyArray<string>>, never, R> =>
  Effect.gen(function*() {
    const prompt = fillPrompt(settings.template, input)
    const failures: Array<string> = []
    for (const model of candidates(settings.config.model_name, settings.runModel)) {
      const attempt = yield* call(summaryRequest(prompt, model)).pipe(
        Effect.withSpan("Summarization.generate", { attributes: { model: model ?? "default" } }),
        Effect.either
      )
      if (Either.isLeft(attempt)) {
        failures.push(`${model ?? "default"}: ${attempt.left.message}`)
        continue
      }
      const text = M.text(attempt.right.message).trim()
      if (text !== "") return Either.right({ text, model, usage: attempt.right.message.usage_metadata })
      failures.push(`${model ?? "default"}: empty summary`)
    }
    return Either.left(failures)
  })

/** What a compaction is asked with. */
export interface Request<E, R> {
  /** Compact even when no trigger fires (the manual default). */
  readonly force: boolean
  /** The trigger that fired (the automatic path has already checked it). */
  readonly hit?: TriggerHit | undefined
  /** The hooks run, in order, once the summary is made and before the update is answered. */
  readonly hooks: ReadonlyArray<Hooks.Hook>
  /** Whose thread: what the hooks are told. */
  readonly threadId: string
  readonly userId: string
  readonly agentName?: string | undefined
  readonly manual: boolean
  /**
   * Whether a manual compaction books its summary call in the thread's token usage (default true; false with
   * `run_events.track_token_usage: false`, as a run's calls then book none). The automatic path books through the
   * run's TokenUsage middleware.
   */
  readonly trackUsage?: boolean | undefined
  /** The model call of the summary. */
  readonly call: (request: ModelRequest) => Effect.Effect<ModelResponse, E, R>
  /** The tokens of a state (messages and summary); default: counted with the settings' counter. */
  readonly counted?: ((state: ThreadState) => number) | undefined
}

/** The report of a compaction, as the `summarization` event carries it. */
export interface Report {
  readonly trigger: Record<string, unknown>
  readonly summarized_messages: number
  readonly rescued_messages: number
  readonly kept_messages: number
  readonly tokens_before: number
}

/** A compaction made: the state update to apply, and what it did. */
export interface Compacted {
  readonly compacted: true
  readonly plan: Plan
  readonly summary: Summary
  /** Messages become `rescued ++ kept`, `summary_text` the summary, and the summary call's usage is recorded. */
  readonly update: StateUpdate
  readonly report: Report
}

/** A compaction that did not happen, and why. */
export interface NotCompacted {
  readonly compacted: false
  readonly reason: NotCompactedReason
  readonly message: string
  readonly errors: ReadonlyArray<string>
  /** When a summary was asked for and failed: what it would have been. */
  readonly report?: Report | undefined
}

/** Whether a compaction happened. */
export type Outcome = Compacted | NotCompacted

const MESSAGES: Record<NotCompactedReason, string> = {
  disabled: "Context compaction is disabled (summarization.enabled is false).",
  not_enough_messages: "There is nothing to compact: no older messages can be summarised.",
  below_trigger: "The thread does not need compaction yet (no summarization trigger fires); force it to compact.",
  summary_failed: "The summary could not be made; the thread is unchanged."
}

/** A compaction that did not happen. */
export const notCompacted = (
  reason: NotCompactedReason,
  errors: ReadonlyArray<string> = [],
  report?: Report
): NotCompacted => ({ compacted: false, reason, message: MESSAGES[reason], errors, report })

/** The error of an outcome that did not happen. */
export const toError = (outcome: NotCompacted): CompactionError =>
  new CompactionError({ reason: outcome.reason, message: outcome.message, errors: outcome.errors })

/** The tokens of a state's messages and summary, counted afresh. */
export const countState = (counter: Tokens.Counter) => (state: ThreadState): number =>
  Tokens.makeTotals(counter).of(state.messages).total +
  (state.summary_text === null || state.summary_text === ""
    ? 0
    : counter.text(state.summary_text) + Tokens.MESSAGE_OVERHEAD)

/**
 * Compacts `state`: plans the cut, asks for the summary, runs the hooks, and answers the update. Never fails:
 * what did not happen is a `NotCompacted` (see `CompactionError` for raising it).
 */
export const compactState = <E extends { readonly message: string }, R>(
  state: ThreadState,
  settings: Settings,
  request: Request<E, R>
): Effect.Effect<Outcome, never, R> =>
  Effect.gen(function*() {
    if (!settings.config.enabled) return notCompacted("disabled")
    const counted = request.counted ?? countState(settings.counter)
    const hit = request.hit ??
      firstHit(state.messages, state.summary_text, settings.triggers, settings.window, () => counted(state))
    if (hit === undefined && !request.force) return notCompacted("below_trigger")
    if (state.messages.length === 0) return notCompacted("not_enough_messages")
    const totals = Tokens.makeTotals(settings.counter)
    const compaction = plan(state.messages, settings.plan, totals.of(state.messages), settings.counter.message)
    if (compaction === undefined) return notCompacted("not_enough_messages")
    const report: Report = {
      trigger: hit === undefined
        ? { type: "manual", forced: true }
        : { type: hit.trigger.type, value: hit.trigger.value, observed: hit.observed, limit: hit.limit },
      summarized_messages: compaction.summarized.length,
      rescued_messages: compaction.rescued.length,
      kept_messages: compaction.kept.length,
      tokens_before: counted(state)
    }
    const input = summaryInput(
      state.summary_text,
      compaction.summarized,
      settings.config.trim_tokens_to_summarize,
      settings.counter.text
    )
    const summary = yield* generate(settings, input, request.call)
    if (Either.isLeft(summary)) return notCompacted("summary_failed", summary.left, report)
    yield* Hooks.run(request.hooks, {
      summarized: compaction.summarized,
      preserved: [...compaction.rescued, ...compaction.kept],
      threadId: request.threadId,
      userId: request.userId,
      agentName: request.agentName,
      modelName: settings.runModel,
      manual: request.manual
    })
    const usage = summary.right.usage
    const booked = request.manual && request.trackUsage !== false
    const delta: ReadonlyArray<TokenUsageDelta> = !booked || usage === undefined ? [] : [{
      model: summary.right.model ?? settings.runModel ?? "default",
      purpose: "summarization",
      input_tokens: usage.input_tokens,
      output_tokens: usage.output_tokens,
      total_tokens: usage.total_tokens
    }]
    const update: StateUpdate = {
      ...compactionUpdate(compaction, summary.right.text),
      ...(delta.length > 0 ? { token_usage: delta } : {})
    }
    return { compacted: true, plan: compaction, summary: summary.right, update, report } satisfies Compacted
  }).pipe(Effect.withSpan("Summarization.compact", {
    attributes: { messages: state.messages.length, manual: request.manual, force: request.force }
  }))

/** The `summarization` event's data of an outcome (`tokens_after`: of the state after the update). */
export const eventData = (outcome: Outcome, tokensAfter?: number): Record<string, unknown> =>
  outcome.compacted
    ? {
      status: "completed",
      ...outcome.report,
      ...(tokensAfter === undefined ? {} : { tokens_after: tokensAfter }),
      model: outcome.summary.model ?? null,
      usage: outcome.summary.usage ?? null
    }
    : { status: "failed", ...outcome.report, errors: outcome.errors }
