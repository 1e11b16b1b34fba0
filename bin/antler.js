#!/usr/bin/env node
// The `antler` command. It runs the bundled CLI (dist/cli/main.cjs, made by scripts/bundle-cli.mjs, through
// cli-loader.js) when it is there and not older than the compiled program, else the compiled program
// (dist/programs/main.js); `npm run build` builds both, and `npm ci` does too.
import { readFileSync, statSync } from "node:fs"
import { fileURLToPath } from "node:url"

// `antler --version` alone is answered here, without loading the program (as src/programs/cli/Cli.ts answers it).
if (process.argv.length === 3 && process.argv[2] === "--version") {
  let version = "0.0.0"
  try {
    version = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version ?? version
  } catch {
    // as Cli.ts: an unreadable package.json reports 0.0.0
  }
  process.stdout.write(`antler ${version}\n`)
} else {
  const mtime = (url) => {
    try {
      return statSync(url).mtimeMs
    } catch {
      return undefined
    }
  }
  const compiled = new URL("../dist/programs/main.js", import.meta.url)
  const bundled = new URL("../dist/cli/main.cjs", import.meta.url)
  const compiledAt = mtime(compiled)
  const bundledAt = mtime(bundled)
  // a bundle older than the compiled program is stale (dist/ rebuilt with tsc alone): the compiled program runs
  if (bundledAt !== undefined && (compiledAt === undefined || bundledAt >= compiledAt)) {
    const { loadCli } = await import("./cli-loader.js")
    loadCli(fileURLToPath(bundled))
  } else if (compiledAt !== undefined) {
    await import(compiled.href)
  } else {
    process.stderr.write(
      "antler is not built yet (dist/programs/main.js is missing).\n" +
        "Build it with:  npm run build   (npm ci runs the build too)\n"
    )
    process.exit(2)
  }
}
