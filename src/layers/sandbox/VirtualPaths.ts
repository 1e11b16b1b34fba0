/**
 * The model's view of paths (pure): the virtual roots (`/mnt/user-data/{workspace,uploads,outputs}`,
 * `/mnt/skills`) and the host directories behind them, the rules a virtual path must pass (no NUL bytes, no
 * percent-encoded separators, no `..` segments, under a mount; a relative path is taken from the workspace), and
 * the masking that keeps host paths out of everything shown to the model.
 */
import * as Either from "effect/Either"
import { absoluteVirtual, OUTPUTS, SandboxError, SKILLS, UPLOADS, WORKSPACE } from "../../services/Sandbox.js"

/** What `mask` shows instead of the data directory (outside the thread's own directories). */
export const HIDDEN_HOME = "<antler-home>"

/** One virtual root and the host directory behind it. */
export interface MountPoint {
  readonly virtual: string
  readonly host: string
  /** The host directory with symlinks resolved. */
  readonly real: string
  readonly writable: boolean
  /** Besides the thread's own directories: the skills, the ACP workspace, a configured mount, an MCP server's root. */
  readonly origin?: "skills" | "acp" | "config" | "mcp" | undefined
}

/** A virtual path split into its mount and the segments below it. */
export interface ParsedPath {
  readonly virtual: string
  readonly mount: MountPoint
  readonly rest: ReadonlyArray<string>
}

/** Whether `path` is `root` or below it. */
export const isInside = (path: string, root: string) =>
  path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`)

const ENCODED = /%(2e|2f|5c|00)/i

/** The virtual roots the model may use, for messages. */
export const VIRTUAL_ROOTS_TEXT = `${WORKSPACE}, ${UPLOADS}, ${OUTPUTS} or ${SKILLS}`

/** The virtual roots of a set of mounts, for messages (the skills and any other mounts after the thread's own). */
export const rootsText = (mounts: ReadonlyArray<MountPoint>): string => {
  const others = mounts.filter((m) => m.origin !== undefined).map((m) => m.virtual)
  const all = [WORKSPACE, UPLOADS, OUTPUTS, ...(others.length === 0 ? [SKILLS] : others)]
  return `${all.slice(0, -1).join(", ")} or ${all[all.length - 1]}`
}

/**
 * Parses a virtual path against mount points (pure): rejects NUL bytes, percent-encoded dots, slashes,
 * backslashes and NULs, `..` segments (between `/` or `\\`), and anything not under a mount; a relative path is taken
 * from the workspace. `show` renders the input for messages (it masks host paths).
 */
export const parseVirtual = (
  input: string,
  mounts: ReadonlyArray<MountPoint>,
  show: (text: string) => string,
  skillsRoot: string = SKILLS
): Either.Either<ParsedPath, SandboxError> => {
  const shown = () => show(input)
  const fail = (reason: SandboxError["reason"], message: string) =>
    Either.left(new SandboxError({ reason, message, path: shown() }))
  if (input.includes("\0")) return fail("path_escape", `Path contains a NUL byte: ${shown()}`)
  if (ENCODED.test(input)) {
    return fail("path_escape", `Path contains a percent-encoded '.', '/', '\\' or NUL: ${shown()}. Use a plain path.`)
  }
  if (input.trim() === "") return fail("not_found", `Path is empty: give a path under ${VIRTUAL_ROOTS_TEXT}`)
  // A relative path is taken from the workspace, as in bash (where the workspace is the current directory).
  const virtual = absoluteVirtual(input)
  // `\` separates too, as DeerFlow reads it: `workspace\..\..\etc` is a traversal, not one odd name
  if (virtual.split(/[/\\]/).includes("..")) {
    return fail("path_escape", `Path may not contain '..' segments: ${shown()}`)
  }
  let best: MountPoint | undefined
  for (const mount of mounts) {
    if (isInside(virtual, mount.virtual) && (best === undefined || mount.virtual.length > best.virtual.length)) {
      best = mount
    }
  }
  if (best === undefined) {
    if (isInside(virtual, skillsRoot)) {
      return fail(
        "not_found",
        `${virtual} does not exist: there is no skills directory (skills.path in config.yaml, or skills/ next to it)`
      )
    }
    const masked = shown()
    if (masked !== input && masked.startsWith("/mnt/")) {
      return fail("path_escape", `Host paths are not accepted; use the virtual path ${masked} instead.`)
    }
    const what = masked === OUTSIDE_PATH ? "That path" : masked
    return fail("path_escape", `Access denied: ${what} is outside the sandbox. Use paths under ${rootsText(mounts)}.`)
  }
  const rest = virtual === best.virtual ? [] : virtual.slice(best.virtual.length + 1).split("/")
  return Either.right({ virtual, mount: best, rest })
}

/** What messages say instead of an absolute path outside the virtual roots. */
export const OUTSIDE_PATH = "(a path outside the sandbox)"

/**
 * How a (masked) path argument is echoed in messages: virtual and relative paths, and paths under `mounts` (a
 * mount outside `/mnt`), as given (cut at 300 chars), any other absolute path not at all, so messages never carry
 * a host path.
 */
export const displayPath = (masked: string, mounts: ReadonlyArray<MountPoint> = []): string => {
  const cut = masked.length > 300 ? `${masked.slice(0, 300)}...` : masked
  return masked.startsWith("/") && !masked.startsWith("/mnt/") && !mounts.some((m) => isInside(masked, m.virtual))
    ? OUTSIDE_PATH
    : cut
}

// Characters that continue a path segment: a host directory followed (or preceded) by one of these is part of
// a different name (`/srv/skills-extra`, `/x/srv/skills`), not that directory.
const SEGMENT_CHAR = "A-Za-z0-9_.~+@%#-"

/**
 * Replaces host directories in text with virtual roots (pure), whole path segments only: a directory matches
 * where it starts a path (not inside a longer name or path) and is followed by `/`, the end, or a character
 * that cannot continue its last segment (a period counts only when no such character follows it, as at the end
 * of a sentence). One pass, longest directory first, so a replacement is never rewritten again.
 */
export const makeMask = (pairs: ReadonlyArray<readonly [host: string, virtual: string]>) => {
  const sorted = [...new Map(pairs.filter(([host]) => host.length > 1)).entries()]
    .map(([host, virtual]) => [host.replace(/\/+$/, ""), virtual] as const)
    .filter(([host]) => host.length > 1)
    .sort((a, b) => b[0].length - a[0].length)
  if (sorted.length === 0) return (text: string): string => text
  const virtuals = new Map(sorted)
  const alternatives = sorted.map(([host]) => host.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")
  const pattern = new RegExp(
    `(?<![${SEGMENT_CHAR}])(${alternatives})(?=$|/|[^${SEGMENT_CHAR}]|\\.(?![${SEGMENT_CHAR}]))`,
    "g"
  )
  return (text: string): string =>
    sorted.some(([host]) => text.includes(host)) ? text.replace(pattern, (host) => virtuals.get(host)!) : text
}
