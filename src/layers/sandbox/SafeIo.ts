/**
 * Reading and writing a thread's files safely: every path is resolved and checked first (`Resolve`), then checked
 * again on the open descriptor (its real path, on Linux), so a symlink swapped in between by a concurrent
 * command cannot redirect a read or a write. Files are opened without following a final symlink and without
 * blocking on FIFOs; reads are bounded by the size seen on the descriptor; writes make missing parent directories
 * one by one, refuse to follow a symlink that appears meanwhile, and honour the file size limit and disk quota.
 *
 * Uses `node:fs` on purpose: these checks need file descriptors, open flags and `/proc/self/fd`, which
 * `@effect/platform`'s FileSystem does not expose.
 */
import * as Fs from "node:fs"
import * as Fsp from "node:fs/promises"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { FileInfo } from "../../services/Sandbox.js"
import { SandboxError } from "../../services/Sandbox.js"
import { codeOf, escapeError, fsError, isDirectoryError } from "./FsErrors.js"
import * as Quota from "./Quota.js"
import type { Resolved } from "./Resolve.js"
import { resolveParsed } from "./Resolve.js"
import type { Access, SandboxState } from "./SandboxState.js"
import type { MountPoint, ParsedPath } from "./VirtualPaths.js"
import { parseVirtual } from "./VirtualPaths.js"

/** The largest file `readText` reads. */
export const MAX_TEXT_BYTES = 32 * 1024 * 1024

// Checks, after opening, that the descriptor really is inside the sandbox (defeats symlink swaps between
// the check and the open). Linux only: elsewhere the resolve-time check stands alone.
const verifyDescriptor = (
  state: SandboxState,
  fd: number,
  access: Access,
  via: MountPoint
): string | undefined => {
  if (process.platform !== "linux") return undefined
  const actual = Fs.readlinkSync(`/proc/self/fd/${fd}`)
  return state.allowed(actual, access) && !state.intoSkills(actual, via) ? undefined : actual
}

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_APPEND } = Fs.constants

const openRead = (state: SandboxState, parsed: ParsedPath, real: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const handle = await Fsp.open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        if (verifyDescriptor(state, handle.fd, "read", parsed.mount) !== undefined) {
          await handle.close()
          throw escapeError(parsed.virtual)
        }
        return handle
      },
      catch: (cause) => fsError(cause, parsed.virtual, "file")
    }),
    (handle) => Effect.promise(() => handle.close().catch(() => undefined))
  )

/** Reads a file's bytes; a file over `maxBytes` fails with reason `too_large` without being read. */
export const readBytes = (
  state: SandboxState,
  input: string,
  maxBytes: number
): Effect.Effect<Uint8Array, SandboxError> =>
  Effect.scoped(Effect.gen(function*() {
    const { parsed, resolved } = yield* resolveParsed(state, input, "read")
    const handle = yield* openRead(state, parsed, resolved.real)
    const stat = yield* Effect.tryPromise({ try: () => handle.stat(), catch: (e) => fsError(e, parsed.virtual) })
    if (stat.isDirectory()) {
      return yield* new SandboxError({
        reason: "is_directory",
        message: `Path is a directory, not a file: ${parsed.virtual}`,
        path: parsed.virtual
      })
    }
    if (!stat.isFile()) {
      return yield* new SandboxError({
        reason: "permission",
        message: `Not a regular file: ${parsed.virtual}`,
        path: parsed.virtual
      })
    }
    if (stat.size > maxBytes) {
      return yield* new SandboxError({
        reason: "too_large",
        message: `File is too large: ${parsed.virtual} is ${stat.size} bytes (limit ${maxBytes})`,
        path: parsed.virtual
      })
    }
    // Reads at most the size seen above, so a file growing meanwhile cannot blow past the limit.
    return yield* Effect.tryPromise({
      try: async () => {
        const buffer = Buffer.alloc(stat.size)
        let offset = 0
        while (offset < buffer.length) {
          const { bytesRead } = await handle.read(buffer, offset, buffer.length - offset, offset)
          if (bytesRead === 0) break
          offset += bytesRead
        }
        return buffer.subarray(0, offset)
      },
      catch: (e) => fsError(e, parsed.virtual, "file")
    })
  }))

