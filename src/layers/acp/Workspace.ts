/**
 * The file requests of an ACP agent (`fs/read_text_file`, `fs/write_text_file`), answered inside its workspace
 * only, under the rules of `/mnt/user-data`: no NUL bytes, no percent-encoded separators, no `..` segments (`/`
 * or `\\`), nothing outside the workspace, symlinks followed and the real path checked to stay inside it, and
 * the last component never a symlink when writing. A path is the workspace's host path or anything below it (as
 * the agent is told its `cwd`), `/mnt/acp-workspace/...` (as the lead agent names it), or relative to the
 * workspace. Refusals are `Refused` errors whose messages name the path as given, never another host path.
 */
import * as Fs from "node:fs"
import * as Fsp from "node:fs/promises"
import * as Path from "node:path"
import { ACP_WORKSPACE } from "../../services/Sandbox.js"

/** The largest file an agent may read through the client. */
export const MAX_READ_BYTES = 10 * 1024 * 1024

/** A request the client refuses (the agent gets it as a JSON-RPC error). */
export class Refused extends Error {
  constructor(message: string) {
    super(message)
    this.name = "Refused"
  }
}

const ENCODED = /%(2e|2f|5c|00)/i

const inside = (path: string, root: string) => path === root || path.startsWith(`${root}/`)

const realOrSelf = (path: string) => {
  try {
    return Fs.realpathSync(path)
  } catch {
    return path
  }
}

/** A workspace: its host directory and that directory with symlinks resolved. */
export interface Workspace {
  readonly root: string
  readonly real: string
}

export const make = (root: string): Workspace => {
  const resolved = Path.resolve(root)
  return { root: resolved, real: realOrSelf(resolved) }
}

const shown = (input: string) => JSON.stringify(input.length > 300 ? `${input.slice(0, 300)}...` : input)

/** The segments of `input` below the workspace (pure), or why the path is refused. */
export const segmentsOf = (workspace: Workspace, input: string): ReadonlyArray<string> => {
  if (input.includes("\0")) throw new Refused(`Path contains a NUL byte: ${shown(input)}`)
  if (ENCODED.test(input)) throw new Refused(`Path contains a percent-encoded '.', '/', '\\' or NUL: ${shown(input)}`)
  if (input.trim() === "") throw new Refused("Path is empty")
  if (input.split(/[/\\]/).includes("..")) throw new Refused(`Path may not contain '..' segments: ${shown(input)}`)
  const base = [workspace.root, workspace.real, ACP_WORKSPACE].find((root) => inside(input, root))
  if (input.startsWith("/") && base === undefined) {
    throw new Refused(`Access denied: ${shown(input)} is outside the ACP workspace (${workspace.root})`)
  }
  const rest = base === undefined ? input : input.slice(base.length)
  return rest.split("/").filter((segment) => segment !== "" && segment !== ".")
}

// The real path of the deepest existing ancestor of `segments` and the missing segments below it.
const resolveReal = async (workspace: Workspace, segments: ReadonlyArray<string>, input: string) => {
  const missing: Array<string> = []
  let current = segments.length === 0 ? workspace.root : Path.join(workspace.root, ...segments)
  for (;;) {
    try {
      const base = await Fsp.realpath(current)
      if (!inside(base, workspace.real)) {
        throw new Refused(`Access denied: ${shown(input)} leads outside the ACP workspace`)
      }
      return { base, missing: missing.reverse() }
    } catch (cause) {
      if (cause instanceof Refused) throw cause
      if ((cause as NodeJS.ErrnoException).code !== "ENOENT") throw cause
      if (current.length <= workspace.root.length) throw cause
      if (await Fsp.lstat(current).then(() => true, () => false)) {
        throw new Refused(`${shown(input)} is a symbolic link whose target does not exist`)
      }
      missing.push(Path.basename(current))
      current = Path.dirname(current)
    }
  }
}

const ioMessage = (cause: unknown, input: string) => {
  if (cause instanceof Refused) return cause
  const code = (cause as NodeJS.ErrnoException | null)?.code
  switch (code) {
    case "ENOENT":
      return new Refused(`File not found: ${shown(input)}`)
    case "EISDIR":
      return new Refused(`${shown(input)} is a directory`)
    case "ELOOP":
      return new Refused(`Refusing to follow a symbolic link at ${shown(input)}`)
    case "ENOTDIR":
      return new Refused(`A parent of ${shown(input)} is not a directory`)
    default:
      return new Refused(`Could not access ${shown(input)} (${code ?? "error"})`)
  }
}

/** Reads a UTF-8 text file of the workspace, from `line` (1-based) for `limit` lines when given. */
export const readText = async (
  workspace: Workspace,
  input: string,
  line?: number | null,
  limit?: number | null
): Promise<string> => {
  try {
    const { base, missing } = await resolveReal(workspace, segmentsOf(workspace, input), input)
    if (missing.length > 0) throw new Refused(`File not found: ${shown(input)}`)
    const handle = await Fsp.open(base, Fs.constants.O_RDONLY | Fs.constants.O_NOFOLLOW)
    try {
      const info = await handle.stat()
      if (!info.isFile()) throw new Refused(`${shown(input)} is not a regular file`)
      if (info.size > MAX_READ_BYTES) {
        throw new Refused(`${shown(input)} is larger than ${MAX_READ_BYTES} bytes and cannot be read whole`)
      }
      const text = (await handle.readFile()).toString("utf8")
      if ((line ?? undefined) === undefined && (limit ?? undefined) === undefined) return text
      const lines = text.split("\n")
      const start = Math.max(0, (line ?? 1) - 1)
      const end = limit === undefined || limit === null ? lines.length : start + Math.max(0, limit)
      return lines.slice(start, end).join("\n")
    } finally {
      await handle.close()
    }
  } catch (cause) {
    throw ioMessage(cause, input)
  }
}

/** Writes a text file of the workspace (replacing it), creating its parent directories. */
export const writeText = async (workspace: Workspace, input: string, content: string): Promise<void> => {
  try {
    const segments = segmentsOf(workspace, input)
    if (segments.length === 0) throw new Refused(`${shown(input)} is the workspace itself, not a file`)
    const { base, missing } = await resolveReal(workspace, segments, input)
    const target = missing.length === 0 ? base : Path.join(base, ...missing)
    if (missing.length > 1) await Fsp.mkdir(Path.dirname(target), { recursive: true })
    const flags = Fs.constants.O_WRONLY | Fs.constants.O_CREAT | Fs.constants.O_TRUNC | Fs.constants.O_NOFOLLOW
    const handle = await Fsp.open(target, flags, 0o644)
    try {
      await handle.writeFile(content, "utf8")
    } finally {
      await handle.close()
    }
  } catch (cause) {
    throw ioMessage(cause, input)
  }
}
