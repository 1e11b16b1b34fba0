/**
 * Listing a thread's directory tree: depth-first with sorted siblings, bounded in depth and entries. Symlinks are
 * shown as what they point to when that stays inside the thread's directories and skipped otherwise; symlinked
 * directories are never descended into (no cycles).
 */
import type * as Fs from "node:fs"
import * as Fsp from "node:fs/promises"
import * as Effect from "effect/Effect"
import type { WalkEntry, WalkOptions, WalkResult } from "../../services/Sandbox.js"
import { SandboxError } from "../../services/Sandbox.js"
import { fsError } from "./FsErrors.js"
import { resolveParsed } from "./Resolve.js"
import type { SandboxState } from "./SandboxState.js"

/** Lists the directory tree at a virtual path. */
export const walk = (
  state: SandboxState,
  input: string,
  options: WalkOptions = {}
): Effect.Effect<WalkResult, SandboxError> =>
  Effect.flatMap(resolveParsed(state, input, "read"), ({ parsed, resolved }) =>
    Effect.tryPromise({
      try: async () => {
        const info = await Fsp.stat(resolved.real)
        if (!info.isDirectory()) {
          throw new SandboxError({
            reason: "not_a_directory",
            message: `Path is not a directory: ${parsed.virtual}`,
            path: parsed.virtual
          })
        }
        const maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY
        const maxEntries = options.maxEntries ?? Number.POSITIVE_INFINITY
        const entries: Array<WalkEntry> = []
        let truncated = false
        const prefix = parsed.virtual === "/" ? "" : parsed.virtual
        const visit = async (dir: string, relative: string, depth: number): Promise<void> => {
          let dirents: Array<Fs.Dirent>
          try {
            dirents = await Fsp.readdir(dir, { withFileTypes: true })
          } catch {
            return
          }
          dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
          for (const dirent of dirents) {
            if (truncated) return
            const host = `${dir}/${dirent.name}`
            let kind: "file" | "directory" | undefined
            let descend = false
            if (dirent.isDirectory()) {
              kind = "directory"
              descend = true
            } else if (dirent.isFile()) {
              kind = "file"
            } else if (dirent.isSymbolicLink()) {
              // Shown as what it points to when that stays inside; never descended into (no cycles).
              const target = await Fsp.realpath(host).catch(() => undefined)
              if (target === undefined || !state.allowed(target, "read") || state.intoSkills(target, parsed.mount)) {
                continue
              }
              const targetStat = await Fsp.stat(target).catch(() => undefined)
              kind = targetStat?.isDirectory() ? "directory" : targetStat?.isFile() ? "file" : undefined
            }
            if (kind === undefined) continue
            if (options.skip?.(dirent.name, kind) === true) continue
            const rel = relative === "" ? dirent.name : `${relative}/${dirent.name}`
            if (entries.length >= maxEntries) {
              truncated = true
              return
            }
            entries.push({ path: `${prefix}/${rel}`, relative: rel, kind, depth })
            if (descend && depth < maxDepth) await visit(host, rel, depth + 1)
          }
        }
        await visit(resolved.real, "", 1)
        return { entries, truncated }
      },
      catch: (cause) => fsError(cause, parsed.virtual, "directory")
    }))
