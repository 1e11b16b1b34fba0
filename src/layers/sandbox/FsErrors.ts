/**
 * File-system failures as readable SandboxErrors that name only the virtual path (never the host path), so
 * they can go to the model as they are.
 */
import { SandboxError } from "../../services/Sandbox.js"

type ErrnoError = NodeJS.ErrnoException

/** The errno code of a file-system failure, if it has one. */
export const codeOf = (cause: unknown): string | undefined => (cause as ErrnoError | undefined)?.code

/** A readable SandboxError for a file-system failure, naming only the virtual path. */
export const fsError = (
  cause: unknown,
  virtual: string,
  what: "file" | "directory" | "path" = "path"
): SandboxError => {
  if (cause instanceof SandboxError) return cause
  const code = codeOf(cause)
  const noun = what === "file" ? "File" : what === "directory" ? "Directory" : "Path"
  switch (code) {
    case "ENOENT":
      // (the common failure, e.g. every check of a file before it is written: its fields are ours, valid by
      // construction, so the constructor does not validate them again)
      return new SandboxError({ reason: "not_found", message: `${noun} not found: ${virtual}`, path: virtual }, true)
    case "EACCES":
    case "EPERM":
    case "EROFS":
      return new SandboxError({ reason: "permission", message: `Permission denied: ${virtual}`, path: virtual })
    case "EISDIR":
      return isDirectoryError(virtual)
    case "ENOTDIR":
      return new SandboxError({
        reason: "not_a_directory",
        message: `A part of the path is a file, not a directory: ${virtual}`,
        path: virtual
      })
    case "ELOOP":
      return new SandboxError({
        reason: "path_escape",
        message: `Access denied: ${virtual} is a symbolic link that cannot be followed safely`,
        path: virtual
      })
    case "ENOSPC":
    case "EDQUOT":
      return new SandboxError({ reason: "io", message: `No space left to write ${virtual}`, path: virtual })
    default:
      return new SandboxError({
        reason: "io",
        message: `File-system error on ${virtual} (${code ?? (cause instanceof Error ? cause.name : "unknown")})`,
        path: virtual
      })
  }
}

/** The error for a directory where a file is expected. */
export const isDirectoryError = (virtual: string) =>
  new SandboxError({ reason: "is_directory", message: `Path is a directory, not a file: ${virtual}`, path: virtual })

/** The error for a path whose symbolic links lead outside the sandbox. */
export const escapeError = (virtual: string) =>
  new SandboxError({
    reason: "path_escape",
    message: `Access denied: ${virtual} leads (through a symbolic link) outside the sandbox`,
    path: virtual
  })
