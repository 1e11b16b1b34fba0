/**
 * The files DeerMem keeps beside a memory, in the `.metadata` directory of its agent: the recall records
 * (`fact-usage.json`, `state/MemoryRecall.ts`) and the eviction audit (`eviction-audit.json`, `state/MemoryAudit.ts`).
 * A custom agent's are under its own directory (`users/{user}/agents/{agent}/.metadata/`), the user's memory's under
 * DeerMem's default agent (`users/{user}/agents/__default__/.metadata/`, a name no custom agent can have): one
 * user's never touch another's.
 *
 * The caller holds the memory file's lock (`FileMemory.withLock`) around each of these, so that a recall, a write
 * and a clear of the same memory do not interleave. Each file is written atomically, and they are hints, never the
 * memory: one that cannot be read (missing, damaged, over `MAX_SIDECAR_BYTES`) counts as empty, and one that cannot
 * be written is said in a warning without failing what wrote the memory (as in DeerMem).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "node:path"
import type { Scope } from "../../services/Memory.js"
import * as FileErrors from "../../internal/FileErrors.js"
import * as MemoryAudit from "../../state/MemoryAudit.js"
import * as MemoryRecall from "../../state/MemoryRecall.js"
import * as TextFile from "../TextFile.js"
import { removeStaleTemps, writeTextAtomic } from "./AtomicFile.js"

/** DeerMem's name for the agent of a user's own memory (custom agent names are letters, digits and `-`). */
export const DEFAULT_AGENT = "__default__"

/** The largest sidecar read (16 MiB); a larger one counts as empty and is replaced at its next write. */
export const MAX_SIDECAR_BYTES = 16 * 1024 * 1024

/** The `.metadata` directory of the memory of `scope` whose file is `memoryFile`. */
export const metadataDirectory = (memoryFile: string, scope: Scope): string =>
  scope.agentName === undefined
    ? Path.join(Path.dirname(memoryFile), "agents", DEFAULT_AGENT, ".metadata")
    : Path.join(Path.dirname(memoryFile), ".metadata")

/** The recall records of a memory. */
export const usageFile = (memoryFile: string, scope: Scope): string =>
  Path.join(metadataDirectory(memoryFile, scope), "fact-usage.json")

/** The eviction audit of a memory. */
export const auditFile = (memoryFile: string, scope: Scope): string =>
  Path.join(metadataDirectory(memoryFile, scope), "eviction-audit.json")

const readText = (file: string): Effect.Effect<string | undefined> =>
  Effect.suspend(() => {
    const read = TextFile.read(file, MAX_SIDECAR_BYTES)
    if (Either.isRight(read)) return Effect.succeed(read.right)
    if (read.left.reason === "missing") return Effect.succeed(undefined)
    return Effect.as(
      Effect.logWarning(`Memory sidecar ignored (it is replaced at its next write): ${read.left.message}`),
      undefined
    )
  })

/** Writes a sidecar (removes it when `text` is undefined: nothing left to keep); a failure is a warning. */
const store = (file: string, text: string | undefined): Effect.Effect<void, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* removeStaleTemps(file)
    if (text === undefined) yield* fs.remove(file, { force: true })
    else yield* writeTextAtomic(file, text)
  }).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning(`Memory sidecar ${file} not written: ${FileErrors.message(error)}`)
    )
  )

/** Removes the `.metadata` directory (and DeerMem's default agent's) once nothing is left in it. */
const tidy = (memoryFile: string, scope: Scope): Effect.Effect<void, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const metadata = metadataDirectory(memoryFile, scope)
    const dirs = scope.agentName === undefined ? [metadata, Path.dirname(metadata)] : [metadata]
    for (const dir of dirs) {
      const names = yield* Effect.either(fs.readDirectory(dir))
      if (Either.isRight(names) && names.right.length > 0) return
      // (checked empty first: under the memory's lock nothing else writes there)
      if (Either.isRight(names)) yield* Effect.ignore(fs.remove(dir, { recursive: true }))
    }
  })

/** The recall records of a memory (empty when it has none, or they cannot be read). */
export const readUsage = (memoryFile: string, scope: Scope): Effect.Effect<MemoryRecall.Usage> =>
  Effect.map(
    readText(usageFile(memoryFile, scope)),
    (text) => text === undefined ? MemoryRecall.empty : MemoryRecall.parse(text)
  )

/** The eviction audit of a memory (no events when it has none, or it cannot be read). */
export const readAudit = (memoryFile: string, scope: Scope): Effect.Effect<MemoryAudit.Events> =>
  Effect.map(readText(auditFile(memoryFile, scope)), (text) => text === undefined ? [] : MemoryAudit.parse(text))

const usageText = (usage: MemoryRecall.Usage) =>
  Object.keys(usage).length === 0 ? undefined : MemoryRecall.text(usage)

/**
 * Records a recall of `ids` (the facts `memory_search` returned) at `now` (milliseconds), for those of them in
 * `facts` (the memory's fact ids): `MemoryRecall.record`, with the records of facts no longer there dropped.
 */
export const recordRecall = (
  memoryFile: string,
  scope: Scope,
  ids: ReadonlyArray<string>,
  options: { readonly now: number; readonly halfLifeDays: number; readonly facts: ReadonlySet<string> }
): Effect.Effect<void, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const before = yield* readUsage(memoryFile, scope)
    const after = MemoryRecall.keepOnly(MemoryRecall.record(before, ids, options), options.facts)
    if (after !== before) yield* store(usageFile(memoryFile, scope), usageText(after))
  })

/**
 * After a memory was written: the records of facts no longer in it (`facts`) are dropped, the audit forgets the
 * facts that left it (`gone`: deleted, removed, evicted) and gets `events` (already redacted) after the others, the
 * newest `maxEntries` kept (0: none is added).
 */
export const afterWrite = (
  memoryFile: string,
  scope: Scope,
  change: {
    readonly facts: ReadonlySet<string>
    readonly gone: ReadonlySet<string>
    readonly events: ReadonlyArray<MemoryAudit.Event>
    readonly maxEntries: number
  }
): Effect.Effect<void, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const metadata = metadataDirectory(memoryFile, scope)
    if (change.events.length === 0 || change.maxEntries === 0) {
      // nothing to add: only a memory that has sidecars has anything to forget
      if (!(yield* Effect.orElseSucceed(fs.exists(metadata), () => false))) return
    }
    const usage = yield* readUsage(memoryFile, scope)
    const kept = MemoryRecall.keepOnly(usage, change.facts)
    if (kept !== usage) yield* store(usageFile(memoryFile, scope), usageText(kept))
    const events = yield* readAudit(memoryFile, scope)
    const next = MemoryAudit.append(MemoryAudit.forget(events, change.gone), change.events, change.maxEntries)
    if (next !== events) {
      yield* store(auditFile(memoryFile, scope), next.length === 0 ? undefined : MemoryAudit.text(next))
    }
    yield* tidy(memoryFile, scope)
  })

/** Removes the sidecars of a memory (it was cleared); a failure is a warning. */
export const clear = (memoryFile: string, scope: Scope): Effect.Effect<void, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const metadata = metadataDirectory(memoryFile, scope)
    yield* fs.remove(metadata, { recursive: true, force: true })
    yield* tidy(memoryFile, scope)
  }).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning(`Memory sidecars of ${memoryFile} not removed: ${FileErrors.message(error)}`)
    )
  )
