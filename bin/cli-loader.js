// Runs the bundled CLI (dist/cli/main.cjs, made by scripts/bundle-cli.mjs) as Node runs a CommonJS module, but
// compiled with the V8 code cache saved beside it (main.cjs.cache) when there is one: V8 then skips parsing and
// compiling most of the program, about a third of the CPU a command spends starting. A cache V8 cannot use
// (another Node version, other V8 flags, or older than the bundle) is ignored, and the bundle is compiled as usual.
import { readFileSync, statSync, writeFileSync } from "node:fs"
import Module, { createRequire } from "node:module"
import { dirname } from "node:path"
import { Script } from "node:vm"

const mtime = (file) => {
  try {
    return statSync(file).mtimeMs
  } catch {
    return undefined
  }
}

/**
 * Runs the bundle `file` (a CommonJS module). `writeCache`: when the process exits, save the code of everything
 * compiled so far as the cache (the build does this once, running `antler --help`).
 */
export const loadCli = (file, options = {}) => {
  const cacheFile = `${file}.cache`
  const cacheAt = options.writeCache ? undefined : mtime(cacheFile)
  const cachedData = cacheAt !== undefined && cacheAt >= (mtime(file) ?? Infinity) ? readFileSync(cacheFile) : undefined
  const script = new Script(Module.wrap(readFileSync(file, "utf8")), { filename: file, cachedData })
  if (options.writeCache) process.once("exit", () => writeFileSync(cacheFile, script.createCachedData()))
  const module = new Module(file)
  module.filename = file
  script.runInThisContext().call(module.exports, module.exports, createRequire(file), module, file, dirname(file))
  module.loaded = true
  return { cacheRejected: cachedData === undefined ? undefined : script.cachedDataRejected }
}
