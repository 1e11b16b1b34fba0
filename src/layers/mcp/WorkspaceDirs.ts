/**
 * The directories a thread's stdio MCP process is pinned to (its workspace and the temporary directory under it,
 * `.mcp/tmp`), made on the host before the process starts. The workspace is the model's: its `bash` can put a
 * symlink (or a file) where `.mcp` or `.mcp/tmp` belongs, naming any host directory. Followed, the process (which
 * runs on the host, outside the sandbox) would write its temporary files there and Antler would make folders
 * there. So each directory under the workspace is made one level at a time without following a link: what stands
 * in its place that is not a directory (a symlink, a file) is removed first, and the directory made is checked to
 * be, by its real path, where it belongs.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

/** `dir`'s entry, not followed when it is a symlink (undefined when there is none). */
const entryOf = (dir: string): Fs.Stats | undefined => {
  try {
    return Fs.lstatSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw error
  }
}

/**
 * Makes `root` (as `mkdir -p`: its parents are Antler's) and each directory of `dirs` under it, one level at a
 * time: an entry in the way that is not a directory (a symlink, a file) is removed and a directory made in its
 * place. Throws when a directory is not, by its real path, inside `root`'s. A dir of `dirs` outside `root` is made
 * as `mkdir -p`.
 */
export const make = (root: string, dirs: ReadonlyArray<string>): void => {
  Fs.mkdirSync(root, { recursive: true, mode: 0o700 })
  const realRoot = Fs.realpathSync(root)
  for (const dir of dirs) {
    const relative = Path.relative(root, dir)
    if (relative === "") continue
    if (relative.startsWith("..") || Path.isAbsolute(relative)) {
      Fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      continue
    }
    let at = root
    for (const part of relative.split(Path.sep)) {
      at = Path.join(at, part)
      const entry = entryOf(at)
      if (entry?.isDirectory() === true) continue
      if (entry !== undefined) Fs.rmSync(at, { force: true })
      Fs.mkdirSync(at, { mode: 0o700 })
    }
    const real = Fs.realpathSync(dir)
    if (real !== Path.join(realRoot, relative)) {
      // (no host path named: the message may reach the model)
      throw new Error(`${relative} of the thread's workspace resolves outside it`)
    }
  }
}
