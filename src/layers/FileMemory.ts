/**
 * Long-term memory in files (DeerFlow's DeerMem layout, SPEC §11): one JSON document per user,
 * `{root}/users/{user}/memory.json`, and one per custom agent, `{root}/users/{user}/agents/{agent}/memory.json`;
 * `root` is `memory.backend_config.storage_path`, else the data directory.
 *
 * - Writes are atomic: the new document goes to a temporary file in the same directory, is flushed to disk,
 *   then renamed over the old one, so a process killed at any point leaves the previous document or the new
 *   one, never a mix. Read-modify-write cycles hold a lock file (`memory.json.lock`, with the holder's pid: a
 *   lock left by a dead process is taken over), so two processes do not lose each other's updates
 *   (`memory/MemoryFile.ts`).
 * - Updates go through one queue per app (this layer): after a run, its conversation waits
 *   `debounce_seconds` (a new run of the same thread restarts the wait and replaces it); then one internal
 *   model call (`internal: "memory"`, never streamed) reads the current memory and the turns not read yet
 *   (a watermark per thread) and answers with the changes, which are applied (through DeerMem's write gate:
 *   only what the model labels as the user's, durable and descriptive, with one warning naming what it refused;
 *   confident facts only, at most `max_facts`; DeerMem's staleness review of the facts past their window, see
 *   `state/MemoryStaleness.ts`, with one line naming what it removed or extended) and stored. Its token usage
 *   is added to the thread under the purpose `memory`. A failed update changes nothing and is retried with the
 *   thread's next run. When the app ends, pending updates run within `shutdown_flush_timeout_seconds`; when it
 *   is stopped (a signal), within `STOP_FLUSH_SECONDS`.
 * - What is stored is bounded and holds no secret: every write is redacted (the configured keys) and cut to
 *   `max_facts`, `max_fact_chars` and `max_summary_chars` (see `state/MemoryLimits.ts`), and so is every file
 *   read (one written by hand or by an older version), with one warning naming what was cut.
 * - `antler serve` takes edits of `config.yaml`: the service `under` the `memory` section of an edit injects and
 *   queues with that section's settings (each queued conversation is updated with the settings it was queued with);
 *   where the files are and the backend stay those of the start.
 * - Beside each memory, under its lock, DeerMem's recall records (what `memory_search` returned, for `hybrid-v1`)
 *   and eviction audit (what `max_facts` left out at each write): `memory/Sidecars.ts`.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as FileSystem from "@effect/platform/FileSystem"
import { randomUUID } from "node:crypto"
import { AppConfigService } from "../services/AppConfig.js"
import * as DetachedCall from "../services/DetachedCall.js"
import type { MemoryConfig } from "../services/AppConfig.js"
import { Memory } from "../services/Memory.js"
import type { Pending, Scope as MemoryScope, Service } from "../services/Memory.js"
import { ModelService } from "../services/ModelService.js"
import type { ModelRequest } from "../services/ModelService.js"
import * as Tracing from "../services/Tracing.js"
import { ThreadStore } from "../services/ThreadStore.js"
import * as M from "../state/Message.js"
import * as MemoryDoc from "../state/Memory.js"
import * as MemoryAudit from "../state/MemoryAudit.js"
import type * as MemoryCapacity from "../state/MemoryCapacity.js"
import type * as MemoryEviction from "../state/MemoryEviction.js"
import * as MemoryLimits from "../state/MemoryLimits.js"
import * as MemoryTemplate from "../state/MemoryTemplate.js"
import * as MemoryRecall from "../state/MemoryRecall.js"
import * as Redact from "../state/Redact.js"
import * as Tokens from "../state/Tokens.js"
import { removeStaleTemps } from "./memory/AtomicFile.js"
import * as PatternFiles from "./memory/PatternFiles.js"
import * as PromptFiles from "./memory/PromptFiles.js"
import type { Settings } from "./memory/Settings.js"
import { settingsOf } from "./memory/Settings.js"
import { dirOf } from "./memory/YamlFiles.js"
import { fileOf, readCapped, rootOf, withLock, writeDocument } from "./memory/MemoryFile.js"
import * as Sidecars from "./memory/Sidecars.js"

export { removeStaleTemps, writeTextAtomic } from "./memory/AtomicFile.js"
export {
  documentText,
  fileOf,
  MAX_FILE_BYTES,
  readCapped,
  readDocument,
  rootOf,
  withLock,
  writeDocument
} from "./memory/MemoryFile.js"
export { consolidationOf, hybridOf, limitsOf, stalenessOf } from "./memory/Settings.js"

// ---------------------------------------------------------------------------------------------------------
// The files (where they are, reading, writing, the lock) are `memory/MemoryFile.ts`; what the service adds to them

/**
 * The secrets memory never stores unless told others (`Options.redact`): the configured models' keys and
 * base-URL credentials.
 */
