/**
 * One memory update (DeerMem's `MemoryUpdater`): the turns of a queued conversation not read yet (a watermark per
 * thread), one internal model call (`internal: "memory"`, never streamed) over the current memory and those turns,
 * and its answer applied through DeerMem's write gate (only what the model labels as the user's, durable and
 * descriptive, with one warning naming what it refused; confident facts only, at most `max_facts`; the staleness
 * review of the facts past their window, with one line naming what it removed or extended) and stored. Its token
 * usage is added to the thread under the purpose `memory`. A failed update changes nothing (it is retried with the
 * thread's next run).
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { randomUUID } from "node:crypto"
import * as DetachedCall from "../../services/DetachedCall.js"
import type { MemoryError, Scope as MemoryScope } from "../../services/Memory.js"
import type { Pending } from "../../services/Memory.js"
import type { ModelService } from "../../services/ModelService.js"
import type { ModelRequest } from "../../services/ModelService.js"
import type { ThreadStore } from "../../services/ThreadStore.js"
import * as M from "../../state/Message.js"
import * as MemoryDoc from "../../state/Memory.js"
import type * as MemoryCapacity from "../../state/MemoryCapacity.js"
import type * as MemoryEviction from "../../state/MemoryEviction.js"
import * as MemoryLimits from "../../state/MemoryLimits.js"
import * as MemoryTemplate from "../../state/MemoryTemplate.js"
import type * as Redact from "../../state/Redact.js"
import type * as PromptFiles from "./PromptFiles.js"
import type { Settings } from "./Settings.js"
import type { Queued } from "./UpdateQueue.js"

/** The internal request of a memory update: its prompt, or a template of `prompts_dir` rendered. */
export const updateRequest = (
  prompt: string | MemoryTemplate.RenderedUpdate,
  modelName: string | undefined
): ModelRequest => ({
  systemPrompt: typeof prompt === "string" ? undefined : prompt.system,
  messages: typeof prompt === "string" ? [M.human(prompt)] : prompt.user.map((text) => M.human(text)),
  tools: [],
  settings: { modelName },
  internal: "memory"
})

/** The services the memory update's model call needs outside any run (see `DetachedCall`). */
const callServices = (threadId: string, userId: string, modelName: string | undefined) =>
  DetachedCall.services({ threadId, runId: `memory-${randomUUID()}`, userId, modelName })

/** Whose memory a scope is, as the warnings name it. */
export const whose = (s: MemoryScope) =>
  s.agentName === undefined ? `user ${s.userId}` : `agent ${s.agentName} of user ${s.userId}`

/**
 * A write of the memory service: `f` gets the document and the facts' recall records and returns its result, the
 * new document and, where it left facts out, the decision of `max_facts` (see `FileMemory`'s `write`).
 */
export type Write = <A>(
  st: Settings,
  s: MemoryScope,
  f: (
    doc: MemoryDoc.Document,
    usage: ReadonlyMap<string, MemoryEviction.Usage>
  ) => readonly [A, MemoryDoc.Document] | readonly [A, MemoryDoc.Document, MemoryCapacity.Decision<MemoryDoc.Fact>],
  cut?: ReadonlyArray<string>
) => Effect.Effect<A, MemoryError>

/** What an update reads and writes through: those of its memory service. */
export interface Deps {
  readonly model: Context.Tag.Service<typeof ModelService>
  readonly store: Context.Tag.Service<typeof ThreadStore>
  /** Whether the runs' token usage is recorded (`run_events.track_token_usage`, as of the start). */
  readonly trackUsage: boolean
  readonly patterns: MemoryDoc.Patterns | undefined
  readonly prompts: PromptFiles.PromptFiles
  readonly redact: Redact.Redactor
  /** The document of a scope, within the limits (quietly). */
  readonly read: (st: Settings, s: MemoryScope) => Effect.Effect<MemoryLimits.Capped<MemoryDoc.Document>, MemoryError>
  readonly write: Write
}

