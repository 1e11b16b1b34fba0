/**
 * Preloaded with `node --import` in the untimed inventory run of a start-up job: lists every module the process
 * loads (ES modules through the resolve hook of startupHooks.ts, CommonJS modules from `require.cache` at exit)
 * into the file named by `ANTLER_BENCH_MODULES`, one file URL a line (repeats allowed).
 */
import * as fs from "node:fs"
import { createRequire, register } from "node:module"
import { pathToFileURL } from "node:url"

const out = process.env.ANTLER_BENCH_MODULES
if (out !== undefined) {
  register(new URL("./startupHooks.js", import.meta.url))
  const cache = createRequire(import.meta.url).cache
  process.on("exit", () => {
    fs.appendFileSync(out, Object.keys(cache).map((file) => `${pathToFileURL(file).href}\n`).join(""))
  })
}
