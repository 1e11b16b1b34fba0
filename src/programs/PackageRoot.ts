/**
 * The directory of the installed `antler` package, found from wherever the running code is: the sources
 * (`src/programs/...`), the compiled modules (`dist/programs/...`) or the bundled CLI (`dist/cli/main.cjs`), in a
 * clone or in `node_modules`. Files the package ships beside its code (`package.json`, `bin/`, the web page's
 * files under `src/`) are found from it, never by a fixed number of `..` from one module, which is right for
 * only one of those layouts.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const isAntler = (dir: string): boolean => {
  try {
    return JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8")).name === "antler"
  } catch {
    return false
  }
}

/** The package directory above `from` (a module's `import.meta.url` or a path), or undefined outside one. */
export const find = (from: string): string | undefined => {
  let dir = Path.dirname(from.startsWith("file:") ? fileURLToPath(from) : from)
  for (;;) {
    if (isAntler(dir)) return dir
    const parent = Path.dirname(dir)
    if (parent === dir) return undefined
    dir = parent
  }
}

/** The package directory of this code (two levels up from this module when nothing else is found). */
export const root = (): string =>
  find(import.meta.url) ?? Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..", "..")
