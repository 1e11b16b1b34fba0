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
 * - Updates go through one queue per app (`memory/UpdateQueue.ts`): after a run, its conversation waits
 *   `debounce_seconds` (a new run of the same thread restarts the wait and replaces it); then one internal
 *   model call (`internal: "memory"`, never streamed) reads the current memory and the turns not read yet
 *   (a watermark per thread) and answers with the changes, which are applied (through DeerMem's write gate:
 *   only what the model labels as the user's, durable and descriptive, with one warning naming what it refused;
 *   confident facts only, at most `max_facts`; DeerMem's staleness review of the facts past their window, see
 *   `state/MemoryStaleness.ts`, with one line naming what it removed or extended) and stored
 *   (`memory/MemoryUpdate.ts`). Its token usage is added to the thread under the purpose `memory`. A failed update
 *   changes nothing and is retried with the thread's next run. When the app ends, pending updates run within
 *   `shutdown_flush_timeout_seconds`; when it is stopped (a signal), within `STOP_FLUSH_SECONDS`.
 * - What is stored is bounded and holds no secret: every write is redacted (the configured keys) and cut to
 *   `max_facts`, `max_fact_chars` and `max_summary_chars` (see `state/MemoryLimits.ts`), and so is every file
 *   read (one written by hand or by an older version), with one warning naming what was cut.
 * - `antler serve` takes edits of `config.yaml`: the service `under` the `memory` section of an edit injects and
 *   queues with that section's settings (each queued conversation is updated with the settings it was queued with);
 *   where the files are and the backend stay those of the start.
 * - Beside each memory, under its lock, DeerMem's recall records (what `memory_search` returned, for `hybrid-v1`)
 *   and eviction audit (what `max_facts` left out at each write): `memory/Sidecars.ts`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as FileSystem from "@effect/platform/FileSystem"
import { AppConfigService } from "../services/AppConfig.js"
import type { MemoryConfig } from "../services/AppConfig.js"
import { Memory } from "../services/Memory.js"
import type { Scope as MemoryScope, Service } from "../services/Memory.js"
import { ModelService } from "../services/ModelService.js"
import * as Tracing from "../services/Tracing.js"
import { ThreadStore } from "../services/ThreadStore.js"
import * as MemoryDoc from "../state/Memory.js"
import * as MemoryAudit from "../state/MemoryAudit.js"
import type * as MemoryEviction from "../state/MemoryEviction.js"
import * as MemoryLimits from "../state/MemoryLimits.js"
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
import * as MemoryUpdate from "./memory/MemoryUpdate.js"
import * as Sidecars from "./memory/Sidecars.js"
import * as UpdateQueue from "./memory/UpdateQueue.js"

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
export { updateRequest } from "./memory/MemoryUpdate.js"
export { STOP_FLUSH_SECONDS } from "./memory/UpdateQueue.js"

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

// ---------------------------------------------------------------------------------------------------------
// The service

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
    // DeerMem's own files, read now (an agent's prompt when first used), with one warning for what is not used; an
    // edit of their folders is taken at the next start (`LiveConfig.STARTUP_ONLY`)
    const enabled = started.config.enabled
    const dirs = started.config.backend_config
    const patterns = enabled ? yield* PatternFiles.load(dirOf(app, dirs.patterns_dir)) : undefined
    const prompts = yield* PromptFiles.make(enabled ? dirOf(app, dirs.prompts_dir) : undefined)
    const countOf = (st: Settings) =>
      st.config.backend_config.token_counting === "char" ? Tokens.estimateText : Tokens.countText

    const file = (s: MemoryScope) => Either.match(fileOf(root, s, filename), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    })

    const warnCut = (st: Settings, s: MemoryScope, cut: ReadonlyArray<string>, note = "") =>
      cut.length === 0 ? Effect.void : Effect.logWarning(
        `Memory of ${MemoryUpdate.whose(s)} over its limits ` +
          `(memory.backend_config: max_facts ${st.limits.maxFacts}, ` +
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
    const write: MemoryUpdate.Write = (st, s, f, cut = []) =>
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

    const update = MemoryUpdate.make({
      model,
      store,
      trackUsage: app.config.run_events.track_token_usage,
      patterns,
      prompts,
      redact,
      read,
      write
    })
    const queue = yield* UpdateQueue.make({
      update,
      // the signals of the last six lines of the whole thread
      signalsOf: (item) =>
        MemoryDoc.signalsOf(MemoryDoc.conversation(item.messages, undefined, patterns?.trivial), patterns),
      started
    })

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
        Tracing.withSpanWhenTraced(queue.enqueue(st, item), "FileMemory.enqueue", {
          attributes: { thread: item.threadId }
        }),
      flush: Effect.withSpan(queue.flush, "FileMemory.flush"),
      pending: queue.pending,
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
