#!/usr/bin/env node
// The `antler` command: runs the compiled CLI (dist/, built by `npm run build`; `npm ci` builds it too).
import { existsSync } from "node:fs"

const main = new URL("../dist/programs/main.js", import.meta.url)
if (!existsSync(main)) {
  process.stderr.write(
    "antler is not built yet (dist/programs/main.js is missing).\n" +
      "Build it with:  npm run build   (npm ci runs the build too)\n"
  )
  process.exit(2)
}
await import(main.href)
