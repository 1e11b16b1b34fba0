#!/usr/bin/env node
// The `antler` command. It runs the bundled CLI (dist/cli/main.cjs, made by scripts/bundle-cli.mjs, through
// cli-loader.js) when its build finished (choose.js reads its stamp), else the compiled program
// (dist/programs/main.js); `npm run build` builds both, and `npm ci` does too.
import { readFileSync } from "node:fs"
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
  const { choose } = await import("./choose.js")
  const program = choose(new URL("../", import.meta.url))
  if (program?.kind === "bundle") {
    const { loadCli } = await import("./cli-loader.js")
    loadCli(fileURLToPath(program.url))
  } else if (program?.kind === "compiled") {
    await import(program.url.href)
  } else {
    process.stderr.write(
      "antler is not built yet (dist/programs/main.js is missing).\n" +
        "Build it with:  npm run build   (npm ci runs the build too)\n"
    )
    process.exit(2)
  }
}
