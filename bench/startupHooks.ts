/**
 * Module resolution hooks for the start-up inventory (see startupInventory.ts): appends the URL of every ES
 * module (or CommonJS module imported from one) the process resolves to the file named by
 * `ANTLER_BENCH_MODULES`. They run on Node's hooks thread; only the untimed inventory run loads them.
 */
import * as fs from "node:fs"
import type { ResolveHook } from "node:module"

const out = process.env.ANTLER_BENCH_MODULES

/** Records each resolved file URL. */
export const resolve: ResolveHook = async (specifier, context, next) => {
  const resolved = await next(specifier, context)
  if (out !== undefined && resolved.url.startsWith("file:")) fs.appendFileSync(out, `${resolved.url}\n`)
  return resolved
}