export const defaultRedactor = (app: AppConfigService["Type"]): Redact.Redactor =>
  Redact.make(app.config.models.flatMap((m) => [
    m.api_key,
    ...Redact.urlSecrets(m.base_url),
    ...Redact.urlSecrets(m.api_base)
  ]))

// Yields to the event loop, not only to other fibers (`Effect.yieldNow` resumes through a microtask): between
// reading a memory file (up to `MAX_FILE_BYTES` parsed) and formatting its block, signals and I/O get their turn.
const breathe: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** Characters tokenized between two yields to the event loop while a memory block is prepared (tens of ms). */
const WARM_SLICE_CHARS = 4096

/**
 * How long pending updates may take when the app is stopped (a signal: SIGTERM, Ctrl-C) rather than ending by
 * itself: the process must end within about two seconds of the signal. What is dropped is read again after the
 * thread's next run (its watermark did not move).
 */
export const STOP_FLUSH_SECONDS = 0.5

// ---------------------------------------------------------------------------------------------------------
// The service

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

const keyOf = (p: Pending) => JSON.stringify([p.threadId, p.userId, p.agentName ?? null])

// a conversation in the update queue, with the settings its update reads
interface Queued {
  readonly item: Pending
  readonly settings: Settings
  /**
   * The signals of the thread's conversation at each run queued for it (DeerMem's queue keeps those of a run it
   * replaces): its update's hints name them, and reinforce with them.
   */
  readonly signals: ReadonlySet<MemoryDoc.Signal>
}

/** Options of `make`. */
export interface Options {
  /** Overrides of the `memory` section of the app config. */
  readonly config?: Partial<MemoryConfig> | undefined
  /** The secrets no memory file may hold (default: `defaultRedactor`). */
  readonly redact?: Redact.Redactor | undefined
}

/**
 * The memory service over the app's model, configuration and thread store. Its update queue lives in the
 * scope: closing it runs what is pending (within `shutdown_flush_timeout_seconds`). `under` gives the service under
 * another `memory` section (an edit of `config.yaml` taken by `antler serve`): its injections and the updates of the
 * conversations it queues read that section; the files (the root, their name, the backend) stay those of the start.
 */
