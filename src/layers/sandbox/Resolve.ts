/**
 * From a virtual path to a real host path: the path parsed against the thread's mounts, writes refused on
 * read-only mounts, symlinks followed (for a path that does not exist yet, from its deepest existing ancestor),
 * and the real path checked to lie inside the thread's directories (and in the skills' only when reached from
 * their mount).
 */
import * as Fsp from "node:fs/promises"
import * as Path from "node:path"
import * as Effect from "effect/Effect"
import { ACP_WORKSPACE, OUTPUTS, SandboxError, UPLOADS, WORKSPACE } from "../../services/Sandbox.js"
import { codeOf, escapeError, fsError } from "./FsErrors.js"
import type { Access, SandboxState } from "./SandboxState.js"
import type { ParsedPath } from "./VirtualPaths.js"
import { parseVirtual } from "./VirtualPaths.js"

/** Where a virtual path leads on the host. */
export interface Resolved {
  /** The real host path. */
  readonly real: string
  /** The deepest existing ancestor (real) and the missing segments below it. */
  readonly base: string
  readonly missing: ReadonlyArray<string>
}

/** Parses a virtual path against the thread's mounts. */
export const parse = (state: SandboxState, input: string) =>
  Effect.suspend(() => parseVirtual(input, state.mounts, state.show, state.spec.skillsContainer))

// Follows the candidate's symlinks; for a path that does not exist yet, resolves its deepest existing
// ancestor. A path component that exists but cannot be resolved is a broken or looping symlink.
const realResolve = (
  state: SandboxState,
  parsed: ParsedPath,
  access: Access
): Effect.Effect<Resolved, SandboxError> =>
  Effect.tryPromise({
    try: async () => {
      const missing: Array<string> = []
      let current = parsed.rest.length === 0 ? parsed.mount.host : `${parsed.mount.host}/${parsed.rest.join("/")}`
      for (;;) {
        try {
          const base = await Fsp.realpath(current)
          missing.reverse()
          return { base, missing, real: missing.length === 0 ? base : `${base}/${missing.join("/")}` }
        } catch (cause) {
          if (codeOf(cause) !== "ENOENT") throw cause
          const exists = await Fsp.lstat(current).then(() => true, () => false)
          if (exists) {
            throw new SandboxError({
              reason: access === "write" ? "path_escape" : "not_found",
              message: access === "write"
                ? `Refusing to write through a broken symbolic link: ${parsed.virtual}`
                : `File not found: ${parsed.virtual} (a symbolic link whose target does not exist)`,
              path: parsed.virtual
            })
          }
          if (current === parsed.mount.host || current.length <= parsed.mount.host.length) throw cause
          missing.push(Path.basename(current))
          current = Path.dirname(current)
        }
      }
    },
    catch: (cause) => fsError(cause, parsed.virtual)
  }).pipe(
    // (a link from elsewhere into the skills is refused: the skills' gate judges their files by their path there)
    Effect.filterOrFail(
      (resolved) => state.allowed(resolved.real, access) && !state.intoSkills(resolved.real, parsed.mount),
      () => escapeError(parsed.virtual)
    )
  )

/** Parses and resolves a virtual path for `access`: the parsed path and where it leads. */
export const resolveParsed = (state: SandboxState, input: string, access: Access) =>
  Effect.flatMap(parse(state, input), (parsed) => {
    if (access === "write" && !parsed.mount.writable) {
      return Effect.fail(
        new SandboxError({
          reason: "read_only",
          message: parsed.mount.origin === "skills"
            ? `${parsed.virtual} is read-only (skills cannot be changed from the sandbox). ` +
              `Write under ${WORKSPACE} or ${OUTPUTS}.`
            : parsed.mount.virtual === ACP_WORKSPACE
            ? `${parsed.virtual} is read-only (only ACP agents write the ACP workspace). ` +
              `Copy what you need to ${WORKSPACE} or ${OUTPUTS}.`
            : parsed.mount.origin === "config"
            ? `${parsed.virtual} is read-only: ${parsed.mount.virtual} is mounted read-only (sandbox.mounts). ` +
              `Write under ${WORKSPACE}, ${OUTPUTS} or a read-write mount.`
            : `${parsed.virtual} is read-only. Write under ${WORKSPACE}, ${UPLOADS} or ${OUTPUTS}.`,
          path: parsed.virtual
        })
      )
    }
    return Effect.map(realResolve(state, parsed, access), (resolved) => ({ parsed, resolved }))
  })
