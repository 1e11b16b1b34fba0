/**
 * Files written whole or not at all (the memory document and its sidecars, `extensions_config.json`): a temporary
 * file, flushed, renamed over the target; and the removal of temporary files left by processes that died while
 * writing.
 */
import * as Effect from "effect/Effect"
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import { randomBytes } from "node:crypto"
import * as Path from "node:path"
import { processAlive as processRunning } from "../../services/ThreadStore.js"

/**
 * Writes text atomically: a temporary file in the same directory, flushed, then renamed over the target (and
 * the directory flushed), so the target is always whole, the old text or the new. The file is the owner's only
 * (0600) unless `mode` gives its permissions. A write once started is not interrupted (a temporary file would be
 * left behind).
 */
export const writeTextAtomic = (
  file: string,
  text: string,
  mode?: number
): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  Effect.uninterruptible(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = Path.dirname(file)
    yield* fs.makeDirectory(dir, { recursive: true })
    const temp = Path.join(dir, `.${Path.basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`)
    yield* Effect.zipRight(
      Effect.scoped(Effect.flatMap(
        fs.open(temp, { flag: "wx", mode: 0o600 }),
        (handle) => Effect.zipRight(handle.writeAll(new TextEncoder().encode(text)), handle.sync)
      )),
      // (set after the open: the process's umask would take bits from the mode asked for there)
      Effect.zipRight(mode === undefined ? Effect.void : fs.chmod(temp, mode), fs.rename(temp, file))
    ).pipe(Effect.tapError(() => Effect.ignore(fs.remove(temp, { force: true }))))
    // some file systems cannot flush a directory; the rename is still atomic
    yield* Effect.ignore(Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (handle) => handle.sync)))
  }))

/** Whether a process holds what it wrote (this one always; a zombie holds nothing: see `ThreadStore.processAlive`). */
export const processAlive = (pid: number): boolean => pid === process.pid || processRunning(pid)

/** Removes temporary files left by processes that died while writing (never a document's only copy). */
export const removeStaleTemps = (file: string): Effect.Effect<void, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = Path.dirname(file)
    const prefix = `.${Path.basename(file)}.`
    const names = yield* Effect.orElseSucceed(fs.readDirectory(dir), () => [])
    for (const name of names) {
      if (!name.startsWith(prefix) || !name.endsWith(".tmp")) continue
      const pid = Number(name.slice(prefix.length).split(".")[0])
      if (!processAlive(pid)) yield* Effect.orDie(fs.remove(Path.join(dir, name), { force: true }))
    }
  })