export const make = (
  options: Options = {}
): Effect.Effect<Service, never, ModelService | AppConfigService | ThreadStore | FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const app = yield* AppConfigService
    const model = yield* ModelService
    const store = yield* ThreadStore
    const fs = yield* FileSystem.FileSystem
    // (the settings of a `memory` section; the test's overrides over any)
    const settingsFor = (memory: MemoryConfig) => settingsOf({ ...memory, ...options.config })
    const started = settingsFor(app.config.memory)
    // as DeerFlow's agent factory: tool mode without memory is a configuration the operator should see
    if (!started.config.enabled && started.config.mode === "tool") {
      yield* Effect.logWarning(
        "memory.mode is 'tool' but memory.enabled is false; memory tools will not be registered."
      )
    }
    // where the files are, their name and the backend are those of the start (`LiveConfig.STARTUP_ONLY`)
    const root = rootOf(app)
    const filename = started.config.backend_config.manifest_filename
    const redact = options.redact ?? defaultRedactor(app)
    const scope = yield* Effect.scope
    // DeerMem's own files, read now (an agent's prompt when first used), with one warning for what is not used; an
    // edit of their folders is taken at the next start (`LiveConfig.STARTUP_ONLY`)
    const enabled = started.config.enabled
    const dirs = started.config.backend_config
    const patterns = enabled ? yield* PatternFiles.load(dirOf(app, dirs.patterns_dir)) : undefined
    const prompts = yield* PromptFiles.make(enabled ? dirOf(app, dirs.prompts_dir) : undefined)
    // the settings of the last conversation queued (what the app's stop reads: `shutdown_flush_timeout_seconds`)
    let latest = started
    const countOf = (st: Settings) =>
      st.config.backend_config.token_counting === "char" ? Tokens.estimateText : Tokens.countText

    const file = (s: MemoryScope) => Either.match(fileOf(root, s, filename), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    })

    const whose = (s: MemoryScope) =>
      s.agentName === undefined ? `user ${s.userId}` : `agent ${s.agentName} of user ${s.userId}`

    const warnCut = (st: Settings, s: MemoryScope, cut: ReadonlyArray<string>, note = "") =>
      cut.length === 0 ? Effect.void : Effect.logWarning(
        `Memory of ${whose(s)} over its limits (memory.backend_config: max_facts ${st.limits.maxFacts}, ` +
          `max_fact_chars ${st.limits.maxFactChars}, max_summary_chars ${st.limits.maxSummaryChars})${note}; cut: ` +
          cut.join("; ")
      )

    /** The document of a scope, within the limits (quietly: the caller reports what was cut). */
    const read = (st: Settings, s: MemoryScope) =>
      Effect.flatMap(file(s), (path) => readCapped(path, st.limits, redact))

    const load = (st: Settings, s: MemoryScope) =>
      Effect.flatMap(read(st, s), (doc) =>
        Effect.as(warnCut(st, s, doc.cut, " when read (its file is cut at its next update)"), doc.value))

    /**
     * Every write: the new document redacted (no secret is stored) and within the limits, with one warning naming
     * what was cut (`cut`: what the caller cut before, such as an update's excess). `f` gets the facts' recall
     * records (under `hybrid-v1`) and may return what `max_facts` left out of it; what it and the limits left out
     * goes to the eviction audit once the memory is written, and the sidecars forget the facts that left the memory
     * (`memory/Sidecars.ts`); a memory left remembering nothing (cleared) keeps no sidecars.
     */
    const write = <A>(
      st: Settings,
      s: MemoryScope,
      f: (
        doc: MemoryDoc.Document,
        usage: ReadonlyMap<string, MemoryEviction.Usage>
      ) => readonly [A, MemoryDoc.Document] | readonly [A, MemoryDoc.Document, MemoryCapacity.Decision<MemoryDoc.Fact>],
      cut: ReadonlyArray<string> = []
    ) =>
      Effect.flatMap(file(s), (path) =>
        withLock(path, st.config.backend_config.file_lock_timeout_seconds * 1000, Effect.gen(function*() {
          yield* removeStaleTemps(path)
          const current = yield* readCapped(path, st.limits, redact)
          const usage = st.scoring === undefined
            ? new Map<string, MemoryEviction.Usage>()
            : MemoryRecall.forPolicy(yield* Sidecars.readUsage(path, s))
          const [result, next, decided] = f(current.value, usage)
          const now = yield* Clock.currentTimeMillis
          const stored = MemoryLimits.capDocument(redact.value(next), st.limits, now, usage)
          yield* warnCut(st, s, [...cut, ...current.cut, ...stored.cut])
          yield* writeDocument(path, stored.value)
          if (MemoryDoc.isEmpty(stored.value)) {
            yield* Sidecars.clear(path, s)
          } else {
            const facts = new Set(stored.value.facts.map((fact) => fact.id))
            const events = [decided, stored.capacity].flatMap((decision) => {
              const event = decision === undefined
                ? undefined
                : MemoryAudit.event(decision, { maxFacts: st.limits.maxFacts, occurredAt: now })
              return event === undefined ? [] : [redact.value(event)]
            })
            const gone = new Set(current.value.facts.map((fact) => fact.id).filter((id) => !facts.has(id)))
            yield* Sidecars.afterWrite(path, s, {
              facts,
              gone,
              events,
              maxEntries: st.config.backend_config.eviction_audit_max_entries
            })
          }
          return result
        }))).pipe(Effect.provideService(FileSystem.FileSystem, fs))

    // DeerMem records recalls only where a policy reads them (`hybrid-v1`, or its shadow); a failure only loses a hint
    const recall = (st: Settings, s: MemoryScope, ids: ReadonlyArray<string>): Effect.Effect<void> => {
      const scoring = st.scoring
      return scoring === undefined || ids.length === 0 ? Effect.void : Effect.flatMap(file(s), (path) =>
        withLock(path, st.config.backend_config.file_lock_timeout_seconds * 1000, Effect.gen(function*() {
          // only facts still there: a recall racing a deletion must not bring its record back
          const doc = yield* readCapped(path, st.limits, redact)
          yield* Sidecars.recordRecall(path, s, ids, {
            now: yield* Clock.currentTimeMillis,
            halfLifeDays: scoring.accessHalfLifeDays,
            facts: new Set(doc.value.facts.map((fact) => fact.id))
          })
        }))).pipe(
          Effect.provideService(FileSystem.FileSystem, fs),
          Effect.catchAll((error) => Effect.logWarning(`Memory recall not recorded: ${error.message}`))
        )
    }

    const modify = <A>(
      st: Settings,
      s: MemoryScope,
      f: (doc: MemoryDoc.Document) => readonly [A, MemoryDoc.Document]
    ) => write(st, s, f)

    // Tokenizing is slow on some text (over 5 µs a character for CJK text never seen before: a second for a hostile
    // memory at the default limits). The texts of the block are counted first in slices, yielding to the event loop
    // between them; formatting the block then counts them again from the tokenizer's cache (by chunk).
    const warm = (st: Settings, doc: MemoryDoc.Document): Effect.Effect<void> =>
      st.config.backend_config.token_counting === "char" ? Effect.void : Effect.gen(function*() {
        const count = countOf(st)
        const most = st.config.backend_config.max_injection_tokens * MemoryDoc.MAX_CHARS_PER_TOKEN
        const texts = [
          ...[...Object.values(doc.user), ...Object.values(doc.history)].map((section) => section.summary),
          ...(st.config.mode === "tool" ? [] : doc.facts.map((fact) => fact.content))
        ]
        let since = 0
        for (const text of texts) {
          const bounded = MemoryDoc.head(text, most)
          for (let at = 0; at < bounded.length; at += WARM_SLICE_CHARS) {
            const piece = bounded.slice(at, at + WARM_SLICE_CHARS)
            count(piece)
            since += piece.length
            if (since >= WARM_SLICE_CHARS) {
              since = 0
              yield* breathe
            }
          }
        }
      })

    const context = (st: Settings, s: MemoryScope) =>
      !st.enabled || !st.config.injection_enabled
        ? Effect.succeed("")
        : load(st, s).pipe(
          Effect.tap((doc) => Effect.zipRight(breathe, warm(st, doc))),
          Effect.map((doc) =>
            MemoryDoc.formatForInjection(doc, {
              maxTokens: st.config.backend_config.max_injection_tokens,
              count: countOf(st),
              guaranteedCategories: st.config.backend_config.guaranteed_categories,
              guaranteedBudget: st.config.backend_config.guaranteed_token_budget,
              includeFacts: st.config.mode !== "tool"
            })
          ),
          Effect.catchAll((error) => Effect.as(Effect.logWarning(`Memory not injected: ${error.message}`), ""))
        )

    // recorded on the thread only while it exists: a stateless run's thread is deleted when the run ends, and an
    // append would make it again (an empty thread nobody made); not when the runs' usage is not tracked
    // (`run_events.track_token_usage: false`, as of the start)
    const track = app.config.run_events.track_token_usage
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
    const update = ({ item, settings: st, signals }: Queued) =>
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

    // The queue: one pending update per (thread, user, agent), with the settings of the service that queued it; a
    // debounce timer; one update at a time.
    const pending = new Map<string, Queued>()
    const urgent: Array<Queued> = []
    const running = yield* Effect.makeSemaphore(1)
    let timer: Fiber.RuntimeFiber<void, never> | undefined

    // An item leaves the queue once its update is done: one interrupted (the app stopping) is still pending.
    const drain = running.withPermits(1)(Effect.gen(function*() {
      for (;;) {
        const next: Queued | undefined = urgent[0] ?? pending.values().next().value
        if (next === undefined) return
        yield* update(next)
        if (urgent[0] === next) urgent.shift()
        else if (pending.get(keyOf(next.item)) === next) pending.delete(keyOf(next.item))
      }
    }))

    const stopTimer = Effect.suspend(() => {
      const current = timer
      timer = undefined
      return current === undefined ? Effect.void : Fiber.interrupt(current)
    })

    const enqueue = (st: Settings, item: Pending): Effect.Effect<void> => {
      if (!st.enabled || st.config.mode === "tool") return Effect.void
      latest = st
      const key = keyOf(item)
      // the signals of the last six lines of the whole thread, with those of a run it replaces (DeerMem's)
      const own = MemoryDoc.signalsOf(MemoryDoc.conversation(item.messages, undefined, patterns?.trivial), patterns)
      const before = pending.get(key)?.signals
      const queued: Queued = { item, settings: st, signals: before === undefined ? own : new Set([...before, ...own]) }
      if (item.immediate) {
        return Effect.asVoid(Effect.forkIn(Effect.zipRight(Effect.sync(() => void urgent.push(queued)), drain), scope))
      }
      const backend = st.config.backend_config
      return Effect.gen(function*() {
        // a full queue still takes a conversation whose user corrected, confirmed or told something (a signal, as
        // DeerMem admits one): a later run may not say it again
        const full = !pending.has(key) && backend.queue_max_depth > 0 && pending.size >= backend.queue_max_depth
        if (full && own.size === 0) {
          return yield* Effect.logWarning(
            `Memory queue full (${backend.queue_max_depth} pending): thread ${item.threadId} is read after its next run`
          )
        }
        pending.set(key, queued)
        yield* stopTimer
        // the timer only waits: stopping it never interrupts an update already running
        const wait = Effect.sleep(`${backend.debounce_seconds} seconds`)
        timer = yield* Effect.forkIn(Effect.zipRight(wait, Effect.asVoid(Effect.forkIn(drain, scope))), scope)
      })
    }

    const flush = Effect.zipRight(stopTimer, drain)

    // Finalizers run uninterruptibly; the flush must not (a model call forks a watchdog it interrupts, and the
    // shutdown timeout interrupts the flush). An app stopped from outside (interrupted: a signal) must end at once:
    // its flush gets `STOP_FLUSH_SECONDS` at most.
    yield* Effect.addFinalizer((exit) =>
      Effect.suspend(() => {
        if (pending.size === 0 && urgent.length === 0) return Effect.void
        const stopped = Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
        const limit = latest.config.shutdown_flush_timeout_seconds
        const seconds = stopped ? Math.min(STOP_FLUSH_SECONDS, limit) : limit
        return Effect.interruptible(flush).pipe(
          Effect.timeout(`${seconds} seconds`),
          Effect.catchAll(() =>
            Effect.logWarning(
              "Memory updates still pending when the app stopped were dropped (their turns are read after their " +
                "threads' next run)"
            )
          )
        )
      })
    )

    // Spans: `context` and `enqueue` come with every run, so theirs are made only when the app traces (see
    // `Tracing`); the others are the memory tools' and the CLI's.
    const attributes = (s: MemoryScope) => ({
      user: s.userId,
      ...(s.agentName === undefined ? {} : { agent: s.agentName })
    })
    // the service under the settings of one `memory` section
    const serviceOf = (st: Settings): Service => ({
      enabled: st.enabled,
      mode: st.config.mode,
      context: (s) => Tracing.withSpanWhenTraced(context(st, s), "FileMemory.context", { attributes: attributes(s) }),
      enqueue: (item) =>
        Tracing.withSpanWhenTraced(enqueue(st, item), "FileMemory.enqueue", { attributes: { thread: item.threadId } }),
      flush: Effect.withSpan(flush, "FileMemory.flush"),
      pending: Effect.sync(() => pending.size + urgent.length),
      load: Effect.fn("FileMemory.load")(function*(s) {
        return yield* load(st, s)
      }),
      clear: Effect.fn("FileMemory.clear")(function*(s) {
        yield* modify(st, s, () => [undefined, MemoryDoc.empty()] as const)
      }),
      modify: (s, f) => Effect.withSpan(modify(st, s, f), "FileMemory.modify", { attributes: attributes(s) }),
      recall: (s, ids) => Effect.withSpan(recall(st, s, ids), "FileMemory.recall", { attributes: attributes(s) }),
      under: (memory) => serviceOf(settingsFor({ ...memory, manager_class: started.config.manager_class }))
    })
    return serviceOf(started)
  })

/** The memory service as a layer (one per app). */
export const layer = (
  options: Options = {}
): Layer.Layer<Memory, never, ModelService | AppConfigService | ThreadStore | FileSystem.FileSystem> =>
  Layer.scoped(Memory, make(options))
