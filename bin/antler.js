#!/usr/bin/env node
// The `antler` command: runs the compiled CLI (dist/, built by `npm run build`; `npm ci` builds it too).
import { existsSync, readFileSync } from "node:fs"

// `antler --version` alone is answered here, without loading the program (as src/programs/Cli.ts answers it).
if (process.argv.length === 3 && process.argv[2] === "--version") {
  let version = "0.0.0"
  try {
    version = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version ?? version
  } catch {
    // as Cli.ts: an unreadable package.json reports 0.0.0
  }
  process.stdout.write(`antler ${version}\n`)
} else {
  const main = new URL("../dist/programs/main.js", import.meta.url)
  if (!existsSync(main)) {
    process.stderr.write(
      "antler is not built yet (dist/programs/main.js is missing).\n" +
        "Build it with:  npm run build   (npm ci runs the build too)\n"
    )
    process.exit(2)
  }
  await import(main.href)
}
