/**
 * A file of a thread that the gateway reads for a client (an artifact, a `.skill` archive previewed) or copies to
 * another thread (a copy, a branch), opened at the real path its sandbox resolved (`Sandbox.resolve`), or that a
 * walk of the thread's real folder named, and nowhere else. The model's bash may change the thread's
 * files while a run goes on: a link it swaps in for the file after the path was resolved (to another user's files
 * or to `config.yaml`, by a relative target) was followed by a read that opened the path again. So the file is opened
 * once, without following a link at its end (`O_NOFOLLOW`) and without blocking on a FIFO (`O_NONBLOCK`), checked on
 * the open descriptor to be a regular file and, on Linux, to be at that real path still (a directory on the way
 * swapped for a link moves it), and read or streamed from that descriptor only.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import type * as Fsp from "node:fs/promises"
import * as Path from "node:path"
import { pipeline } from "node:stream/promises"

/** Why a resolved file is not read: not there (or a link now), not a regular file, or no longer where it was. */
export class ThreadFileError extends Data.TaggedError("ThreadFileError")<{
  readonly reason: "not_found" | "not_a_file" | "moved"
}> {}

/** A regular file open for reading, and its size when opened; whoever opened it closes it. */
export interface Opened {
  readonly handle: Fsp.FileHandle
  readonly size: number
}

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = Fs.constants

// (throws a `ThreadFileError`, or the file system's error)
const openAt = async (real: string): Promise<Opened> => {
  const handle = await Fs.promises.open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
  try {
    const stat = await handle.stat()
    if (process.platform === "linux" && (await Fs.promises.readlink(`/proc/self/fd/${handle.fd}`)) !== real) {
      throw new ThreadFileError({ reason: "moved" })
    }
    if (!stat.isFile()) throw new ThreadFileError({ reason: "not_a_file" })
    return { handle, size: stat.size }
  } catch (error) {
    await handle.close()
    throw error
  }
}

/** Opens the regular file at `real` (a real path a sandbox resolved), refusing whatever now stands there instead. */
export const open = (real: string): Effect.Effect<Opened, ThreadFileError> =>
  Effect.tryPromise({
    try: () => openAt(real),
    catch: (error) => error instanceof ThreadFileError ? error : new ThreadFileError({ reason: "not_found" })
  })

/** The bytes of an opened file, as many as it held when opened (it may grow meanwhile); the file is closed after. */
export const readAll = (opened: Opened): Effect.Effect<Uint8Array, ThreadFileError> =>
  Effect.tryPromise({
    try: async () => {
      try {
        const bytes = new Uint8Array(opened.size)
        let at = 0
        while (at < bytes.byteLength) {
          const { bytesRead } = await opened.handle.read(bytes, at, bytes.byteLength - at, at)
          if (bytesRead === 0) break
          at += bytesRead
        }
        return bytes.subarray(0, at)
      } finally {
        await opened.handle.close()
      }
    },
    catch: () => new ThreadFileError({ reason: "not_found" })
  })

/** Closes an opened file that is not read. */
export const close = (opened: Opened): Effect.Effect<void> => Effect.promise(() => opened.handle.close())

/** Reads the file at `real` whole when it holds at most `limit` bytes (`too_large` else), closing it after. */
export const readBounded = (
  real: string,
  limit: number
): Effect.Effect<Uint8Array | "too_large", ThreadFileError> =>
  Effect.flatMap(open(real), (opened): Effect.Effect<Uint8Array | "too_large", ThreadFileError> =>
    opened.size > limit ? Effect.as(close(opened), "too_large" as const) : readAll(opened))

/**
 * Copies the regular files and folders under `from` (a real path) to `to` (made), leaving out links, FIFOs and the
 * names `skip` names, and a file found to be something else once opened (a link or folder swapped in by a command
 * running meanwhile: its contents are not the thread's). Files keep their permissions.
 */
export const copyTree = async (from: string, to: string, skip: (name: string) => boolean): Promise<void> => {
  await Fs.promises.mkdir(to, { recursive: true })
  for (const entry of await Fs.promises.readdir(from, { withFileTypes: true })) {
    if (skip(entry.name)) continue
    const source = Path.join(from, entry.name)
    const target = Path.join(to, entry.name)
    if (entry.isDirectory()) await copyTree(source, target, skip)
    else if (entry.isFile()) await copyFile(source, target)
  }
}

const copyFile = async (source: string, target: string): Promise<void> => {
  const opened = await openAt(source).catch(() => undefined)
  if (opened === undefined) return
  try {
    const mode = (await opened.handle.stat()).mode & 0o777
    const output = await Fs.promises.open(target, "wx", mode)
    await pipeline(opened.handle.createReadStream({ autoClose: false }), output.createWriteStream())
  } finally {
    await opened.handle.close()
  }
}