/** Reads a UTF-8 text file; binary or non-UTF-8 content fails with reason `binary`. */
export const readText = (state: SandboxState, input: string): Effect.Effect<string, SandboxError> =>
  Effect.flatMap(readBytes(state, input, MAX_TEXT_BYTES), (bytes) => {
    const parsed = parseVirtual(input, state.mounts, state.show, state.spec.skillsContainer)
    const virtual = Either.getOrElse(parsed, () => ({ virtual: input })).virtual
    const binary = new SandboxError({
      reason: "binary",
      message: `Cannot read ${virtual} as text: it is binary or not UTF-8.`,
      path: virtual
    })
    if (bytes.includes(0)) return Effect.fail(binary)
    try {
      return Effect.succeed(state.decoder.decode(bytes))
    } catch {
      return Effect.fail(binary)
    }
  })

// Creates the missing directories one by one below a verified real ancestor, refusing to follow any
// symlink that appears meanwhile.
const makeParents = (virtual: string, resolved: Resolved) =>
  Effect.tryPromise({
    try: async () => {
      let dir = resolved.base
      for (const segment of resolved.missing.slice(0, -1)) {
        dir = `${dir}/${segment}`
        try {
          await Fsp.mkdir(dir)
        } catch (cause) {
          if (codeOf(cause) !== "EEXIST") throw cause
          const stat = await Fsp.lstat(dir)
          if (!stat.isDirectory()) throw stat.isSymbolicLink() ? escapeError(virtual) : cause
        }
      }
    },
    catch: (cause) => fsError(cause, virtual)
  })

/** Writes (or appends to) a file, creating parent directories. */
export const writeText = (
  state: SandboxState,
  input: string,
  content: string,
  append = false
): Effect.Effect<void, SandboxError> =>
  Effect.gen(function*() {
    const { parsed, resolved } = yield* resolveParsed(state, input, "write")
    const virtual = parsed.virtual
    if (parsed.rest.length === 0) {
      return yield* isDirectoryError(virtual)
    }
    yield* makeParents(virtual, resolved)
    yield* Effect.tryPromise({
      try: async () => {
        const flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | (append ? O_APPEND : 0)
        // O_EXCL first tells whether this call created the file, so a refused file is removed again.
        let created = true
        let handle: Fsp.FileHandle
        try {
          handle = await Fsp.open(resolved.real, flags | O_CREAT | O_EXCL, 0o644)
        } catch (cause) {
          if (codeOf(cause) !== "EEXIST") throw cause
          created = false
          handle = await Fsp.open(resolved.real, flags)
        }
        try {
          const outside = verifyDescriptor(state, handle.fd, "write", parsed.mount)
          if (outside !== undefined) {
            if (created) await Fsp.unlink(outside).catch(() => undefined)
            throw escapeError(virtual)
          }
          const stat = await handle.stat()
          if (!stat.isFile()) {
            throw new SandboxError({ reason: "permission", message: `Not a regular file: ${virtual}`, path: virtual })
          }
          const refusal = await Quota.checkWrite(state.quota, virtual, append ? stat.size : 0, stat.size, content)
          if (refusal !== undefined) {
            if (created) await Fsp.unlink(resolved.real).catch(() => undefined)
            throw refusal
          }
          if (!append && !created) await handle.truncate(0)
          await handle.writeFile(content, "utf8")
        } finally {
          await handle.close().catch(() => undefined)
        }
      },
      catch: (cause) => fsError(cause, virtual, "file")
    })
  })

/** What a path is. */
export const stat = (state: SandboxState, input: string): Effect.Effect<FileInfo, SandboxError> =>
  Effect.flatMap(resolveParsed(state, input, "read"), ({ parsed, resolved }) =>
    Effect.tryPromise({
      try: async () => {
        const info = await Fsp.stat(resolved.real)
        return {
          kind: info.isFile() ? "file" : info.isDirectory() ? "directory" : "other",
          size: info.isFile() ? info.size : 0
        } satisfies FileInfo
      },
      catch: (cause) => fsError(cause, parsed.virtual)
    }))