/** The update of one queued conversation, under the settings it was queued with; it never fails. */
export const make = (deps: Deps): (queued: Queued) => Effect.Effect<void> => {
  const { model, patterns, prompts, read, redact, store, write } = deps
  // recorded on the thread only while it exists: a stateless run's thread is deleted when the run ends, and an
  // append would make it again (an empty thread nobody made); not when the runs' usage is not tracked
  // (`run_events.track_token_usage: false`, as of the start)
  const track = deps.trackUsage
  const recordUsage = (item: Pending, usage: M.UsageMetadata | undefined, modelName: string) =>
    usage === undefined || !track ? Effect.void : Effect.flatMap(store.info(item.threadId), (info) =>
      Option.isNone(info) ? Effect.void : store.append(item.threadId, `memory-${randomUUID()}`, [{
      token_usage: [{
        model: modelName,
        purpose: "memory",
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        total_tokens: usage.total_tokens
      }]
    }])).pipe(Effect.catchAll((error) => Effect.logWarning(`Memory token usage not recorded: ${error.message}`)))

  /** One update: the unread turns of the item, one model call, the changes applied and stored (its settings). */
  return ({ item, settings: st, signals }: Queued): Effect.Effect<void> =>
    Effect.gen(function*() {
      const { consolidation, limits, staleness } = st
      const backend = st.config.backend_config
      const s: MemoryScope = { userId: item.userId, agentName: item.agentName }
      const before = (yield* read(st, s)).value
      const watermark = item.immediate ? undefined : before.threads[item.threadId]
      const turns = MemoryDoc.conversation(item.messages, watermark, patterns?.trivial)
      if (turns.length === 0) return
      const configured = st.config.model_name ?? undefined
      // (`memory.model_name` the user's role may not use: the run's model, which it may; none: no update)
      const passedOver = configured !== undefined && item.allows !== undefined && !(yield* item.allows(configured))
      const modelName = passedOver ? item.modelName : configured ?? item.modelName
      if (passedOver) {
        yield* Effect.logInfo(
          `Memory update: memory.model_name ${configured} is not available for the user's role` +
            (modelName === undefined ? "; not updated" : `; ${modelName} is used`)
        ).pipe(Effect.annotateLogs({ thread: item.threadId }))
        if (modelName === undefined) return
      }
      const templates = yield* prompts.templates(item.agentName)
      const { consolidation: merging, staleness: stale, update: template } = templates
      const options: MemoryDoc.PromptOptions = {
        threshold: backend.fact_confidence_threshold,
        consolidation,
        staleness,
        now: yield* Clock.currentTimeMillis,
        patterns,
        signals,
        sections: {
          staleness: stale === undefined
            ? undefined
            : (facts) => MemoryTemplate.renderText(stale, { stale_facts: facts }),
          consolidation: merging === undefined
            ? undefined
            : (groups, most) =>
              MemoryTemplate.renderText(merging, { consolidation_groups: groups, max_groups: String(most) })
        }
      }
      const prompt = template === undefined
        ? MemoryDoc.updatePrompt(before, turns, options)
        : MemoryTemplate.renderUpdate(template, MemoryDoc.updateVariables(before, turns, options))
      const response = yield* model.generate(updateRequest(prompt, modelName)).pipe(
        Effect.provide(callServices(item.threadId, item.userId, modelName)),
        Effect.withSpan("FileMemory.update", { attributes: { thread: item.threadId } })
      )
      const answer = response.message
      const usedModel = String(answer.response_metadata?.model_name ?? modelName ?? "unknown")
      yield* recordUsage(item, answer.usage_metadata, usedModel)
      // the answer is untrusted: no more facts than can be kept are decoded, and what is kept is cut to its limits
      const json = MemoryDoc.updateJson(M.text(answer))
      const raw = Either.map(json, (value) => MemoryLimits.capRawUpdate(value, limits))
      const decoded = Either.flatMap(raw, (r) => MemoryDoc.decodeUpdate(r.value))
      if (Either.isLeft(decoded)) {
        return yield* Effect.logWarning(`Memory not updated for thread ${item.threadId}: ${decoded.left}`)
      }
      // redacted before it is cut: a key cut in half would no longer be recognised
      const capped = MemoryLimits.capUpdate(redact.value(decoded.right), limits)
      const excess = Either.isRight(raw) ? raw.right.cut : []
      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      const last = MemoryDoc.lastMessageId(item.messages)
      const [refused, review] = yield* write(st, s, (doc, usage) => {
        const applied = MemoryDoc.applyUpdateGated(doc, capped.value, {
          usage,
          shadow: st.limits.shadow,
          now,
          maxFacts: backend.max_facts,
          threshold: backend.fact_confidence_threshold,
          newId: () => `fact_${randomUUID().replace(/-/g, "").slice(0, 12)}`,
          source: item.threadId,
          hybrid: st.hybrid,
          signals,
          consolidation,
          staleness
        })
        let next = applied.value
        if (!item.immediate && last !== undefined) next = MemoryDoc.withWatermark(next, item.threadId, last)
        return [[applied.refused, applied.staleness] as const, next, applied.capacity] as const
      }, [...excess, ...capped.cut])
      // what the model did not label as the user's, durable and descriptive is not stored, and said so
      if (refused.length > 0) {
        yield* Effect.logWarning(
          `Memory of ${whose(s)} from thread ${item.threadId}: the write gate refused (a new fact is stored only ` +
            `labelled scope user, durability durable, authority descriptive; a summary scope user, authority ` +
            `descriptive; a removal scope user, with a reason): ${refused.join("; ")}`
        )
      }
      // the ids only: the model's reasons may echo the conversation
      const reviewed = [
        review.removed.length === 0 ? "" : `removed ${review.removed.join(", ")}`,
        review.extended.length === 0 ? "" : `extended ${review.extended.join(", ")}`,
        review.ignored === 0 ? "" : `ignored ${review.ignored} decisions naming no fact due for review`
      ].filter((part) => part !== "")
      if (reviewed.length > 0) {
        yield* Effect.logInfo(`Memory of ${whose(s)}: the staleness review ${reviewed.join("; ")}`)
      }
    }).pipe(
      // Only a message: a logged cause object would escape the caller's log redaction (a server may echo keys).
      Effect.catchAllCause((cause) => {
        const error = Cause.squash(cause) as { message?: unknown }
        const why = Cause.isInterruptedOnly(cause) ? "interrupted" : String(error?.message ?? error)
        return Effect.logWarning(
          `Memory not updated for thread ${item.threadId} (it is retried after its next run): ${why}`
        )
      })
    )
}
