/**
 * A memory's file on disk (DeerFlow's DeerMem layout): where a scope's `memory.json` is, reading it within a size
 * bound (and the memory's limits), writing it atomically, and the lock file a read-modify-write holds across
 * processes. The service over these files is `FileMemory`.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Path from "node:path"
import * as FileErrors from "../../internal/FileErrors.js"
import type { AppConfigService } from "../../services/AppConfig.js"
import type { Scope as MemoryScope } from "../../services/Memory.js"
import { MemoryError } from "../../services/Memory.js"
import { isSafeId } from "../../services/Sandbox.js"
import * as MemoryDoc from "../../state/Memory.js"
import * as MemoryLimits from "../../state/MemoryLimits.js"
import type * as Redact from "../../state/Redact.js"
import * as TextFile from "../TextFile.js"
import { processAlive, writeTextAtomic } from "./AtomicFile.js"

/** The memory file of a scope under a root directory. */
export const fileOf = (
  root: string,
  scope: MemoryScope,
  filename = "memory.json"
): Either.Either<string, MemoryError> => {
  const unsafe = (what: string, value: string) =>
    Either.left(
      new MemoryError({ reason: "io", message: `The ${what} ${JSON.stringify(value)} cannot name a directory` })
    )
  if (!isSafeId(scope.userId)) return unsafe("user id", scope.userId)
  if (scope.agentName !== undefined && !isSafeId(scope.agentName)) return unsafe("agent name", scope.agentName)
  const user = Path.join(root, "users", scope.userId)
  return Either.right(
    scope.agentName === undefined ? Path.join(user, filename) : Path.join(user, "agents", scope.agentName, filename)
  )
}

const ioError = (what: string, file: string) => (cause: unknown) =>
  new MemoryError({ reason: "io", message: `Cannot ${what} ${file}: ${FileErrors.message(cause)}`, cause })

/**
 * The largest memory file read: 16 MiB. Parsing a larger one would hold the process for too long (Antler writes
 * files within `max_facts`, `max_fact_chars` and `max_summary_chars`, far smaller), so only a file written by
 * something else gets there. A larger one, or one that is not a regular file (a FIFO, a device), is an `io` error:
 * memory is then neither injected nor updated (the file is left as it is).
 */
export const MAX_FILE_BYTES = 16 * 1024 * 1024

/**
 * Reads a memory document, within `limits` when given (what is over them is cut, and named in `cut`) and
 * redacted with `redact` when given; a missing file is an empty memory, a damaged one a `corrupt` error, one over
 * `MAX_FILE_BYTES` or not a regular file an `io` error.
 */
export const readCapped = (
  file: string,
  limits?: MemoryLimits.Limits | undefined,
  redact?: Redact.Redactor | undefined
): Effect.Effect<MemoryLimits.Capped<MemoryDoc.Document>, MemoryError> =>
  Effect.flatMap(
    Effect.suspend(() => {
      const read = TextFile.read(file, MAX_FILE_BYTES)
      if (Either.isRight(read)) return Effect.succeed<string | undefined>(read.right)
      if (read.left.reason === "missing") return Effect.succeed(undefined)
      const hint = read.left.reason === "too_large" ? "; antler memory clear starts it afresh" : ""
      return Effect.fail(
        new MemoryError({ reason: "io", message: `Cannot read ${read.left.message}${hint}`, cause: read.left })
      )
    }),
    (text) => {
      if (text === undefined) return Effect.succeed({ value: MemoryDoc.empty(), cut: [] })
      const corrupt = (problem: string) =>
        Effect.fail(new MemoryError({ reason: "corrupt", message: `${file} is not a memory document: ${problem}` }))
      const decoded = limits === undefined
        ? Either.map(MemoryDoc.decodeDocument(text), (value) => ({ value, cut: [] }))
        : MemoryLimits.decodeDocument(text, limits, redact?.value)
      return Either.match(decoded, { onLeft: corrupt, onRight: Effect.succeed })
    }
  )

/** Reads a memory document (see `readCapped`). */
export const readDocument = (
  file: string,
  limits?: MemoryLimits.Limits | undefined,
  redact?: Redact.Redactor | undefined
): Effect.Effect<MemoryDoc.Document, MemoryError> => Effect.map(readCapped(file, limits, redact), (read) => read.value)

/** The text of a memory document as stored. */
export const documentText = (doc: MemoryDoc.Document): string => `${JSON.stringify(doc, null, 2)}\n`

/** Writes a memory document atomically (see `writeTextAtomic`); a failure is an `io` error naming the file. */
export const writeDocument = (
  file: string,
  doc: MemoryDoc.Document
): Effect.Effect<void, MemoryError, FileSystem.FileSystem> =>
  Effect.mapError(writeTextAtomic(file, documentText(doc)), ioError("write", file))

const sleepReal = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/**
 * Runs `body` holding the lock of a memory file (`<file>.lock`, created exclusively, holding the pid). A lock
 * whose holder is dead is taken over; one held longer than `timeoutMs` (real time: the lock is between
 * processes) fails with `locked`.
 */
export const withLock = <A, E, R>(
  file: string,
  timeoutMs: number,
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E | MemoryError, R | FileSystem.FileSystem> => {
  const lock = `${file}.lock`
  const started = Date.now()
  const take: Effect.Effect<void, MemoryError, FileSystem.FileSystem> = Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.makeDirectory(Path.dirname(file), { recursive: true }).pipe(
      Effect.zipRight(fs.writeFileString(lock, String(process.pid), { flag: "wx" })),
      Effect.catchAll((error) =>
        FileErrors.hasCode(error, "EEXIST") ? held(fs) : Effect.fail(ioError("lock", file)(error))
      )
    ))
  // (removed in between: tried again; not a small regular file: held by nobody we know, waited for)
  const held = (fs: FileSystem.FileSystem): Effect.Effect<void, MemoryError, FileSystem.FileSystem> => {
    const holder = Either.match(TextFile.read(lock, 64), {
      onLeft: () => Number.NaN,
      onRight: (text) => Number(text.trim())
    })
    if (!Number.isNaN(holder) && !processAlive(holder)) {
      return Effect.zipRight(Effect.orDie(fs.remove(lock, { force: true })), take)
    }
    if (Date.now() - started > timeoutMs) {
      return Effect.fail(
        new MemoryError({ reason: "locked", message: `${file} is being updated by process ${holder}; try again later` })
      )
    }
    return Effect.zipRight(sleepReal(25), take)
  }
  return Effect.acquireUseRelease(
    take,
    () => body,
    () => Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.orDie(fs.remove(lock, { force: true })))
  )
}

/** Where memory files live for a configuration: `storage_path` (relative to the config file), else `home`. */
export const rootOf = (app: AppConfigService["Type"]): string => {
  const storage = app.config.memory.backend_config.storage_path
  if (storage === "") return app.home
  const base = app.source !== undefined ? Path.dirname(Path.resolve(app.source)) : process.cwd()
  return Path.resolve(base, storage)
}
