/**
 * Node's words for the errors of `@effect/platform`'s `FileSystem`. A `PlatformError` made by the Node file system
 * keeps Node's error as its `cause` and Node's message as its `description`, so a message naming a file reads as it
 * did when the code called `node:fs` itself ("ENOENT: no such file or directory, open '/x'").
 */
import * as PlatformError from "@effect/platform/Error"

/** Node's message of a file system failure (any other error's message, or the value as text). */
export const message = (cause: unknown): string => {
  if (PlatformError.isPlatformError(cause)) return cause.description ?? cause.message
  return cause instanceof Error ? cause.message : String(cause)
}

/** The error Node raised behind a file system failure (`String` of it reads `Error: ENOENT: ...`). */
export const nodeError = (cause: unknown): unknown =>
  PlatformError.isPlatformError(cause) && cause.cause instanceof Error ? cause.cause : cause

/** Whether a file system failure is Node's `code` (`EEXIST`, `ENOENT`...). */
export const hasCode = (cause: unknown, code: string): boolean =>
  (nodeError(cause) as { readonly code?: unknown } | undefined)?.code === code
