// Runs the bundled CLI (dist/cli/main.cjs, made by scripts/bundle-cli.mjs) as Node runs a CommonJS module, but
// compiled with the V8 code cache saved beside it (main.cjs.cache) when there is one: V8 then skips parsing and
// compiling most of the program, about a third of the CPU a command spends starting. A cache V8 cannot use
// (another Node version, other V8 flags, or not made for this bundle) is ignored, and the bundle is compiled as usual.
import { readFileSync, writeFileSync } from "node:fs"
import Module, { createRequire } from "node:module"
import { dirname } from "node:path"
import { Script } from "node:vm"

const readOptional = (file) => {
  try {
    return readFileSync(file)
  } catch {
    return undefined
  }
}

/**
 * Whether the cache beside the bundle was made for it: the build's stamp (build.json, written after the cache)
 * names the id the bundle's first line holds. A bundle rebuilt without its stamp, or a stamp of another build,
 * and the cache is not offered. (V8 checks a cache only against the source's length.)
 */
const sameBuild = (file, source) => {
  const id = /^\/\* antler-build ([0-9a-f]+) \*\//.exec(source)?.[1]
  if (id === undefined) return false
  try {
    return JSON.parse(readFileSync(`${dirname(file)}/build.json`, "utf8")).id === id
  } catch {
    return false
  }
}

/**
 * Runs the bundle `file` (a CommonJS module). `writeCache`: when the process exits, save the code of everything
 * compiled so far as the cache (the build does this once, running `antler --help`).
 */
export const loadCli = (file, options = {}) => {
  const cacheFile = `${file}.cache`
  const source = readFileSync(file, "utf8")
  const cachedData = !options.writeCache && sameBuild(file, source) ? readOptional(cacheFile) : undefined
  const script = new Script(Module.wrap(source), { filename: file, cachedData })
  if (options.writeCache) process.once("exit", () => writeFileSync(cacheFile, script.createCachedData()))
  const module = new Module(file)
  module.filename = file
  script.runInThisContext().call(module.exports, module.exports, createRequire(file), module, file, dirname(file))
  module.loaded = true
  return { cacheRejected: cachedData === undefined ? undefined : script.cachedDataRejected }
}
